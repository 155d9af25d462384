#include "placer/service/credentials.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_helpers.h"
#include "grpcpp/support/channel_arguments.h"

namespace placer {
namespace {

// A PEM file's text; `what` says what it should hold, for errors.
absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read ", what));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not PEM (", what, " expected)"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> NewServerCredentials(
    const ServerTlsFiles& files) {
  if (!files.enabled()) {
    if (!files.private_key.empty() || !files.client_ca.empty()) {
      return absl::InvalidArgumentError(
          "TLS: a key or client CA without the server's certificate");
    }
    return grpc::InsecureServerCredentials();
  }
  if (files.private_key.empty()) {
    return absl::InvalidArgumentError(
        "TLS: the server's certificate needs its private key");
  }
  ASSIGN_OR_RETURN(
      std::string certificate,
      ReadPem(files.certificate, "the server's certificate chain"));
  ASSIGN_OR_RETURN(std::string key,
                   ReadPem(files.private_key, "the server's private key"));
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({key, certificate});
  if (!files.client_ca.empty()) {
    ASSIGN_OR_RETURN(
        std::string ca,
        ReadPem(files.client_ca, "the CA certificates of client certificates"));
    options.pem_root_certs = ca;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> NewChannelCredentials(
    const ClientTlsFiles& files, const std::string& bearer_token,
    grpc::ChannelArguments* arguments) {
  if (!files.enabled()) {
    if (!bearer_token.empty()) {
      return absl::InvalidArgumentError(
          "a bearer token is sent only over TLS: name the CA that signed "
          "the server's certificate");
    }
    if (!files.certificate.empty() || !files.private_key.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate is sent only over TLS: name the CA that "
          "signed the server's certificate");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  ASSIGN_OR_RETURN(
      std::string ca,
      ReadPem(files.ca, "the CA certificate that signed the server's"));
  options.pem_root_certs = ca;
  if (files.certificate.empty() != files.private_key.empty()) {
    return absl::InvalidArgumentError(
        "TLS: a client certificate needs its private key, and a key its "
        "certificate");
  }
  if (!files.certificate.empty()) {
    ASSIGN_OR_RETURN(
        std::string certificate,
        ReadPem(files.certificate, "the client's certificate chain"));
    ASSIGN_OR_RETURN(std::string key,
                     ReadPem(files.private_key, "the client's private key"));
    options.pem_cert_chain = certificate;
    options.pem_private_key = key;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::SslCredentials(options);
  if (!files.server_name.empty() && arguments != nullptr) {
    arguments->SetSslTargetNameOverride(files.server_name);
  }
  if (!bearer_token.empty()) {
    credentials = grpc::CompositeChannelCredentials(
        credentials, grpc::AccessTokenCredentials(bearer_token));
  }
  return credentials;
}

bool IsLoopbackAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:") ||
      absl::StartsWith(address, "unix-abstract:")) {
    return true;
  }
  absl::string_view host = address;
  absl::ConsumePrefix(&host, "dns:");
  absl::ConsumePrefix(&host, "ipv4:");
  absl::ConsumePrefix(&host, "ipv6:");
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    host = host.substr(1, close - 1);
    return host == "::1" || host == "0:0:0:0:0:0:0:1";
  }
  const size_t colon = host.rfind(':');
  if (colon != absl::string_view::npos) host = host.substr(0, colon);
  if (host == "localhost") return true;
  // 127.0.0.0/8, written as four decimal numbers: three after "127.".
  if (!absl::ConsumePrefix(&host, "127.")) return false;
  int parts = 1;
  int digits = 0;
  for (char c : host) {
    if (c == '.') {
      if (digits == 0) return false;
      ++parts;
      digits = 0;
    } else if (c >= '0' && c <= '9' && digits < 3) {
      ++digits;
    } else {
      return false;
    }
  }
  return parts == 3 && digits > 0;
}

}  // namespace placer
