#include "placer/service/authorization.h"

#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/status_helpers.h"

namespace placer {
namespace {

constexpr char kAuthorization[] = "authorization";
constexpr char kBearer[] = "Bearer ";

absl::string_view View(grpc::string_ref s) {
  return absl::string_view(s.data(), s.size());
}

// The names a verified client certificate goes by: its subject common name
// and subject alternative names (empty without one).
std::vector<std::string> CertificateNames(const grpc::AuthContext* auth) {
  std::vector<std::string> names;
  if (auth == nullptr) return names;
  for (const char* property :
       {"x509_common_name", "x509_subject_alternative_name"}) {
    for (grpc::string_ref v : auth->FindPropertyValues(property)) {
      names.emplace_back(v.data(), v.size());
    }
  }
  return names;
}

// Who the credentials of a call name. `authorization` is the metadata's
// value, or nullopt when the call sent none. Returns nullopt for a call
// with no credentials; UNAUTHENTICATED for credentials that name nobody.
absl::StatusOr<std::optional<Client>> Authenticate(
    const AccessPolicy* policy, std::optional<absl::string_view> authorization,
    const std::vector<std::string>& certificate_names) {
  if (authorization.has_value()) {
    absl::string_view token = *authorization;
    if (!absl::ConsumePrefix(&token, kBearer) || token.empty()) {
      return absl::UnauthenticatedError(
          "authorization: expected 'Bearer TOKEN'");
    }
    if (policy == nullptr) {
      return absl::UnauthenticatedError(
          "this server takes no bearer tokens (it was started without an "
          "access file)");
    }
    std::optional<Client> client = policy->ByToken(token);
    if (!client) {
      return absl::UnauthenticatedError(
          "the bearer token is not one this server accepts (revoked, "
          "mistyped, or meant for another server)");
    }
    return client;
  }
  if (!certificate_names.empty()) {
    if (policy == nullptr) {
      return std::optional<Client>(Client{certificate_names[0], Roles::All()});
    }
    if (std::optional<Client> client =
            policy->ByCertificate(certificate_names)) {
      return client;
    }
    return absl::UnauthenticatedError(
        absl::StrCat("client certificate '", certificate_names[0],
                     "' is not named in this server's access file"));
  }
  return std::optional<Client>();
}

class TokenProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenProcessor(const AccessControl* access) : access_(access) {}
  // Hashing a token and comparing it is quick: run on the call's thread.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata,
                       grpc::AuthContext* context, OutputMetadata* consumed,
                       OutputMetadata* response) override {
    (void)consumed;
    (void)response;
    std::optional<absl::string_view> authorization;
    if (auto it = metadata.find(kAuthorization); it != metadata.end()) {
      authorization = View(it->second);
    }
    std::shared_ptr<const AccessPolicy> policy = access_->policy();
    absl::StatusOr<std::optional<Client>> client =
        Authenticate(policy.get(), authorization, CertificateNames(context));
    if (!client.ok()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          std::string(client.status().message()));
    }
    // The handler finds the client again from the call's own metadata
    // (Authorize): properties set here would be the connection's, shared
    // by every later call on it.
    return grpc::Status::OK;
  }

 private:
  const AccessControl* const access_;
};

}  // namespace

std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  // "ipv4:1.2.3.4:5678" and "ipv6:[::1]:5678" lose the port; "unix:/path"
  // has none.
  if (colon == std::string::npos || peer.find(':') == colon) return peer;
  return peer.substr(0, colon);
}

absl::StatusOr<std::unique_ptr<AccessControl>> AccessControl::Open(
    const std::string& access_file) {
  std::unique_ptr<AccessControl> access(new AccessControl(access_file));
  if (access_file.empty()) return access;
  RETURN_IF_ERROR(access->Reload());
  return access;
}

absl::Status AccessControl::Reload() {
  if (access_file_.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(AccessPolicy policy, AccessPolicy::Load(access_file_));
  auto next = std::make_shared<const AccessPolicy>(std::move(policy));
  absl::MutexLock lock(&mu_);
  policy_ = std::move(next);
  return absl::OkStatus();
}

std::shared_ptr<const AccessPolicy> AccessControl::policy() const {
  absl::MutexLock lock(&mu_);
  return policy_;
}

std::shared_ptr<grpc::AuthMetadataProcessor> AccessControl::NewProcessor()
    const {
  return std::make_shared<TokenProcessor>(this);
}

absl::StatusOr<Client> AccessControl::Authorize(
    const grpc::ServerContextBase& context, Role role,
    const char* method) const {
  std::optional<absl::string_view> authorization;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kAuthorization); it != metadata.end()) {
    authorization = View(it->second);
  }
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  std::shared_ptr<const AccessPolicy> current = policy();
  ASSIGN_OR_RETURN(
      std::optional<Client> found,
      Authenticate(current.get(), authorization, CertificateNames(auth.get())));
  Client client;
  if (found.has_value()) {
    client = std::move(*found);
  } else if (enforced()) {
    return absl::UnauthenticatedError(
        absl::StrCat(method,
                     ": no credentials; this server needs a bearer token "
                     "('authorization: Bearer TOKEN') or a client certificate "
                     "named in its access file"));
  } else {
    client = Client{PeerHost(context.peer()), Roles::All()};
  }
  if (!client.roles.Has(role)) {
    return absl::PermissionDeniedError(
        absl::StrCat(method, " needs role '", RoleName(role), "'; client '",
                     client.name, "' has ", client.roles.ToString()));
  }
  return client;
}

}  // namespace placer
