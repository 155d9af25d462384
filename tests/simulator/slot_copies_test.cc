// What crosses a wide stage's slots (StageSlotCopies, read off the
// lowering's walk of a pass) against the rule as Strategy's contract
// states it, written here as lists, on PyTorch's training-mode exports.
#include "simulator/slot_copies.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/placement_lowering.h"
#include "simulator/strategy.h"
#include "simulator/view_index.h"

namespace placer {
namespace {

// Calls test(graph, view, cluster, context) on PyTorch's training-mode
// exports of the corpus, each on four P100s (roofline costs), under a
// SCOPED_TRACE naming the file.
template <typename Test>
void ForEachCorpusExport(Test&& test) {
  absl::StatusOr<Cluster> cluster = LoadCluster("p100x4");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  const std::unique_ptr<ReadyOrder> order = NewTopologicalReadyOrder();
  for (const char* file :
       {"bert_tiny.train.op13", "gpt2.train.op17", "llama.train.op17",
        "llama_moe.train.op17", "lstm.train.op13", "convnext_tiny.train.op13",
        "densenet121.train.op17"}) {
    SCOPED_TRACE(file);
    absl::StatusOr<Graph> graph = ImportOnnxFile(
        std::string("tests/fixtures/corpus/") + file + ".onnx", {});
    ASSERT_TRUE(graph.ok()) << graph.status();
    const TrainingView view = BuildTrainingView(*graph);
    const SimulationContext context =
        SimulationContext::Create(view, *cluster, *costs, *order);
    test(*graph, view, *cluster, context);
  }
}

// The rule, per stage, as SlotCopy's contract states it: each value a
// forward node of a wide stage makes (or a weight of the stage's ops) to
// each other slot whose forward nodes of the stage read it; each slot's
// partials of a gradient sum whose sink (a backward node or an update) is
// in the stage on another slot, to the sink's slot.
std::vector<std::vector<SlotCopy>> RuleCopies(const TrainingView& view,
                                              const Strategy& strategy) {
  std::vector<std::vector<SlotCopy>> copies(strategy.stages.size());
  auto stage_of = [&](int n) {
    return strategy.stage_of_op[view.node(n).forward_op];
  };
  auto slot_of = [&](int n) {
    return SlotOfOp(strategy, view.node(n).forward_op);
  };
  auto wide = [&](int s) { return strategy.stages[s].width() > 1; };
  std::vector<int> group_of_parameter(view.values().size(), -1);
  for (int g = 0; g < view.num_groups(); ++g) {
    for (int v : view.group_parameters(g)) group_of_parameter[v] = g;
  }
  for (int v = 0; v < static_cast<int>(view.values().size()); ++v) {
    const TrainingValue& value = view.value(v);
    int stage = -1, holder = -1;
    std::vector<int> made_by;
    if (value.kind == ValueKind::kActivation && value.producer >= 0 &&
        view.node(value.producer).kind == NodeKind::kForward) {
      stage = stage_of(value.producer);
      holder = slot_of(value.producer);
      made_by = {value.producer};
    } else if (value.kind == ValueKind::kParameter &&
               group_of_parameter[v] >= 0) {
      stage = strategy.stage_of_op[group_of_parameter[v]];
      holder = SlotOfOp(strategy, group_of_parameter[v]);
    }
    if (stage < 0 || !wide(stage)) continue;
    std::map<int, std::vector<int>> readers;  // per slot
    for (int c : value.consumers) {
      if (view.node(c).kind == NodeKind::kForward && stage_of(c) == stage &&
          slot_of(c) != holder) {
        readers[slot_of(c)].push_back(c);
      }
    }
    for (auto& [slot, nodes] : readers) {
      std::sort(nodes.begin(), nodes.end());
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
      copies[stage].push_back({v, -1, holder, slot, made_by, nodes});
    }
  }
  for (int x = 0; x < static_cast<int>(view.gradient_sums().size()); ++x) {
    const GradientSum& sum = view.gradient_sums()[x];
    if (view.node(sum.sink).kind == NodeKind::kForward) continue;
    const int stage = stage_of(sum.sink);
    if (!wide(stage)) continue;
    std::map<int, std::vector<int>> made_on;  // per slot
    for (int p : sum.partials) {
      const int producer = view.value(p).producer;
      if (stage_of(producer) == stage &&
          slot_of(producer) != slot_of(sum.sink)) {
        made_on[slot_of(producer)].push_back(producer);
      }
    }
    for (auto& [slot, made_by] : made_on) {
      std::sort(made_by.begin(), made_by.end());
      copies[stage].push_back({-1,
                               x,
                               slot,
                               slot_of(sum.sink),
                               made_by,
                               {sum.sink},
                               view.node(sum.sink).kind == NodeKind::kUpdate});
    }
  }
  return copies;
}

// The rule for what forward or backward node n of a wide stage waits for:
// the nodes of its pass (its stage, its kind) whose values or partial
// gradients it reads, and its control inputs there.
std::vector<int> RuleWaits(const TrainingView& view, const Strategy& strategy,
                           int n) {
  const TrainingNode& node = view.node(n);
  const int stage = strategy.stage_of_op[node.forward_op];
  if (node.kind == NodeKind::kUpdate || strategy.stages[stage].width() == 1) {
    return {};
  }
  auto in_pass = [&](int m) {
    return m >= 0 && view.node(m).kind == node.kind &&
           strategy.stage_of_op[view.node(m).forward_op] == stage;
  };
  std::vector<int> from;
  for (int v : node.inputs) {
    if (in_pass(view.value(v).producer)) from.push_back(view.value(v).producer);
  }
  for (int c : node.control_inputs) {
    if (in_pass(c)) from.push_back(c);
  }
  std::sort(from.begin(), from.end());
  from.erase(std::unique(from.begin(), from.end()), from.end());
  return from;
}

// The stage of each op when the ops from `split` on (in graph order) are
// stage 1: the first split at or after the middle that keeps every reader
// of a weight in the weight's stage (CheckStrategy), given the rest of
// `strategy`.
void CutInTwo(const TrainingView& view, const Cluster& cluster, int ops,
              Strategy& strategy) {
  for (int split = ops / 2; split < ops; ++split) {
    strategy.stage_of_op.clear();
    for (int op = 0; op < ops; ++op) {
      strategy.stage_of_op.push_back(op < split ? 0 : 1);
    }
    if (CheckStrategy(view, cluster, strategy).ok()) return;
  }
  ADD_FAILURE() << "no cut keeps each weight's readers in its stage";
}

// (value or -1, gradient sum or -1, from, to, made by, read by, to update)
using Crossing =
    std::tuple<int, int, int, int, std::vector<int>, std::vector<int>, bool>;

std::vector<Crossing> Crossings(const std::vector<SlotCopy>& copies) {
  std::vector<Crossing> out;
  for (const SlotCopy& c : copies) {
    out.emplace_back(c.value, c.sum, c.from_slot, c.to_slot, c.made_by,
                     c.readers, c.to_update);
  }
  return out;
}

// On PyTorch's training-mode exports cut into two pipeline stages of two
// slots each (ops dealt to slots at random), the copies the lowering's
// walk makes in each stage's forward and backward passes are the rule's,
// in the contract's order, with what each waits for and who reads it; and
// each node waits, on its slot or through a copy, for what the rule says.
TEST(StageSlotCopiesTest, WhatCrossesSlotsIsWhatTheRuleSays) {
  ForEachCorpusExport([](const Graph& graph, const TrainingView& view,
                         const Cluster& cluster, const SimulationContext&) {
    std::mt19937 rng(11);
    Strategy strategy;
    const int ops = static_cast<int>(graph.ops().size());
    for (int op = 0; op < ops; ++op) {
      strategy.slot_of_op.push_back(static_cast<int>(rng() % 2));
    }
    strategy.stages = {PipelineStage::OfReplicas({{0, 1}}),
                       PipelineStage::OfReplicas({{2, 3}})};
    CutInTwo(view, cluster, ops, strategy);
    const absl::Status checked = CheckStrategy(view, cluster, strategy);
    ASSERT_TRUE(checked.ok()) << checked;
    const StageSlotLinks links = StageSlotCopies(ViewIndex::Of(view), strategy);
    const std::vector<std::vector<SlotCopy>> rule = RuleCopies(view, strategy);
    ASSERT_EQ(links.copies.size(), 2u);
    for (int stage = 0; stage < 2; ++stage) {
      EXPECT_GT(links.copies[stage].size(), 10u) << "stage " << stage;
      EXPECT_EQ(Crossings(links.copies[stage]), Crossings(rule[stage]))
          << "stage " << stage;
    }
    int waiting = 0;
    for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
      EXPECT_EQ(links.waits[n], RuleWaits(view, strategy, n))
          << view.node(n).key;
      waiting += !links.waits[n].empty();
    }
    EXPECT_GT(waiting, 10);
  });
}

// A stage of one slot has no copies and its nodes no waits.
TEST(StageSlotCopiesTest, NarrowStagesExchangeNothing) {
  ForEachCorpusExport([](const Graph& graph, const TrainingView& view,
                         const Cluster& cluster, const SimulationContext&) {
    Strategy strategy;
    const int ops = static_cast<int>(graph.ops().size());
    strategy.stages = {PipelineStage::OfReplicas({{0}, {1}}),
                       PipelineStage::OfReplicas({{2}, {3}})};
    strategy.micro_batches = 2;
    CutInTwo(view, cluster, ops, strategy);
    const absl::Status checked = CheckStrategy(view, cluster, strategy);
    ASSERT_TRUE(checked.ok()) << checked;
    const StageSlotLinks links = StageSlotCopies(ViewIndex::Of(view), strategy);
    for (const std::vector<SlotCopy>& copies : links.copies) {
      EXPECT_TRUE(copies.empty());
    }
    for (const std::vector<int>& waits : links.waits) {
      EXPECT_TRUE(waits.empty());
    }
  });
}

// What the lowering of an op placement's step copies between devices is
// what crosses between the slots of the placement as its strategy
// (StrategyOfPlacement): the same values, weights and summed gradient
// buffers between the same devices, each once. The step's walk and the
// pass's keep different things (the pass: nothing from outside it; sums
// whose sink is in it or an update of the stage); this holds them equal
// where they must be, under random placements over four devices.
TEST(StageSlotCopiesTest, AnOpPlacementsCopiesAreItsStrategysSlotCopies) {
  ForEachCorpusExport([](const Graph& graph, const TrainingView& view,
                         const Cluster&, const SimulationContext& context) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 3; ++trial) {
      Placement placement;
      for (size_t op = 0; op < graph.ops().size(); ++op) {
        placement.device_of_op.push_back(static_cast<int>(rng() % 4));
      }
      // (value or -1, gradient sum or -1, from device, to device)
      using Copy = std::tuple<int, int, int, int>;
      std::vector<Copy> lowered, crossing;
      const LoweredPlacement lowering = LowerPlacement(context, placement);
      for (const CopyTask& copy : lowering.copies) {
        lowered.emplace_back(copy.gradient_sum >= 0 ? -1 : copy.value,
                             copy.gradient_sum, copy.src, copy.dst);
      }
      const Strategy strategy = StrategyOfPlacement(placement);
      const PipelineStage& stage = strategy.stages[0];
      const StageSlotLinks links = StageSlotCopies(context.index(), strategy);
      for (const SlotCopy& copy : links.copies[0]) {
        crossing.emplace_back(copy.value, copy.sum,
                              stage.device(0, copy.from_slot),
                              stage.device(0, copy.to_slot));
      }
      std::sort(lowered.begin(), lowered.end());
      std::sort(crossing.begin(), crossing.end());
      EXPECT_GT(lowered.size(), 50u);
      EXPECT_EQ(lowered, crossing) << "trial " << trial;
    }
  });
}

}  // namespace
}  // namespace placer
