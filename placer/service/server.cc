#include "placer/service/server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace placer {

absl::StatusOr<std::unique_ptr<PlacementServer>> PlacementServer::Start(
    const ServerOptions& options) {
  const ClientLimitOptions& clients = options.service.clients;
  if (options.max_threads < 2 || options.max_request_bytes < 1024 ||
      clients.max_searches < 1 || clients.max_searches_per_client < 1 ||
      clients.max_placing < 1 || clients.max_placing_per_client < 1 ||
      !(clients.max_calls_per_second_per_client >= 0)) {
    return absl::InvalidArgumentError(
        "server options: max_threads >= 2, max_request_bytes >= 1024, "
        "max_searches, max_searches_per_client, max_placing and "
        "max_placing_per_client >= 1, max_calls_per_second_per_client >= 0");
  }
  if (!options.tls.enabled() && !options.allow_insecure_network &&
      !IsLoopbackAddress(options.address)) {
    return absl::FailedPreconditionError(absl::StrCat(
        options.address,
        " is reachable from other machines: serve it over TLS (a server "
        "certificate and key), or allow plaintext there explicitly"));
  }
  if (!options.access_file.empty() && !options.tls.enabled()) {
    return absl::FailedPreconditionError(
        "an access file needs TLS: bearer tokens and client certificates "
        "travel only over TLS");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   NewServerCredentials(options.tls));
  std::unique_ptr<PlacementServer> s(new PlacementServer());
  ASSIGN_OR_RETURN(std::unique_ptr<AccessControl> access,
                   AccessControl::Open(options.access_file));
  s->access_ = std::move(access);
  s->tls_ = options.tls.enabled();
  if (s->tls_) {
    credentials->SetAuthMetadataProcessor(s->access_->NewProcessor());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PlacementStore> store,
                   PlacementStore::Open(options.state_dir, options.store));
  s->store_ = std::move(store);
  s->service_ = std::make_unique<PlacementServiceImpl>(
      s->store_.get(), s->access_.get(), options.service);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, credentials, &s->port_);
  // gRPC sets SO_REUSEPORT by default, which lets a second server bind the
  // same port and the kernel split calls between the two: one server per
  // port, so a port in use is an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(options.max_request_bytes);
  grpc::ResourceQuota quota("placer-serve");
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.address,
        " (in use, or not an address of this machine?)"));
  }
  grpc::HealthCheckServiceInterface* health = s->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(proto::PlacementService::service_full_name(), true);
  }
  return s;
}

void PlacementServer::Shutdown(double grace_seconds) {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(
                        static_cast<int64_t>(grace_seconds * 1000)));
}

PlacementServer::~PlacementServer() {
  Shutdown(0);
  if (server_ != nullptr) server_->Wait();
}

}  // namespace placer
