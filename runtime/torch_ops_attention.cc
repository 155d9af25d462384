// The FusedAttention kernel (graph/fused_attention.h), with
// FlashAttention's memory: the forward keeps Q, Kᵀ, V, the steps' inputs,
// O and the fp32 log-sum-exp of each query row, never the probabilities;
// the backward recomputes the scores from Q and Kᵀ (Dao et al. 2022,
// Algorithm 4, in blocks of query rows), so the executor holds what the
// training view counts for the op, plus one block's scores while it runs.
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "graph/fused_attention.h"
#include "runtime/torch_kernel.h"
#include "runtime/torch_ops.h"

namespace placer::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Steps as "Type:position:inputs" joined by commas, for autograd's context.
std::string EncodeSteps(const std::vector<AttentionStep>& steps) {
  std::vector<std::string> parts;
  for (const AttentionStep& s : steps) {
    parts.push_back(absl::StrCat(s.op_type, ":", s.score_position, ":",
                                 s.inputs));
  }
  return absl::StrJoin(parts, ",");
}

// The scores after each step; `extras` are the fused op's inputs after V.
torch::Tensor ApplySteps(torch::Tensor scores, const std::string& encoded,
                         const std::vector<torch::Tensor>& extras) {
  size_t next = 0;
  for (absl::string_view part : absl::StrSplit(encoded, ',', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(part, ':');
    const int position = std::stoi(f[1]);
    const int count = std::stoi(f[2]);
    std::vector<torch::Tensor> args;
    for (int k = 0; k < count; ++k) args.push_back(extras.at(next + k));
    next += count;
    args.insert(args.begin() + position, scores);
    // The step's own kernel from the registry (torch_ops.cc), so a step
    // computes what the op computes outside the core.
    Op step;
    step.op_type = f[0];
    step.key = absl::StrCat("FusedAttention step ", f[0]);
    absl::StatusOr<std::vector<torch::Tensor>> result = RunTorchOp(step, args);
    TORCH_CHECK(result.ok(), std::string(result.status().message()));
    scores = (*result)[0];
  }
  return scores;
}

// Query rows per block: FlashAttention-2's block of rows. Only one block's
// scores exist at a time, in the forward and in the backward.
constexpr int64_t kRowsPerBlock = 64;

// The steps' inputs for query rows [row, row + rows) and keys [0, keys)
// of `all_keys`: a tensor with the query dim (aligned with the scores'
// second-to-last) is cut to the block, one with the key dim (the last) to
// the keys; one broadcast along either is kept whole there.
std::vector<torch::Tensor> BlockOf(const std::vector<torch::Tensor>& extras,
                                   int64_t queries, int64_t row, int64_t rows,
                                   int64_t all_keys, int64_t keys) {
  std::vector<torch::Tensor> block;
  for (torch::Tensor e : extras) {
    if (e.dim() >= 2 && e.size(-2) == queries && queries > 1) {
      e = e.narrow(-2, row, rows);
    }
    if (keys < all_keys && e.dim() >= 1 && e.size(-1) == all_keys) {
      e = e.narrow(-1, 0, keys);
    }
    block.push_back(e);
  }
  return block;
}

// The keys a block of query rows [row, row + rows) attends to: with a
// causal mask (square scores), those up to its last row, since every later
// key's probability is exactly 0 (FlashAttention skips those blocks);
// otherwise all of them.
int64_t KeysOfBlock(bool causal, int64_t queries, int64_t all_keys,
                    int64_t row, int64_t rows) {
  if (!causal || queries != all_keys) return all_keys;
  return std::min(all_keys, row + rows);
}

struct FlashAttention : torch::autograd::Function<FlashAttention> {
  static variable_list forward(AutogradContext* ctx, std::string steps,
                               bool causal, torch::Tensor q, torch::Tensor kt,
                               torch::Tensor v, at::TensorList extras) {
    std::vector<torch::Tensor> rest(extras.begin(), extras.end());
    const int64_t queries = q.size(-2);
    const int64_t all_keys = kt.size(-1);
    std::vector<torch::Tensor> outputs, sums;
    for (int64_t row = 0; row < queries; row += kRowsPerBlock) {
      const int64_t rows = std::min(kRowsPerBlock, queries - row);
      const int64_t keys = KeysOfBlock(causal, queries, all_keys, row, rows);
      torch::Tensor scores =
          ApplySteps(torch::matmul(q.narrow(-2, row, rows),
                                   kt.narrow(-1, 0, keys)),
                     steps, BlockOf(rest, queries, row, rows, all_keys, keys))
              .to(torch::kFloat);
      torch::Tensor lse = torch::logsumexp(scores, -1, /*keepdim=*/true);
      torch::Tensor p = torch::exp(scores - lse).to(v.scalar_type());
      outputs.push_back(torch::matmul(p, v.narrow(-2, 0, keys)));
      sums.push_back(lse);
    }
    torch::Tensor o = torch::cat(outputs, -2);
    torch::Tensor lse = torch::cat(sums, -2);
    std::vector<torch::Tensor> saved = {q, kt, v, o, lse};
    saved.insert(saved.end(), rest.begin(), rest.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["steps"] = steps;
    ctx->saved_data["causal"] = causal;
    return {o};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const std::string steps = ctx->saved_data["steps"].toStringRef();
    const bool causal = ctx->saved_data["causal"].toBool();
    const size_t extras = saved.size() - 5;
    const torch::Tensor& q = saved[0];
    const torch::Tensor& v = saved[2];
    const torch::Tensor& o = saved[3];
    const torch::Tensor& lse = saved[4];
    const torch::Tensor go = grads[0];
    const int64_t queries = q.size(-2);
    const int64_t all_keys = saved[1].size(-1);
    // Whole leaves for Kᵀ and the steps' floating-point inputs (a learned
    // bias added to the scores), a leaf per block for Q.
    const bool want_q = ctx->needs_input_grad(0) && q.is_floating_point();
    torch::Tensor kt = saved[1];
    std::vector<torch::Tensor> rest(saved.begin() + 5, saved.end());
    std::vector<int> leaf_edges;  // 1 (Kᵀ), 3 + k (extra k)
    std::vector<torch::Tensor> leaves;
    if (ctx->needs_input_grad(1) && kt.is_floating_point()) {
      kt = kt.detach().requires_grad_(true);
      leaf_edges.push_back(1);
      leaves.push_back(kt);
    }
    for (size_t k = 0; k < extras; ++k) {
      if (!ctx->needs_input_grad(3 + k) || !rest[k].is_floating_point()) {
        continue;
      }
      rest[k] = rest[k].detach().requires_grad_(true);
      leaf_edges.push_back(static_cast<int>(3 + k));
      leaves.push_back(rest[k]);
    }
    variable_list result(6 + extras);  // [steps, causal, Q, Kᵀ, V, extras...]
    std::vector<torch::Tensor> dq_blocks;
    std::vector<torch::Tensor> sums(leaves.size());
    torch::Tensor dv;
    torch::AutoGradMode grad_mode(true);
    for (int64_t row = 0; row < queries; row += kRowsPerBlock) {
      const int64_t rows = std::min(kRowsPerBlock, queries - row);
      const int64_t keys = KeysOfBlock(causal, queries, all_keys, row, rows);
      torch::Tensor qb = q.narrow(-2, row, rows);
      if (want_q) qb = qb.detach().requires_grad_(true);
      torch::Tensor scores = ApplySteps(
          torch::matmul(qb, kt.narrow(-1, 0, keys)), steps,
          BlockOf(rest, queries, row, rows, all_keys, keys));
      torch::Tensor p = torch::exp(scores.detach().to(torch::kFloat) -
                                   lse.narrow(-2, row, rows));
      torch::Tensor gob = go.narrow(-2, row, rows);
      const torch::Tensor vb = v.narrow(-2, 0, keys);
      if (ctx->needs_input_grad(2)) {
        torch::Tensor part =
            torch::matmul(p.to(v.scalar_type()).transpose(-1, -2), gob);
        if (keys < all_keys) {
          part = torch::constant_pad_nd(part, {0, 0, 0, all_keys - keys});
        }
        dv = dv.defined() ? dv + part : part;
      }
      if (!want_q && leaves.empty()) continue;
      torch::Tensor dp =
          torch::matmul(gob, vb.transpose(-1, -2)).to(torch::kFloat);
      torch::Tensor d = (gob.to(torch::kFloat) *
                         o.narrow(-2, row, rows).to(torch::kFloat))
                            .sum(-1, true);
      torch::Tensor ds = (p * (dp - d)).to(scores.scalar_type());
      std::vector<torch::Tensor> wrt = leaves;
      if (want_q) wrt.push_back(qb);
      variable_list g = torch::autograd::grad({scores}, wrt, {ds},
                                              /*retain_graph=*/false,
                                              /*create_graph=*/false,
                                              /*allow_unused=*/true);
      for (size_t i = 0; i < leaves.size(); ++i) {
        if (!g[i].defined()) continue;
        sums[i] = sums[i].defined() ? sums[i] + g[i] : g[i];
      }
      if (want_q) dq_blocks.push_back(g.back());
    }
    if (dv.defined()) result[4] = dv.sum_to_size(v.sizes());
    if (want_q) result[2] = torch::cat(dq_blocks, -2);
    for (size_t i = 0; i < leaves.size(); ++i) result[2 + leaf_edges[i]] = sums[i];
    return result;
  }
};

Result FusedAttentionKernel(const Op& op, const Tensors& in) {
  const std::vector<AttentionStep> steps = AttentionSteps(op);
  size_t needed = 3;
  for (const AttentionStep& s : steps) needed += s.inputs;
  if (in.size() != needed) {
    return Unsupported(op, absl::StrCat("expected ", needed, " inputs (Q, K^T, "
                                        "V and the steps'), got ", in.size()));
  }
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k].defined()) {
      return Unsupported(op, absl::StrCat("input ", k, " is missing"));
    }
  }
  std::vector<torch::Tensor> extras(in.begin() + 3, in.end());
  return Tensors{FlashAttention::apply(EncodeSteps(steps),
                                       IsCausalAttention(op), in[0], in[1],
                                       in[2], at::TensorList(extras))[0]};
}

}  // namespace

void AddAttentionKernels(KernelTable& table) {
  table[kFusedAttentionType] = FusedAttentionKernel;
}

}  // namespace placer::kernels
