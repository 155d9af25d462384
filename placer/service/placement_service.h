// The PlacementService's handlers (placer/service/service.proto): placing,
// simulating and streamed training over the policies and the simulator,
// with answers cached in a PlacementStore by fingerprint.
//
// Contract: a request is checked before any work (errors as gRPC status
// codes naming the field); Place and Train answer from the store when the
// fingerprint is there, else take one of the search slots (client_limits.h)
// (waiting for one no longer than the deadline allows), import, place and
// simulate. Searches stop shortly before the request's deadline, or when
// the client goes away, and answer with the best placement found so far,
// marked `stopped_at_deadline` and not cached. Every call is first
// authorized (authorization.h: UNAUTHENTICATED, PERMISSION_DENIED) and
// admitted by the client's share of the server (client_limits.h:
// RESOURCE_EXHAUSTED). Handlers are thread-safe.
#ifndef PLACER_PLACER_SERVICE_PLACEMENT_SERVICE_H_
#define PLACER_PLACER_SERVICE_PLACEMENT_SERVICE_H_

#include <chrono>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "placer/service/authorization.h"
#include "placer/service/client_limits.h"
#include "placer/service/placement_store.h"
#include "placer/service/service.grpc.pb.h"
#include "placer/service/service_requests.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"

namespace placer {

struct ServiceOptions {
  RequestLimits limits;
  // Search slots and uncached Place calls, in all and per client.
  ClientLimitOptions clients;
};

// GetPlacement and Place are callback methods over raw bytes: a cached
// answer is the store's serialized one, sent without copying; a Place that
// must compute runs on a thread of its own (at most max_placing at once,
// more are refused with RESOURCE_EXHAUSTED).
class PlacementServiceImpl final
    : public proto::PlacementService::WithRawCallbackMethod_Place<
          proto::PlacementService::WithRawCallbackMethod_GetPlacement<
              proto::PlacementService::Service>> {
 public:
  // `store` and `access` outlive the service.
  PlacementServiceImpl(PlacementStore* store, const AccessControl* access,
                       ServiceOptions options);

  grpc::ServerUnaryReactor* Place(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
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
  // The stored placement's HTML report, simulated again with what it was
  // placed with. NOT_FOUND for an unknown fingerprint; INVALID_ARGUMENT
  // when the model sent is not the one placed (or an ONNX model is not
  // sent); FAILED_PRECONDITION when the entry predates kept requests or the
  // reported profiles it used have changed since.
  grpc::Status GetReport(grpc::ServerContext* context,
                         const proto::GetReportRequest* request,
                         proto::GetReportResponse* response) override;

 private:
  using Clock = std::chrono::system_clock;
  // A request checked, with what it resolves to and its fingerprint.
  struct Prepared {
    proto::PlaceOptions options;  // normalized
    TrainingOptions training;     // options.training's
    Cluster cluster;
    proto::Cluster cluster_message;  // as the fingerprint hashed it
    std::unique_ptr<CostModel> costs;
    std::string profile_digest;  // of the reported profiles; "" for none
    std::string fingerprint;
  };
  absl::StatusOr<Prepared> Prepare(const proto::PlaceRequest& request) const;
  // The caller, allowed `role` and within its call rate.
  absl::StatusOr<Client> Admit(const grpc::ServerContextBase& context,
                               Role role, const char* method);
  // The cost model of a request: the roofline, or over it the profiles
  // reported for the cluster by clients that hold the report role (and are
  // among `profile_clients` when it is not empty). `digest` names them.
  absl::StatusOr<std::unique_ptr<CostModel>> CostsFor(
      const std::string& cluster_name, bool use_reported_profiles,
      const google::protobuf::RepeatedPtrField<std::string>& profile_clients,
      std::string* digest) const;
  // Places an uncached request for `client` and stores the answer unless
  // the deadline cut the search short; `progress` (may be empty) hears the
  // search.
  absl::StatusOr<proto::PlaceResponse> Compute(
      grpc::ServerContextBase* context, const std::string& client,
      const proto::PlaceRequest& request, const Prepared& prepared,
      double progress_interval_seconds,
      const std::function<void(const SearchProgress&)>& progress);
  // GetReport's work.
  absl::StatusOr<std::string> ReportHtml(
      const proto::GetReportRequest& request) const;
  // Simulate's work; Simulate turns an allocation failure into its status.
  grpc::Status SimulateOrThrow(grpc::ServerContext* context,
                               const proto::SimulateRequest* request,
                               proto::SimulateResponse* response);

  PlacementStore* const store_;
  const AccessControl* const access_;
  const ServiceOptions options_;
  ClientLimits limits_;
};

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_PLACEMENT_SERVICE_H_
