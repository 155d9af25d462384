// `place --parallelism pipeline|data|hybrid|tensor|auto`: the strategy
// rows (one device; the op policy's placement run as a gradient-accumulation
// loop; each parallelism's search, and with --micro-batch-sizes the search
// at each micro batch size), the plan chosen among them, printed, emitted in
// another system's terms and written. place_command.cc reads the flags,
// loads the model and builds its view; this file compares plans of it.
#ifndef PLACER_PLACER_CLI_PLACE_STRATEGIES_H_
#define PLACER_PLACER_CLI_PLACE_STRATEGIES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "placer/model_source.h"
#include "placer/policy_run.h"
#include "policies/policy.h"
#include "policies/strategy_search.h"
#include "profiles/cluster.h"

namespace placer {

// What place is told, its own flags read once (the model's, the
// training's, the cost model's and the searches' are read by cli_common).
struct PlaceFlags {
  std::string cluster;
  std::string policy;
  std::string checkpoint;   // a trained model for learned policies
  std::string parallelism;  // "model", "data", "pipeline", "hybrid", "auto"
  int micro_batches = 0;    // 0: one per device
  std::string recompute;    // ParseStageRecompute's names
  std::string zero;         // "auto", "0", "1", "2", "3"
  std::string tensor;       // "auto" or devices per group
  std::string stages;       // "auto" or pipeline stages
  std::string replicas;     // "auto" or data-parallel replicas per stage
  bool sequence_parallel = false;
  bool overlap_param_gather = false;
  std::string emit;         // --emit: "", "megatron", "deepspeed", "torchtitan"
  int64_t global_batch = 0;  // --global-batch; 0: --micro-batches decides
  // --micro-batch-sizes: the graph batches to search at (with
  // --global-batch); empty: the graph's own.
  std::vector<std::string> micro_batch_sizes;
  bool compare = false;
  bool json = false;
  std::string out_path;     // -o; empty: no file
  std::string report_path;  // --report; empty: no HTML report
};

PlaceFlags ReadPlaceFlags();

// Prints the rows and the chosen plan for `mode` (not kModel) and writes
// what the flags ask; returns the command's exit code. `spec` is the MODEL
// argument as given (reloaded at each --micro-batch-sizes size); `model`
// and `input` are it at its graph's batch; `op_policy` runs the op
// placement policy once, on demand.
int PlaceWithStrategies(Parallelism mode, const std::string& spec,
                        const LoadedModel& model, const Cluster& cluster,
                        const PolicyInput& input, const PolicyOptions& options,
                        const PlaceFlags& flags,
                        const std::function<const PolicyRun&()>& op_policy);

}  // namespace placer

#endif  // PLACER_PLACER_CLI_PLACE_STRATEGIES_H_
