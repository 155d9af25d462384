#include "graph/training_view.h"

#include <map>
#include <set>

#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "tests/graph/test_models.h"
#include "onnx/onnx_pb.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

Graph ImportZoo(const std::string& name, zoo::ZooParams p) {
  absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel(name, p);
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Graph> g = ImportOnnxModel(*m, "zoo:" + name, {});
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(*g);
}

// diamond: top = x W_top; left = top W_l; right = top W_r; join = l + r.
TEST(TrainingViewTest, DiamondExactStructure) {
  zoo::ZooParams p;
  p.batch_size = 2;
  p.hidden = 3;
  Graph g = ImportZoo("diamond", p);
  TrainingView v = BuildTrainingView(g);
  // 4 forward, 4 backward, 3 updates.
  ASSERT_EQ(v.nodes().size(), 11u);
  EXPECT_EQ(v.node(4).key, "grad:join");
  EXPECT_EQ(v.node(v.backward_node(g.FindOp("top"))).key, "grad:top");
  // join's backward waits for join (loss seed) and writes one partial
  // gradient for each of its two inputs.
  const TrainingNode& bj = v.node(v.backward_node(g.FindOp("join")));
  EXPECT_EQ(bj.control_inputs, std::vector<int>{g.FindOp("join")});
  EXPECT_EQ(bj.outputs.size(), 2u);
  // top's output feeds left and right: grad:top sums two partials and,
  // since x needs no gradient, writes only W_top's.
  const TrainingNode& bt = v.node(v.backward_node(g.FindOp("top")));
  int partials = 0;
  for (int in : bt.inputs) partials += v.value(in).kind == ValueKind::kGradient;
  EXPECT_EQ(partials, 2);
  ASSERT_EQ(bt.outputs.size(), 1u);
  EXPECT_EQ(v.value(bt.outputs[0]).name, "grad:top:w_top");
  // MatMul [2,3]x[3,3] = 36 FLOPs; top's backward needs only dW: 36.
  EXPECT_DOUBLE_EQ(v.node(g.FindOp("top")).cost.flops, 36);
  EXPECT_DOUBLE_EQ(bt.cost.flops, 36);
  // left's backward needs d(top) and dW_left: 72.
  EXPECT_DOUBLE_EQ(v.node(v.backward_node(g.FindOp("left"))).cost.flops, 72);
  // Updates: 4 FLOPs per weight element (9 each), one partial each.
  for (int i = 8; i < 11; ++i) {
    EXPECT_EQ(v.node(i).kind, NodeKind::kUpdate);
    EXPECT_DOUBLE_EQ(v.node(i).cost.flops, 36);
  }
  // Colocation: w_top lives with top, alongside grad:top and its update.
  int top = g.FindOp("top");
  EXPECT_EQ(v.group_nodes(top).size(), 3u);
  ASSERT_EQ(v.group_parameters(top).size(), 1u);
  EXPECT_EQ(v.value(v.group_parameters(top)[0]).name, "w_top");
}

void CheckInvariants(const Graph& g, const TrainingView& v) {
  std::vector<int> position(v.nodes().size(), -1);
  for (size_t k = 0; k < v.topological_order().size(); ++k) {
    position[v.topological_order()[k]] = static_cast<int>(k);
  }
  for (int p : position) ASSERT_GE(p, 0);
  for (size_t i = 0; i < v.nodes().size(); ++i) {
    const TrainingNode& n = v.node(i);
    for (int in : n.inputs) {
      int producer = v.value(in).producer;
      if (producer >= 0) {
        EXPECT_LT(position[producer], position[i]) << n.key;
      }
    }
    for (int c : n.control_inputs) EXPECT_LT(position[c], position[i]);
    // Every backward and update node sits in its forward op's group.
    std::set<int> group(v.group_nodes(n.forward_op).begin(),
                        v.group_nodes(n.forward_op).end());
    EXPECT_TRUE(group.count(i)) << n.key;
  }
  // Every partial gradient is consumed by exactly one node: the backward
  // of the tensor's producer or the parameter's update.
  int updates = 0;
  for (const TrainingValue& val : v.values()) {
    if (val.kind != ValueKind::kGradient) continue;
    ASSERT_EQ(val.consumers.size(), 1u) << val.name;
    const TrainingNode& c = v.node(val.consumers[0]);
    const Tensor& t = g.tensor(val.tensor);
    if (t.kind == TensorKind::kParameter) {
      EXPECT_EQ(c.kind, NodeKind::kUpdate);
      EXPECT_EQ(c.parameter, val.tensor);
    } else {
      EXPECT_EQ(c.kind, NodeKind::kBackward);
      EXPECT_EQ(c.forward_op, t.producer);
    }
  }
  for (const TrainingNode& n : v.nodes()) updates += n.kind == NodeKind::kUpdate;
  int parameters = 0;
  for (const Tensor& t : g.tensors()) parameters += t.kind == TensorKind::kParameter;
  EXPECT_EQ(updates, parameters);
  // Backward costs one forward pass (ops that need only weight gradients,
  // like every branch of `wide`) to two. Updates are excluded: on these tiny test sizes
  // they rival the forward pass; at real sizes the zoo test checks 3x.
  double ratio = v.flops(NodeKind::kBackward) / v.flops(NodeKind::kForward);
  EXPECT_GE(ratio, 1.0);
  EXPECT_LE(ratio, 2.05);
}

// Backward nodes read what their ops keep: MatMul the operand the other's
// gradient needs, Transpose nothing of the forward pass, Relu its output.
TEST(TrainingViewTest, BackwardNodesReadWhatTheirOpsKeep) {
  absl::StatusOr<Graph> g =
      ImportOnnxModel(testing::MatMulTransposeRelu(), "test", {});
  ASSERT_TRUE(g.ok()) << g.status();
  TrainingView v = BuildTrainingView(*g);
  auto forward_reads = [&](const char* op) {
    std::set<std::string> names;
    for (int in : v.node(v.backward_node(g->FindOp(op))).inputs) {
      if (v.value(in).kind != ValueKind::kGradient) {
        names.insert(v.value(in).name);
      }
    }
    return names;
  };
  // x is a graph input, with no gradient: mm keeps x, for w's gradient,
  // and not w (PyTorch's mm keeps each operand for the other's gradient).
  EXPECT_EQ(forward_reads("mm"), std::set<std::string>{"x"});
  EXPECT_EQ(forward_reads("tr"), std::set<std::string>{});
  EXPECT_EQ(forward_reads("relu"), std::set<std::string>{"r"});
  // y's only reader is the Transpose; t's only reader is the Relu.
  EXPECT_EQ(v.value(g->FindTensor("y")).consumers,
            std::vector<int>{g->FindOp("tr")});
  EXPECT_EQ(v.value(g->FindTensor("t")).consumers,
            std::vector<int>{g->FindOp("relu")});
}

// Dropout in training mode, as PyTorch exports it (ratio and training_mode
// inputs, the mask a second output): its backward keeps the bool mask, a
// byte per element, not its float input; without a mask output, its input
// stands in for the mask (an over-count, never an under-count).
TEST(TrainingViewTest, DropoutKeepsItsMask) {
  for (bool mask_output : {true, false}) {
    SCOPED_TRACE(mask_output ? "with a mask output" : "without");
    onnx::ModelProto m = testing::EmptyModel(13);
    auto* graph = m.mutable_graph();
    testing::AddInput(graph, "x", {4, 2});
    testing::AddWeight(graph, "w", {2, 8});
    testing::AddWeight(graph, "ratio", {});
    auto* training = graph->add_initializer();
    training->set_name("training_mode");
    training->set_data_type(onnx::TensorProto::BOOL);
    training->add_int32_data(1);
    testing::AddNode(graph, "MatMul", "mm", {"x", "w"}, {"y"});
    if (mask_output) {
      testing::AddNode(graph, "Dropout", "drop",
                       {"y", "ratio", "training_mode"}, {"d", "mask"});
    } else {
      testing::AddNode(graph, "Dropout", "drop",
                       {"y", "ratio", "training_mode"}, {"d"});
    }
    testing::AddOutput(graph, "d");
    absl::StatusOr<Graph> g = ImportOnnxModel(m, "test", {});
    ASSERT_TRUE(g.ok()) << g.status();
    TrainingView v = BuildTrainingView(*g);
    std::map<std::string, int64_t> kept;
    for (int in : v.node(v.backward_node(g->FindOp("drop"))).inputs) {
      if (v.value(in).kind != ValueKind::kGradient) {
        kept[v.value(in).name] = v.value(in).bytes;
      }
    }
    if (mask_output) {
      EXPECT_EQ(kept, (std::map<std::string, int64_t>{{"mask", 32}}));
    } else {
      EXPECT_EQ(kept, (std::map<std::string, int64_t>{{"y", 128}}));
    }
  }
}

// A fused recurrent layer keeps its steps' state for its backward, which
// is no value of the view: the forward node's saved_workspace_bytes, per
// step, direction and batch row 7 x hidden elements for LSTM and GRU, 2
// for RNN, plus W and R (the executor's gate-reordered copies); and its
// forward needs scratch_bytes while it runs. Of its inputs, its backward
// keeps X only: it reads the reordered copies, not W, R and B.
TEST(TrainingViewTest, FusedRecurrentLayersKeepTheirSteps) {
  struct Case {
    std::string type;
    bool bidirectional;
    int64_t expected;
    int64_t scratch;  // one direction's input projections [T, B, gates x
                      // hidden], and both directions' outputs
  };
  // X [3, 2, 5] float, hidden 4: T x B x hidden x 4 bytes = 96 per unit
  // and direction; W [dirs, gates x 4, 5], R [dirs, gates x 4, 4].
  for (const Case& c : std::vector<Case>{
           {"LSTM", false, 7 * 96 + 16 * 5 * 4 + 16 * 4 * 4, 4 * 96},
           {"GRU", true, 2 * 7 * 96 + 2 * 12 * 5 * 4 + 2 * 12 * 4 * 4,
            (3 + 2) * 96},
           {"RNN", false, 2 * 96 + 4 * 5 * 4 + 4 * 4 * 4, 96}}) {
    SCOPED_TRACE(c.type);
    absl::StatusOr<Graph> g = ImportOnnxModel(
        testing::RecurrentLayer(c.type, 3, 2, 5, 4, c.bidirectional), "test",
        {});
    ASSERT_TRUE(g.ok()) << g.status();
    TrainingView v = BuildTrainingView(*g);
    const int op = g->FindOp("rnn");
    ASSERT_GE(v.backward_node(op), 0);
    EXPECT_EQ(v.node(op).saved_workspace_bytes, c.expected);
    EXPECT_EQ(v.node(op).scratch_bytes, c.scratch);
    std::set<std::string> kept;
    for (int in : v.node(v.backward_node(op)).inputs) {
      if (v.value(in).kind != ValueKind::kGradient) {
        kept.insert(v.value(in).name);
      }
    }
    EXPECT_EQ(kept, (std::set<std::string>{"x"}));
    // Nothing else keeps any.
    for (const TrainingNode& n : v.nodes()) {
      if (n.kind != NodeKind::kForward || n.forward_op != op) {
        EXPECT_EQ(n.saved_workspace_bytes, 0) << n.key;
        EXPECT_EQ(n.scratch_bytes, 0) << n.key;
      }
    }
  }
}

// What autograd keeps beside the tensors of the view, by hand (checked
// against LibTorch over the corpus by tests/runtime/saved_tensors_test):
// x [2, 3, 4, 4] float. BatchNormalization in training mode keeps a mean
// and an inverse deviation per channel, 2 x 3 x 4 bytes; MaxPool 2 x 2 an
// int64 index per output element, [2, 3, 2, 2] x 8; InstanceNormalization
// its statistics per (sample, channel), 2 x 6 x 4, and its scale repeated
// per sample, 6 x 4; LayerNormalization over the last dim its statistics
// per row of [2, 3, 4], 2 x 24 x 4. An LSTM given its initial state h0
// keeps one step's state less: X [3, 2, 5], hidden 4, 7 x 3 x 2 x 4
// elements less 2 x 4, plus W and R.
TEST(TrainingViewTest, StatisticsIndicesAndGivenStatesAreKept) {
  onnx::ModelProto m = testing::EmptyModel(17);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {2, 3, 4, 4});
  for (const char* name : {"scale", "bias", "mean", "var"}) {
    testing::AddWeight(g, name, {3});
  }
  onnx::NodeProto* bn = testing::AddNode(g, "BatchNormalization", "bn",
                                         {"x", "scale", "bias", "mean", "var"},
                                         {"b", "running_mean", "running_var"});
  auto* mode = bn->add_attribute();
  mode->set_name("training_mode");
  mode->set_type(onnx::AttributeProto::INT);
  mode->set_i(1);
  onnx::NodeProto* pool = testing::AddNode(g, "MaxPool", "pool", {"b"}, {"p"});
  for (const char* name : {"kernel_shape", "strides"}) {
    auto* a = pool->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(2);
    a->add_ints(2);
  }
  testing::AddNode(g, "InstanceNormalization", "in", {"x", "scale", "bias"},
                   {"i"});
  testing::AddWeight(g, "ln_scale", {4});
  testing::AddNode(g, "LayerNormalization", "ln", {"i", "ln_scale"}, {"l"});
  testing::AddOutput(g, "p");
  testing::AddOutput(g, "l");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "test", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingView v = BuildTrainingView(*graph);
  auto workspace = [&](const char* op) {
    return v.node(graph->FindOp(op)).saved_workspace_bytes;
  };
  EXPECT_EQ(workspace("bn"), 2 * 3 * 4);
  EXPECT_EQ(workspace("pool"), 2 * 3 * 2 * 2 * 8);
  EXPECT_EQ(workspace("in"), 2 * 6 * 4 + 6 * 4);
  EXPECT_EQ(workspace("ln"), 2 * 24 * 4);

  onnx::ModelProto lstm = testing::RecurrentLayer("LSTM", 3, 2, 5, 4, false);
  auto* rg = lstm.mutable_graph();
  testing::AddWeight(rg, "h0", {1, 2, 4});
  onnx::NodeProto* rnn = rg->mutable_node(0);
  rnn->add_input("");  // sequence_lens
  rnn->add_input("h0");
  absl::StatusOr<Graph> recurrent = ImportOnnxModel(lstm, "test", {});
  ASSERT_TRUE(recurrent.ok()) << recurrent.status();
  TrainingView rv = BuildTrainingView(*recurrent);
  EXPECT_EQ(rv.node(recurrent->FindOp("rnn")).saved_workspace_bytes,
            (7 * 3 * 2 - 2) * 4 * 4 + 16 * 5 * 4 + 16 * 4 * 4);
}

TEST(TrainingViewTest, InvariantsOnZooModels) {
  zoo::ZooParams small;
  small.batch_size = 2;
  small.weights = false;
  for (const char* name : {"chain", "diamond", "wide", "resnet50"}) {
    SCOPED_TRACE(name);
    Graph g = ImportZoo(name, small);
    CheckInvariants(g, BuildTrainingView(g));
  }
  zoo::ZooParams seq = small;
  seq.seq_len = 4;
  seq.hidden = 32;
  seq.vocab = 50;
  seq.layers = 3;
  for (const char* name : {"gnmt4", "rnnlm", "transformer_big"}) {
    SCOPED_TRACE(name);
    Graph g = ImportZoo(name, seq);
    CheckInvariants(g, BuildTrainingView(g));
  }
}

TEST(TrainingViewTest, BatchNormRunningStatsAreNotTrained) {
  zoo::ZooParams p;
  p.batch_size = 1;
  p.weights = false;
  Graph g = ImportZoo("resnet50", p);
  const Tensor& mean = g.tensor(g.FindTensor("conv1.bn.running_mean"));
  EXPECT_EQ(mean.kind, TensorKind::kConstant);
  EXPECT_EQ(g.tensor(g.FindTensor("conv1.bn.weight")).kind,
            TensorKind::kParameter);
}

}  // namespace
}  // namespace placer
