// The service's request handling, in process and without a network: a
// PlaceRequest decoded from bytes, then what the server does before a
// search: the cluster resolved, the model imported within the server's
// limits, the options normalized and resolved against both.
#include <string>

#include "fuzz/fuzz_target.h"
#include "placer/service/service.pb.h"
#include "placer/service/service_requests.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  placer::proto::PlaceRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  placer::RequestLimits limits;
  limits.max_ops = 20000;
  absl::StatusOr<placer::ResolvedCluster> cluster =
      placer::ResolveClusterSpec(request.cluster());
  if (!cluster.ok()) return 0;
  absl::StatusOr<placer::proto::PlaceOptions> options =
      placer::NormalizeOptions(request.options(), limits);
  if (!options.ok()) return 0;
  absl::StatusOr<placer::LoadedModel> model =
      placer::LoadModelSpec(request.model(), limits);
  if (!model.ok()) return 0;
  (void)placer::ToPolicyOptions(*options, model->graph, cluster->cluster);
  return 0;
}
