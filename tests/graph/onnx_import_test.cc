#include "graph/onnx_import.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tests/graph/test_models.h"
#include "zoo/onnx_builder.h"

namespace placer {
namespace {

using ::placer::testing::AddInput;
using ::placer::testing::AddInts;
using ::placer::testing::AddNode;
using ::placer::testing::AddOutput;
using ::placer::testing::AddWeight;
using ::placer::testing::EmptyModel;
using ::placer::testing::MatMulRelu;
using ::testing::HasSubstr;
using ::testing::Not;

ImportOptions Batch(int64_t b) {
  ImportOptions o;
  o.batch_size = b;
  return o;
}

absl::StatusOr<Graph> ImportString(const std::string& bytes,
                                   const ImportOptions& options = Batch(2)) {
  return ImportOnnxBytes(bytes, "model.onnx", options);
}

std::string Serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

TEST(OnnxImportTest, ImportsShapesCostsAndKeys) {
  absl::StatusOr<Graph> g = ImportOnnxModel(MatMulRelu(), "m", Batch(3));
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->ops().size(), 2u);
  EXPECT_EQ(g->op(0).key, "mm");
  const Tensor& h = g->tensor(g->FindTensor("h"));
  EXPECT_TRUE(h.shape_known);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(h.bytes(), 3 * 8 * 4);
  // MatMul [3,4]x[4,8]: 2 * 4 FLOPs for each of 24 outputs.
  EXPECT_DOUBLE_EQ(g->op(0).forward.flops, 2 * 4 * 24);
  EXPECT_EQ(g->op(0).forward.status, CostStatus::kExact);
  EXPECT_EQ(g->op(0).forward.bytes_accessed, (3 * 4 + 4 * 8 + 3 * 8) * 4);
  EXPECT_DOUBLE_EQ(g->op(1).forward.flops, 24);
  EXPECT_EQ(g->parameter_bytes(), 4 * 8 * 4);
  EXPECT_EQ(g->tensor(g->FindTensor("w")).kind, TensorKind::kParameter);
}

// A model with its tensors in external data, as exports over 2 GB come: the
// small one (a mask-sized constant) is read from beside the model, the
// weight never is; without the data files everything still imports, and
// the small tensor keeps its location for the error of what needs it.
TEST(OnnxImportTest, SmallExternalTensorsAreReadFromBesideTheModel) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp");
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 4});
  auto external = [&](const std::string& name, int64_t rows, int64_t cols,
                      const std::string& location) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(rows);
    t->add_dims(cols);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t->add_external_data();
    e->set_key("location");
    e->set_value(location);
  };
  external("bias", 2, 4, "bias.bin");
  external("w", 4, 300 * 300, "w.bin");  // over the folding limit: a weight
  AddNode(g, "Add", "add", {"x", "bias"}, {"h"});
  AddNode(g, "MatMul", "mm", {"h", "w"}, {"y"});
  AddOutput(g, "y");
  const std::string path = dir + "/external.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    std::vector<float> bias = {1, 2, 3, 4, 5, 6, 7, 8};
    std::ofstream(dir + "/bias.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(bias.data()), 32);
  }
  absl::StatusOr<Graph> read = ImportOnnxFile(path, {});
  ASSERT_TRUE(read.ok()) << read.status();
  const Tensor& bias = read->tensor(read->FindTensor("bias"));
  ASSERT_EQ(bias.data->raw.size(), 32u);
  float last = 0;
  std::memcpy(&last, bias.data->raw.data() + 28, 4);
  EXPECT_EQ(last, 8.0f);
  const Tensor& w = read->tensor(read->FindTensor("w"));
  EXPECT_TRUE(w.data->raw.empty());
  EXPECT_EQ(w.data->external_location, "w.bin");
  EXPECT_EQ(w.bytes(), 4 * 90000 * 4);

  std::remove((dir + "/bias.bin").c_str());
  absl::StatusOr<Graph> without = ImportOnnxFile(path, {});
  ASSERT_TRUE(without.ok()) << without.status();
  const Tensor& missing = without->tensor(without->FindTensor("bias"));
  EXPECT_TRUE(missing.data->raw.empty());
  EXPECT_EQ(missing.data->external_location, "bias.bin");
  EXPECT_EQ(missing.shape, (std::vector<int64_t>{2, 4}));
}

TEST(OnnxImportTest, NodeKeysFallBackToIndexForEmptyOrDuplicateNames) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 2});
  AddNode(g, "Relu", "", {"x"}, {"a"});
  AddNode(g, "Relu", "same", {"a"}, {"b"});
  AddNode(g, "Relu", "same", {"b"}, {"c"});
  AddNode(g, "Relu", "unique", {"c"}, {"d"});
  AddOutput(g, "d");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "m", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->op(0).key, "node_0");
  EXPECT_EQ(graph->op(1).key, "node_1");
  EXPECT_EQ(graph->op(2).key, "node_2");
  EXPECT_EQ(graph->op(3).key, "unique");
}

// The exporter pattern: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
// Shape inference alone cannot give the Reshape output a shape.
TEST(OnnxImportTest, FoldsShapeArithmeticChains) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {-1, 6, 4});
  AddInts(g, "zero", {0});
  AddInts(g, "minus_one", {-1});
  AddNode(g, "Shape", "shape", {"x"}, {"s"});
  auto* gather = AddNode(g, "Gather", "gather", {"s", "zero_scalar"}, {"b"});
  (void)gather;
  auto* c = g->add_initializer();  // scalar index 0
  c->set_name("zero_scalar");
  c->set_data_type(onnx::TensorProto::INT64);
  c->add_int64_data(0);
  AddNode(g, "Unsqueeze", "unsq", {"b", "zero"}, {"b1"});
  *AddNode(g, "Concat", "concat", {"b1", "minus_one"}, {"new_shape"})
       ->add_attribute() = zoo::IntAttr("axis", 0);
  AddNode(g, "Reshape", "reshape", {"x", "new_shape"}, {"flat"});
  AddWeight(g, "w", {24, 5});
  AddNode(g, "MatMul", "mm", {"flat", "w"}, {"y"});
  AddOutput(g, "y");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "m", Batch(7));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Tensor& flat = graph->tensor(graph->FindTensor("flat"));
  ASSERT_TRUE(flat.shape_known);
  EXPECT_EQ(flat.shape, (std::vector<int64_t>{7, 24}));
  EXPECT_DOUBLE_EQ(graph->op(graph->FindOp("mm")).forward.flops,
                   2.0 * 24 * 7 * 5);
  // The folded value is kept: [7, -1], a constant no op writes.
  const Tensor& shape = graph->tensor(graph->FindTensor("new_shape"));
  ASSERT_NE(shape.data, nullptr);
  EXPECT_EQ(shape.data->raw.size(), 16u);
  EXPECT_EQ(shape.kind, TensorKind::kConstant);
  EXPECT_EQ(shape.producer, -1);
  // The chain that computed it is not an op: only Reshape and MatMul run,
  // under their own keys; the file's other four nodes are listed as folded.
  ASSERT_EQ(graph->ops().size(), 2u);
  EXPECT_EQ(graph->op(0).key, "reshape");
  EXPECT_EQ(graph->op(1).key, "mm");
  EXPECT_EQ(graph->folded_op_keys(),
            (std::vector<std::string>{"shape", "gather", "unsq", "concat"}));
  const Tensor& x = graph->tensor(graph->FindTensor("x"));
  EXPECT_EQ(x.consumers, (std::vector<int>{0}));
  TrainingView view = BuildTrainingView(*graph);
  // Forward Reshape and MatMul, MatMul's backward (x needs no gradient) and
  // w's update.
  EXPECT_EQ(view.nodes().size(), 2u + 1u + 1u);
}

TEST(OnnxImportErrorTest, AGraphThatFoldsEntirelyIsNamed) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 3});
  AddNode(g, "Shape", "shape", {"x"}, {"s"});
  *AddNode(g, "Cast", "cast", {"s"}, {"f"})->add_attribute() =
      zoo::IntAttr("to", onnx::TensorProto::FLOAT);
  AddOutput(g, "f");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "m.onnx", {});
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("m.onnx"));
  EXPECT_THAT(graph.status().message(),
              HasSubstr("every node computes a constant"));
}

TEST(OnnxImportTest, InputShapeOverridesAndValidates) {
  ImportOptions o;
  o.input_shapes["x"] = {5, 4};
  absl::StatusOr<Graph> g = ImportOnnxModel(MatMulRelu(), "m", o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->tensor(g->FindTensor("y")).shape, (std::vector<int64_t>{5, 8}));
  ImportOptions wrong;
  wrong.input_shapes["nope"] = {1, 4};
  absl::StatusOr<Graph> bad = ImportOnnxModel(MatMulRelu(), "m", wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'nope'"));
}

TEST(OnnxImportTest, DimsTextParsesOrNamesTheBadDimWithoutFlagNames) {
  absl::StatusOr<std::vector<int64_t>> dims = ParseDims("32x3x224x224");
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(*dims, (std::vector<int64_t>{32, 3, 224, 224}));
  absl::StatusOr<std::vector<int64_t>> bad = ParseDims("5xz");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("dim 1 ('z')"));
  // The text reaches gRPC clients too: it names no CLI flag.
  EXPECT_THAT(bad.status().message(), Not(HasSubstr("--")));
  EXPECT_FALSE(ParseDims("").ok());
  EXPECT_FALSE(ParseDims("4x0").ok());
  EXPECT_FALSE(ParseDims("4x-2").ok());
}

TEST(OnnxImportErrorTest, AbsurdDimensionsAreAnErrorNotAnOverflow) {
  // [1e17, 4] floats would overflow int64 byte counts.
  absl::StatusOr<Graph> g =
      ImportOnnxModel(MatMulRelu(), "m", Batch(100000000000000000));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("tensor 'x'"));
  EXPECT_THAT(g.status().message(), HasSubstr("absurd"));
  // Large but countable is fine: 2^40 x 4 floats is 16 TiB.
  EXPECT_TRUE(ImportOnnxModel(MatMulRelu(), "m", Batch(int64_t{1} << 40)).ok());
}

TEST(OnnxImportTest, UnknownOpIsKeptAndFlagged) {
  onnx::ModelProto m = MatMulRelu();
  auto* g = m.mutable_graph();
  auto* custom = AddNode(g, "FancyAttention", "fancy", {"y"}, {"z"});
  custom->set_domain("com.example");
  auto* o = m.add_opset_import();
  o->set_domain("com.example");
  o->set_version(1);
  g->clear_output();
  AddOutput(g, "z");
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "m", Batch(2));
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->ops().size(), 3u);
  std::vector<int> unknown = graph->unknown_cost_ops();
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(graph->op(unknown[0]).key, "fancy");
  EXPECT_EQ(graph->op(unknown[0]).forward.flops, 0);
  // Its backward is flagged unknown too, never a silent zero-cost node.
  TrainingView view = BuildTrainingView(*graph);
  EXPECT_EQ(view.unknown_cost_nodes(), 2);
}

// --- Malformed input: each error names the file and the culprit. ---

// torch.onnx 1.13's repeat_interleave after torch.outer: a Reshape whose
// 0s copy the wrong dims (tests/fixtures/corpus/modern_models.py). The
// file does not compute the model's shapes; the error says where and why.
TEST(OnnxImportErrorTest, WrongRepeatInterleaveExportIsNamed) {
  for (const char* opset : {"14", "17"}) {
    absl::StatusOr<Graph> g = ImportOnnxFile(
        std::string("tests/fixtures/corpus/llama_repeat_interleave.train.op") +
            opset + ".onnx",
        {});
    ASSERT_FALSE(g.ok());
    const std::string message(g.status().message());
    EXPECT_THAT(message, HasSubstr("'/blocks.0/attention/MatMul' (MatMul"));
    EXPECT_THAT(message,
                HasSubstr("its inputs are [2,4,16,16] and [2,32,16,2]"));
    EXPECT_THAT(message, HasSubstr("node '/blocks.0/attention/Reshape_4' "
                                   "(Reshape) copies dims by 0 from an input "
                                   "of rank 5 into a shape of rank 4"));
    EXPECT_THAT(message, HasSubstr("repeat_interleave"));
  }
  // The same model with Hugging Face's repeat_kv imports (its rotary
  // frequencies an Einsum, whose dims ONNX's inference leaves symbolic).
  absl::StatusOr<Graph> llama =
      ImportOnnxFile("tests/fixtures/corpus/llama.train.op17.onnx", {});
  ASSERT_TRUE(llama.ok()) << llama.status();
  for (const Op& op : llama->ops()) {
    if (op.op_type != "Einsum") continue;
    EXPECT_EQ(llama->tensor(op.outputs[0]).shape,
              (std::vector<int64_t>{16, 8}));
  }
}

TEST(OnnxImportErrorTest, NotAProtobuf) {
  absl::StatusOr<Graph> g = ImportString("this is plainly not a protobuf\xff");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("model.onnx"));
  EXPECT_THAT(g.status().message(), HasSubstr("not an ONNX model"));
}

TEST(OnnxImportErrorTest, TruncatedFile) {
  std::string bytes = Serialize(MatMulRelu());
  for (size_t cut : {bytes.size() / 2, bytes.size() - 3, size_t{5}}) {
    absl::StatusOr<Graph> g = ImportString(bytes.substr(0, cut));
    ASSERT_FALSE(g.ok()) << "cut at " << cut;
    EXPECT_THAT(g.status().message(), HasSubstr("model.onnx"));
  }
}

TEST(OnnxImportErrorTest, EmptyFileAndMissingFile) {
  EXPECT_THAT(ImportString("").status().message(), HasSubstr("empty"));
  absl::StatusOr<Graph> g = ImportOnnxFile("/nonexistent/x.onnx", {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("/nonexistent/x.onnx"));
}

TEST(OnnxImportErrorTest, Cycle) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 2});
  AddNode(g, "Add", "a", {"x", "c"}, {"b"});
  AddNode(g, "Relu", "r", {"b"}, {"c"});
  AddOutput(g, "c");
  absl::Status s = ImportOnnxModel(m, "cyc.onnx", {}).status();
  EXPECT_THAT(s.message(), HasSubstr("cyc.onnx"));
  EXPECT_THAT(s.message(), HasSubstr("cycle"));
  EXPECT_THAT(s.message(), HasSubstr("node 'a'"));
}

TEST(OnnxImportErrorTest, UndefinedInput) {
  onnx::ModelProto m = MatMulRelu();
  m.mutable_graph()->mutable_node(1)->set_input(0, "ghost");
  absl::Status s = ImportOnnxModel(m, "m.onnx", Batch(2)).status();
  EXPECT_THAT(s.message(), HasSubstr("node 'relu' (Relu, index 1)"));
  EXPECT_THAT(s.message(), HasSubstr("'ghost' is not defined"));
}

TEST(OnnxImportErrorTest, DuplicateOutputName) {
  onnx::ModelProto m = MatMulRelu();
  m.mutable_graph()->mutable_node(1)->set_output(0, "h");
  absl::Status s = ImportOnnxModel(m, "m.onnx", Batch(2)).status();
  EXPECT_THAT(s.message(), HasSubstr("duplicate output name"));
  EXPECT_THAT(s.message(), HasSubstr("node 'relu'"));
  EXPECT_THAT(s.message(), HasSubstr("node 'mm'"));
}

TEST(OnnxImportErrorTest, UnresolvedInputShapeNamesTheDim) {
  absl::Status s = ImportOnnxModel(MatMulRelu(), "m.onnx", {}).status();
  EXPECT_THAT(s.message(), HasSubstr("unresolved shape"));
  EXPECT_THAT(s.message(), HasSubstr("'x'"));
  EXPECT_THAT(s.message(), HasSubstr("dim 0 is symbolic 'batch'"));
  // The fix in the caller's terms: the options' own names by default (no
  // CLI flag from this layer), the caller's when it gives them.
  EXPECT_THAT(s.message(), HasSubstr("fix it with batch_size N or "
                                     "dim_values batch=N, or input_shapes "
                                     "x=D0xD1x..."));
  EXPECT_THAT(s.message(), Not(HasSubstr("--")));
  ImportOptions named;
  named.names.batch_size = "model.batch";
  s = ImportOnnxModel(MatMulRelu(), "m.onnx", named).status();
  EXPECT_THAT(s.message(), HasSubstr("fix it with model.batch N or "));
}

TEST(OnnxImportErrorTest, UnresolvedShapeInsideTheGraphNamesTheNode) {
  // A Reshape whose target shape is a graph input cannot be resolved.
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {2, 6});
  AddInput(g, "target", {2}, onnx::TensorProto::INT64);
  AddNode(g, "Reshape", "reshape", {"x", "target"}, {"y"});
  AddOutput(g, "y");
  absl::Status s = ImportOnnxModel(m, "m.onnx", {}).status();
  EXPECT_THAT(s.message(), HasSubstr("unresolved shape: tensor 'y'"));
  EXPECT_THAT(s.message(), HasSubstr("node 'reshape' (Reshape, index 0)"));
}

TEST(OnnxImportErrorTest, EmptyGraph) {
  onnx::ModelProto m = EmptyModel();
  AddInput(m.mutable_graph(), "x", {2});
  absl::Status s = ImportOnnxModel(m, "m.onnx", {}).status();
  EXPECT_THAT(s.message(), HasSubstr("empty graph"));
}

TEST(OnnxImportErrorTest, ModelWithoutGraph) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  absl::Status s = ImportString(Serialize(m)).status();
  EXPECT_THAT(s.message(), HasSubstr("no graph"));
}

TEST(OnnxImportErrorTest, InitializerWithTooFewBytes) {
  onnx::ModelProto m = MatMulRelu();
  m.mutable_graph()->mutable_initializer(0)->mutable_float_data()->RemoveLast();
  absl::Status s = ImportOnnxModel(m, "m.onnx", Batch(2)).status();
  EXPECT_THAT(s.message(), HasSubstr("initializer 'w'"));
}

TEST(OnnxImportTest, ExternalDataIsSizedFromDims) {
  onnx::ModelProto m = MatMulRelu();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("missing.bin");
  absl::StatusOr<Graph> g = ImportOnnxModel(m, "m", Batch(2));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->parameter_bytes(), 4 * 8 * 4);
  EXPECT_TRUE(g->tensor(g->FindTensor("w")).data->raw.empty());
}

}  // namespace
}  // namespace placer

namespace placer {
namespace {

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Files are read by a reader that sizes each weight's bytes exactly; it
// must give what protobuf's own parser gives, for weights over protobuf's
// 50 MB string threshold too, and refuse what it refuses.
TEST(OnnxImportTest, FileReaderMatchesProtobufsParse) {
  onnx::ModelProto m = MatMulRelu();
  onnx::TensorProto* big = m.mutable_graph()->add_initializer();
  big->set_name("big_unused");
  big->set_data_type(onnx::TensorProto::FLOAT);
  big->add_dims(13'000'000);  // 52 MB
  big->mutable_raw_data()->assign(52'000'000, '\x01');
  const std::string bytes = Serialize(m);
  const std::string path = WriteTemp("exact.onnx", bytes);
  absl::StatusOr<Graph> from_file = ImportOnnxFile(path, Batch(2));
  absl::StatusOr<Graph> from_bytes = ImportString(bytes);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status();
  ASSERT_EQ(from_file->tensors().size(), from_bytes->tensors().size());
  for (size_t t = 0; t < from_file->tensors().size(); ++t) {
    const Tensor& a = from_file->tensors()[t];
    const Tensor& b = from_bytes->tensors()[t];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.data == nullptr, b.data == nullptr);
    if (a.data != nullptr && b.data != nullptr) {
      EXPECT_TRUE(a.data->raw == b.data->raw) << a.name;
    }
  }
  EXPECT_EQ(from_file->ops().size(), from_bytes->ops().size());
  // Truncated anywhere, the file is refused like the bytes are.
  for (size_t cut : {size_t{7}, bytes.size() / 3, bytes.size() - 2}) {
    absl::StatusOr<Graph> g =
        ImportOnnxFile(WriteTemp("cut.onnx", bytes.substr(0, cut)), Batch(2));
    ASSERT_FALSE(g.ok()) << "cut at " << cut;
    EXPECT_THAT(g.status().message(), HasSubstr("cut.onnx"));
  }
}

}  // namespace
}  // namespace placer
