// Kernels that pick and place by index, as mixtures of experts and masks
// use them: TopK, GatherElements, ScatterElements, ScatterND, CumSum.
#include "absl/strings/str_cat.h"
#include "runtime/torch_kernel.h"

namespace placer::kernels {
namespace {

// ONNX indices may count from the end of `dim`; torch's may not.
torch::Tensor Wrapped(const torch::Tensor& index, int64_t dim) {
  torch::Tensor i = index.to(torch::kLong);
  return torch::where(i < 0, i + dim, i);
}

Result TopK(const Op& op, const Tensors& in) {
  const int64_t axis = Axis(op.IntAttribute("axis", -1), in[0].dim());
  const int64_t k = IntsOf(in[1]).at(0);
  auto [values, indices] =
      torch::topk(in[0], k, axis, op.IntAttribute("largest", 1) != 0,
                  op.IntAttribute("sorted", 1) != 0);
  return Tensors{values, indices};
}

Result GatherElements(const Op& op, const Tensors& in) {
  const int64_t axis = Axis(op.IntAttribute("axis", 0), in[0].dim());
  return Tensors{torch::gather(in[0], axis, Wrapped(in[1], in[0].size(axis)))};
}

std::string Reduction(const Op& op) {
  const AttributeValue* a = op.FindAttribute("reduction");
  return a != nullptr ? a->s : "none";
}

Result ScatterElements(const Op& op, const Tensors& in) {
  const int64_t axis = Axis(op.IntAttribute("axis", 0), in[0].dim());
  torch::Tensor index = Wrapped(in[1], in[0].size(axis));
  const std::string reduction = Reduction(op);
  if (reduction == "none") {
    return Tensors{torch::scatter(in[0], axis, index, in[2])};
  }
  if (reduction == "add") {
    return Tensors{torch::scatter_add(in[0], axis, index, in[2])};
  }
  return Unsupported(op, "reduction " + reduction);
}

// indices [..., k] address data's first k dims; updates are
// indices.shape[:-1] + data.shape[k:].
Result ScatterND(const Op& op, const Tensors& in) {
  const torch::Tensor& data = in[0];
  const int64_t k = in[1].size(-1);
  if (k > data.dim()) return Unsupported(op, "indices deeper than the data");
  torch::List<c10::optional<torch::Tensor>> index;
  for (int64_t j = 0; j < k; ++j) {
    index.push_back(Wrapped(in[1].select(-1, j), data.size(j)));
  }
  const std::string reduction = Reduction(op);
  if (reduction != "none" && reduction != "add") {
    return Unsupported(op, "reduction " + reduction);
  }
  return Tensors{torch::index_put(data, index, in[2],
                                  /*accumulate=*/reduction == "add")};
}

Result CumSum(const Op& op, const Tensors& in) {
  const int64_t axis = Axis(IntsOf(in[1]).at(0), in[0].dim());
  torch::Tensor x = in[0];
  const bool reverse = op.IntAttribute("reverse", 0) != 0;
  if (reverse) x = x.flip(axis);
  torch::Tensor y = torch::cumsum(x, axis);
  if (op.IntAttribute("exclusive", 0) != 0) y = y - x;
  if (reverse) y = y.flip(axis);
  return Tensors{y};
}

}  // namespace

void AddIndexingKernels(KernelTable& table) {
  table["TopK"] = TopK;
  table["GatherElements"] = GatherElements;
  table["ScatterElements"] = ScatterElements;
  table["ScatterND"] = ScatterND;
  table["CumSum"] = CumSum;
}

}  // namespace placer::kernels
