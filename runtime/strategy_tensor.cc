// Tensor parallelism in the strategy executor (runtime/strategy_executor.h):
// each device of a replica's tensor-parallel group runs every op of its
// stage on its part of the tensors (graph/tensor_sharding.h's layouts),
// converting each input from the layout it is held in to the one the op's
// rule reads, and each gradient back, through collectives of the group.
// The ops with collectives inside their parts: strategy_tensor_ops.cc.
#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "graph/fused_region.h"
#include "runtime/executor_ops.h"
#include "runtime/op_autograd.h"
#include "runtime/torch_ops.h"
#include "runtime/strategy_executor_impl.h"

namespace placer {
namespace {

using Kind = TensorLayout::Kind;

// Exchange codes within one node (forward or backward): distinct per site.
constexpr int kInputCode = 0;        // + input position
constexpr int kOutputCode = 1000;    // + output position
constexpr int kGradientCode = 2000;  // + output position (backward)
constexpr int kPartialCode = 3000;   // + input position (backward)
constexpr int kExactCode = 4000;     // + input position (backward)

bool IsLoss(const Op& op) {
  return op.op_type == "SoftmaxCrossEntropyLoss" && op.domain.empty();
}

bool IsSoftmax(const Op& op) {
  return (op.op_type == "Softmax" || op.op_type == "LogSoftmax") &&
         op.domain.empty();
}

}  // namespace

absl::Status TorchStrategyExecutor::InitTensorParallelism() {
  tensor_rank_of_device_.assign(D_, 0);
  tensor_subgroup_.assign(S_, {});
  for (int s = 0; s < S_; ++s) {
    tensor_subgroup_[s].assign(strategy_.stages[s].num_replicas(), -1);
  }
  if (!HasTensorParallelism(strategy_)) return absl::OkStatus();
  T_ = strategy_.stages[0].tensor();
  for (int s = 0; s < S_; ++s) {
    const PipelineStage& stage = strategy_.stages[s];
    if (stage.tensor() != T_) {
      return absl::UnimplementedError(absl::StrCat(
          "stage ", s, " is tensor parallel over ", stage.tensor(),
          " devices and stage 0 over ", T_,
          "; the strategy executor runs stages of one group size"));
    }
    for (int k = 0; k < stage.num_replicas(); ++k) {
      const std::vector<int> group = stage.TensorGroup(k);
      for (int r = 0; r < static_cast<int>(group.size()); ++r) {
        const int d = group[r];
        stage_of_device_[d] = s;
        replica_of_device_[d] = k;
        slot_of_device_[d] = 0;
        tensor_rank_of_device_[d] = r;
      }
    }
  }
  // Over ranks: a group in one process, or one device per rank (a
  // subgroup each, made in stage and replica order on every rank).
  for (int s = 0; s < S_ && Distributed(); ++s) {
    for (int k = 0; k < strategy_.stages[s].num_replicas(); ++k) {
      const std::vector<int> group = strategy_.stages[s].TensorGroup(k);
      std::set<int> ranks;
      for (int d : group) ranks.insert(RankOf(d));
      if (ranks.size() == 1) continue;
      if (ranks.size() != group.size()) {
        return absl::UnimplementedError(absl::StrCat(
            "stage ", s, "'s replica ", k,
            " is a tensor-parallel group with two devices on one rank and "
            "others on other ranks; the strategy executor runs a group in one "
            "process or one device per rank"));
      }
      if (S_ > 1) {
        return absl::UnimplementedError(absl::StrCat(
            "stage ", s, "'s replica ", k,
            " is a tensor-parallel group over ranks in a pipeline; the "
            "strategy executor runs such groups in a strategy of one stage "
            "(a pipeline's groups each in one process)"));
      }
      if (ranks.count(rank_) == 0) continue;
      ASSIGN_OR_RETURN(tensor_subgroup_[s][k],
                       options_.ranks->AddSubgroup(
                           std::vector<int>(ranks.begin(), ranks.end()),
                           absl::StrCat("tensor/", s, "/", k)));
    }
  }
  ASSIGN_OR_RETURN(sharding_, ShardStrategy(graph_, strategy_));
  for (size_t o = 0; o < graph_.ops().size(); ++o) {
    const Op& op = graph_.op(static_cast<int>(o));
    const OpLayouts& layouts = sharding_.op_layouts[o];
    if (layouts.internal_allreduce_bytes > 0 && !IsLoss(op) &&
        !IsSoftmax(op)) {
      return absl::UnimplementedError(absl::StrCat(
          "op ", op.key, " (", op.op_type, ") runs ",
          OpShardingName(sharding_.op[o]),
          " with an allreduce inside it; the strategy executor runs it split "
          "on another dim or replicated"));
    }
    // Run whole on every device of a group, each would draw its own numbers
    // and the group's copies would differ (Megatron-LM seeds such regions
    // alike on every tensor rank; the kernels here draw from LibTorch's
    // global generator).
    if (DrawsRandomNumbers(graph_, op) && !sharding_.op[o].split()) {
      return absl::UnimplementedError(absl::StrCat(
          "op ", op.key, " (", op.op_type,
          ") draws random numbers and runs whole on each device of a "
          "tensor-parallel group: the devices would draw different numbers "
          "for one value; the strategy executor runs such ops split (fix it "
          "out:<dim> in the file's sharding) or outside tensor parallelism"));
    }
    // A depthwise convolution split on channels: 1/T of its groups.
    if (op.op_type == "Conv" &&
        sharding_.op[o] == OpSharding::SplitOutput(1) &&
        op.IntAttribute("group", 1) > 1) {
      Op local = op;
      local.attributes["group"].i = op.IntAttribute("group", 1) / T_;
      local_ops_.emplace(static_cast<int>(o), std::move(local));
    }
    if (IsLoss(op) && sharding_.op[o].split() && op.inputs.size() > 2 &&
        op.inputs[2] >= 0) {
      return absl::UnimplementedError(absl::StrCat(
          "op ", op.key, " (", op.op_type,
          ") over split classes: the strategy executor's vocabulary-parallel "
          "loss takes no class weights"));
    }
  }
  return InitPieces();
}

absl::Status TorchStrategyExecutor::InitPieces() {
  // A Split over the dim its group splits: each device holds the r-th 1/T
  // of every piece, so what makes its input is dealt likewise, back to the
  // weights (Megatron-LM's fused QKV projection).
  pieces_.assign(graph_.tensors().size(), {});
  std::vector<std::pair<int, int>> work;  // (tensor, dim)
  auto extent = [&](int t, int dim) { return graph_.tensor(t).shape[dim]; };
  auto refuse = [&](const Op& op, const std::string& why) {
    return absl::UnimplementedError(absl::StrCat(
        "op ", op.key, " (", op.op_type, ") ", why,
        "; the strategy executor deals a tensor over a tensor-parallel group "
        "only between the weights and the Split that cuts it"));
  };
  for (size_t o = 0; o < graph_.ops().size(); ++o) {
    const Op& op = graph_.op(static_cast<int>(o));
    const OpSharding& mode = sharding_.op[o];
    if (op.op_type != "Split" || mode.kind != OpSharding::Kind::kSplitOutput) {
      continue;
    }
    const int x = op.inputs[0];
    int64_t axis = op.IntAttribute("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(graph_.tensor(x).shape.size());
    if (axis != mode.dim) continue;
    std::vector<int64_t> sizes;
    for (int y : op.outputs) {
      if (y < 0) return refuse(op, "leaves an output out");
      sizes.push_back(extent(y, mode.dim));
    }
    if (!pieces_[x].empty() && pieces_[x] != sizes) {
      return refuse(op, "cuts a value cut otherwise too");
    }
    pieces_[x] = sizes;
    work.push_back({x, mode.dim});
  }
  while (!work.empty()) {
    const auto [t, dim] = work.back();
    work.pop_back();
    const int p = graph_.tensor(t).producer;
    if (p < 0) continue;  // a weight: dealt as it is held
    const Op& op = graph_.op(p);
    const OpLayouts& layouts = sharding_.op_layouts[p];
    // Made whole or partial: the conversion after it deals it.
    bool made_split = false;
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      if (op.outputs[k] != t) continue;
      made_split = layouts.outputs[k] == sharding_.layout[t];
      if (!made_split && layouts.outputs[k].kind == TensorLayout::Kind::kSplit) {
        return refuse(op, "makes a dealt value split on another dim");
      }
    }
    if (!made_split) continue;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const int x = op.inputs[i];
      if (x < 0 || layouts.reads_any[i] ||
          layouts.inputs[i].kind != TensorLayout::Kind::kSplit) {
        continue;
      }
      const int e = layouts.inputs[i].dim;
      if (extent(x, e) != extent(t, dim)) return refuse(op, "reads a part");
      if (!pieces_[x].empty()) {
        if (pieces_[x] != pieces_[t]) {
          return refuse(op, "reads a value dealt otherwise");
        }
        continue;
      }
      pieces_[x] = pieces_[t];
      work.push_back({x, e});
    }
  }
  // Read only as held, by ops whose outputs are dealt alike or the Split.
  for (size_t o = 0; o < graph_.ops().size(); ++o) {
    const Op& op = graph_.op(static_cast<int>(o));
    const OpLayouts& layouts = sharding_.op_layouts[o];
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const int x = op.inputs[i];
      if (x < 0 || pieces_[x].empty() || layouts.reads_any[i]) continue;
      if (layouts.inputs[i].kind == TensorLayout::Kind::kReplicated) {
        continue;  // gathered whole (dealt back)
      }
      // Held split on another dim: an all-to-all (a partial sum or a whole
      // value is dealt as it is cut).
      if (layouts.inputs[i] != sharding_.layout[x] &&
          sharding_.layout[x].kind == TensorLayout::Kind::kSplit) {
        return refuse(op, absl::StrCat("reads '", graph_.tensor(x).name,
                                       "' (dealt) as ",
                                       TensorLayoutName(layouts.inputs[i])));
      }
      const bool cut = op.op_type == "Split" && op.inputs[0] == x;
      if (!cut && (op.outputs.empty() || op.outputs[0] < 0 ||
                   pieces_[op.outputs[0]].empty())) {
        return refuse(op, absl::StrCat("reads '", graph_.tensor(x).name,
                                       "' (dealt) and makes a value that "
                                       "is not"));
      }
    }
  }
  return absl::OkStatus();
}

TensorLayout TorchStrategyExecutor::HeldLayout(int t) const {
  if (T_ == 1) return TensorLayout::Replicated();
  return sharding_.layout[t];
}

torch::Tensor TorchStrategyExecutor::PartOf(const torch::Tensor& whole,
                                            const TensorLayout& layout, int r,
                                            int t) const {
  if (layout.kind != Kind::kSplit) return whole;
  if (t < 0 || pieces_[t].empty()) {
    return whole.chunk(T_, layout.dim)[r].contiguous();
  }
  std::vector<torch::Tensor> mine;
  for (const torch::Tensor& piece :
       whole.split_with_sizes(pieces_[t], layout.dim)) {
    mine.push_back(piece.chunk(T_, layout.dim)[r]);
  }
  return torch::cat(mine, layout.dim);
}

absl::StatusOr<std::vector<torch::Tensor>> TorchStrategyExecutor::FromGroup(
    int j, int n, int code, int d, const torch::Tensor& mine) {
  const int r = tensor_rank_of_device_[d];
  const auto start = SteadyClock::now();
  std::vector<torch::Tensor> parts;
  const int s = stage_of_device_[d];
  const int subgroup = tensor_subgroup_[s][replica_of_device_[d]];
  if (subgroup >= 0) {
    // One device per rank: c10d's all-gather over the group's ranks
    // (ascending), in tensor rank order here.
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> by_rank,
                     options_.ranks->AllGather(subgroup, mine));
    const std::vector<int> group = strategy_.stages[s].TensorGroup(
        replica_of_device_[d]);
    std::vector<int> ranks;
    for (int member : group) ranks.push_back(RankOf(member));
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    for (int rank : ranks) {
      const size_t at =
          std::lower_bound(sorted.begin(), sorted.end(), rank) - sorted.begin();
      parts.push_back(by_rank[at]);
    }
  } else {
    // In one process, as an all-gather does: each device's send buffer (a
    // copy, the exchange's own) and, for each other device's, a receive
    // buffer here. The copies run outside the lock; the exchange's buffers
    // are let go under it, by the last to have copied them (no worker
    // reads a tensor another lets go unseen).
    const torch::Tensor send = mine.defined()
                                   ? mine.to(mine.device(), /*non_blocking=*/
                                             false, /*copy=*/true)
                                   : mine;
    const std::tuple<int, int, int> key{j, n, code};
    std::vector<torch::Tensor> sent;
    {
      absl::MutexLock lock(&mu_);
      GroupExchange& slot = group_exchanges_[key];
      if (slot.parts.empty()) slot.parts.resize(T_);
      slot.parts[r] = send;
      if (++slot.arrived == T_) group_cv_.SignalAll();
      while (failure_.ok() && slot.arrived != T_) group_cv_.Wait(&mu_);
      if (!failure_.ok()) return absl::AbortedError("failed elsewhere");
      sent = slot.parts;
    }
    for (int q = 0; q < T_; ++q) {
      parts.push_back(q == r || !sent[q].defined()
                          ? mine
                          : sent[q].to(devices_[d], /*non_blocking=*/false,
                                       /*copy=*/true));
    }
    absl::MutexLock lock(&mu_);
    sent.clear();
    auto at = group_exchanges_.find(key);
    if (++at->second.taken == T_) group_exchanges_.erase(at);
  }
  waited_seconds_[d] += SecondsSince(start);
  for (torch::Tensor& part : parts) {
    if (part.defined() && part.device() != devices_[d]) {
      part = part.to(devices_[d]);
    }
  }
  return parts;
}

torch::Tensor TorchStrategyExecutor::Sum(
    const std::vector<torch::Tensor>& parts) const {
  torch::Tensor total = parts[0];
  for (size_t q = 1; q < parts.size(); ++q) total = total + parts[q];
  return total;
}

torch::Tensor TorchStrategyExecutor::Join(const std::vector<torch::Tensor>& parts,
                                          int dim, int t) const {
  if (pieces_.empty() || pieces_[t].empty()) return torch::cat(parts, dim);
  // Dealt: each device's part holds the r-th 1/T of every piece.
  std::vector<int64_t> sizes;
  for (int64_t size : pieces_[t]) sizes.push_back(size / T_);
  std::vector<std::vector<torch::Tensor>> by_device;
  for (const torch::Tensor& part : parts) {
    by_device.push_back(part.split_with_sizes(sizes, dim));
  }
  std::vector<torch::Tensor> whole;
  for (size_t piece = 0; piece < sizes.size(); ++piece) {
    for (const std::vector<torch::Tensor>& device : by_device) {
      whole.push_back(device[piece]);
    }
  }
  return torch::cat(whole, dim);
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::ToLayout(
    const torch::Tensor& value, const TensorLayout& from,
    const TensorLayout& to, int t, int j, int n, int code, int d) {
  if (from == to) return value;
  const int r = tensor_rank_of_device_[d];
  if (from.kind == Kind::kReplicated) {
    if (to.kind == Kind::kSplit) return PartOf(value, to, r, t);
    return absl::InternalError("a partial sum wanted of a whole value");
  }
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> parts,
                   FromGroup(j, n, code, d, value));
  if (from.kind == Kind::kPartial) {
    // Allreduce (in rank order: the same bits on every device), or a
    // reduce-scatter.
    const torch::Tensor total = Sum(parts);
    return to.kind == Kind::kSplit ? PartOf(total, to, r, t) : total;
  }
  if (to.kind == Kind::kReplicated) return Join(parts, from.dim, t);
  if (to.kind == Kind::kSplit && pieces_[t].empty()) {
    // All-to-all: this device's part of `to` from each device's part.
    std::vector<torch::Tensor> mine;
    for (const torch::Tensor& p : parts) mine.push_back(p.chunk(T_, to.dim)[r]);
    return torch::cat(mine, from.dim);
  }
  return absl::InternalError("a partial sum wanted of a split value");
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::GradientToLayout(
    torch::Tensor gradient, const TensorLayout& at, bool partial,
    const TensorLayout& to, int t, int j, int n, int code, int d) {
  if (!gradient.defined()) return gradient;
  const int r = tensor_rank_of_device_[d];
  if (partial) {
    // Each device's is a part of the sum: allreduced (reduce-scattered to a
    // split value).
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> parts,
                     FromGroup(j, n, code, d, gradient));
    gradient = Sum(parts);
    if (at.kind == Kind::kSplit) {
      return absl::InternalError("a partial gradient of a split read");
    }
    return to.kind == Kind::kSplit ? PartOf(gradient, to, r, t) : gradient;
  }
  if (at == to) return gradient;
  // The gradient of a partial sum is the gradient of the whole value, on
  // every device.
  const TensorLayout want =
      to.kind == Kind::kPartial ? TensorLayout::Replicated() : to;
  if (at == want) return gradient;
  if (at.kind == Kind::kReplicated) return PartOf(gradient, want, r, t);
  // Read split: its gradient is split likewise.
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> parts,
                   FromGroup(j, n, code + 1, d, gradient));
  if (want.kind == Kind::kReplicated) return Join(parts, at.dim, t);
  if (!pieces_[t].empty()) {
    return absl::InternalError("an all-to-all of a dealt gradient");
  }
  std::vector<torch::Tensor> mine;
  for (const torch::Tensor& p : parts) mine.push_back(p.chunk(T_, want.dim)[r]);
  return torch::cat(mine, at.dim);
}

absl::StatusOr<std::vector<torch::Tensor>>
TorchStrategyExecutor::TensorParallelForward(int n, int j, int d,
                                             std::vector<torch::Tensor> inputs,
                                             bool autograd, bool rerun) {
  const TrainingNode& node = view_.node(n);
  const int o = node.forward_op;
  const Op& op = graph_.op(o);
  const OpLayouts& layouts = sharding_.op_layouts[o];
  const OpSharding& mode = sharding_.op[o];
  const int r = tensor_rank_of_device_[d];
  const int lane = Lane(j, d);
  // A rerun's collectives are the forward's again, at other sites.
  const int pass = rerun ? kRerunSite : 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int t = op.inputs[i];
    if (t < 0 || !inputs[i].defined() || layouts.reads_any[i]) continue;
    ASSIGN_OR_RETURN(inputs[i],
                     ToLayout(inputs[i], HeldLayout(t), layouts.inputs[i], t, j,
                              n, pass + kInputCode + static_cast<int>(i), d));
  }
  TensorParallelSaved& kept = tensor_saved_[lane][o];
  const std::string& type = op.op_type;
  // The op's own attributes and inputs for a part of its work.
  if (mode.kind == OpSharding::Kind::kSplitOutput &&
      (type == "Reshape" || type == "Expand") && inputs.size() > 1) {
    std::vector<int64_t> shape = graph_.tensor(op.outputs[0]).shape;
    shape[mode.dim] /= T_;
    inputs[1] = torch::tensor(shape, torch::dtype(torch::kLong));
  }
  if (mode.kind == OpSharding::Kind::kSplitOutput && type == "Split" &&
      !pieces_[op.inputs[0]].empty()) {
    // A 1/T of each piece.
    std::vector<int64_t> sizes;
    for (int64_t size : pieces_[op.inputs[0]]) sizes.push_back(size / T_);
    inputs.resize(std::max<size_t>(inputs.size(), 2));
    inputs[1] = torch::tensor(sizes, torch::dtype(torch::kLong));
  }
  if (mode.kind == OpSharding::Kind::kContracted &&
      (type == "Gemm" || type == "Conv") && inputs.size() > 2 &&
      inputs[2].defined() && r != 0) {
    // The bias is added once (by tensor rank 0): zeros here, and no
    // gradient from here.
    inputs[2] = torch::zeros_like(inputs[2]);
    kept.zero_bias = true;
  }
  torch::Tensor gather_mask;
  if (mode.kind == OpSharding::Kind::kContracted && type == "Gather") {
    // A vocabulary-parallel lookup: rows outside this device's part read
    // zeros (its row 0, masked).
    int64_t axis = op.IntAttribute("axis", 0);
    const int data_rank = static_cast<int>(inputs[0].dim());
    if (axis < 0) axis += data_rank;
    const int64_t rows = inputs[0].size(axis);
    torch::Tensor ids = inputs[1].to(torch::kLong);
    ids = torch::where(ids < 0, ids + rows * T_, ids) - rows * r;
    torch::Tensor inside = (ids >= 0).logical_and(ids < rows);
    inputs[1] = torch::where(inside, ids, torch::zeros_like(ids));
    std::vector<int64_t> view(axis, 1);
    for (int64_t e : inside.sizes()) view.push_back(e);
    for (int k = static_cast<int>(axis) + 1; k < data_rank; ++k) {
      view.push_back(1);
    }
    gather_mask = inside.reshape(view);
  }
  std::vector<torch::Tensor> outputs;
  if (IsLoss(op) && mode.split()) {
    ASSIGN_OR_RETURN(outputs,
                     VocabularyParallelLoss(n, j, d, inputs, pass, &kept));
  } else if (IsSoftmax(op) && layouts.internal_allreduce_bytes > 0) {
    ASSIGN_OR_RETURN(outputs,
                     SplitSoftmax(n, j, d, inputs[0], pass, &kept));
  } else {
    auto local = local_ops_.find(o);
    ASSIGN_OR_RETURN(
        outputs,
        ForwardOp(graph_, local == local_ops_.end() ? op : local->second,
                  std::move(inputs), devices_[d], precision_,
                  autograd ? &needs_gradient_[o] : nullptr, &saved_[lane][o]));
  }
  if (gather_mask.defined()) {
    outputs[0] = outputs[0] * gather_mask.to(outputs[0].scalar_type());
    kept.mask = gather_mask;
  }
  for (size_t k = 0; k < outputs.size() && k < op.outputs.size(); ++k) {
    const int t = op.outputs[k];
    if (t < 0 || !outputs[k].defined()) continue;
    ASSIGN_OR_RETURN(outputs[k],
                     ToLayout(outputs[k], layouts.outputs[k], FinalLayout(t),
                              t, j, n, pass + kOutputCode + static_cast<int>(k),
                              d));
  }
  return outputs;
}

TensorLayout TorchStrategyExecutor::FinalLayout(int t) const {
  if (T_ == 1 || graph_.tensor(t).is_graph_output) {
    return TensorLayout::Replicated();
  }
  return sharding_.layout[t];
}

absl::StatusOr<std::vector<torch::Tensor>>
TorchStrategyExecutor::TensorParallelBackward(
    int b, int j, int d, std::vector<torch::Tensor> output_gradients,
    const std::vector<int>& tensors) {
  const TrainingNode& node = view_.node(b);
  const int o = node.forward_op;
  const Op& op = graph_.op(o);
  const OpLayouts& layouts = sharding_.op_layouts[o];
  const int lane = Lane(j, d);
  for (size_t k = 0; k < output_gradients.size() && k < op.outputs.size();
       ++k) {
    const int t = op.outputs[k];
    if (t < 0) continue;
    ASSIGN_OR_RETURN(
        output_gradients[k],
        GradientToLayout(std::move(output_gradients[k]), FinalLayout(t),
                         /*partial=*/false, layouts.outputs[k], t, j, b,
                         kGradientCode + 2 * static_cast<int>(k), d));
  }
  TensorParallelSaved kept = std::move(tensor_saved_[lane][o]);
  tensor_saved_[lane][o] = TensorParallelSaved();
  std::vector<torch::Tensor> grads;
  if (kept.softmax.defined()) {
    ASSIGN_OR_RETURN(torch::Tensor gradient,
                     SplitSoftmaxGradient(b, j, d, output_gradients[0], kept));
    for (int t : tensors) {
      grads.push_back(t == op.inputs[0] ? gradient : torch::Tensor());
    }
  } else if (kept.gradient.defined()) {
    // The vocabulary-parallel loss: the gradient of its scores only.
    for (int t : tensors) {
      grads.push_back(t == op.inputs[0] && output_gradients[0].defined()
                          ? kept.gradient * output_gradients[0]
                          : torch::Tensor());
    }
  } else {
    if (kept.mask.defined() && output_gradients[0].defined()) {
      output_gradients[0] =
          output_gradients[0] *
          kept.mask.to(output_gradients[0].scalar_type());
    }
    ASSIGN_OR_RETURN(grads, BackwardOp(graph_, op, std::move(saved_[lane][o]),
                                       output_gradients, tensors));
    if (kept.zero_bias) {
      for (size_t k = 0; k < tensors.size(); ++k) {
        if (tensors[k] == op.inputs[2] && grads[k].defined()) {
          grads[k] = torch::zeros_like(grads[k]);
        }
      }
    }
  }
  saved_[lane][o] = SavedOp();
  // Each gradient from the layout the op read its input in to the one it
  // is held in.
  for (size_t k = 0; k < tensors.size(); ++k) {
    const int t = tensors[k];
    int position = -1;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (op.inputs[i] != t || layouts.reads_any[i]) continue;
      if (position >= 0 &&
          (layouts.inputs[i] != layouts.inputs[position] ||
           layouts.gradient_partial[i] != layouts.gradient_partial[position])) {
        return absl::UnimplementedError(absl::StrCat(
            "op ", op.key, " reads '", graph_.tensor(t).name,
            "' in two layouts (", TensorLayoutName(layouts.inputs[position]),
            ", ", TensorLayoutName(layouts.inputs[i]), ")"));
      }
      if (position < 0) position = static_cast<int>(i);
    }
    if (position < 0) continue;
    ASSIGN_OR_RETURN(
        grads[k],
        GradientToLayout(std::move(grads[k]), layouts.inputs[position],
                         layouts.gradient_partial[position] != 0,
                         HeldLayout(t), t, j, b,
                         (layouts.gradient_partial[position] ? kPartialCode
                                                             : kExactCode) +
                             2 * position,
                         d));
  }
  return grads;
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::ParameterPart(
    absl::string_view name, int replica, int rank) const {
  if (T_ == 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "parameter '", name, "': no stage is tensor parallel"));
  }
  ASSIGN_OR_RETURN(LocalParameterAt at, LocalParameter(name, replica, rank));
  return params_[at.device][at.value].to(torch::kCPU).clone();
}

absl::StatusOr<torch::Tensor> TorchStrategyExecutor::WholeParameter(
    int v, int k) const {
  const int s = strategy_.stage_of_op[group_of_parameter_[v]];
  const std::vector<int> group = strategy_.stages[s].TensorGroup(k);
  const TensorLayout layout = HeldLayout(view_.value(v).tensor);
  if (layout.kind != Kind::kSplit) {
    return ShardsParametersOf(s) ? Gather(v, group[0]).to(torch::kCPU)
                                 : params_[group[0]][v].to(torch::kCPU).clone();
  }
  std::vector<torch::Tensor> parts;
  for (int d : group) {
    if (!Local(d)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "parameter '", view_.value(v).name, "' is split over replica ", k,
          "'s tensor-parallel group; device ", cluster_.device(d).name,
          " is on rank ", RankOf(d)));
    }
    // ZeRO-3: the device's part gathered from its replicas' shards.
    parts.push_back(ShardsParametersOf(s) ? Gather(v, d).to(torch::kCPU)
                                          : params_[d][v].to(torch::kCPU));
  }
  return Join(parts, layout.dim, view_.value(v).tensor);
}

}  // namespace placer
