// The PlacementService's handlers (placer/service.proto): placing,
// simulating and streamed training over the policies and the simulator,
// with answers cached in a PlacementStore by fingerprint.
//
// Contract: a request is checked before any work (errors as gRPC status
// codes naming the field); Place and Train answer from the store when the
// fingerprint is there, else take one of `max_concurrent_searches` slots
// (waiting for one no longer than the deadline allows), import, place and
// simulate. Searches stop shortly before the request's deadline, or when
// the client goes away, and answer with the best placement found so far,
// marked `stopped_at_deadline` and not cached. Handlers are thread-safe.
#ifndef PLACER_PLACER_PLACEMENT_SERVICE_H_
#define PLACER_PLACER_PLACEMENT_SERVICE_H_

#include <chrono>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "placer/placement_store.h"
#include "placer/service.grpc.pb.h"
#include "placer/service_requests.h"

namespace placer {

struct ServiceOptions {
  RequestLimits limits;
  int max_concurrent_searches = 2;
};

// GetPlacement, the cache read, is a callback method over raw bytes: it
// sends the store's serialized answer without parsing or copying it.
class PlacementServiceImpl final
    : public proto::PlacementService::WithRawCallbackMethod_GetPlacement<
          proto::PlacementService::Service> {
 public:
  // `store` outlives the service.
  PlacementServiceImpl(PlacementStore* store, ServiceOptions options);

  grpc::Status Place(grpc::ServerContext* context,
                     const proto::PlaceRequest* request,
                     proto::PlaceResponse* response) override;
  grpc::Status Simulate(grpc::ServerContext* context,
                        const proto::SimulateRequest* request,
                        proto::SimulateResponse* response) override;
  grpc::Status Train(grpc::ServerContext* context,
                     const proto::TrainRequest* request,
                     grpc::ServerWriter<proto::TrainUpdate>* writer) override;
  grpc::ServerUnaryReactor* GetPlacement(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::Status ReportMeasurement(
      grpc::ServerContext* context,
      const proto::ReportMeasurementRequest* request,
      proto::ReportMeasurementResponse* response) override;

 private:
  using Clock = std::chrono::system_clock;
  // The work of Place and Train: `progress` (may be empty) hears the search.
  absl::StatusOr<proto::PlaceResponse> PlaceOrLookup(
      grpc::ServerContext* context, const proto::PlaceRequest& request,
      double progress_interval_seconds,
      const std::function<void(const SearchProgress&)>& progress);
  // Waits for a search slot until `deadline`; false when none came.
  bool AcquireSlot(grpc::ServerContext* context, Clock::time_point deadline);
  void ReleaseSlot();

  PlacementStore* const store_;
  const ServiceOptions options_;
  absl::Mutex mu_;
  int searches_running_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace placer

#endif  // PLACER_PLACER_PLACEMENT_SERVICE_H_
