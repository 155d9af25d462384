// AccessPolicy: who may call the placement service and what each may do —
// the clients of an access file, each with its roles and credentials (a
// bearer token, kept as its SHA-256, or a client certificate's name).
//
// Access file: one client credential a line, `#` starts a comment:
//
//   # client   roles               credential
//   ci         read                sha256:<64 hex digits of the token's hash>
//   trainer    read,place,report   sha256:...
//   launcher   read,place,train    cert:launcher.example.com
//
// A client may have several lines (a second token while rotating, a token
// and a certificate); its roles are the union of its lines'. Roles: read
// (GetPlacement, GetReport, Simulate), place (Place), train (Train), report
// (ReportMeasurement). `cert:NAME` matches a verified client certificate
// whose subject common name or a subject alternative name is NAME.
//
// Contract: Parse and Load return INVALID_ARGUMENT naming the file, the
// line and the field for anything malformed; a policy is immutable and
// thread-safe. Tokens are compared by hash in constant time (every entry
// is compared, whatever matches) and never appear in a message.
#ifndef PLACER_PLACER_SERVICE_ACCESS_POLICY_H_
#define PLACER_PLACER_SERVICE_ACCESS_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer {

enum class Role : uint8_t { kRead = 0, kPlace = 1, kTrain = 2, kReport = 3 };

// A set of roles.
class Roles {
 public:
  static Roles All();
  // "read,place": INVALID_ARGUMENT naming the unknown role (no file).
  static absl::StatusOr<Roles> Parse(absl::string_view comma_separated);
  bool Has(Role role) const { return (bits_ >> static_cast<int>(role)) & 1; }
  void Add(Role role) { bits_ |= 1u << static_cast<int>(role); }
  void Add(Roles roles) { bits_ |= roles.bits_; }
  bool empty() const { return bits_ == 0; }
  // "read,place" in the order of Role; "none" when empty.
  std::string ToString() const;

 private:
  uint8_t bits_ = 0;
};

absl::string_view RoleName(Role role);

// A caller the service knows: its name and what it may do.
struct Client {
  std::string name;
  Roles roles;
};

class AccessPolicy {
 public:
  // `source` names the text in errors (the file's path).
  static absl::StatusOr<AccessPolicy> Parse(absl::string_view text,
                                            absl::string_view source);
  static absl::StatusOr<AccessPolicy> Load(const std::string& path);

  // The client holding `token`, or nullopt.
  std::optional<Client> ByToken(absl::string_view token) const;
  // The client named by `cert:NAME` for one of `certificate_names`, or
  // nullopt.
  std::optional<Client> ByCertificate(
      const std::vector<std::string>& certificate_names) const;
  // The roles of a client by name (none when unknown).
  Roles RolesOf(absl::string_view client) const;
  int clients() const;

 private:
  struct Entry {
    std::string client;
    Roles roles;
    std::string token_sha256;  // 32 raw bytes, or empty
    std::string certificate;   // or empty
  };
  Client ClientOf(const std::string& name) const;
  std::vector<Entry> entries_;
};

// A fresh random bearer token (32 bytes from OpenSSL's generator, as 43
// base64url characters) and the `sha256:<hex>` an access file keeps of it.
absl::StatusOr<std::string> NewToken();
std::string TokenCredential(absl::string_view token);

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_ACCESS_POLICY_H_
