// PlacementServer: the gRPC server of `placer serve` — the PlacementService
// over a PlacementStore, with the standard health service
// (grpc.health.v1.Health: "" and "placer.proto.PlacementService") and
// server reflection.
//
// Contract: Start binds `address` (loopback unless the caller opens it;
// port 0 picks a free port, reported by port()) or fails with the reason;
// requests over max_request_bytes are refused with RESOURCE_EXHAUSTED;
// at most max_threads threads handle the synchronous calls (Train,
// Simulate, ReportMeasurement) at once, and Place and GetPlacement are
// bounded by the service's own limits. Shutdown stops
// accepting, lets running calls finish until the grace deadline, and
// leaves the store consistent on disk.
#ifndef PLACER_PLACER_SERVICE_SERVER_H_
#define PLACER_PLACER_SERVICE_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "placer/service/placement_service.h"
#include "placer/service/placement_store.h"

namespace placer {

struct ServerOptions {
  std::string address = "127.0.0.1:50051";
  std::string state_dir;  // "": nothing survives a restart
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
  void Shutdown(double grace_seconds = 5);
  void Wait() { server_->Wait(); }

 private:
  PlacementServer() = default;
  std::unique_ptr<PlacementStore> store_;
  std::unique_ptr<PlacementServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_SERVER_H_
