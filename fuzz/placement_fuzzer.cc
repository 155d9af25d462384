// A placement file (JSON) in, against a fixed small model and cluster.
#include <string>

#include "fuzz/fuzz_target.h"
#include "graph/onnx_import.h"
#include "simulator/placement_file.h"
#include "profiles/cluster.h"
#include "zoo/zoo.h"

namespace {

struct Fixed {
  placer::Graph graph;
  placer::Cluster cluster;
};

const Fixed& TheModel() {
  static const Fixed* fixed = [] {
    placer::zoo::ZooParams p;
    p.weights = false;
    p.batch_size = 2;
    p.seq_len = 3;
    p.hidden = 16;
    p.vocab = 20;
    auto* f = new Fixed{
        *placer::ImportOnnxModel(*placer::zoo::BuildZooModel("gnmt2", p),
                                 "zoo:gnmt2", {}),
        *placer::LoadCluster("p100x4")};
    return f;
  }();
  return *fixed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixed& f = TheModel();
  absl::StatusOr<placer::Placement> p = placer::ParsePlacementJson(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.json",
      f.graph, f.cluster);
  (void)p;
  return 0;
}
