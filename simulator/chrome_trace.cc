#include "simulator/chrome_trace.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace placer {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr double kMicros = 1e6;

const char* KindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kForward: return "forward";
    case NodeKind::kBackward: return "backward";
    case NodeKind::kUpdate: return "update";
  }
  return "node";
}

Struct* AddEvent(google::protobuf::ListValue* events, const std::string& name,
                 const std::string& ph, int pid, int tid) {
  Struct* e = events->add_values()->mutable_struct_value();
  auto& f = *e->mutable_fields();
  f["name"].set_string_value(name);
  f["ph"].set_string_value(ph);
  f["pid"].set_number_value(pid);
  f["tid"].set_number_value(tid);
  return e;
}

void Metadata(google::protobuf::ListValue* events, const std::string& what,
              int pid, int tid, const std::string& name) {
  Struct* e = AddEvent(events, what, "M", pid, tid);
  (*(*e->mutable_fields())["args"].mutable_struct_value()->mutable_fields())
      ["name"]
          .set_string_value(name);
}

}  // namespace

std::string ChromeTraceJson(const SimulationContext& context,
                            const SimulationResult& result) {
  const TrainingView& view = context.view();
  const Cluster& cluster = context.cluster();
  Struct root;
  auto* events =
      (*root.mutable_fields())["traceEvents"].mutable_list_value();
  (*root.mutable_fields())["displayTimeUnit"].set_string_value("ms");
  for (int d = 0; d < cluster.num_devices(); ++d) {
    Metadata(events, "process_name", d, 0, cluster.device(d).name);
    Metadata(events, "thread_name", d, 0, "compute");
    for (int dst = 0; dst < cluster.num_devices(); ++dst) {
      if (dst != d) {
        Metadata(events, "thread_name", d, 1 + dst,
                 "send to " + cluster.device(dst).name);
      }
    }
  }
  for (const ScheduledNode& s : result.schedule) {
    const TrainingNode& node = view.node(s.node);
    Struct* e = AddEvent(events, node.key, "X", s.device, 0);
    auto& f = *e->mutable_fields();
    f["cat"].set_string_value(KindName(node.kind));
    f["ts"].set_number_value(s.start_seconds * kMicros);
    f["dur"].set_number_value((s.end_seconds - s.start_seconds) * kMicros);
    auto& args = *f["args"].mutable_struct_value()->mutable_fields();
    args["flops"].set_number_value(node.cost.flops);
    args["bytes_accessed"].set_number_value(
        static_cast<double>(node.cost.bytes_accessed));
  }
  for (const ScheduledTransfer& t : result.transfers) {
    Struct* e = AddEvent(events, TransferName(view, t), "X", t.src,
                         1 + t.dst);
    auto& f = *e->mutable_fields();
    f["cat"].set_string_value("transfer");
    f["ts"].set_number_value(t.start_seconds * kMicros);
    f["dur"].set_number_value((t.end_seconds - t.start_seconds) * kMicros);
    auto& args = *f["args"].mutable_struct_value()->mutable_fields();
    args["bytes"].set_number_value(static_cast<double>(t.bytes));
    args["to"].set_string_value(cluster.device(t.dst).name);
  }
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(root, &json);
  return json;
}

}  // namespace placer
