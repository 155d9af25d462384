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
#include "policies/inside_placements.h"
#include "policies/memory_savers.h"
#include "policies/search_clock.h"
#include "policies/stage_partitions.h"
#include "simulator/memory_check.h"

namespace placer {
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
  // With `peaks`: each device's breakdown at its peak.
  std::vector<MemoryBreakdown> last_breakdown;
  double last_seconds_per_batch = 0;  // the last simulation's, or 0
  auto simulate = [&](Strategy s, std::vector<int64_t>* peaks) {
    last_seconds_per_batch = 0;
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
    last_seconds_per_batch = r->seconds_per_batch;
    if (peaks != nullptr) {
      *peaks = r->step.peak_memory_bytes;
      last_breakdown = r->step.peak_breakdown;
    }
    // Over a limit: what the device furthest over held, and when.
    absl::Status memory = CheckMemory(
        input.cluster, r->step.peak_memory_bytes, limits, [&](int d) {
          return absl::StrCat(PeakParts(r->step.peak_breakdown,
                                        r->step.peak_memory_bytes, limits),
                              ", ", DescribePeakPass(r->peak_passes[d]));
        });
    if (!memory.ok()) {
      int64_t over = 0;
      for (int d = 0; d < input.cluster.num_devices(); ++d) {
        over = std::max(over, r->step.peak_memory_bytes[d] - limits[d]);
      }
      if (over < least_over) {
        least_over = over;
        over_status = absl::ResourceExhaustedError(
            absl::StrCat("no strategy fits in memory; the closest (",
                         DescribeStrategy(s), "): ", memory.message()));
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
  // A lower bound on any candidate's seconds per micro-batch: a
  // micro-batch's forward and backward nodes on one pool device, split over
  // the candidate's devices (tensor parallelism splits a node's time
  // exactly, recomputation only adds, and a device runs one node at a
  // time). A candidate whose bound is no better than the best so far is
  // not simulated.
  double work_seconds = 0;
  for (int n = 0; n < input.simulation.num_nodes(); ++n) {
    if (input.view.node(n).kind == NodeKind::kUpdate) continue;
    work_seconds += std::min(input.simulation.node_seconds(n, pool[0]),
                             input.simulation.alone_node_seconds(n, pool[0]));
  }
  const double state_fraction = [&] {
    const double state =
        input.view.options().optimizer_state_per_parameter_byte();
    return state / (1 + state);
  }();
  // What a candidate ended as: not simulated (its bound), fitting (with
  // the ZeRO stage and recomputation that made it fit), or over a limit
  // with every memory saver tried (or ruled out).
  enum class Outcome { kSkipped, kFits, kOver };
  // `simulate` with the search's recomputation and ZeRO. A candidate over a
  // limit is tried again: with ZeRO-1, then ZeRO-2, then ZeRO-3 (zero
  // unset, when a stage has replicas; ZeRO-2 and -3 when every stage's
  // replicas run as many micro-batches; where ZeRO-1 fits, ZeRO-2 is
  // simulated too and the faster kept), then with its over stages
  // recomputing (kAuto), until one fits or the budget ends (read before
  // each retry: at a thousand devices one simulation takes seconds). A
  // retry is skipped when the first try's peaks, less all that the saver
  // could free at each over device's peak (ZeRO: the sharded part of the
  // optimizer state, gradients and parameters over the stage's replicas;
  // recomputation: every activation and workspace byte), are still over.
  // `s` comes back with the savers it was last simulated with; `peaks`
  // gets the first try's.
  auto stop = [&] { return clock.Expired(); };
  int shaped = 0;  // candidates of the fixed shape (all when none is)
  const bool repeated_layers =
      search.recompute == StageRecompute::kAuto &&
      FindRepeatedLayers(input.view).count > 0;
  auto consider = [&](Strategy& s,
                      std::vector<int64_t>* peaks = nullptr) -> Outcome {
    if (!HasShape(s, search)) return Outcome::kSkipped;
    ++shaped;
    if (const std::optional<Recompute> fixed = FixedRecompute(search.recompute);
        fixed.has_value()) {
      for (PipelineStage& stage : s.stages) stage.recompute = *fixed;
    }
    if (search.zero.has_value()) s.zero = *search.zero;
    const std::vector<int> replicas_of_device =
        ReplicasOfDevices(s, input.cluster.num_devices());
    const int devices_used = static_cast<int>(
        std::count_if(replicas_of_device.begin(), replicas_of_device.end(),
                      [](int replicas) { return replicas > 0; }));
    if (found && devices_used > 0 &&
        work_seconds / devices_used >= best.simulation.seconds_per_batch) {
      ++best.bounded;
      return Outcome::kSkipped;
    }
    TriedMemory tried;
    const bool fits = simulate(s, &tried.peak_bytes);
    tried.parts = last_breakdown;
    if (peaks != nullptr) *peaks = tried.peak_bytes;
    if (fits) return Outcome::kFits;
    if (tried.peak_bytes.empty()) return Outcome::kOver;
    auto could_fit = [&](ZeroStage zero, bool recompute) {
      return SaversCouldFit(tried, limits, replicas_of_device,
                            {s.zero, zero, recompute, state_fraction});
    };
    if (!search.zero.has_value() && s.zero == ZeroStage::kNone) {
      bool replicas = false, even = true;
      for (const PipelineStage& stage : s.stages) {
        replicas |= stage.num_replicas() > 1;
        even &= s.micro_batches % stage.num_replicas() == 0;
      }
      const bool recompute_later = search.recompute == StageRecompute::kAuto;
      if (!could_fit(even && replicas ? ZeroStage::kParameters
                                      : ZeroStage::kOptimizerState,
                     recompute_later)) {
        return Outcome::kOver;
      }
      for (ZeroStage zero : {ZeroStage::kOptimizerState, ZeroStage::kGradients,
                             ZeroStage::kParameters}) {
        if (!replicas || (ShardsGradients(zero) && !even) || stop()) break;
        // ZeRO-3 is the recomputation's base: simulated even when it
        // alone would not do.
        if (!could_fit(zero, false) &&
            !(zero == ZeroStage::kParameters && recompute_later)) {
          continue;
        }
        std::vector<int64_t> sharded;
        s.zero = zero;
        const bool zero_fits = simulate(s, &sharded);
        if (zero_fits && zero == ZeroStage::kOptimizerState && even &&
            !stop()) {
          // ZeRO-2's reduce-scatter of each micro-batch overlaps the
          // backward that ZeRO-1's allreduce follows, though it moves
          // more: tried too, kept when faster.
          const double one = last_seconds_per_batch;
          Strategy two = s;
          two.zero = ZeroStage::kGradients;
          if (simulate(two, nullptr) && last_seconds_per_batch < one) {
            s.zero = ZeroStage::kGradients;
          }
        }
        if (zero_fits) return Outcome::kFits;
        if (!sharded.empty()) {
          tried.peak_bytes = std::move(sharded);
          tried.parts = last_breakdown;
        }
      }
    }
    if (search.recompute != StageRecompute::kAuto || stop()) {
      return Outcome::kOver;
    }
    if (!could_fit(s.zero, true)) return Outcome::kOver;
    // The over stages recompute selectively, then layer by layer (where
    // the model has repeated layers; neither inside wide stages), then
    // wholly.
    std::vector<char> over(s.stages.size(), 0);
    for (size_t k = 0; k < s.stages.size(); ++k) {
      for (const Replica& replica : s.stages[k].replicas) {
        for (int d : replica.device_of_slot) {
          over[k] |= tried.peak_bytes[d] > limits[d];
        }
      }
      over[k] &= s.stages[k].recompute == Recompute::kNone;
    }
    const std::vector<PipelineStage> unrecomputed = s.stages;
    for (Recompute recompute :
         {Recompute::kSelective, Recompute::kLayers, Recompute::kFull}) {
      if (recompute == Recompute::kLayers && !repeated_layers) continue;
      if (stop()) break;
      bool any = false;
      for (size_t k = 0; k < s.stages.size(); ++k) {
        if (!over[k] ||
            (RecomputesInPart(recompute) && s.stages[k].width() > 1)) {
          continue;
        }
        s.stages[k].recompute = recompute;
        any = true;
      }
      if (any && simulate(s, nullptr)) return Outcome::kFits;
    }
    s.stages = unrecomputed;
    return Outcome::kOver;
  };
  // Considers each of `variants` (one shape and schedule with different
  // allreduce algorithms: alike in memory): the first with every memory
  // saver it needs; the others start from the savers that made the first
  // fit; when the first cannot fit, the others are not simulated.
  auto consider_alike = [&](std::vector<Strategy> variants) {
    std::optional<Strategy> settled;
    for (Strategy& s : variants) {
      if (stop()) return;
      if (settled.has_value()) {
        s.zero = settled->zero;
        for (size_t k = 0; k < s.stages.size(); ++k) {
          s.stages[k].recompute = settled->stages[k].recompute;
        }
      }
      const Outcome outcome = consider(s);
      if (outcome == Outcome::kOver) return;
      if (outcome == Outcome::kFits && !settled.has_value()) settled = s;
    }
  };
  // Each tensor-parallel group size; each partition (over the groups, a
  // group acting as one device) with each schedule (when it has stages to
  // pipeline) and allreduce (when it has replicas), 1F1B and ring first.
  std::vector<int> pool_position(input.cluster.num_devices(), -1);
  for (int i = 0; i < P; ++i) pool_position[pool[i]] = i;
  auto pool_candidates = [&] {
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
          std::vector<Strategy> variants;
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
            variants.push_back(std::move(s));
          }
          consider_alike(std::move(variants));
        }
      }
    }
  };
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
  auto grid_candidates = [&] {
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
        std::vector<Strategy> variants;
        for (AllreduceAlgorithm algorithm :
             {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kHierarchical}) {
          if (algorithm == AllreduceAlgorithm::kHierarchical && !hosts) {
            continue;
          }
          Strategy s = shape;
          s.allreduce = algorithm;
          variants.push_back(std::move(s));
        }
        consider_alike(std::move(variants));
      }
    }
  };
  // The uniform candidates first: they use every device, and the bound
  // above then spares the pool's candidates the budget.
  grid_candidates();
  pool_candidates();
  // Wide candidates: replicas of an op placement over w devices.
  absl::Status inside_status;
  // They use the pool's P devices at most, which together hold every
  // parameter and its optimizer state at least once (no ZeRO-3 inside
  // wide stages): they are not placed when that, over P devices, is over
  // every limit, or when the bound above is no better than the best.
  const double resident_bytes =
      input.view.parameter_bytes() *
      (1 + input.view.options().optimizer_state_per_parameter_byte());
  const int64_t most_limit = *std::max_element(limits.begin(), limits.end());
  const bool too_big = resident_bytes / P > most_limit;
  const bool hopeless =
      too_big ||
      (found && work_seconds / P >= best.simulation.seconds_per_batch);
  const bool wide = !hopeless && (search.parallelism == Parallelism::kHybrid ||
                                  (search.parallelism == Parallelism::kAuto &&
                                   !search.inside_policy.empty()));
  if (too_big && search.parallelism == Parallelism::kHybrid) {
    over_status = absl::ResourceExhaustedError(absl::StrFormat(
        "no hybrid strategy fits in memory: the parameters and their "
        "optimizer state, %.1f GB, over the pool's %d devices are %.1f GB "
        "each, over every device's limit (at most %.1f GB)",
        resident_bytes / 1e9, P, resident_bytes / P / 1e9, most_limit / 1e9));
  }
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
