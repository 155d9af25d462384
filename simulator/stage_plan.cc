#include "simulator/stage_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "base/status_helpers.h"
#include "graph/repeated_layers.h"
#include "simulator/parameter_gathers.h"
#include "simulator/partial_additions.h"
#include "simulator/selective_recompute.h"

namespace placer {

absl::StatusOr<StagePlan> MakeStagePlan(const SimulationContext& context,
                                        const Strategy& strategy) {
  const TrainingView& view = context.view();
  const int S = static_cast<int>(strategy.stages.size());
  StagePlan plan;
  plan.stages.resize(S);
  plan.crossings = StageCrossings(view, strategy);
  auto stage_of_node = [&](int n) {
    return strategy.stage_of_op[view.node(n).forward_op];
  };
  plan.slot_of_node.assign(view.nodes().size(), 0);
  for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
    plan.slot_of_node[n] = SlotOfOp(strategy, view.node(n).forward_op);
  }
  const std::vector<int>& slot_of = plan.slot_of_node;
  // Tensor parallelism: each device's share of a node's time and of a
  // value's bytes.
  plan.share_of_node.assign(view.nodes().size(), 1.0);
  const bool tensor = HasTensorParallelism(strategy);
  TensorSharding sharding;
  if (tensor) {
    ASSIGN_OR_RETURN(sharding, ShardStrategy(view.forward(), strategy));
  }
  auto held = [&](int v) -> int64_t {
    const TrainingValue& value = view.value(v);
    if (!tensor || value.tensor < 0) return value.bytes;
    const int64_t whole = view.forward().tensor(value.tensor).bytes();
    if (whole <= 0) return value.bytes;
    const int64_t part = sharding.HeldBytes(view.forward(), value.tensor);
    return static_cast<int64_t>(static_cast<double>(value.bytes) * part /
                                whole);
  };
  if (tensor) {
    for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
      const TrainingNode& node = view.node(n);
      if (node.kind == NodeKind::kUpdate) {
        const int64_t whole = view.value(node.parameter).bytes;
        plan.share_of_node[n] =
            whole > 0 ? static_cast<double>(held(node.parameter)) / whole : 1;
      } else {
        plan.share_of_node[n] = sharding.ShareOfOp(node.forward_op);
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    StageModel& st = plan.stages[s];
    st.width = strategy.stages[s].width();
    st.tensor = strategy.stages[s].tensor();
    st.parameter_bytes.assign(st.width, 0);
    st.stash_bytes.assign(st.width, 0);
    st.input_bytes.assign(st.width, 0);
    st.recompute = strategy.stages[s].recompute;
    st.one_batch_peak_bytes.assign(st.width, 0);
    st.one_batch_forward_peak_bytes.assign(st.width, 0);
    st.later_batch_peak_bytes.assign(st.width, 0);
    st.gradients.assign(st.width, {});
  }
  std::vector<int>& position = plan.position_in_pass;
  position.assign(view.nodes().size(), -1);
  for (int n : view.topological_order()) {
    StageModel& st = plan.stages[stage_of_node(n)];
    // What an op keeps for its backward besides values is stashed too.
    st.stash_bytes[slot_of[n]] += static_cast<int64_t>(
        static_cast<double>(view.node(n).saved_workspace_bytes) *
        plan.share_of_node[n]);
    switch (view.node(n).kind) {
      case NodeKind::kForward:
        position[n] = static_cast<int>(st.forward.size());
        st.forward.push_back(n);
        break;
      case NodeKind::kBackward:
        position[n] = static_cast<int>(st.backward.size());
        st.backward.push_back(n);
        break;
      case NodeKind::kUpdate:
        st.update.push_back(n);
        break;
    }
  }
  for (int g = 0; g < view.num_groups(); ++g) {
    for (int v : view.group_parameters(g)) {
      plan.stages[strategy.stage_of_op[g]]
          .parameter_bytes[SlotOfOp(strategy, g)] += held(v);
    }
  }
  // What each stage's backward keeps alive and what its forward reads from
  // before it. Sorted and unique per value (vectors, reused: allocating
  // sets per value was a tenth of a strategy's simulation).
  std::vector<std::pair<int, int>> stashed_in, input_of;
  auto sort_unique = [](auto& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    const TrainingValue& value = view.value(v);
    if (value.kind != ValueKind::kActivation &&
        value.kind != ValueKind::kGraphInput) {
      continue;
    }
    const int made_in = value.producer >= 0 && view.node(value.producer).kind ==
                                                   NodeKind::kForward
                            ? stage_of_node(value.producer)
                            : -1;
    stashed_in.clear();
    input_of.clear();
    for (int c : value.consumers) {
      const int s = stage_of_node(c);
      if (view.node(c).kind == NodeKind::kBackward) {
        stashed_in.emplace_back(s, slot_of[c]);
      }
      if (view.node(c).kind == NodeKind::kForward && s != made_in) {
        input_of.emplace_back(s, slot_of[c]);
      }
    }
    sort_unique(stashed_in);
    sort_unique(input_of);
    for (auto [s, slot] : stashed_in) {
      plan.stages[s].stash_bytes[slot] += held(v);
    }
    for (auto [s, slot] : input_of) {
      plan.stages[s].input_bytes[slot] += held(v);
    }
  }
  // Buffers from later stages, and the partial additions of a stage of one
  // slot in its backward order (PartialAdditions; a wide stage's are
  // charged as they happen).
  for (int s = 0; s < S; ++s) {
    StageModel& st = plan.stages[s];
    const size_t sums = view.gradient_sums().size();
    st.held_at_start.assign(st.width, {});
    st.adds.assign(st.backward.size(), {});
    // Per sink in the stage: the later stages that make partials of it.
    std::vector<int> later;
    for (size_t x = 0; x < sums; ++x) {
      const GradientSum& sum = view.gradient_sums()[x];
      if (stage_of_node(sum.sink) != s) continue;
      later.clear();
      for (int p : sum.partials) {
        const int from = stage_of_node(view.value(p).producer);
        if (from > s) later.push_back(from);
      }
      sort_unique(later);
      for (size_t e = 0; e < later.size(); ++e) {
        st.held_at_start[slot_of[sum.sink]].push_back(static_cast<int>(x));
      }
    }
    if (st.width > 1) continue;
    PartialAdditions additions(view, 1);
    for (int x : st.held_at_start[0]) additions.BufferArrives(x, 0);
    for (size_t k = 0; k < st.backward.size(); ++k) {
      additions.NodeAdds(st.backward[k], 0, [&](int x, int count) {
        st.adds[k].insert(st.adds[k].end(), count, x);
      });
    }
  }
  // Recomputation in part: forward nodes that read no parameter are rerun
  // (kSelective), or a layer's nodes but its outputs, attention cores and
  // every other product (kSelectiveOp), or but its outputs (kLayers); what
  // the others make, and what the rerun ones read from outside the rerun,
  // is kept.
  bool selective = false;
  for (StageModel& st : plan.stages) {
    st.selective_kept_bytes.assign(st.width, 0);
    selective |= RecomputesInPart(st.recompute);
  }
  // The one rule of what is rerun (simulator/selective_recompute.h).
  ASSIGN_OR_RETURN(SelectiveRecompute chosen,
                   FindSelectiveRecompute(view, strategy));
  const RepeatedLayers& layers = chosen.layers;
  const std::vector<char>& rerun = chosen.rerun;
  for (StageModel& st : plan.stages) {
    if (!selective) break;
    for (int n : st.forward) {
      if (!rerun[n]) {
        st.selective_kept_bytes[slot_of[n]] += static_cast<int64_t>(
            static_cast<double>(view.node(n).saved_workspace_bytes) *
            plan.share_of_node[n]);
      } else {
        st.selective_rerun.push_back(n);
      }
    }
  }
  for (int v = 0; selective && v < static_cast<int>(view.values().size());
       ++v) {
    const TrainingValue& value = view.value(v);
    if (value.kind != ValueKind::kActivation &&
        value.kind != ValueKind::kGraphInput) {
      continue;
    }
    // A stage reruns only its own nodes.
    const int rerun_in = value.producer >= 0 && rerun[value.producer]
                             ? stage_of_node(value.producer)
                             : -1;
    std::set<std::pair<int, int>> kept_in;
    for (int c : value.consumers) {
      const bool stashed = view.node(c).kind == NodeKind::kBackward;
      if ((stashed || rerun[c]) && stage_of_node(c) != rerun_in) {
        kept_in.insert({stage_of_node(c), slot_of[c]});
      }
    }
    for (auto [s, slot] : kept_in) {
      plan.stages[s].selective_kept_bytes[slot] += held(v);
    }
  }
  // By layer: per stage, per layer, where in its backward the layer's
  // rerun runs (the one rule, selective_recompute.h).
  std::vector<std::vector<int>> layer_start(S);
  for (int s = 0; s < S; ++s) {
    if (!RecomputesByLayer(plan.stages[s].recompute)) continue;
    layer_start[s] = LayerRerunPositions(view, layers, plan.stages[s].backward);
  }
  // What recomputation in part lets go and makes again, for the memory
  // timeline of one micro-batch (MemoryTimelineOptions::rebuilds): each
  // rerun value from the first of its stage's backward nodes that reads it
  // (or, if earlier, its layer's rerun by layer, or the rerun of a node
  // that reads it: a rerun brings what it reads along) to the last; each
  // rerun op's saved workspace from its backward node (by layer: its layer's
  // rerun); what a rerun op reads from outside the rerun, held until the
  // rerun that reads it last. Megatron-LM reruns each layer's attention
  // core in that layer's backward, torch's checkpoint a block when its
  // backward starts: layer by layer, not the whole stage's at once.
  Rebuilds rebuilds;
  if (selective) {
    const int num_values = static_cast<int>(view.values().size());
    const int num_nodes = static_cast<int>(view.nodes().size());
    rebuilds.value_at.assign(num_values, -1);
    rebuilds.workspace_at.assign(num_nodes, -1);
    // The earlier of a position and its layer's rerun (by layer).
    auto from_layer = [&](int s, int forward_node, int first) {
      if (layer_start[s].empty()) return first;
      const int start = layer_start[s][layers.layer_of_node[forward_node]];
      if (start < 0) return first;
      return first < 0 ? start : std::min(first, start);
    };
    // Per rerun node: the earliest position in its stage's backward where
    // it reruns (what it makes, or what reads that, is first needed).
    std::vector<int> rerun_at(num_nodes, -1);
    const std::vector<int>& order = view.topological_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int n = *it;
      if (!rerun[n]) continue;
      const int s = stage_of_node(n);
      int first = -1;
      auto earliest = [&first](int p) {
        if (p >= 0) first = first < 0 ? p : std::min(first, p);
      };
      for (int v : view.node(n).outputs) {
        // Made again for its first backward reader, or earlier for a
        // rerun that reads it (a rerun brings what it reads along).
        int value_first = -1, for_rerun = -1;
        for (int c : view.value(v).consumers) {
          if (stage_of_node(c) != s) continue;
          if (view.node(c).kind == NodeKind::kBackward) {
            value_first = value_first < 0 ? position[c]
                                          : std::min(value_first, position[c]);
          } else if (rerun[c] && rerun_at[c] >= 0) {
            for_rerun =
                for_rerun < 0 ? rerun_at[c] : std::min(for_rerun, rerun_at[c]);
          }
        }
        earliest(for_rerun);
        if (value_first >= 0) {
          value_first = from_layer(s, n, value_first);
          if (for_rerun >= 0) value_first = std::min(value_first, for_rerun);
          rebuilds.value_at[v] = plan.stages[s].backward[value_first];
          earliest(value_first);
        }
      }
      const int b = view.backward_node(view.node(n).forward_op);
      if (b >= 0 && stage_of_node(b) == s) {
        const int at = from_layer(s, n, position[b]);
        rebuilds.workspace_at[n] = plan.stages[s].backward[at];
        earliest(at);
      }
      rerun_at[n] = first;
    }
    // What a rerun node reads from outside the rerun: held until the last
    // rerun in its stage that reads it.
    std::map<std::pair<int, int>, int> held_to;  // (value, stage) -> position
    for (int n = 0; n < num_nodes; ++n) {
      if (!rerun[n] || rerun_at[n] < 0) continue;
      const int s = stage_of_node(n);
      for (int v : view.node(n).inputs) {
        const TrainingValue& value = view.value(v);
        if (value.kind != ValueKind::kActivation &&
            value.kind != ValueKind::kGraphInput) {
          continue;
        }
        if (value.producer >= 0 && rerun[value.producer] &&
            stage_of_node(value.producer) == s) {
          continue;
        }
        int& to = held_to.emplace(std::make_pair(v, s), -1).first->second;
        to = std::max(to, rerun_at[n]);
      }
    }
    for (const auto& [value_and_stage, at] : held_to) {
      const auto [v, s] = value_and_stage;
      rebuilds.holds.push_back({v, plan.stages[s].backward[at]});
    }
  }
  // ZeRO-3's gathers: each parameter once per pass, before its first
  // reader there, held until its last reader has run; the window is the
  // most held at once with the next gather in flight. Recomputed by
  // layer, a layer's rerun gathers the weights its rerun nodes read at
  // once, before it runs, and they stay until the backward's last reader
  // (the saved graphs hold them: the strategy executor, FSDP's backward
  // unshard before a checkpointed block). An overlapped ZeRO-1/2 gather:
  // the forward's (its parameters stay whole).
  const bool zero3 = strategy.zero == ZeroStage::kParameters;
  for (int s = 0; s < S; ++s) {
    if (!zero3 && !strategy.overlap_parameter_gather) break;
    StageModel& st = plan.stages[s];
    std::vector<std::pair<std::vector<int>*, std::vector<int64_t>*>> passes =
        {{&st.forward, &st.forward_gather_bytes}};
    if (zero3) passes.push_back({&st.backward, &st.backward_gather_bytes});
    for (auto [nodes, bytes] : passes) {
      const int count = static_cast<int>(nodes->size());
      bytes->assign(count, 0);
      PassGathers gathers = PlanPassGathers(view, *nodes);
      if (zero3 && nodes == &st.backward && !layer_start[s].empty()) {
        GatherAtLayerReruns(view, layers, rerun, st.forward, layer_start[s],
                            &gathers);
      }
      // Held at each node: gathered at or before it, last read at or after.
      std::vector<int64_t> starts(count + 1, 0), ends(count + 1, 0);
      for (int i = 0; i < count; ++i) {
        for (int v : gathers.first_read[i]) {
          (*bytes)[i] += held(v);
          starts[i] += held(v);
        }
        for (int v : gathers.last_read[i]) ends[i + 1] += held(v);
      }
      // After each node, the next gather (prefetched).
      std::vector<int64_t> next(count + 1, 0);
      for (int i = count - 1; i >= 0; --i) {
        next[i] = (*bytes)[i] > 0 ? (*bytes)[i] : next[i + 1];
      }
      if (!zero3) {
        // The distributed optimizer gathers its buckets (about
        // bucket_bytes each, in the forward's order), each before the
        // first reader of any parameter in it.
        int open = -1;
        for (int i = 0; i < count; ++i) {
          if ((*bytes)[i] == 0) continue;
          if (open >= 0 &&
              (*bytes)[open] + (*bytes)[i] <= strategy.bucket_bytes) {
            (*bytes)[open] += (*bytes)[i];
            (*bytes)[i] = 0;
          } else {
            open = i;
          }
        }
        continue;
      }
      int64_t live = 0;
      for (int i = 0; i < count; ++i) {
        live += starts[i] - ends[i];
        st.gathered_window_bytes =
            std::max(st.gathered_window_bytes, live + next[i + 1]);
      }
    }
  }
  // Parameters' gradients: final after the last of their partials.
  for (int s = 0; s < S; ++s) {
    StageModel& st = plan.stages[s];
    for (int u : st.update) {
      int last = -1;
      for (int sum : view.sums_read_by(u)) {
        for (int p : view.gradient_sums()[sum].partials) {
          last = std::max(last, position[view.value(p).producer]);
        }
      }
      st.gradients[slot_of[u]].emplace_back(last, held(view.node(u).parameter));
    }
    for (auto& gradients : st.gradients) {
      std::stable_sort(
          gradients.begin(), gradients.end(),
          [](const auto& a, const auto& b) { return a.first < b.first; });
    }
  }
  // One micro-batch's peak: the stage on its first replica's devices, the
  // rest on another one (their values arrive as they would from other
  // stages), counting what one rank of a tensor-parallel group holds.
  RankShares shares;
  if (tensor) {
    shares.value_bytes.resize(view.values().size());
    for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
      shares.value_bytes[v] = held(v);
    }
    shares.node_share = plan.share_of_node;
  }
  const int D = context.num_devices();
  for (int s = 0; s < S; ++s) {
    const PipelineStage& stage = strategy.stages[s];
    std::vector<char> mine(D, 0);
    for (int slot = 0; slot < stage.width(); ++slot) {
      mine[stage.device(0, slot)] = 1;
    }
    int elsewhere = 0;
    while (elsewhere < D - 1 && mine[elsewhere]) ++elsewhere;
    Placement p;
    p.device_of_op.resize(strategy.stage_of_op.size());
    for (size_t g = 0; g < p.device_of_op.size(); ++g) {
      p.device_of_op[g] =
          strategy.stage_of_op[g] == s
              ? stage.device(0, SlotOfOp(strategy, static_cast<int>(g)))
              : elsewhere;
    }
    // Replica 0 runs the most micro-batches: ceil(M / R).
    const bool accumulates = strategy.micro_batches > stage.num_replicas();
    SimulationOptions peaks;
    peaks.list_transfers = false;
    peaks.later_micro_batch = accumulates;
    if (selective) peaks.rebuilds = &rebuilds;
    if (ShardsGradients(strategy.zero)) {
      peaks.gradient_shards = stage.num_replicas();
    }
    if (tensor) peaks.rank_shares = &shares;
    ASSIGN_OR_RETURN(SimulationResult r, Simulate(context, p, peaks));
    for (int slot = 0; slot < stage.width(); ++slot) {
      const int d = stage.device(0, slot);
      plan.stages[s].one_batch_peak_bytes[slot] = r.peak_memory_bytes[d];
      plan.stages[s].one_batch_forward_peak_bytes[slot] =
          r.forward_peak_memory_bytes[d];
      if (accumulates) {
        plan.stages[s].later_batch_peak_bytes[slot] =
            r.later_peak_memory_bytes[d] - r.accumulator_bytes[d];
      }
    }
  }
  if (!tensor) return plan;
  for (const GroupCollective& c : sharding.collectives) {
    StageModel& st = plan.stages[strategy.stage_of_op[c.op]];
    if (!c.backward) {
      st.forward_collectives.push_back(c);
      continue;
    }
    const int b = view.backward_node(c.op);
    const int at = b >= 0 && position[b] >= 0
                       ? position[b]
                       : static_cast<int>(st.backward.size()) - 1;
    st.backward_collectives.emplace_back(at, c);
  }
  for (StageModel& st : plan.stages) {
    std::stable_sort(
        st.backward_collectives.begin(), st.backward_collectives.end(),
        [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  return plan;
}

}  // namespace placer
