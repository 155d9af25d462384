// metis: METIS multi-constraint k-way partitioning of the group graph.
// Two constraints per group, compute (its fastest time) and memory (its
// estimated bytes), balanced to each device's share of the cluster's peak
// FLOP/s and of its memory; edge weights are the bytes that would cross.
#include "absl/strings/str_cat.h"
#include "policies/group_graph.h"
#include "policies/metis_graph.h"
#include "policies/policies.h"

namespace placer {
namespace {

class MetisPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups(in.simulation);
    const int n = groups.num_units();
    const int devices = in.cluster.num_devices();
    Placement p{std::vector<int>(n, 0)};
    if (devices > 1) {
      std::vector<double> compute(n), memory(n);
      for (int g = 0; g < n; ++g) {
        compute[g] = groups.min_seconds(g);
        memory[g] = static_cast<double>(groups.memory_bytes(g));
      }
      MetisGraph graph = ToMetisGraph(groups);
      std::vector<idx_t> c = ScaledWeights(compute), m = ScaledWeights(memory);
      std::vector<idx_t> vwgt;
      for (int g = 0; g < n; ++g) {
        vwgt.push_back(c[g]);
        vwgt.push_back(m[g]);
      }
      double memory_total = 0;
      for (int d = 0; d < devices; ++d) {
        memory_total += static_cast<double>(MemoryLimit(in.cluster, o, d));
      }
      std::vector<real_t> tpwgts;
      for (int d = 0; d < devices; ++d) {
        tpwgts.push_back(static_cast<real_t>(in.cluster.device(d).peak_flops /
                                             in.cluster.total_peak_flops()));
        tpwgts.push_back(static_cast<real_t>(
            static_cast<double>(MemoryLimit(in.cluster, o, d)) / memory_total));
      }
      std::vector<real_t> ubvec = {1.05f, 1.5f};
      idx_t options[METIS_NOPTIONS];
      METIS_SetDefaultOptions(options);
      options[METIS_OPTION_SEED] = static_cast<idx_t>(o.seed & 0x7fffffff);
      options[METIS_OPTION_CONTIG] = 0;
      std::vector<idx_t> part;
      const int status = PartGraphKway(graph, /*ncon=*/2, vwgt, devices, tpwgts,
                                       ubvec, options, &part);
      if (status != METIS_OK) {
        return absl::InternalError(
            absl::StrCat("metis: METIS_PartGraphKway failed with ", status));
      }
      for (int g = 0; g < n; ++g) p.device_of_op[g] = part[g];
    }
    for (const auto& [op, d] : o.pinned) p.device_of_op[op] = d;
    return Checked(in, o, std::move(p), "metis");
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewMetisPolicy() {
  return std::make_unique<MetisPolicy>();
}

}  // namespace placer
