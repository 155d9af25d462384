// What a candidate strategy's peaks are made of, and what the memory savers
// (ZeRO, recomputation) could free of them: the strategy search's words
// for an over candidate, and its estimates for skipping retries that
// cannot fit.
//
// Contract: pure functions of their arguments; no simulation. Thread-safe.
#ifndef PLACER_POLICIES_MEMORY_SAVERS_H_
#define PLACER_POLICIES_MEMORY_SAVERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "simulator/memory_timeline.h"
#include "simulator/strategy.h"

namespace placer {

// A candidate's memory as one simulation found it, per device: its peak
// and what the peak was made of (parts may be empty: no breakdown).
struct TriedMemory {
  std::vector<int64_t> peak_bytes;
  std::vector<MemoryBreakdown> parts;
};

// Per device of a cluster of `num_devices`: the replicas of the stage that
// runs on it (any slot or tensor-parallel group); 0 where no stage does.
std::vector<int> ReplicasOfDevices(const Strategy& strategy, int num_devices);

// What the savers may do to a tried candidate.
struct SaverTry {
  // The ZeRO stage the candidate was tried with, and the one to estimate:
  // from kNone, ZeRO-1 frees the sharded part of the optimizer state,
  // ZeRO-2 that and of the gradients, ZeRO-3 that and of the parameters;
  // from any other stage, nothing.
  ZeroStage tried_zero = ZeroStage::kNone;
  ZeroStage zero = ZeroStage::kNone;
  // Recomputation frees every activation and workspace byte.
  bool recompute = false;
  // The optimizer state's share of MemoryBreakdown::parameters
  // (TrainingOptions::optimizer_state_per_parameter_byte s: s / (1 + s)).
  double state_fraction = 0;
};

// Whether every device over its limit in `tried` could come within it:
// its peak less what `saver` could free at that peak, the sharded part
// being 1 - 1/R of a stage of R replicas (ReplicasOfDevices). An estimate
// in the savers' favour (ZeRO-3's gathered parameters, what a rerun keeps
// and the later moments of the step are not counted): false means the
// retry would not fit. True where a device has no breakdown.
bool SaversCouldFit(const TriedMemory& tried,
                    const std::vector<int64_t>& limits,
                    const std::vector<int>& replicas_of_device,
                    const SaverTry& saver);

// ": parameters and optimizer state N GB, activations ..., gradients ...,
// the rest of a micro-batch ..." for the device furthest over its limit,
// largest part first (" (parameters and optimizer state 1.0 GB, ...)");
// empty without a device over or a breakdown.
std::string PeakParts(const std::vector<MemoryBreakdown>& parts,
                      const std::vector<int64_t>& peaks,
                      const std::vector<int64_t>& limits);

}  // namespace placer

#endif  // PLACER_POLICIES_MEMORY_SAVERS_H_
