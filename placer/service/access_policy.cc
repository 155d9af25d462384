#include "placer/service/access_policy.h"

#include <openssl/rand.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/sha256.h"

namespace placer {
namespace {

constexpr Role kAllRoles[] = {Role::kRead, Role::kPlace, Role::kTrain,
                              Role::kReport};
constexpr char kTokenPrefix[] = "sha256:";
constexpr char kCertificatePrefix[] = "cert:";

bool IsLowerHex(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

bool IsClientName(absl::string_view s) {
  return !s.empty() && s.size() <= 128 &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ||
                  c == '@';
         });
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kPlace:
      return "place";
    case Role::kTrain:
      return "train";
    case Role::kReport:
      return "report";
  }
  return "?";
}

Roles Roles::All() {
  Roles all;
  for (Role r : kAllRoles) all.Add(r);
  return all;
}

absl::StatusOr<Roles> Roles::Parse(absl::string_view comma_separated) {
  Roles roles;
  for (absl::string_view name : absl::StrSplit(comma_separated, ',')) {
    bool known = false;
    for (Role r : kAllRoles) {
      if (name == RoleName(r)) {
        roles.Add(r);
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown role '", name, "' (roles: read, place, train, report)"));
    }
  }
  return roles;
}

std::string Roles::ToString() const {
  std::vector<absl::string_view> names;
  for (Role r : kAllRoles) {
    if (Has(r)) names.push_back(RoleName(r));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

absl::StatusOr<AccessPolicy> AccessPolicy::Parse(absl::string_view text,
                                                 absl::string_view source) {
  AccessPolicy policy;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::string_view line = raw.substr(0, raw.find('#'));
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    auto error = [&](const std::string& message) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number, ": ", message));
    };
    if (fields.size() != 3) {
      return error(
          absl::StrCat("expected 3 fields (client, roles, credential), found ",
                       fields.size()));
    }
    Entry entry;
    if (!IsClientName(fields[0])) {
      return error(absl::StrCat(
          "client '", fields[0].substr(0, 64),
          "': letters, digits and - _ . @ only, 1 to 128 characters"));
    }
    entry.client = std::string(fields[0]);
    absl::StatusOr<Roles> roles = Roles::Parse(fields[1]);
    if (!roles.ok()) return error(std::string(roles.status().message()));
    entry.roles = *roles;
    absl::string_view credential = fields[2];
    if (absl::ConsumePrefix(&credential, kTokenPrefix)) {
      if (credential.size() != 64 || !IsLowerHex(credential)) {
        // The field is never echoed: it may be a token pasted by mistake.
        return error(
            "credential: sha256: must be followed by 64 lower-case hex "
            "digits (the SHA-256 of the token, as `placer token` prints it; "
            "never the token itself)");
      }
      entry.token_sha256 = std::string(credential);
    } else if (absl::ConsumePrefix(&credential, kCertificatePrefix)) {
      if (credential.empty()) return error("credential: cert: needs a name");
      entry.certificate = std::string(credential);
    } else {
      return error(
          "credential: expected sha256:<hex of the token's hash> or "
          "cert:<client certificate name>");
    }
    policy.entries_.push_back(std::move(entry));
  }
  if (policy.entries_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": no clients (an access file with no line would refuse "
                     "every call)"));
  }
  return policy;
}

absl::StatusOr<AccessPolicy> AccessPolicy::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read the access file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

Client AccessPolicy::ClientOf(const std::string& name) const {
  return Client{name, RolesOf(name)};
}

std::optional<Client> AccessPolicy::ByToken(absl::string_view token) const {
  const std::string hash = Sha256Hex(token);
  const Entry* found = nullptr;
  for (const Entry& e : entries_) {
    // Every token entry is compared, so the time does not tell which (or
    // whether one) matched.
    const bool match =
        !e.token_sha256.empty() && ConstantTimeEquals(hash, e.token_sha256);
    if (match && found == nullptr) found = &e;
  }
  if (found == nullptr) return std::nullopt;
  return ClientOf(found->client);
}

std::optional<Client> AccessPolicy::ByCertificate(
    const std::vector<std::string>& certificate_names) const {
  for (const Entry& e : entries_) {
    if (e.certificate.empty()) continue;
    for (const std::string& name : certificate_names) {
      if (name == e.certificate) return ClientOf(e.client);
    }
  }
  return std::nullopt;
}

Roles AccessPolicy::RolesOf(absl::string_view client) const {
  Roles roles;
  for (const Entry& e : entries_) {
    if (e.client == client) roles.Add(e.roles);
  }
  return roles;
}

int AccessPolicy::clients() const {
  std::vector<absl::string_view> names;
  for (const Entry& e : entries_) names.push_back(e.client);
  std::sort(names.begin(), names.end());
  return static_cast<int>(std::unique(names.begin(), names.end()) -
                          names.begin());
}

absl::StatusOr<std::string> NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return absl::InternalError("OpenSSL's random generator failed");
  }
  return absl::WebSafeBase64Escape(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::string TokenCredential(absl::string_view token) {
  return absl::StrCat(kTokenPrefix, Sha256Hex(token));
}

}  // namespace placer
