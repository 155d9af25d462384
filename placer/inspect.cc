#include "placer/inspect.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "graph/training_view.h"
#include "placer/json_report.h"
#include "runtime/executor_ops.h"

namespace placer {
namespace {

std::string HumanFlops(double flops) {
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (flops >= 1000 && u < 5) {
    flops /= 1000;
    ++u;
  }
  return absl::StrFormat("%.2f %sFLOP", flops, units[u]);
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return absl::StrFormat("%.2f %s", bytes, units[u]);
}

}  // namespace

InspectReport Inspect(const std::string& model, const Graph& graph,
                      double import_seconds) {
  InspectReport r;
  r.model = model;
  r.graph_name = graph.name();
  r.nodes = static_cast<int>(graph.ops().size());
  r.folded_nodes = static_cast<int>(graph.folded_op_keys().size());
  TrainingView view = BuildTrainingView(graph);
  r.training_nodes = static_cast<int>(view.nodes().size());
  for (const TrainingNode& n : view.nodes()) {
    r.backward_nodes += n.kind == NodeKind::kBackward;
    r.update_nodes += n.kind == NodeKind::kUpdate;
  }
  for (const Tensor& t : graph.tensors()) {
    if (t.kind == TensorKind::kParameter) r.parameters += t.num_elements();
  }
  r.parameter_bytes = graph.parameter_bytes();
  r.forward_flops = view.flops(NodeKind::kForward);
  r.backward_flops = view.flops(NodeKind::kBackward);
  r.update_flops = view.flops(NodeKind::kUpdate);
  r.training_flops = view.training_flops();
  r.longest_path_flops = LongestPathFlops(graph);
  for (const Op& op : graph.ops()) {
    r.estimated_ops += op.forward.status == CostStatus::kEstimated;
  }
  for (int i : graph.unknown_cost_ops()) {
    const Op& op = graph.op(i);
    r.unknown_ops.push_back({op.key, op.op_type, op.domain});
  }
  for (int i : OpsUnsupportedByExecutor(graph)) {
    const Op& op = graph.op(i);
    r.unsupported_by_executor.push_back({op.key, op.op_type, op.domain});
  }
  r.ops_by_type = StatsByOpType(graph);
  r.import_seconds = import_seconds;
  return r;
}

namespace {

void AppendOps(const std::vector<InspectReport::UnknownOp>& ops,
               std::string* out) {
  for (const auto& u : ops) {
    absl::StrAppendFormat(out, "  %s (%s%s%s)\n", u.key, u.domain,
                          u.domain.empty() ? "" : "::", u.op_type);
  }
}

}  // namespace

std::string FormatInspectText(const InspectReport& r) {
  std::string out;
  absl::StrAppendFormat(&out, "model            %s (graph '%s')\n", r.model,
                        r.graph_name);
  absl::StrAppendFormat(&out, "nodes            %d forward ONNX nodes",
                        r.nodes);
  if (r.folded_nodes > 0) {
    absl::StrAppendFormat(&out, " (%d more folded to constants at import)",
                          r.folded_nodes);
  }
  out += "\n";
  absl::StrAppendFormat(
      &out, "training view    %d nodes (%d forward, %d backward, %d update)\n",
      r.training_nodes, r.nodes, r.backward_nodes, r.update_nodes);
  absl::StrAppendFormat(&out, "parameters       %d (%s)\n", r.parameters,
                        HumanBytes(static_cast<double>(r.parameter_bytes)));
  absl::StrAppendFormat(&out, "forward          %s\n",
                        HumanFlops(r.forward_flops));
  absl::StrAppendFormat(&out, "backward         %s\n",
                        HumanFlops(r.backward_flops));
  absl::StrAppendFormat(&out, "update           %s\n",
                        HumanFlops(r.update_flops));
  absl::StrAppendFormat(
      &out, "training step    %s (%.2fx forward)\n",
      HumanFlops(r.training_flops),
      r.forward_flops > 0 ? r.training_flops / r.forward_flops : 0.0);
  absl::StrAppendFormat(
      &out, "longest path     %s of forward FLOPs (%.1f%% of forward)\n",
      HumanFlops(r.longest_path_flops),
      r.forward_flops > 0 ? 100 * r.longest_path_flops / r.forward_flops
                          : 0.0);
  absl::StrAppendFormat(&out, "import           %.3f s\n", r.import_seconds);
  absl::StrAppendFormat(&out, "\n%-28s %8s %16s %7s\n", "op type", "count",
                        "forward FLOPs", "share");
  std::vector<std::pair<std::string, OpTypeStats>> rows(r.ops_by_type.begin(),
                                                        r.ops_by_type.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.flops > b.second.flops;
  });
  for (const auto& [type, s] : rows) {
    absl::StrAppendFormat(
        &out, "%-28s %8d %16s %6.1f%%\n", type, s.count, HumanFlops(s.flops),
        r.forward_flops > 0 ? 100 * s.flops / r.forward_flops : 0.0);
  }
  if (r.estimated_ops > 0) {
    absl::StrAppendFormat(&out,
                          "\n%d ops have estimated costs (data-dependent or "
                          "interpolation ops)\n",
                          r.estimated_ops);
  }
  if (r.unknown_ops.empty()) {
    out += "\nunknown ops      none\n";
  } else {
    absl::StrAppendFormat(&out,
                          "\nunknown ops      %d (no cost model; their FLOPs "
                          "are not in the totals):\n",
                          r.unknown_ops.size());
    AppendOps(r.unknown_ops, &out);
  }
  if (!r.unsupported_by_executor.empty()) {
    absl::StrAppendFormat(&out,
                          "\nnot runnable     %d ops have no LibTorch kernel "
                          "(run and profile refuse the model):\n",
                          r.unsupported_by_executor.size());
    AppendOps(r.unsupported_by_executor, &out);
  }
  return out;
}

std::string FormatInspectJson(const InspectReport& r) {
  google::protobuf::Struct s;
  auto& f = *s.mutable_fields();
  f["model"].set_string_value(r.model);
  f["graph_name"].set_string_value(r.graph_name);
  f["nodes"].set_number_value(r.nodes);
  f["folded_nodes"].set_number_value(r.folded_nodes);
  f["training_nodes"].set_number_value(r.training_nodes);
  f["backward_nodes"].set_number_value(r.backward_nodes);
  f["update_nodes"].set_number_value(r.update_nodes);
  f["parameters"].set_number_value(static_cast<double>(r.parameters));
  f["parameter_bytes"].set_number_value(
      static_cast<double>(r.parameter_bytes));
  f["forward_flops"].set_number_value(r.forward_flops);
  f["backward_flops"].set_number_value(r.backward_flops);
  f["update_flops"].set_number_value(r.update_flops);
  f["training_flops"].set_number_value(r.training_flops);
  f["longest_path_flops"].set_number_value(r.longest_path_flops);
  f["estimated_ops"].set_number_value(r.estimated_ops);
  f["import_seconds"].set_number_value(r.import_seconds);
  auto* unknown = f["unknown_ops"].mutable_list_value();
  for (const auto& u : r.unknown_ops) {
    auto& e = *unknown->add_values()->mutable_struct_value()->mutable_fields();
    e["key"].set_string_value(u.key);
    e["op_type"].set_string_value(u.op_type);
    e["domain"].set_string_value(u.domain);
  }
  auto* unsupported = f["unsupported_by_executor"].mutable_list_value();
  for (const auto& u : r.unsupported_by_executor) {
    auto& e =
        *unsupported->add_values()->mutable_struct_value()->mutable_fields();
    e["key"].set_string_value(u.key);
    e["op_type"].set_string_value(u.op_type);
    e["domain"].set_string_value(u.domain);
  }
  auto& by_type = *f["ops_by_type"].mutable_struct_value()->mutable_fields();
  for (const auto& [type, st] : r.ops_by_type) {
    auto& e = *by_type[type].mutable_struct_value()->mutable_fields();
    e["count"].set_number_value(st.count);
    e["forward_flops"].set_number_value(st.flops);
  }
  return ReportJson(s);
}

}  // namespace placer
