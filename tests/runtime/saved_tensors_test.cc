// What each op's backward keeps from the forward pass, as the training view
// counts it (graph/saved_for_backward.h: the activations and inputs its
// backward node reads, and its saved_workspace_bytes), is what LibTorch's
// autograd keeps when the executor runs the op (runtime/op_autograd.h):
// for every op with a backward in every model of the corpus (PyTorch's
// exports, tests/fixtures/corpus) and in the zoo's Llama decoder, the
// bytes still allocated once the op's inputs and outputs are dropped are
// the view's count, to the byte; but for one difference, held to its size:
// Gather keeps an int64 copy of constant indices (its kernel's
// negative-index fix).
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "c10/util/ThreadLocalDebugInfo.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/signature.h"
#include "runtime/allocation_tracker.h"
#include "runtime/initial_values.h"
#include "runtime/op_autograd.h"
#include "tests/graph/corpus.h"
#include "tests/runtime/small_llama.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

struct Checked {
  int ops = 0;    // ops with a backward, compared
  int known = 0;  // of them, Gathers of constant indices
};

// Runs `view`'s forward ops in order on the executor's kernels, and each op
// with a backward once more under autograd on fresh copies of its
// activations and inputs; compares what stays allocated with the view.
void ExpectKeptAsAutogradKeeps(const TrainingView& view, Checked* checked) {
  const Graph& graph = view.forward();
  absl::StatusOr<HostValues> host = DrawHostValues(view, 1);
  ASSERT_TRUE(host.ok()) << host.status();
  std::vector<torch::Tensor> value(graph.tensors().size());
  std::vector<int> value_of(graph.tensors().size(), -1);
  for (size_t v = 0; v < view.values().size(); ++v) {
    const TrainingValue& x = view.value(v);
    if (x.kind == ValueKind::kGradient || x.tensor < 0) continue;
    if (value_of[x.tensor] < 0) value_of[x.tensor] = static_cast<int>(v);
    if (host->value[v].defined()) value[x.tensor] = host->value[v];
  }
  // What a micro-batch stashes: activations and graph inputs; parameters
  // and constants are resident.
  auto stashed = [&](int t) {
    if (value_of[t] < 0) return false;
    const ValueKind kind = view.value(value_of[t]).kind;
    return kind == ValueKind::kActivation || kind == ValueKind::kGraphInput;
  };
  const StepPrecision precision;
  for (int i : graph.topological_order()) {
    const Op& op = graph.op(i);
    SCOPED_TRACE(op.name + " (" + op.op_type + ")");
    std::vector<torch::Tensor> inputs;
    for (int t : op.inputs) {
      inputs.push_back(t >= 0 ? value[t] : torch::Tensor());
    }
    absl::StatusOr<std::vector<torch::Tensor>> outputs =
        ForwardOp(graph, op, inputs, torch::kCPU, precision, nullptr, nullptr);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    for (size_t k = 0; k < op.outputs.size() && k < outputs->size(); ++k) {
      if (op.outputs[k] >= 0) value[op.outputs[k]] = (*outputs)[k];
    }
    const int backward = view.backward_node(i);
    if (backward < 0) continue;
    const std::vector<bool> needs = InputsNeedingGradient(view, backward);
    AllocationTracker tracker;
    tracker.Start({0});
    SavedOp saved;
    {
      c10::DebugInfoGuard guard(
          c10::DebugInfoKind::PROFILER_STATE,
          std::make_shared<ThreadAllocationReporter>(&tracker, 0));
      std::map<int, torch::Tensor> fresh;
      std::vector<torch::Tensor> in;
      for (int t : op.inputs) {
        if (t < 0 || !stashed(t)) {
          in.push_back(t < 0 ? torch::Tensor() : value[t]);
          continue;
        }
        auto [at, made] = fresh.emplace(t, torch::Tensor());
        if (made) at->second = value[t].clone();
        in.push_back(at->second);
      }
      absl::StatusOr<std::vector<torch::Tensor>> run = ForwardOp(
          graph, op, std::move(in), torch::kCPU, precision, &needs, &saved);
      ASSERT_TRUE(run.ok()) << run.status();
    }
    const int64_t kept = tracker.live(0);
    // The view's count: what the backward node reads of the forward pass
    // that a micro-batch stashes, and what the op keeps beside it.
    int64_t counted = view.node(i).saved_workspace_bytes;
    for (int v : view.node(backward).inputs) {
      const TrainingValue& read = view.value(v);
      if (read.kind != ValueKind::kGradient && stashed(read.tensor)) {
        counted += graph.tensor(read.tensor).bytes();
      }
    }
    ++checked->ops;
    if (op.op_type == "Gather" && !stashed(op.inputs[1])) {
      EXPECT_EQ(kept - counted, graph.tensor(op.inputs[1]).num_elements() * 8);
      ++checked->known;
    } else {
      EXPECT_EQ(kept, counted);
    }
  }
}

TEST(SavedTensorsTest, EveryCorpusOpKeepsWhatAutogradKeeps) {
  const std::vector<CorpusEntry> entries = CorpusManifest();
  ASSERT_GE(entries.size(), 90u) << "MANIFEST.tsv missing or short";
  Checked checked;
  for (const CorpusEntry& entry : entries) {
    SCOPED_TRACE(entry.file);
    absl::StatusOr<Graph> graph = ImportCorpusEntry(entry);
    ASSERT_TRUE(graph.ok()) << graph.status();
    ExpectKeptAsAutogradKeeps(BuildTrainingView(*graph), &checked);
  }
  // Every op of the corpus with a backward, 21,486 of them; 42 Gathers of
  // constant indices (ViT's class token, bert's).
  std::printf("%d ops compared, %d Gathers of constant indices\n", checked.ops,
              checked.known);
  EXPECT_GT(checked.ops, 20000);
  EXPECT_LT(checked.known, 60);
}

// The zoo's Llama: its rotary products and its attention scale multiply by
// constants, which keep only the constant (the view used to count the
// other operand too: 2 MiB a layer at this size).
TEST(SavedTensorsTest, TheZooLlamaKeepsWhatAutogradKeeps) {
  absl::StatusOr<onnx::ModelProto> proto =
      zoo::BuildZooModel("llama", SmallLlama());
  ASSERT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*proto, "llama", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  Checked checked;
  ExpectKeptAsAutogradKeeps(BuildTrainingView(*graph), &checked);
  EXPECT_GT(checked.ops, 100);
  EXPECT_EQ(checked.known, 0);
}

}  // namespace
}  // namespace placer
