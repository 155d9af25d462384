#include "graph/onnx_values.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/onnx_file.h"

namespace placer {
namespace {

template <typename T>
void AppendRaw(std::string* raw, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  raw->append(bytes, sizeof(T));
}

}  // namespace

ShapeInfo FromTypeProto(const onnx::TypeProto& type) {
  ShapeInfo info;
  if (!type.has_tensor_type()) return info;
  const auto& tt = type.tensor_type();
  info.dtype = DataTypeFromOnnx(tt.elem_type());
  if (!tt.has_shape()) return info;
  info.has_shape = true;
  for (const auto& d : tt.shape().dim()) {
    Dim dim;
    if (d.has_dim_value() && d.dim_value() >= 0) dim.value = d.dim_value();
    if (d.has_dim_param()) dim.param = d.dim_param();
    info.dims.push_back(dim);
  }
  return info;
}

std::shared_ptr<TensorData> ToTensorData(const onnx::TensorProto& t) {
  auto data = std::make_shared<TensorData>();
  data->dtype = DataTypeFromOnnx(t.data_type());
  data->dims.assign(t.dims().begin(), t.dims().end());
  if (IsExternal(t)) {
    for (const onnx::StringStringEntryProto& e : t.external_data()) {
      if (e.key() == "location") data->external_location = e.value();
    }
    return data;
  }
  if (t.has_raw_data()) {
    data->raw = t.raw_data();
    return data;
  }
  switch (data->dtype) {
    case DataType::kFloat32:
      for (float v : t.float_data()) AppendRaw(&data->raw, v);
      break;
    case DataType::kFloat64:
      for (double v : t.double_data()) AppendRaw(&data->raw, v);
      break;
    case DataType::kInt64:
      for (int64_t v : t.int64_data()) AppendRaw(&data->raw, v);
      break;
    case DataType::kUInt32:
    case DataType::kUInt64:
      for (uint64_t v : t.uint64_data()) {
        if (data->dtype == DataType::kUInt32) {
          AppendRaw(&data->raw, static_cast<uint32_t>(v));
        } else {
          AppendRaw(&data->raw, v);
        }
      }
      break;
    case DataType::kInt32:
      for (int32_t v : t.int32_data()) AppendRaw(&data->raw, v);
      break;
    case DataType::kInt16:
    case DataType::kUInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      for (int32_t v : t.int32_data()) {
        AppendRaw(&data->raw, static_cast<uint16_t>(v));
      }
      break;
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kBool:
      for (int32_t v : t.int32_data()) {
        AppendRaw(&data->raw, static_cast<uint8_t>(v));
      }
      break;
    default:
      break;
  }
  return data;
}

std::optional<FoldedValue> ToFolded(const TensorData& data) {
  FoldedValue v;
  v.dtype = data.dtype;
  v.dims = data.dims;
  int64_t n = v.size();
  int64_t width = DataTypeBytes(data.dtype);
  if (n > kMaxFoldedElements || width == 0 ||
      static_cast<int64_t>(data.raw.size()) != n * width) {
    return std::nullopt;
  }
  const char* p = data.raw.data();
  for (int64_t i = 0; i < n; ++i, p += width) {
    switch (data.dtype) {
      case DataType::kFloat32: {
        float f;
        std::memcpy(&f, p, 4);
        v.reals.push_back(f);
        break;
      }
      case DataType::kFloat64: {
        double d;
        std::memcpy(&d, p, 8);
        v.reals.push_back(d);
        break;
      }
      case DataType::kInt32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        v.ints.push_back(x);
        break;
      }
      case DataType::kInt64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        v.ints.push_back(x);
        break;
      }
      case DataType::kInt8:
        v.ints.push_back(static_cast<int8_t>(*p));
        break;
      case DataType::kUInt8:
      case DataType::kBool:
        v.ints.push_back(static_cast<uint8_t>(*p));
        break;
      default:
        return std::nullopt;
    }
  }
  return v;
}

onnx::TensorProto ToTensorProto(const std::string& name, const FoldedValue& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(static_cast<int32_t>(DataTypeToOnnx(v.dtype)));
  for (int64_t d : v.dims) t.add_dims(d);
  t.set_raw_data(v.ToTensorData().raw);
  return t;
}

AttributeValue ToAttribute(const onnx::AttributeProto& a) {
  AttributeValue v;
  using A = onnx::AttributeProto;
  using K = AttributeValue::Kind;
  switch (a.type()) {
    case A::INT:
      v.kind = K::kInt;
      v.i = a.i();
      break;
    case A::FLOAT:
      v.kind = K::kFloat;
      v.f = a.f();
      break;
    case A::STRING:
      v.kind = K::kString;
      v.s = a.s();
      break;
    case A::INTS:
      v.kind = K::kInts;
      v.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case A::FLOATS:
      v.kind = K::kFloats;
      v.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case A::STRINGS:
      v.kind = K::kStrings;
      v.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case A::TENSOR:
      v.kind = K::kTensor;
      v.tensor = ToTensorData(a.t());
      break;
    default:
      v.kind = K::kOther;
      v.s = A::AttributeType_Name(a.type());
      break;
  }
  return v;
}

std::optional<FoldedValue> ConstantNodeValue(const Op& op) {
  using K = AttributeValue::Kind;
  for (const auto& [name, a] : op.attributes) {
    FoldedValue v;
    if (a.kind == K::kTensor && a.tensor != nullptr) return ToFolded(*a.tensor);
    if (name == "value_int") {
      v.dtype = DataType::kInt64;
      v.ints = {a.i};
    } else if (name == "value_ints") {
      v.dtype = DataType::kInt64;
      v.ints = a.ints;
      v.dims = {static_cast<int64_t>(a.ints.size())};
    } else if (name == "value_float") {
      v.dtype = DataType::kFloat32;
      v.reals = {a.f};
    } else if (name == "value_floats") {
      v.dtype = DataType::kFloat32;
      v.reals = a.floats;
      v.dims = {static_cast<int64_t>(a.floats.size())};
    } else {
      continue;
    }
    return v;
  }
  return std::nullopt;
}

}  // namespace placer
