#include "zoo/onnx_builder.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>

#include "base/stable_hash.h"

namespace placer::zoo {
namespace {

constexpr int kOpsetVersion = 17;
constexpr int kIrVersion = 8;

// SplitMix64: a fast, well-mixed generator for deterministic weights.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

onnx::ValueInfoProto MakeValueInfo(const std::string& name, int32_t elem_type,
                                   const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  return v;
}

}  // namespace

onnx::AttributeProto IntAttr(const std::string& name, int64_t value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
  return a;
}

onnx::AttributeProto FloatAttr(const std::string& name, float value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
  return a;
}

onnx::AttributeProto IntsAttr(const std::string& name,
                              std::vector<int64_t> values) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a.add_ints(v);
  return a;
}

onnx::AttributeProto FloatTensorAttr(const std::string& name, float value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = a.mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1);
  t->add_float_data(value);
  return a;
}

OnnxBuilder::OnnxBuilder(std::string graph_name, uint64_t seed,
                         bool with_weights)
    : seed_(seed), with_weights_(with_weights) {
  model_.set_ir_version(kIrVersion);
  model_.set_producer_name("placer-zoo");
  auto* opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpsetVersion);
  model_.mutable_graph()->set_name(std::move(graph_name));
}

std::string OnnxBuilder::Input(const std::string& name,
                               std::vector<int64_t> dims) {
  *model_.mutable_graph()->add_input() =
      MakeValueInfo(name, onnx::TensorProto::FLOAT, dims);
  return name;
}

std::string OnnxBuilder::IntInput(const std::string& name,
                                  std::vector<int64_t> dims) {
  *model_.mutable_graph()->add_input() =
      MakeValueInfo(name, onnx::TensorProto::INT64, dims);
  return name;
}

std::string OnnxBuilder::Weight(const std::string& name,
                                std::vector<int64_t> dims, int64_t fan_in,
                                float fill) {
  onnx::TensorProto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  if (!with_weights_) {
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* entry = t->add_external_data();
    entry->set_key("location");
    entry->set_value(name + ".bin");
    return name;
  }
  std::string* raw = t->mutable_raw_data();
  raw->resize(static_cast<size_t>(n) * sizeof(float));
  char* out = raw->data();
  if (fan_in <= 0) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(out + 4 * i, &fill, 4);
    return name;
  }
  const float scale = static_cast<float>(std::sqrt(1.0 / fan_in));
  uint64_t state = seed_ ^ StableHash(name);
  for (int64_t i = 0; i < n; ++i) {
    // 24 random bits -> [-1, 1) -> scaled.
    float u = static_cast<float>(SplitMix64(state) >> 40) * (1.0f / 8388608.0f) - 1.0f;
    float v = u * scale;
    std::memcpy(out + 4 * i, &v, 4);
  }
  return name;
}

std::string OnnxBuilder::Ints(const std::string& name,
                              std::vector<int64_t> values) {
  onnx::TensorProto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return name;
}

std::string OnnxBuilder::Constant(const std::string& name,
                                  std::vector<int64_t> dims,
                                  const std::vector<float>& values) {
  onnx::AttributeProto value;
  value.set_name("value");
  value.set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = value.mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return Node("Constant", name, {}, {value});
}

std::vector<std::string> OnnxBuilder::NodeN(
    const std::string& op_type, const std::string& name,
    const std::vector<std::string>& inputs, int output_count,
    std::initializer_list<onnx::AttributeProto> attributes) {
  onnx::NodeProto* node = model_.mutable_graph()->add_node();
  node->set_op_type(op_type);
  node->set_name(name);
  for (const std::string& in : inputs) node->add_input(in);
  std::vector<std::string> outputs;
  for (int k = 0; k < output_count; ++k) {
    outputs.push_back(output_count == 1 ? name : name + ":" + std::to_string(k));
    node->add_output(outputs.back());
  }
  for (const onnx::AttributeProto& a : attributes) *node->add_attribute() = a;
  return outputs;
}

std::string OnnxBuilder::Node(
    const std::string& op_type, const std::string& name,
    const std::vector<std::string>& inputs,
    std::initializer_list<onnx::AttributeProto> attributes) {
  return NodeN(op_type, name, inputs, 1, attributes).front();
}

void OnnxBuilder::Output(const std::string& name, int32_t elem_type,
                         const std::vector<int64_t>& dims) {
  *model_.mutable_graph()->add_output() = MakeValueInfo(name, elem_type, dims);
}

onnx::ModelProto OnnxBuilder::Finish() { return std::move(model_); }

}  // namespace placer::zoo
