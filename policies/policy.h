// PlacementPolicy: decides a device for every colocation group (forward op)
// of a training view.
//
// Contract: Place returns a placement that assigns every forward op to a
// device of the cluster, keeps ops pinned in the options where they are
// pinned, and that the simulator finds within every device's memory limit;
// or an error that says why none was found (for memory: which device and
// by how many bytes). Policies are deterministic: the same inputs and seed
// give the same placement; ties are broken by node key. Searches stop at
// their time budget or evaluation limit, whichever comes first (only the
// evaluation limit makes a search's stopping point machine-independent).
// Policies are made by name from a registry (NewPolicy), never chosen by
// string compares elsewhere.
#ifndef PLACER_POLICIES_POLICY_H_
#define PLACER_POLICIES_POLICY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/training_view.h"
#include "simulator/simulator.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"

namespace placer {

// How far a search has come: what `on_progress` receives.
struct SearchProgress {
  std::string stage;            // the policy or portfolio member running
  int64_t evaluations = 0;      // simulator calls so far
  double best_step_seconds = 0; // best valid placement so far; 0: none yet
  double elapsed_seconds = 0;
};

struct PolicyOptions {
  uint64_t seed = 1;
  double budget_seconds = 10;
  int64_t max_evaluations = 0;  // simulator calls for searches; 0: no limit
  // Per-device memory limits in bytes; empty: the devices' capacities less
  // the headroom.
  std::vector<int64_t> memory_limit_bytes;
  // The fraction of each device's capacity kept free where no explicit
  // limit is given: the allocator's fragmentation, kernels' workspaces and
  // the runtime's own memory, which the simulator does not count.
  double memory_headroom = 0.05;
  std::map<int, int> pinned;  // forward op -> device
  // A starting placement for refining policies (local_search).
  std::optional<Placement> initial;
  // Learned policies (rl): the directory of a trained model to start from
  // (`placer train --checkpoint`); empty: train from scratch.
  std::string checkpoint_dir;
  // Searches call `should_stop` between evaluations and, when it says so,
  // return the best placement found so far (a caller's deadline or
  // cancellation); `on_progress` hears how the search goes at most
  // every progress_interval_seconds, and once when it ends. Both may be
  // empty; both are called on the policy's thread.
  std::function<bool()> should_stop;
  std::function<void(const SearchProgress&)> on_progress;
  double progress_interval_seconds = 0.5;
};

// What every policy sees. The simulation context is built once by the
// caller and shared.
struct PolicyInput {
  const TrainingView& view;
  const Cluster& cluster;
  const CostModel& costs;
  const SimulationContext& simulation;
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual absl::StatusOr<Placement> Place(const PolicyInput& input,
                                          const PolicyOptions& options) = 0;
};

// What a policy is, for callers that run several: `best` runs the
// heuristics; calibration measures every policy but the learned ones.
enum class PolicyKind {
  kHeuristic,  // one pass, milliseconds to seconds
  kSearch,     // spends its budget evaluating placements
  kLearned,    // trains or loads a model (needs LibTorch)
};

struct PolicyInfo {
  std::string name;
  std::string description;
  std::unique_ptr<PlacementPolicy> (*make)();
  PolicyKind kind = PolicyKind::kHeuristic;
};

// Every registered policy, in a fixed order: the built-in ones, then those
// registered by libraries linked into this binary, in link order.
const std::vector<PolicyInfo>& Policies();

// Policies that live in libraries not every binary links (the RL placer
// needs LibTorch and is linked into placer_torch only) add themselves
// with a namespace-scope `static PolicyRegistrar r({...});`.
class PolicyRegistrar {
 public:
  explicit PolicyRegistrar(PolicyInfo info);
};

// The registered policy named `name` in this binary, or null (unknown, or
// in a library this binary does not link: the CLI runs `place --policy
// NAME` in placer_torch then, which has every policy).
const PolicyInfo* FindPolicy(const std::string& name);
// The policy named `name`. Heuristics (PolicyKind::kHeuristic) check their
// own results (each ends in Checked); every other policy — searches,
// learned ones, any registered later — is wrapped so that its every
// placement passes CheckPlacement (else the check's error): policy.h's
// contract holds for every policy made here.
absl::StatusOr<std::unique_ptr<PlacementPolicy>> NewPolicy(
    const std::string& name);

// Simulates `placement` and checks it against the options: memory limits,
// pinned ops. Returns the simulation or an error naming the device and the
// bytes over its limit. Every policy's result passes through this.
absl::StatusOr<SimulationResult> CheckPlacement(const PolicyInput& input,
                                                const PolicyOptions& options,
                                                const Placement& placement);

// `placement` when it passes CheckPlacement, else the check's error
// prefixed with the policy's name.
absl::StatusOr<Placement> Checked(const PolicyInput& input,
                                  const PolicyOptions& options,
                                  Placement placement,
                                  const std::string& policy);

// The memory limit of device d under `options`: the explicit limit, else
// the capacity less the headroom.
int64_t MemoryLimit(const Cluster& cluster, const PolicyOptions& options,
                    int device);
// MemoryLimit of every device: what CheckMemory (simulator/memory_check.h)
// is given wherever a policy or the RL trainer judges a placement.
std::vector<int64_t> MemoryLimits(const Cluster& cluster,
                                  const PolicyOptions& options);

}  // namespace placer

#endif  // PLACER_POLICIES_POLICY_H_
