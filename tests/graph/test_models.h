// Small hand-built ONNX models shared by the graph tests.
#ifndef PLACER_TESTS_GRAPH_TEST_MODELS_H_
#define PLACER_TESTS_GRAPH_TEST_MODELS_H_

#include <string>

#include "onnx/onnx_pb.h"

namespace placer::testing {

// Adds a node with explicit output names.
inline onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& type,
                                const std::string& name,
                                std::initializer_list<std::string> inputs,
                                std::initializer_list<std::string> outputs) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(type);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

inline void AddInput(onnx::GraphProto* g, const std::string& name,
                     std::initializer_list<int64_t> dims,
                     int32_t type = onnx::TensorProto::FLOAT) {
  auto* v = g->add_input();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) {
      shape->add_dim()->set_dim_param("batch");
    } else {
      shape->add_dim()->set_dim_value(d);
    }
  }
}

inline void AddWeight(onnx::GraphProto* g, const std::string& name,
                      std::initializer_list<int64_t> dims) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t->add_float_data(0.5f);
}

inline void AddInts(onnx::GraphProto* g, const std::string& name,
                    std::initializer_list<int64_t> values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

inline void AddOutput(onnx::GraphProto* g, const std::string& name) {
  auto* v = g->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
}

inline onnx::ModelProto EmptyModel(int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("test");
  return m;
}

// One fused recurrent layer (ONNX "LSTM", "GRU" or "RNN") over X [steps,
// batch, input], every weight 0.5, its Y [steps, directions, batch, hidden]
// the graph's output.
inline onnx::ModelProto RecurrentLayer(const std::string& type, int64_t steps,
                                       int64_t batch, int64_t input,
                                       int64_t hidden, bool bidirectional) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  const int64_t dirs = bidirectional ? 2 : 1;
  const int64_t gates = type == "LSTM" ? 4 : type == "GRU" ? 3 : 1;
  AddInput(g, "x", {steps, batch, input});
  AddWeight(g, "w", {dirs, gates * hidden, input});
  AddWeight(g, "r", {dirs, gates * hidden, hidden});
  AddWeight(g, "b", {dirs, 2 * gates * hidden});
  onnx::NodeProto* n = AddNode(g, type, "rnn", {"x", "w", "r", "b"}, {"y"});
  auto* size = n->add_attribute();
  size->set_name("hidden_size");
  size->set_type(onnx::AttributeProto::INT);
  size->set_i(hidden);
  auto* direction = n->add_attribute();
  direction->set_name("direction");
  direction->set_type(onnx::AttributeProto::STRING);
  direction->set_s(bidirectional ? "bidirectional" : "forward");
  if (type == "GRU") {  // PyTorch's GRU
    auto* linear = n->add_attribute();
    linear->set_name("linear_before_reset");
    linear->set_type(onnx::AttributeProto::INT);
    linear->set_i(1);
  }
  AddOutput(g, "y");
  return m;
}

// x[B, 4] -> MatMul W[4, 8] -> Relu -> y. B is symbolic ("batch").
inline onnx::ModelProto MatMulRelu() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {-1, 4});
  AddWeight(g, "w", {4, 8});
  AddNode(g, "MatMul", "mm", {"x", "w"}, {"h"});
  AddNode(g, "Relu", "relu", {"h"}, {"y"});
  AddOutput(g, "y");
  return m;
}

// One weight read by four ops, as an unrolled RNN reads its weights:
// y0 = W x, y1 = W y0, y2 = W y1, y3 = W y2 (ops m0..m3), W [2, 2],
// x [2, 1], y3 the output. W's partial gradients: one per op.
inline onnx::ModelProto SharedWeightChain() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 1});
  AddWeight(g, "w", {2, 2});
  AddNode(g, "MatMul", "m0", {"w", "x"}, {"y0"});
  AddNode(g, "MatMul", "m1", {"w", "y0"}, {"y1"});
  AddNode(g, "MatMul", "m2", {"w", "y1"}, {"y2"});
  AddNode(g, "MatMul", "m3", {"w", "y2"}, {"y3"});
  AddOutput(g, "y3");
  return m;
}

// x [4, 4] feeds B (an output) and the chain A -> C -> D (an output), each
// a MatMul with its own [4, 4] weight, nodes in the order B, A, C, D: A's
// path is the longer, the view's order puts B first.
inline onnx::ModelProto ForkOfFourMatMuls() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 4});
  for (const char* w : {"wb", "wa", "wc", "wd"}) AddWeight(g, w, {4, 4});
  AddNode(g, "MatMul", "B", {"x", "wb"}, {"b"});
  AddNode(g, "MatMul", "A", {"x", "wa"}, {"a"});
  AddNode(g, "MatMul", "C", {"a", "wc"}, {"c"});
  AddNode(g, "MatMul", "D", {"c", "wd"}, {"d"});
  AddOutput(g, "b");
  AddOutput(g, "d");
  return m;
}

// What a backward keeps: x[4, 2] -> MatMul W[2, 2] -> y -> Transpose -> t
// -> Relu -> r, the output. MatMul's backward keeps x and W, Transpose's
// nothing, Relu's its output r. Every activation is 32 bytes.
inline onnx::ModelProto MatMulTransposeRelu() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 2});
  AddWeight(g, "w", {2, 2});
  AddNode(g, "MatMul", "mm", {"x", "w"}, {"y"});
  AddNode(g, "Transpose", "tr", {"y"}, {"t"});
  AddNode(g, "Relu", "relu", {"t"}, {"r"});
  AddOutput(g, "r");
  return m;
}

}  // namespace placer::testing

#endif  // PLACER_TESTS_GRAPH_TEST_MODELS_H_
