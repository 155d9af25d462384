// The table of LibTorch kernels, one per ONNX op type the executor runs,
// each a few lines that follow the ONNX operator spec: here elementwise,
// linear algebra, shapes and reductions, with the dispatch and the helpers
// kernels share (layers: torch_ops_layers.cc; image and indexing kernels:
// torch_ops_image.cc, torch_ops_indexing.cc).
#include "runtime/torch_ops.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "runtime/torch_kernel.h"

namespace placer {
namespace kernels {

absl::Status Unsupported(const Op& op, const std::string& what) {
  return absl::UnimplementedError(absl::StrCat(
      "node '", op.key, "' (", op.op_type, "): ", what));
}

bool Present(const Tensors& in, size_t k) {
  return k < in.size() && in[k].defined();
}

std::vector<int64_t> IntsOf(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kLong).contiguous().cpu();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

int64_t Axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace kernels

namespace {

using kernels::Axis;
using kernels::IntsOf;
using kernels::Kernel;
using kernels::Present;
using kernels::Result;
using kernels::Tensors;
using kernels::Unsupported;

// Axes from input k (opset >= 13) or the "axes" attribute.
std::vector<int64_t> AxesOf(const Op& op, const Tensors& in, size_t k) {
  if (Present(in, k)) return IntsOf(in[k]);
  return op.IntsAttribute("axes");
}

template <torch::Tensor (*F)(const torch::Tensor&)>
Result Unary(const Op&, const Tensors& in) {
  return Tensors{F(in[0])};
}

torch::Tensor ReluF(const torch::Tensor& x) { return torch::relu(x); }
torch::Tensor SigmoidF(const torch::Tensor& x) { return torch::sigmoid(x); }
torch::Tensor TanhF(const torch::Tensor& x) { return torch::tanh(x); }
torch::Tensor ExpF(const torch::Tensor& x) { return torch::exp(x); }
torch::Tensor LogF(const torch::Tensor& x) { return torch::log(x); }
torch::Tensor SqrtF(const torch::Tensor& x) { return torch::sqrt(x); }
torch::Tensor NegF(const torch::Tensor& x) { return torch::neg(x); }
torch::Tensor ErfF(const torch::Tensor& x) { return torch::erf(x); }
torch::Tensor AbsF(const torch::Tensor& x) { return torch::abs(x); }
torch::Tensor ReciprocalF(const torch::Tensor& x) { return torch::reciprocal(x); }
torch::Tensor IdentityF(const torch::Tensor& x) { return x; }
torch::Tensor SinF(const torch::Tensor& x) { return torch::sin(x); }
torch::Tensor CosF(const torch::Tensor& x) { return torch::cos(x); }

Result Add(const Op&, const Tensors& in) { return Tensors{in[0] + in[1]}; }
Result Sub(const Op&, const Tensors& in) { return Tensors{in[0] - in[1]}; }
Result Mul(const Op&, const Tensors& in) { return Tensors{in[0] * in[1]}; }
Result Div(const Op&, const Tensors& in) {
  if (!in[0].is_floating_point()) {
    return Tensors{torch::div(in[0], in[1], "trunc")};
  }
  return Tensors{in[0] / in[1]};
}
// A one-element exponent that needs no gradient is a number: the exporter's
// constant for what the model wrote as x.pow(2), which autograd's
// pow(Tensor, Scalar) saves only x for (pow(Tensor, Tensor) also keeps the
// result, for an exponent's gradient nobody asks for).
Result Pow(const Op&, const Tensors& in) {
  if (in[1].numel() == 1 && !in[1].requires_grad()) {
    return Tensors{torch::pow(in[0], in[1].item())};
  }
  return Tensors{torch::pow(in[0], in[1])};
}

Result Sum(const Op&, const Tensors& in) {
  torch::Tensor s = in[0];
  for (size_t k = 1; k < in.size(); ++k) s = s + in[k];
  return Tensors{s};
}

Result MatMul(const Op&, const Tensors& in) {
  return Tensors{torch::matmul(in[0], in[1])};
}

Result Gemm(const Op& op, const Tensors& in) {
  torch::Tensor a = op.IntAttribute("transA", 0) ? in[0].t() : in[0];
  torch::Tensor b = op.IntAttribute("transB", 0) ? in[1].t() : in[1];
  const AttributeValue* alpha = op.FindAttribute("alpha");
  const AttributeValue* beta = op.FindAttribute("beta");
  torch::Tensor y = torch::matmul(a, b);
  if (alpha != nullptr) y = y * alpha->f;
  if (Present(in, 2)) y = y + (beta != nullptr ? in[2] * beta->f : in[2]);
  return Tensors{y};
}

Result Einsum(const Op& op, const Tensors& in) {
  const AttributeValue* eq = op.FindAttribute("equation");
  if (eq == nullptr) return Unsupported(op, "no equation");
  return Tensors{torch::einsum(eq->s, in)};
}

// Pad: pads from input 1 (opset 11+) or the attribute, [x1_begin, ...,
// x1_end, ...]; constant_value from input 2 or the attribute; axes
// (opset 18) from input 3. Modes constant (any dims, negative pads crop),
// reflect and edge (the last one to three dims, as LibTorch has them).
Result Pad(const Op& op, const Tensors& in) {
  std::vector<int64_t> pads =
      Present(in, 1) ? IntsOf(in[1]) : op.IntsAttribute("pads");
  const int64_t rank = in[0].dim();
  std::vector<int64_t> axes;
  if (Present(in, 3)) {
    for (int64_t a : IntsOf(in[3])) axes.push_back(Axis(a, rank));
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const int64_t n = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * n) {
    return Unsupported(op, "pads do not match the axes");
  }
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    begin[axes[k]] = pads[k];
    end[axes[k]] = pads[k + n];
  }
  // LibTorch's order: last dim first, (begin, end) pairs; trailing zero
  // dims dropped so reflect/edge see only the dims they pad.
  int64_t first = 0;
  while (first < rank && begin[first] == 0 && end[first] == 0) ++first;
  std::vector<int64_t> torch_pads;
  for (int64_t d = rank - 1; d >= first; --d) {
    torch_pads.push_back(begin[d]);
    torch_pads.push_back(end[d]);
  }
  const AttributeValue* mode_attr = op.FindAttribute("mode");
  const std::string mode = mode_attr != nullptr ? mode_attr->s : "constant";
  if (mode == "constant") {
    double value = 0;
    if (Present(in, 2)) {
      value = in[2].item<double>();
    } else if (const AttributeValue* v = op.FindAttribute("value")) {
      value = v->f;
    }
    return Tensors{torch::constant_pad_nd(in[0], torch_pads, value)};
  }
  const int64_t padded = static_cast<int64_t>(torch_pads.size()) / 2;
  if (padded == 0) return Tensors{in[0]};
  if (padded > 3 || rank < padded + 1) {
    return Unsupported(op, "mode " + mode + " over more than the last 3 dims");
  }
  torch::Tensor x = in[0];
  // LibTorch's reflect/replicate kernels want a batch (and channel) dim.
  while (x.dim() < padded + 2) x = x.unsqueeze(0);
  torch::Tensor y;
  if (mode == "reflect") {
    y = padded == 1 ? torch::reflection_pad1d(x, torch_pads)
        : padded == 2 ? torch::reflection_pad2d(x, torch_pads)
                      : torch::reflection_pad3d(x, torch_pads);
  } else if (mode == "edge") {
    y = padded == 1 ? torch::replication_pad1d(x, torch_pads)
        : padded == 2 ? torch::replication_pad2d(x, torch_pads)
                      : torch::replication_pad3d(x, torch_pads);
  } else {
    return Unsupported(op, "mode " + mode);
  }
  std::vector<int64_t> shape(in[0].sizes().begin(), in[0].sizes().end());
  for (int64_t d = 0; d < rank; ++d) shape[d] += begin[d] + end[d];
  return Tensors{y.reshape(shape)};
}

Result Flatten(const Op& op, const Tensors& in) {
  int64_t axis = Axis(op.IntAttribute("axis", 1), in[0].dim());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= in[0].size(d);
  return Tensors{in[0].reshape({outer, -1})};
}

Result Reshape(const Op& op, const Tensors& in) {
  std::vector<int64_t> shape = IntsOf(in[1]);
  if (!op.IntAttribute("allowzero", 0)) {
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0) shape[i] = in[0].size(i);
    }
  }
  return Tensors{in[0].reshape(shape)};
}

Result Transpose(const Op& op, const Tensors& in) {
  std::vector<int64_t> perm = op.IntsAttribute("perm");
  if (perm.empty()) {
    for (int64_t d = in[0].dim() - 1; d >= 0; --d) perm.push_back(d);
  }
  return Tensors{in[0].permute(perm)};
}

Result Concat(const Op& op, const Tensors& in) {
  return Tensors{torch::cat(in, Axis(op.IntAttribute("axis", 0), in[0].dim()))};
}

Result Split(const Op& op, const Tensors& in) {
  int64_t axis = Axis(op.IntAttribute("axis", 0), in[0].dim());
  std::vector<int64_t> sizes = Present(in, 1) ? IntsOf(in[1])
                                              : op.IntsAttribute("split");
  if (sizes.empty()) {
    int64_t parts = static_cast<int64_t>(op.outputs.size());
    int64_t n = in[0].size(axis);
    if (n % parts != 0) return Unsupported(op, "uneven split without sizes");
    sizes.assign(parts, n / parts);
  }
  return in[0].split_with_sizes(sizes, axis);
}

Result Squeeze(const Op& op, const Tensors& in) {
  std::vector<int64_t> axes = AxesOf(op, in, 1);
  torch::Tensor x = in[0];
  if (axes.empty()) return Tensors{x.squeeze()};
  std::vector<int64_t> shape;
  int64_t rank = x.dim();
  for (int64_t d = 0; d < rank; ++d) {
    bool drop = false;
    for (int64_t a : axes) drop |= Axis(a, rank) == d;
    if (!drop) shape.push_back(x.size(d));
  }
  return Tensors{x.reshape(shape)};
}

Result Unsqueeze(const Op& op, const Tensors& in) {
  std::vector<int64_t> axes = AxesOf(op, in, 1);
  int64_t rank = in[0].dim() + static_cast<int64_t>(axes.size());
  for (int64_t& a : axes) a = Axis(a, rank);
  std::sort(axes.begin(), axes.end());
  torch::Tensor x = in[0];
  for (int64_t a : axes) x = x.unsqueeze(a);
  return Tensors{x};
}

Result Gather(const Op& op, const Tensors& in) {
  int64_t axis = Axis(op.IntAttribute("axis", 0), in[0].dim());
  torch::Tensor idx = in[1].to(torch::kLong);
  idx = torch::where(idx < 0, idx + in[0].size(axis), idx);
  std::vector<int64_t> shape(in[0].sizes().begin(), in[0].sizes().begin() + axis);
  for (int64_t s : idx.sizes()) shape.push_back(s);
  shape.insert(shape.end(), in[0].sizes().begin() + axis + 1, in[0].sizes().end());
  return Tensors{in[0].index_select(axis, idx.flatten()).reshape(shape)};
}

Result Slice(const Op& op, const Tensors& in) {
  // Opset >= 10: starts, ends, axes, steps as inputs; opset 1: attributes.
  std::vector<int64_t> starts = Present(in, 1) ? IntsOf(in[1]) : op.IntsAttribute("starts");
  std::vector<int64_t> ends = Present(in, 2) ? IntsOf(in[2]) : op.IntsAttribute("ends");
  std::vector<int64_t> axes = Present(in, 3) ? IntsOf(in[3]) : op.IntsAttribute("axes");
  std::vector<int64_t> steps = Present(in, 4) ? IntsOf(in[4]) : std::vector<int64_t>();
  if (starts.size() != ends.size()) return Unsupported(op, "starts and ends differ in length");
  torch::Tensor x = in[0];
  const int64_t rank = x.dim();
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(k) : Axis(axes[k], rank);
    int64_t step = steps.empty() ? 1 : steps[k];
    if (step <= 0) return Unsupported(op, "non-positive slice steps");
    int64_t n = x.size(axis);
    int64_t start = starts[k] < 0 ? starts[k] + n : starts[k];
    int64_t end = ends[k] < 0 ? ends[k] + n : ends[k];
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, 0, n);
    x = x.slice(axis, start, std::max(start, end), step);
  }
  return Tensors{x};
}

// ReduceMean/Sum/Max/Min: axes from the attribute (or input 1 for
// ReduceSum >= 13 and the others >= 18), keepdims default 1.
template <int kKind>
Result Reduce(const Op& op, const Tensors& in) {
  std::vector<int64_t> axes = AxesOf(op, in, 1);
  bool keep = op.IntAttribute("keepdims", 1) != 0;
  const int64_t rank = in[0].dim();
  if (axes.empty()) {
    if (op.IntAttribute("noop_with_empty_axes", 0) != 0) return Tensors{in[0]};
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = Axis(a, rank);
  torch::Tensor x = in[0];
  switch (kKind) {
    // The sum over the count: what mean computes on a CPU, and what
    // autograd keeps for it since PyTorch 2 (the sizes; LibTorch 1.13's mean
    // kept its input too).
    case 0: {
      if (!x.is_floating_point()) return Tensors{x.mean(axes, keep)};
      int64_t count = 1;
      for (int64_t a : axes) count *= x.size(a);
      return Tensors{x.sum(axes, keep) / static_cast<double>(count)};
    }
    case 1: return Tensors{x.sum(axes, keep)};
    case 2: return Tensors{x.amax(axes, keep)};
    default: return Tensors{x.amin(axes, keep)};
  }
}

Result Trilu(const Op& op, const Tensors& in) {
  int64_t k = Present(in, 1) ? IntsOf(in[1])[0] : 0;
  return Tensors{op.IntAttribute("upper", 1) != 0 ? torch::triu(in[0], k)
                                                  : torch::tril(in[0], k)};
}

Result Expand(const Op&, const Tensors& in) {
  std::vector<int64_t> shape = IntsOf(in[1]);
  // ONNX broadcasts both ways: a 1 in `shape` keeps the input's size.
  const int64_t rank = std::max<int64_t>(in[0].dim(), shape.size());
  std::vector<int64_t> out(rank, 1);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t a = d - (rank - in[0].dim());
    int64_t b = d - (rank - static_cast<int64_t>(shape.size()));
    int64_t sa = a >= 0 ? in[0].size(a) : 1, sb = b >= 0 ? shape[b] : 1;
    out[d] = sa == 1 ? sb : sa;
  }
  return Tensors{in[0].expand(out)};
}

Result Equal(const Op&, const Tensors& in) { return Tensors{torch::eq(in[0], in[1])}; }
Result Less(const Op&, const Tensors& in) { return Tensors{torch::lt(in[0], in[1])}; }
Result Greater(const Op&, const Tensors& in) { return Tensors{torch::gt(in[0], in[1])}; }
Result Not(const Op&, const Tensors& in) { return Tensors{torch::logical_not(in[0])}; }
Result Max(const Op&, const Tensors& in) {
  torch::Tensor y = in[0];
  for (size_t k = 1; k < in.size(); ++k) y = torch::maximum(y, in[k]);
  return Tensors{y};
}
Result Min(const Op&, const Tensors& in) {
  torch::Tensor y = in[0];
  for (size_t k = 1; k < in.size(); ++k) y = torch::minimum(y, in[k]);
  return Tensors{y};
}

Result Clip(const Op& op, const Tensors& in) {
  c10::optional<c10::Scalar> lo, hi;
  if (Present(in, 1)) lo = in[1].item();
  if (Present(in, 2)) hi = in[2].item();
  if (const AttributeValue* a = op.FindAttribute("min")) lo = a->f;
  if (const AttributeValue* a = op.FindAttribute("max")) hi = a->f;
  return Tensors{torch::clamp(in[0], lo, hi)};
}

Result LeakyRelu(const Op& op, const Tensors& in) {
  const AttributeValue* a = op.FindAttribute("alpha");
  return Tensors{torch::leaky_relu(in[0], a != nullptr ? a->f : 0.01)};
}

Result ConstantOfShape(const Op& op, const Tensors& in) {
  std::vector<int64_t> shape = IntsOf(in[0]);
  const AttributeValue* v = op.FindAttribute("value");
  if (v != nullptr && v->tensor != nullptr) {
    ASSIGN_OR_RETURN(torch::Tensor t, TensorFromData(*v->tensor));
    return Tensors{t.reshape({}).expand(shape).clone()};
  }
  return Tensors{torch::zeros(shape)};
}

Result Range(const Op&, const Tensors& in) {
  return Tensors{torch::arange(in[0].item(), in[1].item(), in[2].item(),
                               torch::TensorOptions().dtype(in[0].scalar_type()))};
}

Result Tile(const Op&, const Tensors& in) { return Tensors{in[0].repeat(IntsOf(in[1]))}; }

Result Cast(const Op& op, const Tensors& in) {
  DataType to = DataTypeFromOnnx(op.IntAttribute("to", 0));
  if (DataTypeBytes(to) == 0) return Unsupported(op, "cast target type");
  return Tensors{in[0].to(ToTorchType(to))};
}

Result Where(const Op&, const Tensors& in) {
  return Tensors{torch::where(in[0].to(torch::kBool), in[1], in[2])};
}

// A Constant the importer did not fold (over its size limit, or external
// data it could not read): its value, or the reason it has none.
Result Constant(const Op& op, const Tensors&) {
  for (const auto& [name, a] : op.attributes) {
    if (a.kind == AttributeValue::Kind::kTensor && a.tensor != nullptr) {
      absl::StatusOr<torch::Tensor> t = TensorFromData(*a.tensor);
      if (!t.ok()) return Unsupported(op, std::string(t.status().message()));
      return Tensors{*t};
    }
    if (name == "value_float") {
      return Tensors{torch::tensor(static_cast<float>(a.f))};
    }
    if (name == "value_int") return Tensors{torch::tensor(a.i, torch::kLong)};
    if (name == "value_floats") {
      return Tensors{torch::tensor(a.floats, torch::kDouble).to(torch::kFloat)};
    }
    if (name == "value_ints")
      return Tensors{torch::tensor(a.ints, torch::kLong)};
  }
  return Unsupported(op, "no value attribute");
}

Result Shape(const Op& op, const Tensors& in) {
  int64_t rank = in[0].dim();
  int64_t start = std::clamp(Axis(op.IntAttribute("start", 0), rank),
                             int64_t{0}, rank);
  int64_t end = std::clamp(Axis(op.IntAttribute("end", rank), rank),
                           int64_t{0}, rank);
  std::vector<int64_t> dims(in[0].sizes().begin() + start,
                            in[0].sizes().begin() + std::max(start, end));
  return Tensors{torch::tensor(dims, torch::kLong)};
}

const kernels::KernelTable& Kernels() {
  static const auto* table = [] {
    auto* table = new kernels::KernelTable{
        {"Relu", Unary<ReluF>},
        {"Sigmoid", Unary<SigmoidF>},
        {"Tanh", Unary<TanhF>},
        {"Exp", Unary<ExpF>},
        {"Log", Unary<LogF>},
        {"Sqrt", Unary<SqrtF>},
        {"Neg", Unary<NegF>},
        {"Erf", Unary<ErfF>},
        {"Abs", Unary<AbsF>},
        {"Reciprocal", Unary<ReciprocalF>},
        {"Identity", Unary<IdentityF>},
        {"Add", Add},
        {"Sub", Sub},
        {"Mul", Mul},
        {"Div", Div},
        {"Pow", Pow},
        {"Sum", Sum},
        {"MatMul", MatMul},
        {"Gemm", Gemm},
        {"Pad", Pad},
        {"Einsum", Einsum},
        {"Flatten", Flatten},
        {"Reshape", Reshape},
        {"Transpose", Transpose},
        {"Concat", Concat},
        {"Split", Split},
        {"Squeeze", Squeeze},
        {"Unsqueeze", Unsqueeze},
        {"Gather", Gather},
        {"Cast", Cast},
        {"Where", Where},
        {"Shape", Shape},
        {"Slice", Slice},
        {"ReduceMean", Reduce<0>},
        {"ReduceSum", Reduce<1>},
        {"ReduceMax", Reduce<2>},
        {"ReduceMin", Reduce<3>},
        {"Trilu", Trilu},
        {"Expand", Expand},
        {"Equal", Equal},
        {"Less", Less},
        {"Greater", Greater},
        {"Not", Not},
        {"Max", Max},
        {"Min", Min},
        {"Clip", Clip},
        {"LeakyRelu", LeakyRelu},
        {"ConstantOfShape", ConstantOfShape},
        {"Range", Range},
        {"Tile", Tile},
        {"Constant", Constant},
        {"Sin", Unary<SinF>},
        {"Cos", Unary<CosF>},
    };
    kernels::AddLayerKernels(*table);
    kernels::AddImageKernels(*table);
    kernels::AddIndexingKernels(*table);
    kernels::AddAttentionKernels(*table);
    kernels::AddFusedRegionKernels(*table);
    return table;
  }();
  return *table;
}

}  // namespace

torch::ScalarType ToTorchType(DataType type) {
  switch (type) {
    case DataType::kFloat32: return torch::kFloat;
    case DataType::kFloat16: return torch::kHalf;
    case DataType::kBFloat16: return torch::kBFloat16;
    case DataType::kFloat64: return torch::kDouble;
    case DataType::kInt8: return torch::kChar;
    case DataType::kUInt8: return torch::kByte;
    case DataType::kInt16: return torch::kShort;
    case DataType::kInt32: return torch::kInt;
    case DataType::kInt64: return torch::kLong;
    case DataType::kBool: return torch::kBool;
    default: return torch::kFloat;
  }
}

absl::StatusOr<torch::Tensor> TensorFromData(const TensorData& data) {
  int64_t width = DataTypeBytes(data.dtype);
  int64_t n = 1;
  for (int64_t d : data.dims) n *= d;
  if (width == 0 || data.dtype == DataType::kUInt16 ||
      data.dtype == DataType::kUInt32 || data.dtype == DataType::kUInt64 ||
      data.dtype == DataType::kComplex64 ||
      data.dtype == DataType::kComplex128) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor type ", DataTypeName(data.dtype), " is not supported"));
  }
  if (static_cast<int64_t>(data.raw.size()) != n * width) {
    if (!data.external_location.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "its values are external data '", data.external_location,
          "', which is not beside the model (or is shorter than the tensor)"));
    }
    return absl::FailedPreconditionError(
        "tensor data not loaded (external data?)");
  }
  torch::Tensor t = torch::empty(data.dims, ToTorchType(data.dtype));
  std::memcpy(t.data_ptr(), data.raw.data(), data.raw.size());
  return t;
}

std::vector<torch::Tensor> MakeGradientLeaves(std::vector<torch::Tensor>& inputs,
                                              const std::vector<bool>& needs) {
  std::vector<torch::Tensor> leaves(inputs.size());
  for (size_t k = 0; k < inputs.size() && k < needs.size(); ++k) {
    if (needs[k] && inputs[k].defined() && inputs[k].is_floating_point()) {
      inputs[k] = inputs[k].detach().requires_grad_(true);
      leaves[k] = inputs[k];
    }
  }
  return leaves;
}

std::vector<std::string> TorchKernelOpTypes() {
  std::vector<std::string> types;
  for (const auto& [type, kernel] : Kernels()) types.push_back(type);
  std::sort(types.begin(), types.end());
  return types;
}

bool HasTorchKernel(absl::string_view domain, absl::string_view op_type) {
  if (!IsTableDomain(domain)) return false;
  return Kernels().contains(op_type);
}

torch::Tensor OwnBytes(const torch::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return t;
  if (!t.is_contiguous()) return t.contiguous();
  if (static_cast<size_t>(t.nbytes()) < t.storage().nbytes()) return t.clone();
  return t;
}

absl::StatusOr<std::vector<torch::Tensor>> RunTorchOp(
    const Op& op, const std::vector<torch::Tensor>& inputs) {
  if (!HasTorchKernel(op.domain, op.op_type)) {
    return Unsupported(op, "no LibTorch kernel for this op type");
  }
  try {
    Result results = Kernels().at(op.op_type)(op, inputs);
    if (results.ok()) {
      for (torch::Tensor& t : *results) t = OwnBytes(t);
    }
    return results;
  } catch (const std::exception& e) {
    return TorchErrorStatus(
        e, absl::StrCat("node '", op.key, "' (", op.op_type, "): "));
  }
}


}  // namespace placer
