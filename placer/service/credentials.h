// The placement service's transport security: gRPC's TLS credentials for
// the server and its clients from PEM files, and which listening addresses
// stay on this machine.
//
// Contract: every function reads its files at once and returns
// INVALID_ARGUMENT naming the file that is missing, unreadable or not PEM;
// nothing is kept open. Server credentials built with a client CA require
// and verify a client certificate (mutual TLS).
#ifndef PLACER_PLACER_SERVICE_CREDENTIALS_H_
#define PLACER_PLACER_SERVICE_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace placer {

struct ServerTlsFiles {
  std::string certificate;  // PEM certificate chain; "": no TLS
  std::string private_key;  // PEM key of the certificate
  // PEM CA certificates that sign client certificates; "": clients present
  // none (authenticate them by token).
  std::string client_ca;
  bool enabled() const { return !certificate.empty(); }
};

struct ClientTlsFiles {
  std::string ca;           // PEM CA that signed the server; "": no TLS
  std::string certificate;  // the client's certificate (mutual TLS), or ""
  std::string private_key;  // its key
  // The name the server's certificate must carry, when it differs from the
  // host dialled ("" : the host).
  std::string server_name;
  bool enabled() const { return !ca.empty(); }
};

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> NewServerCredentials(
    const ServerTlsFiles& files);

// Channel credentials for a client: TLS per `files` (insecure when not
// enabled), with `bearer_token` sent on every call when not empty (tokens
// need TLS: INVALID_ARGUMENT otherwise). `arguments` receives the TLS
// target name override.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> NewChannelCredentials(
    const ClientTlsFiles& files, const std::string& bearer_token,
    grpc::ChannelArguments* arguments);

// Whether `address` (HOST:PORT, [V6]:PORT, or unix:PATH) listens on this
// machine only: 127.0.0.0/8, ::1, localhost, or a Unix socket.
bool IsLoopbackAddress(absl::string_view address);

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_CREDENTIALS_H_
