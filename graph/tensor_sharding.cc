#include "graph/tensor_sharding.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "graph/sharding_rules.h"

namespace placer {
namespace {

using Kind = TensorLayout::Kind;

class Sharder {
 public:
  Sharder(const Graph& graph, const std::vector<int>& group_of_op,
          const std::vector<int>& group_size,
          const TensorShardingOptions& options)
      : graph_(graph),
        group_of_op_(group_of_op),
        group_size_(group_size),
        options_(options) {}

  absl::StatusOr<TensorSharding> Run(const std::vector<OpSharding>& fixed);

 private:
  const std::vector<int64_t>& Shape(int t) const {
    return graph_.tensor(t).shape;
  }
  bool Known(int t) const { return t >= 0 && graph_.tensor(t).shape_known; }
  int Rank(int t) const { return static_cast<int>(Shape(t).size()); }
  int Size(int op) const { return group_size_[group_of_op_[op]]; }
  int64_t Bytes(int t) const {
    const int64_t b = graph_.tensor(t).bytes();
    return b < 0 ? 0 : b;
  }
  bool WeightFed(int op) const;
  std::optional<OpRule> Rule(int op, const OpSharding& mode) const {
    return ShardingRule(graph_, op, mode, Size(op));
  }
  bool Push(int t, int dim, int reader);
  // Sequence parallelism: tensor `t` split on its token dim over
  // `devices` (replicated when none divides).
  TensorLayout TokenSplit(int t, int devices) const;
  // Bytes a mode moves given the inputs' layouts: forward, backward.
  std::pair<int64_t, int64_t> Cost(int op, const OpRule& rule) const;
  TensorLayout Held(int t) const {
    return t >= 0 && layout_[t].has_value() ? *layout_[t]
                                            : TensorLayout::Replicated();
  }
  void Apply(int op, const OpSharding& mode, const OpRule& rule);
  void Exchange(int t, const TensorLayout& to, int consumer);

  const Graph& graph_;
  const std::vector<int>& group_of_op_;
  const std::vector<int>& group_size_;
  const TensorShardingOptions options_;
  std::vector<std::optional<TensorLayout>> layout_;
  std::vector<char> requires_grad_, weight_only_;
  std::vector<OpSharding> op_;
  std::vector<GroupCollective> collectives_;
  std::set<std::pair<int, int>> forward_done_;  // (tensor, layout code)
  std::set<int> backward_allreduced_;
};

bool Sharder::WeightFed(int op) const {
  const Op& o = graph_.op(op);
  const std::string& type = o.op_type;
  int weight = -1;
  if (type == "MatMul" || type == "Gemm" || type == "Conv") weight = 1;
  // A lookup table of the ids the user feeds (an embedding), not of
  // constants (positions).
  if (type == "Gather" && o.inputs.size() > 1 && o.inputs[1] >= 0 &&
      graph_.tensor(o.inputs[1]).kind == TensorKind::kGraphInput) {
    weight = 0;
  }
  if (weight < 0 || static_cast<int>(o.inputs.size()) <= weight) return false;
  const int t = o.inputs[weight];
  return t >= 0 && weight_only_[t] && requires_grad_[t] && Known(t) &&
         Rank(t) >= 2;
}

TensorLayout Sharder::TokenSplit(int t, int devices) const {
  if (!Known(t) || Rank(t) < 2) return TensorLayout::Replicated();
  int best = -1;
  for (int d = 0; d + 1 < Rank(t); ++d) {
    const int64_t extent = Shape(t)[d];
    if (extent < devices || extent % devices != 0) continue;
    if (best < 0 || extent >= Shape(t)[best]) best = d;
  }
  return best < 0 ? TensorLayout::Replicated() : TensorLayout::Split(best);
}

std::pair<int64_t, int64_t> Sharder::Cost(int op, const OpRule& rule) const {
  int64_t forward = 2 * rule.internal_allreduce_bytes, backward = 0;
  const Op& o = graph_.op(op);
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    const int x = o.inputs[i];
    if (x < 0 || rule.inputs[i].any) continue;
    const TensorLayout have = Held(x);
    const TensorLayout& need = rule.inputs[i].layout;
    const int64_t bytes = Bytes(x);
    const bool grad = requires_grad_[x];
    const bool free_parameter =
        weight_only_[x] && !layout_[x].has_value() && grad;
    if (have != need && !(free_parameter && need.kind == Kind::kSplit)) {
      if (have.kind == Kind::kPartial) {
        forward += need.kind == Kind::kReplicated ? 2 * bytes : bytes;
        if (need.kind == Kind::kSplit && grad) backward += bytes;
      } else if (have.kind == Kind::kSplit) {
        forward += bytes;
        if (need.kind == Kind::kSplit && grad) backward += bytes;
      } else if (grad) {
        backward += bytes;  // a slice: its gradient all-gathered
      }
    }
    if (rule.inputs[i].gradient_partial && grad) {
      backward += have.kind == Kind::kSplit ? bytes : 2 * bytes;
    }
  }
  return {forward, backward};
}

void Sharder::Exchange(int t, const TensorLayout& to, int consumer) {
  const TensorLayout have = Held(t);
  if (have == to) return;
  const int code = static_cast<int>(to.kind) * 1000 + to.dim + 1;
  if (!forward_done_.insert({t, code}).second) return;
  const int producer = graph_.tensor(t).producer;
  const int64_t bytes = Bytes(t);
  const bool grad = requires_grad_[t];
  const int by =
      have.kind == Kind::kReplicated || producer < 0 ? consumer : producer;
  auto add = [&](bool backward, Collective kind) {
    collectives_.push_back({t, by, backward, kind, bytes});
  };
  if (have.kind == Kind::kPartial) {
    if (to.kind == Kind::kReplicated) {
      add(false, Collective::kAllreduce);
    } else {
      add(false, Collective::kReduceScatter);
      if (grad) add(true, Collective::kAllGather);
    }
  } else if (have.kind == Kind::kSplit) {
    if (to.kind == Kind::kReplicated) {
      add(false, Collective::kAllGather);
    } else {
      add(false, Collective::kAllToAll);
      if (grad) add(true, Collective::kAllToAll);
    }
  } else if (grad) {
    add(true, Collective::kAllGather);
  }
}

bool Sharder::Push(int t, int dim, int reader) {
  if (t < 0 || !weight_only_[t] || layout_[t].has_value()) return false;
  const Tensor& tensor = graph_.tensor(t);
  if (tensor.kind == TensorKind::kParameter) {
    layout_[t] = TensorLayout::Split(dim);
    return true;
  }
  const int p = tensor.producer;
  if (p < 0 || tensor.consumers.size() != 1 || tensor.consumers[0] != reader) {
    return false;
  }
  const std::string& type = graph_.op(p).op_type;
  if (type != "Transpose" && type != "Cast" && type != "Identity") {
    return false;
  }
  if (group_of_op_[p] != group_of_op_[reader]) return false;
  const std::optional<OpRule> rule = Rule(p, OpSharding::SplitOutput(dim));
  if (!rule || !Push(graph_.op(p).inputs[0], rule->inputs[0].layout.dim, p)) {
    return false;
  }
  op_[p] = OpSharding::SplitOutput(dim);
  layout_[t] = TensorLayout::Split(dim);
  return true;
}

void Sharder::Apply(int op, const OpSharding& mode, const OpRule& rule) {
  const Op& o = graph_.op(op);
  op_[op] = mode;
  // A replicated op of a weight chain (a Transpose of a weight) leaves
  // its weights' layout to the chain's reader (Push).
  bool chain = !mode.split() && !o.outputs.empty();
  for (int y : o.outputs) chain &= y >= 0 && weight_only_[y];
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    const int x = o.inputs[i];
    if (x < 0 || rule.inputs[i].any) continue;
    const TensorLayout& need = rule.inputs[i].layout;
    const bool unassigned = weight_only_[x] && !layout_[x].has_value();
    if (chain && unassigned) continue;
    if (unassigned) {
      if (need.kind == Kind::kSplit && Push(x, need.dim, op)) continue;
      if (graph_.tensor(x).kind == TensorKind::kParameter) {
        layout_[x] = TensorLayout::Replicated();
      }
    }
    Exchange(x, need, op);
    if (rule.inputs[i].gradient_partial && requires_grad_[x] &&
        backward_allreduced_.insert(x).second) {
      // Gathered from a split (sequence parallelism): its partial
      // gradient goes back reduce-scattered to that split.
      collectives_.push_back({x, op, true,
                              Held(x).kind == Kind::kSplit
                                  ? Collective::kReduceScatter
                                  : Collective::kAllreduce,
                              Bytes(x)});
    }
  }
  for (int k = 0; k < 2 && rule.internal_allreduce_bytes > 0; ++k) {
    collectives_.push_back({o.outputs[0], op, false, Collective::kAllreduce,
                            rule.internal_allreduce_bytes});
  }
  if (chain) return;
  for (size_t i = 0; i < o.outputs.size(); ++i) {
    if (o.outputs[i] >= 0) layout_[o.outputs[i]] = rule.outputs[i];
  }
}

absl::StatusOr<TensorSharding> Sharder::Run(
    const std::vector<OpSharding>& fixed) {
  const int num_tensors = static_cast<int>(graph_.tensors().size());
  layout_.assign(num_tensors, std::nullopt);
  requires_grad_.assign(num_tensors, 0);
  weight_only_.assign(num_tensors, 0);
  op_.assign(graph_.ops().size(), OpSharding::Replicated());
  for (int t = 0; t < num_tensors; ++t) {
    const Tensor& tensor = graph_.tensor(t);
    if (tensor.kind == TensorKind::kParameter) {
      requires_grad_[t] = 1;
      weight_only_[t] = 1;
    } else if (tensor.kind != TensorKind::kActivation) {
      layout_[t] = TensorLayout::Replicated();
    }
  }
  for (int op : graph_.topological_order()) {
    const Op& o = graph_.op(op);
    bool grad = false, weights = true;
    for (int x : o.inputs) {
      if (x < 0) continue;
      grad |= requires_grad_[x] != 0;
      weights &= weight_only_[x] != 0 ||
                 graph_.tensor(x).kind == TensorKind::kConstant;
    }
    for (int y : o.outputs) {
      if (y < 0) continue;
      requires_grad_[y] = grad && IsFloatingPoint(graph_.tensor(y).dtype);
      weight_only_[y] = weights && grad;
    }
  }
  for (int op : graph_.topological_order()) {
    const Op& o = graph_.op(op);
    const int t = Size(op);
    // Values from another group arrive replicated.
    for (int x : o.inputs) {
      if (x < 0) continue;
      const int p = graph_.tensor(x).producer;
      if (p >= 0 && group_of_op_[p] != group_of_op_[op] &&
          Held(x).kind != Kind::kReplicated) {
        Exchange(x, TensorLayout::Replicated(), op);
        layout_[x] = TensorLayout::Replicated();
      }
    }
    if (!fixed.empty()) {
      const OpSharding& mode = fixed[op];
      if (mode.split() && t < 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "op ", o.key, " (", o.op_type, ") is ", OpShardingName(mode),
            " but its stage is not tensor parallel"));
      }
      const std::optional<OpRule> rule = Rule(op, mode);
      if (!rule) {
        const int out = o.outputs.empty() ? -1 : o.outputs[0];
        return absl::InvalidArgumentError(absl::StrCat(
            "op ", o.key, " (", o.op_type, ") cannot run ",
            OpShardingName(mode), " over ", t, " devices",
            mode.kind == OpSharding::Kind::kSplitOutput && Known(out) &&
                    mode.dim < Rank(out)
                ? absl::StrCat(": output dim ", mode.dim, " is ",
                               Shape(out)[mode.dim])
                : "",
            " (an input or output does not split there, or the op type has "
            "no such rule)"));
      }
      Apply(op, mode, *rule);
      continue;
    }
    // Partial inputs are allreduced first (Megatron's g), unless the op
    // reads no data.
    const bool reads_data = o.op_type != "Shape" && o.op_type != "Size";
    for (int x : o.inputs) {
      if (x >= 0 && reads_data && Held(x).kind == Kind::kPartial) {
        const TensorLayout to = options_.sequence_parallel
                                    ? TokenSplit(x, t)
                                    : TensorLayout::Replicated();
        Exchange(x, to, op);
        layout_[x] = to;
      }
    }
    OpSharding best = OpSharding::Replicated();
    std::optional<OpRule> best_rule = Rule(op, best);
    if (t >= 2 && !o.outputs.empty() && Known(o.outputs[0])) {
      bool any_split = false;
      for (int x : o.inputs) {
        any_split |= x >= 0 && Held(x).kind == Kind::kSplit;
      }
      std::vector<OpSharding> modes;
      for (int e = 0; e < Rank(o.outputs[0]); ++e) {
        modes.push_back(OpSharding::SplitOutput(e));
      }
      modes.push_back(OpSharding::Contracted());
      // A weight's reader: row-parallel where its input is split on the
      // dim it sums over (no communication), else it starts a split
      // (contract), gathering a split input first.
      OpSharding start = OpSharding::Replicated();
      if (WeightFed(op)) {
        const std::string& type = o.op_type;
        if (type == "MatMul") {
          start = OpSharding::SplitOutput(Rank(o.outputs[0]) - 1);
        } else if (type == "Gemm" || type == "Conv") {
          start = OpSharding::SplitOutput(1);
        } else {
          start = OpSharding::Contracted();
        }
        const std::optional<OpRule> row = Rule(op, OpSharding::Contracted());
        if (any_split && row && Cost(op, *row).first == 0) {
          start = OpSharding::Contracted();
        }
      }
      std::optional<OpRule> started;
      if (start.split()) started = Rule(op, start);
      if (started) {
        best = start;
        best_rule = started;
      } else if (any_split) {
        std::pair<int64_t, int64_t> least = Cost(op, *best_rule);
        int64_t least_total = least.first + least.second;
        for (const OpSharding& mode : modes) {
          const std::optional<OpRule> rule = Rule(op, mode);
          if (!rule) continue;
          const std::pair<int64_t, int64_t> cost = Cost(op, *rule);
          const int64_t total = cost.first + cost.second;
          if (total < least_total || (total == least_total && !best.split())) {
            best = mode;
            best_rule = rule;
            least_total = total;
          }
        }
      }
    }
    Apply(op, best, *best_rule);
  }
  // Graph outputs leave replicated.
  for (int y : graph_.outputs()) {
    if (Held(y).kind != Kind::kReplicated) {
      Exchange(y, TensorLayout::Replicated(), graph_.tensor(y).producer);
    }
  }
  TensorSharding out;
  out.group_of_op.resize(graph_.ops().size());
  for (size_t op = 0; op < graph_.ops().size(); ++op) {
    out.group_of_op[op] = Size(static_cast<int>(op));
  }
  out.op = op_;
  out.op_layouts.resize(graph_.ops().size());
  for (size_t op = 0; op < graph_.ops().size(); ++op) {
    const std::optional<OpRule> rule = Rule(static_cast<int>(op), op_[op]);
    if (!rule) {
      const Op& o = graph_.op(static_cast<int>(op));
      return absl::InternalError(absl::StrCat(
          "tensor sharding: op ", o.key, " (", o.op_type, ") has no rule for ",
          OpShardingName(op_[op]), " it was given"));
    }
    OpLayouts& layouts = out.op_layouts[op];
    for (const InputNeed& need : rule->inputs) {
      layouts.inputs.push_back(need.layout);
      layouts.reads_any.push_back(need.any ? 1 : 0);
      layouts.gradient_partial.push_back(need.gradient_partial ? 1 : 0);
    }
    layouts.outputs = rule->outputs;
    layouts.internal_allreduce_bytes = rule->internal_allreduce_bytes;
  }
  out.layout.reserve(num_tensors);
  for (int t = 0; t < num_tensors; ++t) out.layout.push_back(Held(t));
  out.collectives = std::move(collectives_);
  return out;
}

}  // namespace

std::string OpShardingName(const OpSharding& sharding) {
  switch (sharding.kind) {
    case OpSharding::Kind::kReplicated:
      return "replicated";
    case OpSharding::Kind::kSplitOutput:
      return absl::StrCat("out:", sharding.dim);
    case OpSharding::Kind::kContracted:
      return "contracted";
  }
  return "replicated";
}

absl::StatusOr<OpSharding> ParseOpSharding(const std::string& name) {
  if (name == "replicated" || name.empty()) return OpSharding::Replicated();
  if (name == "contracted") return OpSharding::Contracted();
  int dim = -1;
  if (name.rfind("out:", 0) == 0 && absl::SimpleAtoi(name.substr(4), &dim) &&
      dim >= 0) {
    return OpSharding::SplitOutput(dim);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("op sharding \"", name,
                   "\" is none of replicated, out:<dim>, contracted"));
}

std::string TensorLayoutName(const TensorLayout& layout) {
  switch (layout.kind) {
    case Kind::kReplicated:
      return "replicated";
    case Kind::kSplit:
      return absl::StrCat("split:", layout.dim);
    case Kind::kPartial:
      return "partial";
  }
  return "replicated";
}

double TensorSharding::ShareOfOp(int op_index) const {
  return op[op_index].split() ? 1.0 / group_of_op[op_index] : 1.0;
}

int64_t TensorSharding::HeldBytes(const Graph& graph, int t) const {
  const int64_t bytes = std::max<int64_t>(0, graph.tensor(t).bytes());
  if (layout[t].kind != Kind::kSplit) return bytes;
  // The group of its producer or, for a parameter, of a reader.
  const Tensor& tensor = graph.tensor(t);
  const int op = tensor.producer >= 0
                     ? tensor.producer
                     : (tensor.consumers.empty() ? -1 : tensor.consumers[0]);
  const int size = op < 0 ? 1 : group_of_op[op];
  return (bytes + size - 1) / size;
}

int TensorSharding::SplitOps() const {
  int n = 0;
  for (const OpSharding& s : op) n += s.split();
  return n;
}

absl::StatusOr<TensorSharding> ShardTensors(
    const Graph& graph, const std::vector<int>& group_of_op,
    const std::vector<int>& group_size, const std::vector<OpSharding>& fixed,
    const TensorShardingOptions& options) {
  if (group_of_op.size() != graph.ops().size() ||
      (!fixed.empty() && fixed.size() != graph.ops().size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor sharding: ", group_of_op.size(), " groups and ", fixed.size(),
        " shardings for ", graph.ops().size(), " ops"));
  }
  for (int g : group_of_op) {
    if (g < 0 || g >= static_cast<int>(group_size.size()) ||
        group_size[g] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor sharding: group ", g, " has no size"));
    }
  }
  return Sharder(graph, group_of_op, group_size, options).Run(fixed);
}

}  // namespace placer
