#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "policies/policies.h"
#include "policies/policy.h"

namespace placer {

namespace {

// policy.h's contract for every policy made by name, whatever its own code
// does: a placement passes CheckPlacement (memory limits, pinned ops), or
// the caller gets the check's error, prefixed with the policy's name.
class CheckedPolicy : public PlacementPolicy {
 public:
  CheckedPolicy(std::string name, std::unique_ptr<PlacementPolicy> inner)
      : name_(std::move(name)), inner_(std::move(inner)) {}
  absl::StatusOr<Placement> Place(const PolicyInput& input,
                                  const PolicyOptions& options) override {
    absl::StatusOr<Placement> placement = inner_->Place(input, options);
    if (!placement.ok()) return placement;
    return Checked(input, options, *std::move(placement), name_);
  }

 private:
  std::string name_;
  std::unique_ptr<PlacementPolicy> inner_;
};

std::vector<PolicyInfo>& Registry() {
  static auto* policies = new std::vector<PolicyInfo>{
      {"single", "the fastest single device that fits", NewSinglePolicy},
      {"expert",
       "hand rules of the papers: one recurrent/attention layer per device, "
       "embeddings first, softmax last; CNNs on one device",
       NewExpertPolicy},
      {"hash", "hash partitioning of node keys (Mayer et al. 2017)",
       NewHashPolicy},
      {"critical_path",
       "critical path on the fastest device, the rest balanced (Mayer et "
       "al. 2017)",
       NewCriticalPathPolicy},
      {"metis",
       "METIS multi-constraint partitioning: compute and memory balanced to "
       "device speeds and capacities, bytes cut minimized",
       NewMetisPolicy},
      {"heft", "HEFT list scheduling, memory-aware", NewHeftPolicy},
      {"m_etf", "earliest-task-first list scheduling, memory-aware (Baechi)",
       NewMEtfPolicy},
      {"m_sct",
       "small-communication-time list scheduling: an LP relaxation (COIN-OR "
       "CLP) picks favorite children kept with their parents (Baechi)",
       NewMSctPolicy},
      {"m_topo",
       "topological order filling devices to their compute share within "
       "memory (Baechi)",
       NewMTopoPolicy},
      {"local_search",
       "moves and swaps of groups evaluated by the simulator, from the "
       "initial placement or the best list scheduler",
       NewLocalSearchPolicy, PolicyKind::kSearch},
      {"best", "the portfolio, then local search on the winner",
       NewBestPolicy, PolicyKind::kSearch},
      {"memory_first",
       "memory before speed: layers dealt out by memory share, then moved "
       "off devices over their limit, cheapest slowdown first",
       NewMemoryFirstPolicy, PolicyKind::kSearch},
  };
  return *policies;
}

}  // namespace

const std::vector<PolicyInfo>& Policies() { return Registry(); }

PolicyRegistrar::PolicyRegistrar(PolicyInfo info) {
  Registry().push_back(std::move(info));
}

const PolicyInfo* FindPolicy(const std::string& name) {
  for (const PolicyInfo& p : Policies()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<PlacementPolicy>> NewPolicy(
    const std::string& name) {
  std::vector<std::string> names;
  for (const PolicyInfo& p : Policies()) {
    if (p.name != name) continue;
    // Every heuristic ends in Checked itself (and BestHeuristic, which
    // calls them directly, relies on it): wrapping it would simulate its
    // result a second time (+40% placement time on GNMT-8).
    if (p.kind == PolicyKind::kHeuristic) return p.make();
    return std::unique_ptr<PlacementPolicy>(
        std::make_unique<CheckedPolicy>(p.name, p.make()));
    names.push_back(p.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown policy '", name,
                                          "'; known: ",
                                          absl::StrJoin(names, ", ")));
}

}  // namespace placer
