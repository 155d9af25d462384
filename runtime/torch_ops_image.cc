// Kernels of the image models users train now (diffusion UNets):
// InstanceNormalization (what torch exports GroupNorm to),
// GroupNormalization (opset 18), ConvTranspose and Resize.
#include "absl/strings/str_cat.h"
#include "runtime/torch_kernel.h"

namespace placer::kernels {
namespace {

namespace F = torch::nn::functional;

double Epsilon(const Op& op) {
  const AttributeValue* eps = op.FindAttribute("epsilon");
  return eps != nullptr ? eps->f : 1e-5;
}

// [C] as [1, C, 1, ...] for an input of rank `rank`.
torch::Tensor PerChannel(const torch::Tensor& v, int64_t rank) {
  std::vector<int64_t> shape(rank, 1);
  shape[1] = v.numel();
  return v.reshape(shape);
}

Result InstanceNormalization(const Op& op, const Tensors& in) {
  return Tensors{torch::instance_norm(in[0], in[1], in[2], {}, {},
                                      /*use_input_stats=*/true,
                                      /*momentum=*/0.0, Epsilon(op),
                                      /*cudnn_enabled=*/false)};
}

// Opset 18: scale and bias per group ([num_groups]); opset 21 writes them
// per channel ([C]); either is taken.
Result GroupNormalization(const Op& op, const Tensors& in) {
  const int64_t groups = op.IntAttribute("num_groups", 0);
  const int64_t channels = in[0].size(1);
  if (groups <= 0 || channels % groups != 0) {
    return Unsupported(op, absl::StrCat("num_groups ", groups, " for ",
                                        channels, " channels"));
  }
  torch::Tensor scale = in[1], bias = in[2];
  if (scale.numel() == groups && groups != channels) {
    scale = scale.repeat_interleave(channels / groups);
    bias = bias.repeat_interleave(channels / groups);
  }
  torch::Tensor y = torch::group_norm(in[0], groups, {}, {}, Epsilon(op));
  return Tensors{y * PerChannel(scale, y.dim()) + PerChannel(bias, y.dim())};
}

std::vector<int64_t> AttributeOr(const Op& op, const char* name, size_t dims,
                                 int64_t value) {
  std::vector<int64_t> v = op.IntsAttribute(name);
  return v.empty() ? std::vector<int64_t>(dims, value) : v;
}

Result ConvTranspose(const Op& op, const Tensors& in) {
  const size_t dims = in[1].dim() - 2;
  const AttributeValue* auto_pad = op.FindAttribute("auto_pad");
  if (auto_pad != nullptr && auto_pad->s != "NOTSET") {
    return Unsupported(op, "auto_pad " + auto_pad->s);
  }
  if (op.FindAttribute("output_shape") != nullptr) {
    return Unsupported(op, "output_shape (give pads and output_padding)");
  }
  std::vector<int64_t> pads = AttributeOr(op, "pads", 2 * dims, 0);
  for (size_t k = 0; k < dims; ++k) {
    if (pads[k] != pads[k + dims]) return Unsupported(op, "asymmetric pads");
  }
  pads.resize(dims);
  torch::Tensor bias = Present(in, 2) ? in[2] : torch::Tensor();
  return Tensors{torch::convolution(
      in[0], in[1], bias, AttributeOr(op, "strides", dims, 1), pads,
      AttributeOr(op, "dilations", dims, 1), /*transposed=*/true,
      AttributeOr(op, "output_padding", dims, 0), op.IntAttribute("group", 1))};
}

std::string StringAttribute(const Op& op, const char* name,
                            const char* default_value) {
  const AttributeValue* a = op.FindAttribute(name);
  return a != nullptr ? a->s : default_value;
}

// Nearest with PyTorch's rule (asymmetric coordinates, floor) and linear
// with half_pixel or align_corners: what F.interpolate exports to.
Result Resize(const Op& op, const Tensors& in) {
  const torch::Tensor& x = in[0];
  const int64_t spatial = x.dim() - 2;
  if (spatial < 1 || spatial > 3) {
    return Unsupported(op, absl::StrCat("rank ", x.dim()));
  }
  std::vector<int64_t> size;
  if (Present(in, 3) && in[3].numel() > 0) {
    size = IntsOf(in[3]);
  } else if (Present(in, 2) && in[2].numel() > 0) {
    torch::Tensor scales = in[2].to(torch::kDouble).contiguous().cpu();
    for (int64_t d = 0; d < x.dim(); ++d) {
      size.push_back(static_cast<int64_t>(
          std::floor(x.size(d) * scales.data_ptr<double>()[d])));
    }
  } else {
    return Unsupported(op, "neither scales nor sizes");
  }
  if (static_cast<int64_t>(size.size()) != x.dim() || size[0] != x.size(0) ||
      size[1] != x.size(1)) {
    return Unsupported(op, "resizing the batch or channel dim");
  }
  const std::vector<int64_t> out(size.begin() + 2, size.end());
  const std::string mode = StringAttribute(op, "mode", "nearest");
  const std::string coordinates =
      StringAttribute(op, "coordinate_transformation_mode", "half_pixel");
  F::InterpolateFuncOptions options;
  options.size(out);
  if (mode == "nearest") {
    const std::string rounding =
        StringAttribute(op, "nearest_mode", "round_prefer_floor");
    if (coordinates != "asymmetric" || rounding != "floor") {
      return Unsupported(
          op, absl::StrCat("nearest with ", coordinates, "/", rounding));
    }
    options.mode(torch::kNearest);
  } else if (mode == "linear") {
    if (coordinates == "align_corners") {
      options.align_corners(true);
    } else if (coordinates == "half_pixel" ||
               coordinates == "pytorch_half_pixel") {
      options.align_corners(false);
    } else {
      return Unsupported(op, "linear with " + coordinates);
    }
    if (spatial == 1) options.mode(torch::kLinear);
    if (spatial == 2) options.mode(torch::kBilinear);
    if (spatial == 3) options.mode(torch::kTrilinear);
  } else {
    return Unsupported(op, "mode " + mode);
  }
  return Tensors{F::interpolate(x, options)};
}

}  // namespace

void AddImageKernels(KernelTable& table) {
  table["InstanceNormalization"] = InstanceNormalization;
  table["GroupNormalization"] = GroupNormalization;
  table["ConvTranspose"] = ConvTranspose;
  table["Resize"] = Resize;
}

}  // namespace placer::kernels
