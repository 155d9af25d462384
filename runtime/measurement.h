// Measuring placements on real devices, with the protocol of Mirhoseini et
// al. (2017): run warm-up steps, drop them, take the median of the rest.
//
// Contract: MeasureSteps runs warmup + steps training steps of an executor
// (either: StepRunner) and reports the median step time of the last
// `steps`, every step's loss and time, the peak tracked memory per device
// (over every step), the most allocated per device in a measured step
// (with measure_allocations), each device's median busy time, each
// (node, device) pair's median over its runs in the measured steps (a
// strategy runs a node once per micro-batch) and the transfers of the
// measured steps; any failed step fails the measurement with its error.
// ProfileFromMeasurement turns a measurement of any plan into the cost
// model's profile format (profiles/profile.proto): per node signature
// and device kind, the median over the (node, device) pairs that share
// it; per
// device pair, a latency/bandwidth fit of the transfers' medians by size
// (pairs with fewer than two sizes are left out); the thread hand-off
// (StepReport::handoff_seconds: a mean without the 5% at each end).
// OverlayStepMeasurement measures a reference placement (RandomRuns:
// seeded, so that every device and link carries work) and overlays those
// in-step times on a profile: what a node costs inside a step (dispatch,
// bookkeeping, workers sharing the host) and op-by-op timing misses; where a
// host has devices of more than one kind (CPU and GPU) it also measures
// each device kind alone (every node on its first device of that kind: the
// profile's alone times, what a node costs when no other device of the
// host is in use; a kind the model does not fit alone keeps the shared
// times). ProfileFromMeasurement records
// alone times too when the nodes ran on one device per host.
// NewExecutorEvaluator is the
// StepEvaluator that measures: one executor per placement.
#ifndef PLACER_RUNTIME_MEASUREMENT_H_
#define PLACER_RUNTIME_MEASUREMENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/training_view.h"
#include "simulator/evaluator.h"
#include "profiles/cluster.h"
#include "profiles/measured_cost_model.h"
#include "base/statistics.h"  // Median, used with measurements
#include "runtime/executor.h"

namespace placer {

struct MeasureOptions {
  int steps = 10;
  int warmup = 2;
  ExecutorOptions executor;
};

// A node's runs on one device in the measured steps.
struct MeasuredNode {
  int node = -1;
  int device = -1;
  double seconds = 0;  // the median
  int runs = 0;
};

struct Measurement {
  double step_seconds = 0;             // median of the measured steps
  std::vector<double> step_times;      // every step, warm-up included
  std::vector<double> losses;          // every step
  std::vector<int64_t> peak_memory_bytes;  // per device, over all steps
  // Per device, the most of a measured step (StepReport's); empty unless
  // the executor measured allocations.
  std::vector<int64_t> allocated_peak_bytes;
  std::vector<double> busy_seconds;    // per device, median
  // Per (node, device) that ran, by node then device.
  std::vector<MeasuredNode> nodes;
  std::vector<MeasuredTransfer> transfers;  // of the measured steps
  std::vector<double> handoff_seconds;      // of the measured steps
};

// `progress` (may be empty) is called after each step.
absl::StatusOr<Measurement> MeasureSteps(
    StepRunner& executor, const MeasureOptions& options,
    const std::function<void(int step, const StepReport&)>& progress = {});

MeasuredProfile ProfileFromMeasurement(const TrainingView& view,
                                       const Cluster& cluster,
                                       const Measurement& measurement);

// Contiguous runs of the topological order on random devices: at each op,
// with probability 1/8, a device is drawn anew (uniformly, so it may be the
// same one: a run ends with probability (1/8)(1 - 1/devices)).
Placement RandomRuns(const Graph& g, int devices, uint64_t seed);

// `base` overlaid with ProfileFromMeasurement of `reference`'s steps.
absl::StatusOr<MeasuredProfile> OverlayStepMeasurement(
    const TrainingView& view, const Cluster& cluster,
    const Placement& reference, MeasuredProfile base,
    const MeasureOptions& options);

// `view` must outlive the evaluator.
std::unique_ptr<StepEvaluator> NewExecutorEvaluator(const TrainingView& view,
                                                    const Cluster& cluster,
                                                    MeasureOptions options);

}  // namespace placer

#endif  // PLACER_RUNTIME_MEASUREMENT_H_
