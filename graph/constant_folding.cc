// Evaluating exporters' shape computations (Shape, Gather, Concat,
// Unsqueeze, Reshape... on known values) so that shapes downstream become
// known: one small evaluator per op type, the values' helpers they share
// (folding_kernels.h) and the dispatch. Arithmetic, comparisons, Where
// and ReduceProd: constant_folding_arithmetic.cc.
#include "graph/constant_folding.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "graph/folding_kernels.h"

namespace placer {

int64_t FoldedValue::size() const { return ElementCount(dims); }

namespace folding {

// A double as int64 when int64 can hold it (the cast is undefined
// otherwise); nullopt for NaN, infinities and values out of range.
std::optional<int64_t> ToInt64(double x) {
  // 2^63 is exactly representable as a double; int64 stops below it.
  if (!std::isfinite(x) || x >= 9223372036854775808.0 ||
      x < -9223372036854775808.0) {
    return std::nullopt;
  }
  return static_cast<int64_t>(x);
}

// A double as int64, clamped to int64's range (NaN: 0): defined for every
// input, for values that only index or size things (out-of-range ones are
// refused by the checks on dims downstream).
int64_t SaturatingInt64(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 9223372036854775808.0) return INT64_MAX;
  if (x < -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(x);
}

template <typename T>
void AppendRaw(std::string* raw, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  raw->append(bytes, sizeof(T));
}

std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * dims[i + 1];
  }
  return strides;
}

int64_t Product(const std::vector<int64_t>& dims) { return ElementCount(dims); }

double RealAt(const FoldedValue& v, int64_t i) {
  return v.is_integral() ? static_cast<double>(v.ints[i]) : v.reals[i];
}

int64_t IntAt(const FoldedValue& v, int64_t i) {
  return v.is_integral() ? v.ints[i] : SaturatingInt64(v.reals[i]);
}

FoldedValue MakeLike(DataType dtype, std::vector<int64_t> dims) {
  FoldedValue v;
  v.dtype = dtype;
  v.dims = std::move(dims);
  int64_t n = Product(v.dims);
  if (v.is_integral()) {
    v.ints.assign(n, 0);
  } else {
    v.reals.assign(n, 0);
  }
  return v;
}

void SetFrom(FoldedValue& dst, int64_t i, const FoldedValue& src, int64_t j) {
  if (dst.is_integral()) {
    dst.ints[i] = IntAt(src, j);
  } else {
    dst.reals[i] = RealAt(src, j);
  }
}

// Reads a 1-D (or scalar) integer constant.
std::optional<std::vector<int64_t>> IntList(const FoldInput& in) {
  if (in.value == nullptr) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < in.value->size(); ++i) {
    out.push_back(IntAt(*in.value, i));
  }
  return out;
}

bool Supported(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 ||
         t == DataType::kInt32 || t == DataType::kInt64 ||
         t == DataType::kBool || t == DataType::kInt8 ||
         t == DataType::kUInt8;
}

int64_t NormalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

// Numpy broadcasting of several shapes.
std::optional<std::vector<int64_t>> BroadcastShape(
    const std::vector<const FoldedValue*>& values) {
  size_t rank = 0;
  for (const FoldedValue* v : values) rank = std::max(rank, v->dims.size());
  std::vector<int64_t> out(rank, 1);
  for (const FoldedValue* v : values) {
    size_t offset = rank - v->dims.size();
    for (size_t i = 0; i < v->dims.size(); ++i) {
      int64_t d = v->dims[i];
      int64_t& o = out[offset + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
      } else {
        return std::nullopt;
      }
    }
  }
  return out;
}

// Flat index into `v` for the output multi-index `index` under broadcasting.
int64_t BroadcastIndex(const FoldedValue& v, const std::vector<int64_t>& index) {
  size_t offset = index.size() - v.dims.size();
  int64_t flat = 0;
  for (size_t i = 0; i < v.dims.size(); ++i) {
    int64_t idx = v.dims[i] == 1 ? 0 : index[offset + i];
    flat = flat * v.dims[i] + idx;
  }
  return flat;
}

void Unravel(int64_t flat, const std::vector<int64_t>& dims,
             std::vector<int64_t>* index) {
  index->resize(dims.size());
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    (*index)[i] = dims[i] == 0 ? 0 : flat % dims[i];
    flat = dims[i] == 0 ? 0 : flat / dims[i];
  }
}

Result One(FoldedValue v) { return std::vector<FoldedValue>{std::move(v)}; }

bool AllConstant(const std::vector<FoldInput>& in, size_t count) {
  if (in.size() < count) return false;
  for (size_t i = 0; i < count; ++i) {
    if (in[i].value == nullptr) return false;
  }
  return true;
}

}  // namespace folding

namespace {

using folding::AllConstant;
using folding::AppendRaw;
using folding::BroadcastIndex;
using folding::BroadcastShape;
using folding::FoldTable;
using folding::IntAt;
using folding::IntList;
using folding::MakeLike;
using folding::NormalizeAxis;
using folding::One;
using folding::Product;
using folding::RealAt;
using folding::Result;
using folding::SaturatingInt64;
using folding::SetFrom;
using folding::Strides;
using folding::Supported;
using folding::ToInt64;
using folding::Unravel;

Result FoldShape(const Op& op, const std::vector<FoldInput>& in) {
  if (in.empty() || in[0].shape == nullptr) return std::nullopt;
  const auto& shape = *in[0].shape;
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t start = std::clamp(NormalizeAxis(op.IntAttribute("start", 0), rank),
                             int64_t{0}, rank);
  int64_t end = std::clamp(NormalizeAxis(op.IntAttribute("end", rank), rank),
                           int64_t{0}, rank);
  FoldedValue v;
  v.dtype = DataType::kInt64;
  for (int64_t i = start; i < end; ++i) v.ints.push_back(shape[i]);
  v.dims = {static_cast<int64_t>(v.ints.size())};
  return One(std::move(v));
}

Result FoldSize(const Op&, const std::vector<FoldInput>& in) {
  if (in.empty() || in[0].shape == nullptr) return std::nullopt;
  FoldedValue v;
  v.dtype = DataType::kInt64;
  v.ints = {Product(*in[0].shape)};
  return One(std::move(v));
}

Result FoldIdentity(const Op&, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 1)) return std::nullopt;
  return One(*in[0].value);
}

Result FoldCast(const Op& op, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 1)) return std::nullopt;
  DataType to = DataTypeFromOnnx(op.IntAttribute("to", 0));
  if (!Supported(to)) return std::nullopt;
  const FoldedValue& x = *in[0].value;
  FoldedValue v = MakeLike(to, x.dims);
  for (int64_t i = 0; i < x.size(); ++i) {
    if (to == DataType::kBool) {
      v.ints[i] = RealAt(x, i) != 0;
    } else {
      SetFrom(v, i, x, i);
    }
  }
  return One(std::move(v));
}

Result FoldConstantOfShape(const Op& op, const std::vector<FoldInput>& in) {
  auto dims = IntList(in.empty() ? FoldInput{} : in[0]);
  if (!dims) return std::nullopt;
  for (int64_t d : *dims) {
    if (d < 0) return std::nullopt;
  }
  if (Product(*dims) > kMaxFoldedElements) return std::nullopt;
  DataType dtype = DataType::kFloat32;
  double fill = 0;
  if (const AttributeValue* a = op.FindAttribute("value");
      a != nullptr && a->tensor != nullptr) {
    dtype = a->tensor->dtype;
    if (!Supported(dtype) || a->tensor->raw.size() <
                                 static_cast<size_t>(DataTypeBytes(dtype))) {
      return std::nullopt;
    }
    const char* p = a->tensor->raw.data();
    switch (dtype) {
      case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); fill = f; break; }
      case DataType::kFloat64: { std::memcpy(&fill, p, 8); break; }
      case DataType::kInt32: { int32_t x; std::memcpy(&x, p, 4); fill = x; break; }
      case DataType::kInt64: { int64_t x; std::memcpy(&x, p, 8); fill = static_cast<double>(x); break; }
      default: fill = static_cast<unsigned char>(p[0]); break;
    }
  }
  FoldedValue v = MakeLike(dtype, *dims);
  for (int64_t i = 0; i < v.size(); ++i) {
    if (v.is_integral()) {
      v.ints[i] = SaturatingInt64(fill);
    } else {
      v.reals[i] = fill;
    }
  }
  return One(std::move(v));
}

Result FoldGather(const Op& op, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 2)) return std::nullopt;
  const FoldedValue& data = *in[0].value;
  const FoldedValue& indices = *in[1].value;
  int64_t rank = static_cast<int64_t>(data.dims.size());
  if (rank == 0) return std::nullopt;
  int64_t axis = NormalizeAxis(op.IntAttribute("axis", 0), rank);
  if (axis < 0 || axis >= rank) return std::nullopt;
  std::vector<int64_t> dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  FoldedValue v = MakeLike(data.dtype, dims);
  int64_t outer = Product({data.dims.begin(), data.dims.begin() + axis});
  int64_t inner = Product({data.dims.begin() + axis + 1, data.dims.end()});
  int64_t n_idx = indices.size();
  int64_t extent = data.dims[axis];
  int64_t o = 0;
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t j = 0; j < n_idx; ++j) {
      int64_t idx = IntAt(indices, j);
      if (idx < 0) idx += extent;
      if (idx < 0 || idx >= extent) return std::nullopt;
      for (int64_t b = 0; b < inner; ++b) {
        SetFrom(v, o++, data, (a * extent + idx) * inner + b);
      }
    }
  }
  return One(std::move(v));
}

std::optional<std::vector<int64_t>> AxesOf(const Op& op,
                                           const std::vector<FoldInput>& in) {
  if (in.size() > 1) {
    if (in[1].value == nullptr && in[1].shape != nullptr) return std::nullopt;
    if (in[1].value != nullptr) return IntList(in[1]);
  }
  return op.IntsAttribute("axes");
}

Result FoldUnsqueeze(const Op& op, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 1)) return std::nullopt;
  auto axes = AxesOf(op, in);
  if (!axes || axes->empty()) return std::nullopt;
  FoldedValue v = *in[0].value;
  int64_t rank = static_cast<int64_t>(v.dims.size() + axes->size());
  std::vector<int64_t> sorted;
  for (int64_t a : *axes) sorted.push_back(NormalizeAxis(a, rank));
  std::sort(sorted.begin(), sorted.end());
  for (int64_t a : sorted) {
    if (a < 0 || a > static_cast<int64_t>(v.dims.size())) return std::nullopt;
    v.dims.insert(v.dims.begin() + a, 1);
  }
  return One(std::move(v));
}

Result FoldSqueeze(const Op& op, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 1)) return std::nullopt;
  auto axes = AxesOf(op, in);
  if (!axes) return std::nullopt;
  FoldedValue v = *in[0].value;
  int64_t rank = static_cast<int64_t>(v.dims.size());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i) {
    bool drop = axes->empty() ? v.dims[i] == 1 : false;
    for (int64_t a : *axes) drop |= NormalizeAxis(a, rank) == i;
    if (drop && v.dims[i] != 1) return std::nullopt;
    if (!drop) dims.push_back(v.dims[i]);
  }
  v.dims = dims;
  return One(std::move(v));
}

Result FoldConcat(const Op& op, const std::vector<FoldInput>& in) {
  if (in.empty() || !AllConstant(in, in.size())) return std::nullopt;
  const FoldedValue& first = *in[0].value;
  int64_t rank = static_cast<int64_t>(first.dims.size());
  if (rank == 0) return std::nullopt;
  int64_t axis = NormalizeAxis(op.IntAttribute("axis", 0), rank);
  if (axis < 0 || axis >= rank) return std::nullopt;
  std::vector<int64_t> dims = first.dims;
  dims[axis] = 0;
  for (const FoldInput& x : in) {
    if (static_cast<int64_t>(x.value->dims.size()) != rank) return std::nullopt;
    dims[axis] += x.value->dims[axis];
  }
  FoldedValue v = MakeLike(first.dtype, dims);
  int64_t outer = Product({dims.begin(), dims.begin() + axis});
  int64_t o = 0;
  for (int64_t a = 0; a < outer; ++a) {
    for (const FoldInput& x : in) {
      int64_t chunk = Product({x.value->dims.begin() + axis,
                               x.value->dims.end()});
      for (int64_t b = 0; b < chunk; ++b) {
        SetFrom(v, o++, *x.value, a * chunk + b);
      }
    }
  }
  return One(std::move(v));
}

// Split along `axis` by the sizes of input 1 (or the `split` attribute,
// before opset 13), else into as many equal parts as the node has outputs
// (the last smaller when they do not divide, as opset 18 defines).
Result FoldSplit(const Op& op, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 1) || op.outputs.empty()) return std::nullopt;
  const FoldedValue& data = *in[0].value;
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  const int64_t axis = NormalizeAxis(op.IntAttribute("axis", 0), rank);
  if (axis < 0 || axis >= rank) return std::nullopt;
  const int64_t parts = static_cast<int64_t>(op.outputs.size());
  std::vector<int64_t> sizes;
  if (in.size() > 1 && in[1].value != nullptr) {
    sizes = *IntList(in[1]);
  } else if (const AttributeValue* a = op.FindAttribute("split")) {
    sizes = a->ints;
  } else {
    const int64_t each = (data.dims[axis] + parts - 1) / parts;
    for (int64_t k = 0, left = data.dims[axis]; k < parts; ++k) {
      sizes.push_back(std::min(each, left));
      left -= sizes.back();
    }
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0) return std::nullopt;
    total += size;
  }
  if (static_cast<int64_t>(sizes.size()) != parts || total != data.dims[axis]) {
    return std::nullopt;
  }
  const int64_t outer = Product({data.dims.begin(), data.dims.begin() + axis});
  const int64_t inner =
      Product({data.dims.begin() + axis + 1, data.dims.end()});
  std::vector<FoldedValue> out;
  int64_t start = 0;
  for (int64_t size : sizes) {
    std::vector<int64_t> dims = data.dims;
    dims[axis] = size;
    FoldedValue v = MakeLike(data.dtype, dims);
    int64_t o = 0;
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t b = 0; b < size * inner; ++b) {
        SetFrom(v, o++, data, (a * data.dims[axis] + start) * inner + b);
      }
    }
    out.push_back(std::move(v));
    start += size;
  }
  return out;
}

Result FoldSlice(const Op& op, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 1)) return std::nullopt;
  const FoldedValue& data = *in[0].value;
  int64_t rank = static_cast<int64_t>(data.dims.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (in.size() >= 3) {  // opset >= 10: inputs
    for (size_t k = 1; k < in.size(); ++k) {
      if (in[k].value == nullptr && (in[k].shape != nullptr || k < 3)) {
        return std::nullopt;
      }
    }
    starts = *IntList(in[1]);
    ends = *IntList(in[2]);
    if (in.size() > 3 && in[3].value) axes = *IntList(in[3]);
    if (in.size() > 4 && in[4].value) steps = *IntList(in[4]);
  } else {
    starts = op.IntsAttribute("starts");
    ends = op.IntsAttribute("ends");
    axes = op.IntsAttribute("axes");
  }
  if (starts.size() != ends.size()) return std::nullopt;
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(i);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return std::nullopt;
  }
  std::vector<int64_t> begin(rank, 0), step(rank, 1), dims = data.dims;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = NormalizeAxis(axes[i], rank);
    if (a < 0 || a >= rank || steps[i] == 0) return std::nullopt;
    int64_t n = data.dims[a];
    int64_t s = starts[i] < 0 ? starts[i] + n : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + n : ends[i];
    if (steps[i] > 0) {
      s = std::clamp(s, int64_t{0}, n);
      e = std::clamp(e, int64_t{0}, n);
      dims[a] = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
    } else {
      s = std::clamp(s, int64_t{0}, n - 1);
      e = std::clamp(e, int64_t{-1}, n - 1);
      dims[a] = s > e ? (s - e - steps[i] - 1) / (-steps[i]) : 0;
    }
    begin[a] = s;
    step[a] = steps[i];
  }
  FoldedValue v = MakeLike(data.dtype, dims);
  std::vector<int64_t> strides = Strides(data.dims), index;
  for (int64_t o = 0; o < v.size(); ++o) {
    Unravel(o, dims, &index);
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d) {
      src += (begin[d] + index[d] * step[d]) * strides[d];
    }
    SetFrom(v, o, data, src);
  }
  return One(std::move(v));
}

Result FoldReshape(const Op& op, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 2)) return std::nullopt;
  FoldedValue v = *in[0].value;
  std::vector<int64_t> shape = *IntList(in[1]);
  bool allow_zero = op.IntAttribute("allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      if (i >= v.dims.size()) return std::nullopt;
      shape[i] = v.dims[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0) return std::nullopt;
    shape[infer] = v.size() / known;
  }
  if (Product(shape) != v.size()) return std::nullopt;
  v.dims = shape;
  return One(std::move(v));
}

Result FoldExpand(const Op&, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 2)) return std::nullopt;
  FoldedValue target;
  target.dims = *IntList(in[1]);
  auto dims = BroadcastShape({in[0].value, &target});
  if (!dims || Product(*dims) > kMaxFoldedElements) return std::nullopt;
  FoldedValue v = MakeLike(in[0].value->dtype, *dims);
  std::vector<int64_t> index;
  for (int64_t o = 0; o < v.size(); ++o) {
    Unravel(o, *dims, &index);
    SetFrom(v, o, *in[0].value, BroadcastIndex(*in[0].value, index));
  }
  return One(std::move(v));
}

Result FoldRange(const Op&, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 3)) return std::nullopt;
  const FoldedValue& start = *in[0].value;
  double s = RealAt(start, 0), limit = RealAt(*in[1].value, 0),
         delta = RealAt(*in[2].value, 0);
  if (delta == 0) return std::nullopt;
  double count = std::max(0.0, std::ceil((limit - s) / delta));
  if (count > kMaxFoldedElements) return std::nullopt;
  FoldedValue v = MakeLike(start.dtype, {static_cast<int64_t>(count)});
  for (int64_t i = 0; i < v.size(); ++i) {
    if (v.is_integral()) {
      int64_t step = 0;
      if (__builtin_mul_overflow(i, IntAt(*in[2].value, 0), &step) ||
          __builtin_add_overflow(IntAt(start, 0), step, &v.ints[i])) {
        return std::nullopt;
      }
    } else {
      v.reals[i] = s + static_cast<double>(i) * delta;
    }
  }
  return One(std::move(v));
}

const FoldTable& Folds() {
  static const auto* table = [] {
    auto* table = new FoldTable{
        {"Shape", FoldShape},
        {"Size", FoldSize},
        {"Identity", FoldIdentity},
        {"Cast", FoldCast},
        {"ConstantOfShape", FoldConstantOfShape},
        {"Gather", FoldGather},
        {"Unsqueeze", FoldUnsqueeze},
        {"Squeeze", FoldSqueeze},
        {"Concat", FoldConcat},
        {"Slice", FoldSlice},
        {"Split", FoldSplit},
        {"Reshape", FoldReshape},
        {"Expand", FoldExpand},
        {"Range", FoldRange},
    };
    folding::AddArithmeticFolds(*table);
    return table;
  }();
  return *table;
}

}  // namespace

TensorData FoldedValue::ToTensorData() const {
  TensorData data;
  data.dtype = dtype;
  data.dims = dims;
  for (int64_t i = 0; i < size(); ++i) {
    switch (dtype) {
      case DataType::kFloat32: AppendRaw(&data.raw, static_cast<float>(reals[i])); break;
      case DataType::kFloat64: AppendRaw(&data.raw, reals[i]); break;
      case DataType::kInt32: AppendRaw(&data.raw, static_cast<int32_t>(ints[i])); break;
      case DataType::kInt64: AppendRaw(&data.raw, ints[i]); break;
      case DataType::kInt8: AppendRaw(&data.raw, static_cast<int8_t>(ints[i])); break;
      default: AppendRaw(&data.raw, static_cast<uint8_t>(ints[i])); break;
    }
  }
  return data;
}

std::optional<std::vector<FoldedValue>> FoldNode(
    const Op& op, const std::vector<FoldInput>& inputs) {
  if (!op.domain.empty() && op.domain != "ai.onnx") return std::nullopt;
  const FoldTable& table = Folds();
  auto it = table.find(op.op_type);
  if (it == table.end()) return std::nullopt;
  for (const FoldInput& in : inputs) {
    if (in.value != nullptr && (!Supported(in.value->dtype) ||
                                in.value->size() > kMaxFoldedElements)) {
      return std::nullopt;
    }
  }
  Result result = it->second(op, inputs);
  if (result) {
    for (const FoldedValue& v : *result) {
      if (!Supported(v.dtype) || v.size() > kMaxFoldedElements) {
        return std::nullopt;
      }
    }
  }
  return result;
}

}  // namespace placer
