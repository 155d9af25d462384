// AccessControl: who a call of the placement service comes from and
// whether that client may make it.
//
// A call is authenticated by a bearer token (`authorization: Bearer TOKEN`
// metadata) or, under mutual TLS, by its verified client certificate; the
// access file (access_policy.h) names the clients and their roles. Without
// an access file every caller may do everything: under mutual TLS it goes
// by its certificate's name, otherwise by its peer address.
//
// Contract: NewProcessor's gRPC auth metadata processor refuses a call
// with a token this server does not know (UNAUTHENTICATED) before any
// handler runs, for every service on the port (health and reflection
// too). Authorize, called by each handler, returns the client or
// UNAUTHENTICATED (no credentials where an access file is in force) or
// PERMISSION_DENIED naming the role the call needs. Tokens appear in no
// message. Reload swaps the access file atomically: calls in flight keep
// the policy they started with; a file that does not parse leaves the old
// policy in force. Thread-safe.
#ifndef PLACER_PLACER_SERVICE_AUTHORIZATION_H_
#define PLACER_PLACER_SERVICE_AUTHORIZATION_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/server_context.h"
#include "placer/service/access_policy.h"

namespace placer {

class AccessControl {
 public:
  // `access_file` "": no access file (every caller has every role).
  static absl::StatusOr<std::unique_ptr<AccessControl>> Open(
      const std::string& access_file);

  // Re-reads the access file; on failure the old policy stays.
  absl::Status Reload();
  // Null when there is no access file.
  std::shared_ptr<const AccessPolicy> policy() const;
  bool enforced() const { return !access_file_.empty(); }

  // The processor to install on the server's TLS credentials.
  std::shared_ptr<grpc::AuthMetadataProcessor> NewProcessor() const;

  // The client making the call, if it may call `method` (for messages),
  // which needs `role`.
  absl::StatusOr<Client> Authorize(const grpc::ServerContextBase& context,
                                   Role role, const char* method) const;

 private:
  explicit AccessControl(std::string access_file)
      : access_file_(std::move(access_file)) {}

  const std::string access_file_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const AccessPolicy> policy_ ABSL_GUARDED_BY(mu_);
};

// The peer's address without its port ("ipv4:127.0.0.1"), the name of a
// caller the server does not authenticate.
std::string PeerHost(const std::string& peer);

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_AUTHORIZATION_H_
