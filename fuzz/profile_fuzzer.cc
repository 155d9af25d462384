// Measured profiles in (files given to simulate/place/run with --profile):
// protobuf text when the first byte is even, JSON when odd. A profile that
// parses becomes a measured cost model over the roofline and answers for
// every node and link of a small fixed model on a two-CPU cluster.
#include <memory>
#include <string>

#include "fuzz/fuzz_target.h"
#include "fuzz/small_model.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "profiles/measured_cost_model.h"
#include "profiles/profile.pb.h"
#include "profiles/proto_io.h"

namespace {

struct Fixed {
  placer::Graph graph;
  placer::TrainingView view;
  placer::Cluster cluster;
};

const Fixed& Model() {
  static const Fixed* fixed = [] {
    auto* f = new Fixed;
    f->graph = placer::fuzz::SmallGnmt2();
    f->view = placer::BuildTrainingView(f->graph);
    f->cluster = *placer::LoadCluster("cpu2");
    return f;
  }();
  return *fixed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Fixed& fixed = Model();
  const std::string source = data[0] % 2 == 0 ? "fuzz.pbtxt" : "fuzz.json";
  placer::proto::Profile message;
  if (!placer::ParseTextOrJson(
           std::string(reinterpret_cast<const char*>(data) + 1, size - 1),
           source, &message)
           .ok()) {
    return 0;
  }
  absl::StatusOr<placer::MeasuredProfile> profile =
      placer::ProfileFromProto(message, source);
  if (!profile.ok()) return 0;
  (void)placer::ProfileToProto(*profile);
  std::unique_ptr<placer::CostModel> costs = placer::NewMeasuredCostModel(
      *profile, placer::NewRooflineCostModel());
  double seconds = 0;
  for (int n = 0; n < static_cast<int>(fixed.view.nodes().size()); ++n) {
    for (int d = 0; d < fixed.cluster.num_devices(); ++d) {
      seconds += costs->NodeSeconds(fixed.view, n, fixed.cluster.device(d));
    }
  }
  seconds += costs->TransferSeconds(1 << 20, fixed.cluster, 0, 1);
  (void)seconds;
  return 0;
}
