#include "policies/strategy_search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"
#include "graph/repeated_layers.h"
#include "policies/search_clock.h"
#include "policies/stage_partitions.h"
#include "simulator/memory_check.h"

namespace placer {
namespace {

// ": parameters and optimizer state N GB, activations ..., gradients ...,
// the rest of a micro-batch ..." for the device furthest over its limit,
// largest part first; empty without a breakdown.
std::string PeakParts(const SimulationResult& step,
                      const std::vector<int64_t>& peaks,
                      const std::vector<int64_t>& limits) {
  int worst = -1;
  int64_t most = 0;
  for (size_t d = 0; d < peaks.size() && d < limits.size(); ++d) {
    if (peaks[d] - limits[d] > most) {
      most = peaks[d] - limits[d];
      worst = static_cast<int>(d);
    }
  }
  if (worst < 0 || worst >= static_cast<int>(step.peak_breakdown.size())) {
    return "";
  }
  const MemoryBreakdown& b = step.peak_breakdown[worst];
  std::vector<std::pair<int64_t, std::string>> parts = {
      {b.parameters, "parameters and optimizer state"},
      {b.activations, "activations kept for the backward"},
      {b.gradients, "accumulated gradients"},
      {b.workspace, "the rest of a micro-batch's peak"}};
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::string> named;
  for (const auto& [bytes, what] : parts) {
    if (bytes > 0) {
      named.push_back(absl::StrFormat("%s %.1f GB", what, bytes / 1e9));
    }
  }
  return named.empty() ? "" : absl::StrCat(" (", absl::StrJoin(named, ", "), ")");
}

constexpr int kMaxPoolDevices = 32;

// The whole model placed by `policy` on `devices` of the cluster (a
// cluster of those alone): per forward op, the index in `devices` of its
// device.
absl::StatusOr<std::vector<int>> PlaceOnDevices(
    const PolicyInput& input, const PolicyOptions& options,
    const std::string& policy, const std::vector<int>& devices,
    const std::vector<int64_t>& limits, double budget_seconds) {
  ASSIGN_OR_RETURN(std::unique_ptr<PlacementPolicy> made, NewPolicy(policy));
  const Cluster part = input.cluster.Subset(devices);
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(input.view, part, input.costs, *order);
  PolicyInput inside{input.view, part, input.costs, context};
  PolicyOptions o;
  o.seed = options.seed;
  o.budget_seconds = budget_seconds;
  o.max_evaluations = options.max_evaluations;
  o.memory_headroom = options.memory_headroom;
  for (int d : devices) o.memory_limit_bytes.push_back(limits[d]);
  for (const auto& [op, device] : options.pinned) {
    auto at = std::find(devices.begin(), devices.end(), device);
    if (at != devices.end()) {
      o.pinned[op] = static_cast<int>(at - devices.begin());
    }
  }
  o.should_stop = options.should_stop;
  ASSIGN_OR_RETURN(Placement placed, made->Place(inside, o));
  return placed.device_of_op;
}

}  // namespace

std::string ParallelismName(Parallelism parallelism) {
  switch (parallelism) {
    case Parallelism::kModel: return "model";
    case Parallelism::kPipeline: return "pipeline";
    case Parallelism::kData: return "data";
    case Parallelism::kHybrid: return "hybrid";
    case Parallelism::kTensor:
      return "tensor";
    case Parallelism::kAuto: return "auto";
  }
  return "?";
}

absl::StatusOr<Parallelism> ParseParallelism(const std::string& name) {
  for (Parallelism p :
       {Parallelism::kAuto, Parallelism::kModel, Parallelism::kPipeline,
        Parallelism::kData, Parallelism::kHybrid, Parallelism::kTensor}) {
    if (ParallelismName(p) == name) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown parallelism '", name,
                   "'; known: auto, model, pipeline, data, hybrid, tensor"));
}

const std::vector<int>* InsidePlacements::Find(const std::string& policy,
                                               int width) const {
  auto it = placed_.find({policy, width});
  return it == placed_.end() ? nullptr : &it->second;
}

void InsidePlacements::Keep(const std::string& policy, int width,
                            std::vector<int> placed) {
  placed_[{policy, width}] = std::move(placed);
}

std::vector<int> IdenticalDevices(const Cluster& cluster) {
  std::vector<std::vector<int>> groups;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
      return cluster.device(g.front()).SameRates(cluster.device(d));
    });
    if (same == groups.end()) {
      groups.push_back({d});
    } else {
      same->push_back(d);
    }
  }
  std::vector<int> best;
  double best_flops = -1;
  for (const std::vector<int>& devices : groups) {
    const double flops =
        cluster.device(devices.front()).peak_flops * devices.size();
    if (flops > best_flops ||
        (flops == best_flops && devices.front() < best.front())) {
      best = devices;
      best_flops = flops;
    }
  }
  return best;
}

std::vector<int> IdenticalDevicePool(const Cluster& cluster) {
  std::vector<int> best = IdenticalDevices(cluster);
  if (best.size() > kMaxPoolDevices) best.resize(kMaxPoolDevices);
  return best;
}

absl::StatusOr<StageRecompute> ParseStageRecompute(const std::string& name) {
  if (name == "auto") return StageRecompute::kAuto;
  if (name == "none") return StageRecompute::kNone;
  if (name == "full") return StageRecompute::kFull;
  if (name == "selective") return StageRecompute::kSelective;
  if (name == "selective-op") return StageRecompute::kSelectiveOp;
  if (name == "layers") return StageRecompute::kLayers;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown recomputation '", name,
      "'; known: auto, none, full, selective, selective-op, layers"));
}

namespace {

// The recomputation every stage of every candidate has, if fixed.
std::optional<Recompute> FixedRecompute(StageRecompute recompute) {
  switch (recompute) {
    case StageRecompute::kAuto:
    case StageRecompute::kNone:
      return std::nullopt;
    case StageRecompute::kFull:
      return Recompute::kFull;
    case StageRecompute::kSelective:
      return Recompute::kSelective;
    case StageRecompute::kSelectiveOp:
      return Recompute::kSelectiveOp;
    case StageRecompute::kLayers:
      return Recompute::kLayers;
  }
  return std::nullopt;
}

// Whether stages with these replica counts have the search's fixed shape.
bool HasShape(const std::vector<int>& replicas_of_stage,
              const StrategySearchOptions& search) {
  if (search.stages > 0 &&
      static_cast<int>(replicas_of_stage.size()) != search.stages) {
    return false;
  }
  for (int r : replicas_of_stage) {
    if (search.replicas > 0 && r != search.replicas) return false;
  }
  return true;
}

bool HasShape(const Strategy& s, const StrategySearchOptions& search) {
  std::vector<int> replicas;
  for (const PipelineStage& stage : s.stages) {
    replicas.push_back(stage.num_replicas());
  }
  return HasShape(replicas, search);
}

// "2 stages of 4 replicas of tensor 2", with "any" for what is not fixed.
std::string DescribeShape(const StrategySearchOptions& search) {
  auto any = [](int n) { return n > 0 ? absl::StrCat(n) : std::string("any"); };
  return absl::StrCat(any(search.stages), " stages of ", any(search.replicas),
                      " replicas of tensor ", any(search.tensor));
}

}  // namespace

absl::StatusOr<StrategyChoice> SearchStrategy(
    const PolicyInput& input, const PolicyOptions& options,
    const StrategySearchOptions& search) {
  if (search.parallelism == Parallelism::kModel) {
    return absl::InvalidArgumentError(
        "parallelism 'model' is op placement: the placement policies' job");
  }
  const std::vector<int> pool = IdenticalDevicePool(input.cluster);
  if (pool.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster '", input.cluster.name(),
        "' has no two identical devices to pipeline or replicate over"));
  }
  const int P = static_cast<int>(pool.size());
  if (search.parallelism == Parallelism::kHybrid) {
    if (search.inside_policy.empty()) {
      return absl::InvalidArgumentError(
          "hybrid parallelism needs a policy to place ops inside a replica");
    }
    if (P < 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster '", input.cluster.name(), "' has ", P,
          " identical devices; hybrid parallelism needs four (two replicas "
          "of two)"));
    }
  }
  const Chunks chunks = MakeChunks(input.simulation, pool[0]);
  const std::vector<int64_t> limits = MemoryLimits(input.cluster, options);
  SearchClock clock(options, "strategies");

  const int micro_batches =
      search.micro_batches > 0 ? search.micro_batches : P;
  if (search.parallelism == Parallelism::kData && micro_batches < P) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data parallelism over ", P, " devices needs at least ", P,
        " micro-batches per step; asked for ", micro_batches));
  }
  // Tensor-parallel group sizes (contract).
  std::vector<int> tensors = {1};
  if (search.tensor > 0) {
    if (P % search.tensor != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor-parallel groups of ", search.tensor, " do not divide the ", P,
          " identical devices of cluster '", input.cluster.name(), "'"));
    }
    tensors = {search.tensor};
  } else if (search.parallelism == Parallelism::kTensor ||
             search.parallelism == Parallelism::kAuto) {
    if (search.parallelism == Parallelism::kTensor) tensors.clear();
    for (int t = 2; t <= P; t *= 2) {
      if (P % t == 0) tensors.push_back(t);
    }
  }

  StrategyChoice best;
  bool found = false;
  int64_t least_over = std::numeric_limits<int64_t>::max();
  absl::Status over_status;
  // Simulates `s` and keeps it when it fits and is the fastest so far;
  // `peaks` (when given) gets each device's peak. Returns whether it fits.
  absl::Status refused;  // the first candidate the simulator refused
  auto simulate = [&](Strategy s, std::vector<int64_t>* peaks) {
    s.overlap_parameter_gather =
        search.overlap_parameter_gather &&
        (s.zero == ZeroStage::kOptimizerState ||
         s.zero == ZeroStage::kGradients);
    absl::StatusOr<StrategySimulation> r =
        SimulateStrategy(input.simulation, s);
    ++best.evaluations;
    if (!r.ok()) {
      if (refused.ok()) refused = r.status();
      return false;
    }
    if (peaks != nullptr) *peaks = r->step.peak_memory_bytes;
    absl::Status memory =
        CheckMemory(input.cluster, r->step.peak_memory_bytes, limits);
    if (!memory.ok()) {
      int64_t over = 0;
      for (int d = 0; d < input.cluster.num_devices(); ++d) {
        over = std::max(over, r->step.peak_memory_bytes[d] - limits[d]);
      }
      if (over < least_over) {
        least_over = over;
        over_status = absl::ResourceExhaustedError(
            absl::StrCat("no strategy fits in memory; the closest (",
                         DescribeStrategy(s), "): ", memory.message(),
                         PeakParts(r->step, r->step.peak_memory_bytes,
                                   limits)));
      }
      return false;
    }
    if (!found || r->seconds_per_batch < best.simulation.seconds_per_batch) {
      found = true;
      best.strategy = s;
      best.simulation = *std::move(r);
    }
    clock.Report(best.evaluations, best.simulation.step.step_seconds);
    return true;
  };
  // `simulate` with the search's recomputation and ZeRO. A candidate over a
  // limit is tried again: with ZeRO-1, then ZeRO-2, then ZeRO-3 (zero
  // unset, when a stage has replicas; ZeRO-2 and -3 when every stage's
  // replicas run as many micro-batches), then with its over stages
  // recomputing (kAuto), until one fits or the budget ends (read before
  // each retry: at a thousand devices one simulation takes seconds).
  // `peaks` gets the first try's.
  auto stop = [&] { return clock.Expired(); };
  int shaped = 0;  // candidates of the fixed shape (all when none is)
  const bool repeated_layers =
      search.recompute == StageRecompute::kAuto &&
      FindRepeatedLayers(input.view).count > 0;
  auto consider = [&](Strategy s, std::vector<int64_t>* peaks = nullptr) {
    if (!HasShape(s, search)) return;
    ++shaped;
    if (const std::optional<Recompute> fixed = FixedRecompute(search.recompute);
        fixed.has_value()) {
      for (PipelineStage& stage : s.stages) stage.recompute = *fixed;
    }
    if (search.zero.has_value()) s.zero = *search.zero;
    std::vector<int64_t> tried;
    const bool fits = simulate(s, &tried);
    if (peaks != nullptr) *peaks = tried;
    if (fits || tried.empty()) return;
    if (!search.zero.has_value()) {
      bool replicas = false, even = true;
      for (const PipelineStage& stage : s.stages) {
        replicas |= stage.num_replicas() > 1;
        even &= s.micro_batches % stage.num_replicas() == 0;
      }
      for (ZeroStage zero : {ZeroStage::kOptimizerState, ZeroStage::kGradients,
                             ZeroStage::kParameters}) {
        if (!replicas || (ShardsGradients(zero) && !even) || stop()) break;
        s.zero = zero;
        std::vector<int64_t> sharded;
        if (simulate(s, &sharded)) return;
        if (!sharded.empty()) tried = std::move(sharded);
      }
    }
    if (search.recompute != StageRecompute::kAuto || stop()) return;
    // The over stages recompute selectively, then layer by layer (where
    // the model has repeated layers; neither inside wide stages), then
    // wholly.
    std::vector<char> over(s.stages.size(), 0);
    for (size_t k = 0; k < s.stages.size(); ++k) {
      for (const Replica& replica : s.stages[k].replicas) {
        for (int d : replica.device_of_slot) over[k] |= tried[d] > limits[d];
      }
      over[k] &= s.stages[k].recompute == Recompute::kNone;
    }
    for (Recompute recompute :
         {Recompute::kSelective, Recompute::kLayers, Recompute::kFull}) {
      if (recompute == Recompute::kLayers && !repeated_layers) continue;
      if (stop()) return;
      bool any = false;
      for (size_t k = 0; k < s.stages.size(); ++k) {
        if (!over[k] ||
            (RecomputesInPart(recompute) && s.stages[k].width() > 1)) {
          continue;
        }
        s.stages[k].recompute = recompute;
        any = true;
      }
      if (any && simulate(s, nullptr)) return;
    }
  };
  // Each tensor-parallel group size; each partition (over the groups, a
  // group acting as one device) with each schedule (when it has stages to
  // pipeline) and allreduce (when it has replicas), 1F1B and ring first.
  std::vector<int> pool_position(input.cluster.num_devices(), -1);
  for (int i = 0; i < P; ++i) pool_position[pool[i]] = i;
  for (int t : tensors) {
    if (stop() || search.parallelism == Parallelism::kHybrid) break;
    std::vector<int> groups;
    for (int i = 0; i + t <= P; i += t) groups.push_back(pool[i]);
    const Parallelism mode = search.parallelism == Parallelism::kTensor
                                 ? Parallelism::kAuto
                                 : search.parallelism;
    std::vector<Partition> parts;
    if (groups.size() >= 2) {
      parts = Partitions(input, chunks, groups, micro_batches, mode);
    } else {
      parts.push_back({{0, chunks.size()}, {1}});  // one group
    }
    for (const Partition& part : parts) {
      if (stop()) break;
      if (!HasShape(part.replicas, search)) continue;
      const int most =
          *std::max_element(part.replicas.begin(), part.replicas.end());
      if (most > micro_batches) continue;
      const int m = micro_batches;
      Strategy shape = ToStrategy(input.view, chunks, groups, part, m);
      shape.sequence_parallel = t > 1 && search.sequence_parallel;
      for (PipelineStage& stage : shape.stages) {
        for (Replica& replica : stage.replicas) {
          if (t < 2) break;
          const int base = pool_position[replica.device_of_slot[0]];
          replica.tensor_devices.assign(pool.begin() + base,
                                        pool.begin() + base + t);
        }
      }
      for (PipelineSchedule schedule :
           {PipelineSchedule::k1F1B, PipelineSchedule::kGPipe}) {
        if (schedule == PipelineSchedule::kGPipe && shape.stages.size() < 2) {
          continue;
        }
        // Hierarchical where some stage's replicas span hosts evenly.
        bool hosts = false;
        for (const PipelineStage& stage : shape.stages) {
          hosts |= SpansHostsEvenly(input.cluster, stage.FirstDevices());
        }
        for (AllreduceAlgorithm algorithm :
             {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree,
              AllreduceAlgorithm::kHierarchical}) {
          if (algorithm == AllreduceAlgorithm::kTree && most < 2) continue;
          if (algorithm == AllreduceAlgorithm::kHierarchical && !hosts) {
            continue;
          }
          Strategy s = shape;
          s.schedule = schedule;
          s.allreduce = algorithm;
          consider(s);
        }
      }
    }
  }
  // Uniform candidates over every identical device, where the cluster has
  // more than the pool: Megatron-LM's layout, t-device tensor groups (t a
  // power of two up to 8 inside a host), p stages of equal work, each with
  // G / p replicas (G = devices / t), for every p dividing G.
  const std::vector<int> every = IdenticalDevices(input.cluster);
  const int N = static_cast<int>(every.size());
  const bool grid = N > P && (search.parallelism == Parallelism::kAuto ||
                              search.parallelism == Parallelism::kTensor);
  int per_host = N;
  if (grid && !input.cluster.device(every[0]).host.empty()) {
    per_host = 0;
    for (int d : every) {
      per_host += input.cluster.device(d).host ==
                  input.cluster.device(every[0]).host;
    }
  }
  std::vector<int> every_position(input.cluster.num_devices(), -1);
  for (int i = 0; i < N; ++i) every_position[every[i]] = i;
  // kTensor from 2, unless the group size is fixed at 1.
  const int first_t =
      search.parallelism == Parallelism::kTensor && search.tensor != 1 ? 2 : 1;
  for (int t = first_t; grid && t <= std::min(per_host, 8) && !stop();
       t *= 2) {
    if (N % t != 0 || (search.tensor > 0 && t != search.tensor)) continue;
    const int groups_count = N / t;
    std::vector<int> groups;
    for (int i = 0; i < N; i += t) groups.push_back(every[i]);
    for (int stages = 1; stages <= std::min(chunks.size(), groups_count) &&
                         !stop();
         ++stages) {
      if (groups_count % stages != 0) continue;
      const int replicas = groups_count / stages;
      if (replicas > micro_batches) continue;
      if (!HasShape(std::vector<int>(stages, replicas), search)) continue;
      Strategy shape =
          ToStrategy(input.view, chunks, groups,
                     EvenPartition(chunks, stages, replicas), micro_batches);
      shape.sequence_parallel = t > 1 && search.sequence_parallel;
      bool hosts = false;
      for (PipelineStage& stage : shape.stages) {
        hosts |= SpansHostsEvenly(input.cluster, stage.FirstDevices());
        if (t < 2) continue;
        for (Replica& replica : stage.replicas) {
          const int base = every_position[replica.device_of_slot[0]];
          replica.tensor_devices.assign(every.begin() + base,
                                        every.begin() + base + t);
        }
      }
      for (AllreduceAlgorithm algorithm :
           {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kHierarchical}) {
        if (algorithm == AllreduceAlgorithm::kHierarchical && !hosts) continue;
        Strategy s = shape;
        s.allreduce = algorithm;
        consider(s);
      }
    }
  }
  // Wide candidates: replicas of an op placement over w devices.
  absl::Status inside_status;
  const bool wide = search.parallelism == Parallelism::kHybrid ||
                    (search.parallelism == Parallelism::kAuto &&
                     !search.inside_policy.empty());
  const int widths = std::max(0, P / 2 - 1);
  for (int w = 2; wide && w <= P / 2 && !stop(); ++w) {
    const int replicas = P / w;
    if (replicas > micro_batches) continue;
    const std::vector<int> first(pool.begin(), pool.begin() + w);
    // Each group of w pool devices acts as one device of a narrower pool
    // (its first): a strategy over those is widened to the groups' devices
    // that the op placement uses, each op in its slot.
    std::vector<int> groups;
    for (int k = 0; k < replicas; ++k) groups.push_back(pool[k * w]);
    std::vector<int> slot_of_index, slots;
    auto widen = [&](const Strategy& narrow) {
      Strategy s = narrow;
      s.slot_of_op = slots;
      for (PipelineStage& stage : s.stages) {
        PipelineStage spread;
        for (int v : stage.FirstDevices()) {
          const int base = pool_position[v];
          Replica replica;
          for (int i = 0; i < w; ++i) {
            if (slot_of_index[i] >= 0) {
              replica.device_of_slot.push_back(pool[base + i]);
            }
          }
          spread.replicas.push_back(std::move(replica));
        }
        stage = std::move(spread);
      }
      return s;
    };
    Strategy hybrid;
    hybrid.stage_of_op.assign(input.view.num_groups(), 0);
    hybrid.stages = {PipelineStage::OneDevicePerReplica(groups)};
    hybrid.micro_batches = micro_batches;
    hybrid.schedule = PipelineSchedule::k1F1B;
    // The policy places one micro-batch; what the strategy adds on a
    // device (gradient buffers, micro-batches in flight) can push it over
    // its limit: then it places again with that device's limit lowered by
    // the overshoot, at most three times.
    std::vector<int64_t> inside_limits = limits;
    bool placed_ok = false;
    // Takes an op placement over `first` (per forward op, the index of its
    // device): its slots, and the replicas of it as candidates; false when
    // it uses one device; sets *over when the ring candidate overshoots a
    // device's limit (and lowers that device's inside limit).
    auto take = [&](const std::vector<int>& placed, bool* over) {
      // Slots: the devices the placement uses, in pool order.
      slot_of_index.assign(w, -1);
      for (int i : placed) slot_of_index[i] = 0;
      int width = 0;
      for (int i = 0; i < w; ++i) {
        if (slot_of_index[i] == 0) slot_of_index[i] = width++;
      }
      if (width < 2) return false;  // one device: data parallelism's
      slots.clear();
      for (int i : placed) slots.push_back(slot_of_index[i]);
      *over = false;
      for (AllreduceAlgorithm algorithm :
           {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree}) {
        Strategy s = widen(hybrid);
        s.allreduce = algorithm;
        std::vector<int64_t> peaks;
        consider(s, &peaks);
        if (peaks.empty() || algorithm != AllreduceAlgorithm::kRing) continue;
        for (int i = 0; i < w; ++i) {
          int64_t most = 0;
          for (int k = 0; k < replicas; ++k) {
            const int d = pool[k * w + i];
            most = std::max(most, peaks[d] - limits[d]);
          }
          if (most > 0) {
            inside_limits[first[i]] -= most;
            *over = true;
          }
        }
      }
      return true;
    };
    const auto reused =
        search.inside_placements == nullptr
            ? nullptr
            : search.inside_placements->Find(search.inside_policy, w);
    if (reused != nullptr) {
      bool over = false;
      placed_ok = take(*reused, &over);
    }
    for (int attempt = 0; reused == nullptr && attempt < 3 && !stop();
         ++attempt) {
      const double share = clock.remaining_seconds() / (3.0 * widths);
      absl::StatusOr<std::vector<int>> placed = PlaceOnDevices(
          input, options, search.inside_policy, first, inside_limits, share);
      if (!placed.ok()) {
        if (inside_status.ok()) {
          inside_status = WithContext(
              placed.status(),
              absl::StrCat("placing ops inside a replica of ", w, " devices (",
                           search.inside_policy, "): "));
        }
        break;
      }
      if (search.inside_placements != nullptr) {
        search.inside_placements->Keep(search.inside_policy, w, *placed);
      }
      bool over = false;
      if (!take(*placed, &over)) break;
      placed_ok = true;
      if (!over) break;
    }
    // auto: pipelines (and stages with replicas) over the groups, each
    // stage with the same op placement inside.
    if (!placed_ok || search.parallelism != Parallelism::kAuto) continue;
    for (const Partition& part :
         Partitions(input, chunks, groups, micro_batches, Parallelism::kAuto)) {
      if (stop()) break;
      if (part.replicas.size() < 2) continue;  // the hybrid above
      const int most =
          *std::max_element(part.replicas.begin(), part.replicas.end());
      if (most > micro_batches) continue;
      const Strategy shape =
          ToStrategy(input.view, chunks, groups, part, micro_batches);
      for (PipelineSchedule schedule :
           {PipelineSchedule::k1F1B, PipelineSchedule::kGPipe}) {
        for (AllreduceAlgorithm algorithm :
             {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree}) {
          if (algorithm == AllreduceAlgorithm::kTree && most < 2) continue;
          Strategy s = widen(shape);
          s.schedule = schedule;
          s.allreduce = algorithm;
          consider(s);
        }
      }
    }
  }
  clock.ReportNow(best.evaluations,
                  found ? best.simulation.step.step_seconds : 0);
  if (!found) {
    if (shaped == 0 && (search.stages > 0 || search.replicas > 0) &&
        !clock.Expired()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no candidate has ", DescribeShape(search), " on cluster '",
          input.cluster.name(), "': its ", N,
          " identical devices (the search's pool: ", P,
          ") take stages x replicas x tensor group size devices, all of "
          "them beyond the pool, and the micro-batches (", micro_batches,
          ") at least the replicas"));
    }
    if (!over_status.ok()) return over_status;
    if (!inside_status.ok()) return inside_status;
    return absl::NotFoundError(absl::StrCat(
        "no ", ParallelismName(search.parallelism),
        " strategy found within the budget (", best.evaluations,
        " simulated", refused.ok() ? "" : "; the first refused: ",
        refused.message(), ")"));
  }
  return best;
}

Strategy OneDeviceStrategy(const TrainingView& view, int device,
                           int micro_batches) {
  Strategy s;
  s.stage_of_op.assign(view.num_groups(), 0);
  s.stages = {PipelineStage::OneDevicePerReplica({device})};
  s.micro_batches = micro_batches;
  s.schedule = PipelineSchedule::k1F1B;  // forward, backward, forward, ...
  return s;
}

}  // namespace placer
