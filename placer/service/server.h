// PlacementServer: the gRPC server of `placer serve` — the PlacementService
// over a PlacementStore, with the standard health service
// (grpc.health.v1.Health: "" and "placer.proto.PlacementService") and
// server reflection.
//
// Contract: Start binds `address` (loopback unless the caller opens it;
// port 0 picks a free port, reported by port()) or fails with the reason:
// an address off this machine without TLS is refused (FAILED_PRECONDITION)
// unless `allow_insecure_network`, and an access file needs TLS. With TLS
// every service on the port (health and reflection too) is behind it;
// tokens are checked by an auth metadata processor (authorization.h);
// requests over max_request_bytes are refused with RESOURCE_EXHAUSTED;
// at most max_threads threads handle the synchronous calls (Train,
// Simulate, GetReport, ReportMeasurement) at once, and Place and
// GetPlacement are bounded by the service's own limits. Shutdown stops
// accepting, lets running calls finish until the grace deadline, and
// leaves the store consistent on disk.
#ifndef PLACER_PLACER_SERVICE_SERVER_H_
#define PLACER_PLACER_SERVICE_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "placer/service/authorization.h"
#include "placer/service/credentials.h"
#include "placer/service/placement_service.h"
#include "placer/service/placement_store.h"

namespace placer {

struct ServerOptions {
  std::string address = "127.0.0.1:50051";
  std::string state_dir;  // "": nothing survives a restart
  StoreOptions store;     // the state's size limit
  ServerTlsFiles tls;     // not enabled: plaintext
  // Clients, their roles and credentials (access_policy.h); "": every
  // caller may do everything.
  std::string access_file;
  // Listen in plaintext on an address other machines can reach.
  bool allow_insecure_network = false;
  // Synchronous calls beyond this many at once are refused with
  // RESOURCE_EXHAUSTED (back-pressure: clients retry later).
  int max_threads = 128;
  int max_request_bytes = 256 << 20;
  ServiceOptions service;
};

class PlacementServer {
 public:
  static absl::StatusOr<std::unique_ptr<PlacementServer>> Start(
      const ServerOptions& options);
  ~PlacementServer();

  int port() const { return port_; }
  // Files of the state directory that could not be read back.
  const std::vector<std::string>& warnings() const { return store_->warnings(); }
  size_t cached_placements() const { return store_->size(); }
  bool tls() const { return tls_; }
  // Re-reads the access file (rotated tokens); on failure the old one stays.
  absl::Status ReloadAccess() { return access_->Reload(); }
  void Shutdown(double grace_seconds = 5);
  void Wait() { server_->Wait(); }

 private:
  PlacementServer() = default;
  std::unique_ptr<PlacementStore> store_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<PlacementServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_SERVER_H_
