// Ops whose parts run collectives of their tensor-parallel group inside
// them (runtime/strategy_tensor.cc runs the others): the
// vocabulary-parallel cross-entropy and a softmax over a split axis.
#include <utility>
#include <vector>

#include "base/status_helpers.h"
#include "runtime/strategy_executor_impl.h"
#include "runtime/torch_ops.h"

namespace placer {

absl::StatusOr<std::vector<torch::Tensor>>
TorchStrategyExecutor::VocabularyParallelLoss(
    int n, int j, int d, const std::vector<torch::Tensor>& inputs, int pass,
    TensorParallelSaved* kept) {
  // Megatron-LM's vocabulary-parallel cross-entropy: each device holds a
  // 1/T of every row's scores; the rows' maxima and sums of exponentials
  // are allreduced, and each device's loss is its part of the mean (the
  // log-sum-exp over T, less the target's score where this device holds
  // it): a partial sum of the loss.
  const Op& op = graph_.op(view_.node(n).forward_op);
  const int r = tensor_rank_of_device_[d];
  torch::NoGradGuard no_grad;
  const torch::ScalarType type = inputs[0].scalar_type();
  const torch::Tensor scores = inputs[0].to(torch::kFloat);
  const int64_t classes = scores.size(1);
  const int64_t ignore = op.IntAttribute("ignore_index", -100);
  torch::Tensor labels = inputs[1].to(torch::kLong);
  const torch::Tensor valid = labels != ignore;
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> maxima,
                   FromGroup(j, n, pass + kInsideSite, d, std::get<0>(scores.max(1))));
  torch::Tensor top = maxima[0];
  for (size_t q = 1; q < maxima.size(); ++q) top = torch::maximum(top, maxima[q]);
  // In place where it can: the loss holds one more block of the scores'
  // size, which becomes its gradient.
  torch::Tensor gradient = torch::sub(scores, top.unsqueeze(1)).exp_();
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> sums,
                   FromGroup(j, n, pass + kInsideSite + 1, d, gradient.sum(1)));
  const torch::Tensor total = Sum(sums);
  const torch::Tensor log_total = torch::log(total) + top;
  const torch::Tensor local = labels - classes * r;
  const torch::Tensor mine = valid.logical_and(local >= 0)
                                 .logical_and(local < classes);
  const torch::Tensor index =
      torch::where(mine, local, torch::zeros_like(local)).unsqueeze(1);
  const torch::Tensor target =
      scores.gather(1, index).squeeze(1) * mine.to(torch::kFloat);
  const torch::Tensor count =
      torch::clamp_min(valid.sum().to(torch::kFloat), 1.0);
  const torch::Tensor per_row =
      (log_total / static_cast<double>(T_) - target) * valid.to(torch::kFloat);
  torch::Tensor loss = per_row.sum() / count;
  // Its gradient per unit of the loss's: (softmax - one-hot) / count.
  gradient.div_(total.unsqueeze(1));
  gradient.scatter_add_(1, index, -mine.to(torch::kFloat).unsqueeze(1));
  gradient.mul_((valid.to(torch::kFloat) / count).unsqueeze(1));
  kept->gradient = gradient.to(type);
  // Each output in its step type (the loss an fp32 op's), as ForwardOp
  // casts.
  auto typed = [&](const torch::Tensor& t, int k) {
    const int out = op.outputs[k];
    return precision_.tensor_types.empty() || out < 0
               ? t.to(type)
               : t.to(ToTorchType(precision_.tensor_types[out]));
  };
  std::vector<torch::Tensor> outputs{typed(loss, 0)};
  if (op.outputs.size() > 1) {
    outputs.push_back(typed(scores - log_total.unsqueeze(1), 1));
  }
  return outputs;
}

absl::StatusOr<std::vector<torch::Tensor>> TorchStrategyExecutor::SplitSoftmax(
    int n, int j, int d, const torch::Tensor& input, int pass,
    TensorParallelSaved* kept) {
  // Over the axis the group splits: the maxima and sums of exponentials
  // allreduced (Megatron-LM's vocabulary-parallel softmax).
  const Op& op = graph_.op(view_.node(n).forward_op);
  torch::NoGradGuard no_grad;
  const int64_t rank = input.dim();
  int64_t axis = op.IntAttribute("axis", -1);
  if (axis < 0) axis += rank;
  const torch::Tensor x = input.to(torch::kFloat);
  ASSIGN_OR_RETURN(
      std::vector<torch::Tensor> maxima,
      FromGroup(j, n, pass + kInsideSite, d, std::get<0>(x.max(axis, true))));
  torch::Tensor top = maxima[0];
  for (size_t q = 1; q < maxima.size(); ++q) top = torch::maximum(top, maxima[q]);
  const torch::Tensor exps = torch::exp(x - top);
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> sums,
                   FromGroup(j, n, pass + kInsideSite + 1, d, exps.sum(axis, true)));
  const torch::Tensor total = Sum(sums);
  const bool log = op.op_type == "LogSoftmax";
  torch::Tensor y = log ? x - top - torch::log(total) : exps / total;
  const int out = op.outputs[0];
  const torch::ScalarType type =
      precision_.tensor_types.empty()
          ? input.scalar_type()
          : ToTorchType(precision_.tensor_types[out]);
  kept->softmax = y;
  kept->axis = axis;
  kept->log = log;
  return std::vector<torch::Tensor>{y.to(type)};
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::SplitSoftmaxGradient(
    int b, int j, int d, const torch::Tensor& output_gradient,
    const TensorParallelSaved& kept) {
  if (!output_gradient.defined()) return torch::Tensor();
  torch::NoGradGuard no_grad;
  const torch::Tensor dy = output_gradient.to(torch::kFloat);
  const torch::Tensor& y = kept.softmax;
  // Softmax: y (dy - sum(dy y)); LogSoftmax: dy - exp(y) sum(dy); the sums
  // over the whole axis, allreduced.
  const torch::Tensor local =
      (kept.log ? dy : dy * y).sum(kept.axis, /*keepdim=*/true);
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> parts,
                   FromGroup(j, b, kInsideSite + 2, d, local));
  const torch::Tensor total = Sum(parts);
  const torch::Tensor dx =
      kept.log ? dy - torch::exp(y) * total : y * (dy - total);
  return dx.to(output_gradient.scalar_type());
}

}  // namespace placer
