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

void DeviceThreads(const Cluster& cluster,
                   google::protobuf::ListValue* events) {
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
}

// A complete event on (pid, tid); returns its args to fill.
google::protobuf::Map<std::string, Value>& Span(
    google::protobuf::ListValue* events, const std::string& name, int pid,
    int tid, const std::string& category, double start_seconds,
    double end_seconds) {
  auto& f = *AddEvent(events, name, "X", pid, tid)->mutable_fields();
  f["cat"].set_string_value(category);
  f["ts"].set_number_value(start_seconds * kMicros);
  f["dur"].set_number_value((end_seconds - start_seconds) * kMicros);
  return *f["args"].mutable_struct_value()->mutable_fields();
}

// On the sender's thread for the receiver.
void TransferSpan(google::protobuf::ListValue* events, const std::string& name,
                  const Cluster& cluster, const ScheduledTransfer& t) {
  auto& args = Span(events, name, t.src, 1 + t.dst, "transfer",
                    t.start_seconds, t.end_seconds);
  args["bytes"].set_number_value(static_cast<double>(t.bytes));
  args["to"].set_string_value(cluster.device(t.dst).name);
}

// A node's run on `device`'s compute thread, named by its key, with its
// cost; returns its args to fill.
google::protobuf::Map<std::string, Value>& NodeSpan(
    google::protobuf::ListValue* events, const TrainingView& view, int node,
    int device, double start_seconds, double end_seconds) {
  const TrainingNode& n = view.node(node);
  auto& args = Span(events, n.key, device, 0, KindName(n.kind), start_seconds,
                    end_seconds);
  args["flops"].set_number_value(n.cost.flops);
  args["bytes_accessed"].set_number_value(
      static_cast<double>(n.cost.bytes_accessed));
  return args;
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
  DeviceThreads(cluster, events);
  for (const ScheduledNode& s : result.schedule) {
    NodeSpan(events, view, s.node, s.device, s.start_seconds, s.end_seconds);
  }
  for (const ScheduledTransfer& t : result.transfers) {
    TransferSpan(events, TransferName(view, t), cluster, t);
  }
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(root, &json);
  return json;
}

std::string StrategyChromeTraceJson(const SimulationContext& context,
                                    const Strategy& strategy,
                                    const StrategySimulation& simulation) {
  const TrainingView& view = context.view();
  const Cluster& cluster = context.cluster();
  const int D = cluster.num_devices();
  Struct root;
  auto* events =
      (*root.mutable_fields())["traceEvents"].mutable_list_value();
  (*root.mutable_fields())["displayTimeUnit"].set_string_value("ms");
  DeviceThreads(cluster, events);
  for (const PipelineStage& stage : strategy.stages) {
    for (int slot = 0; slot < stage.width(); ++slot) {
      for (int d : SlotDevices(stage, slot)) {
        Metadata(events, "thread_name", d, 1 + D, "allreduce");
      }
    }
  }
  for (const StrategyTask& t : simulation.tasks) {
    const char* kind = t.micro_batch < 0 ? "update"
                       : t.adds          ? "adds"
                       : t.recompute     ? "recompute"
                       : t.backward      ? "backward"
                                         : "forward";
    const std::string name =
        t.micro_batch < 0 ? absl::StrCat("update s", t.stage)
        : t.adds          ? absl::StrCat("adds s", t.stage)
                          : absl::StrCat(t.recompute  ? "R s"
                                         : t.backward ? "B s"
                                                      : "F s",
                                         t.stage, " j", t.micro_batch);
    Span(events, name, t.device, 0, kind, t.start_seconds, t.end_seconds);
  }
  // A wide pass's nodes, inside its task on each slot's device.
  for (const StrategyNodeRun& run : simulation.nodes) {
    NodeSpan(events, view, run.node, run.device, run.start_seconds,
             run.end_seconds)["micro_batch"]
        .set_number_value(run.micro_batch);
  }
  for (const ScheduledTransfer& t : simulation.step.transfers) {
    TransferSpan(events,
                 t.value < 0 && t.gradient_sum < 0 ? "stage transfer"
                                                   : TransferName(view, t),
                 cluster, t);
  }
  for (size_t b = 0; b < simulation.buckets.size(); ++b) {
    const StrategyBucket& bucket = simulation.buckets[b];
    const char* kind = bucket.collective == Collective::kAllreduce ? "allreduce"
                       : bucket.collective == Collective::kReduceScatter
                           ? "reduce-scatter"
                           : "all-gather";
    for (int d : SlotDevices(strategy.stages[bucket.stage], bucket.slot)) {
      Span(events, absl::StrCat("bucket ", b, " s", bucket.stage), d, 1 + D,
           kind, bucket.start_seconds, bucket.end_seconds)["bytes"]
          .set_number_value(static_cast<double>(bucket.bytes));
    }
  }
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(root, &json);
  return json;
}

}  // namespace placer
