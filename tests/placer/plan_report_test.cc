#include "placer/plan_report.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

// GNMT-4 (13k view nodes) dealt over four GPUs: the page stays bounded
// (at most a box per pixel column per lane), self-contained, and shows the
// result's own figures; the title is escaped.
TEST(PlanReportTest, BoundedSelfContainedAndTheResultsFigures) {
  zoo::ZooParams p;
  p.weights = false;
  absl::StatusOr<onnx::ModelProto> proto = zoo::BuildZooModel("gnmt4", p);
  ASSERT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*proto, "gnmt4", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingView view = BuildTrainingView(*graph);
  Cluster cluster = *LoadCluster("p100x4");
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, cluster, *costs, *order);
  Placement placement;
  for (int op = 0; op < static_cast<int>(graph->ops().size()); ++op) {
    placement.device_of_op.push_back(op % 4);
  }
  SimulationOptions options;
  options.record_schedule = true;
  absl::StatusOr<SimulationResult> result =
      Simulate(context, placement, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->memory.empty());
  // Memory samples end where the simulator's peaks say they reach.
  std::vector<int64_t> highest(4, 0);
  for (const MemorySample& s : result->memory) {
    highest[s.device] = std::max(highest[s.device], s.bytes);
  }
  EXPECT_EQ(highest, result->peak_memory_bytes);

  PlanReport report;
  report.title = "gnmt4 <round robin> & co";
  report.context = &context;
  report.result = &*result;
  report.comparison = {{"single", true, 0.5, 1 << 20, 0, 0.01},
                       {"broken", false, 0, 0, 0, 0}};
  const std::string html = PlanReportHtml(report);
  EXPECT_EQ(html, PlanReportHtml(report));  // pure
  EXPECT_LT(html.size(), 1u << 20) << "bounded whatever the graph's size";
  EXPECT_LE(Count(html, "<rect"), (4 + kReportLinks) * kTimelinePixels + 2);
  EXPECT_EQ(Count(html, "<script"), 0);
  EXPECT_EQ(Count(html, "http"), 0);
  EXPECT_NE(html.find("gnmt4 &lt;round robin&gt; &amp; co"), std::string::npos);
  EXPECT_NE(html.find(absl::StrFormat("<td id=\"step_seconds\">%.6f s</td>",
                                      result->step_seconds)),
            std::string::npos);
  for (const Device& d : cluster.devices()) {
    EXPECT_NE(html.find("aria-label=\"memory of " + d.name + "\""),
              std::string::npos)
        << d.name;
  }
  EXPECT_NE(html.find("<tr><td>broken</td><td colspan=\"5\">failed</td>"),
            std::string::npos);
  // Each device's peak names what was live then.
  EXPECT_EQ(Count(html, "(capacity 16.0 GiB): "), 4);
  EXPECT_GE(Count(html, "activations "), 4);
}

// A strategy: ResNet-50's ops in two pipeline stages, each on two
// data-parallel replicas, 4 micro-batches. The page names what each device
// runs, draws each stage's allreduce as a lane, shows the step and the time
// per graph batch as the simulation says, and its peaks as a table (a
// strategy's memory has no timeline).
TEST(PlanReportTest, AStrategysStagesReplicasAndAllreduce) {
  zoo::ZooParams p;
  p.weights = false;
  absl::StatusOr<onnx::ModelProto> proto = zoo::BuildZooModel("resnet50", p);
  ASSERT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Graph> graph = ImportOnnxModel(*proto, "resnet50", {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  TrainingView view = BuildTrainingView(*graph);
  Cluster cluster = *LoadCluster("p100x4");
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext context =
      SimulationContext::Create(view, cluster, *costs, *order);
  Strategy strategy;
  const int ops = static_cast<int>(graph->ops().size());
  strategy.stage_of_op.resize(ops);
  for (int k = 0; k < ops; ++k) {
    strategy.stage_of_op[graph->topological_order()[k]] = 2 * k / ops;
  }
  strategy.stages = {PipelineStage::OneDevicePerReplica({0, 1}),
                     PipelineStage::OneDevicePerReplica({2, 3})};
  strategy.micro_batches = 4;
  SimulationOptions options;
  options.record_schedule = true;
  absl::StatusOr<StrategySimulation> step =
      SimulateStrategy(context, strategy, options);
  ASSERT_TRUE(step.ok()) << step.status();

  PlanReport report;
  report.title = "resnet50 2 x 2";
  report.context = &context;
  report.result = &step->step;
  report.strategy = &strategy;
  report.strategy_result = &*step;
  const std::string html = PlanReportHtml(report);
  EXPECT_EQ(Count(html, "<script"), 0);
  EXPECT_NE(html.find(absl::StrFormat("<td id=\"step_seconds\">%.6f s</td>",
                                      step->step.step_seconds)),
            std::string::npos);
  EXPECT_NE(
      html.find(absl::StrFormat("<td id=\"seconds_per_batch\">%.6f s</td>",
                                step->seconds_per_batch)),
      std::string::npos);
  EXPECT_NE(html.find(DescribeStrategy(strategy)), std::string::npos);
  EXPECT_NE(html.find("stage 1, replica 1: "), std::string::npos);
  EXPECT_NE(html.find(">allreduce stage 0</text>"), std::string::npos);
  EXPECT_NE(html.find(">allreduce stage 1</text>"), std::string::npos);
  // Peaks as a table, and the strategy's memory timeline per device,
  // whose samples reach the peaks the simulator reports.
  EXPECT_EQ(Count(html, "<th>micro-batches in flight</th>"), 1);
  EXPECT_EQ(Count(html, "aria-label=\"memory of"), 4);
  std::vector<int64_t> highest(4, 0);
  for (const MemorySample& s : step->step.memory) {
    highest[s.device] = std::max(highest[s.device], s.bytes);
  }
  EXPECT_EQ(highest, step->step.peak_memory_bytes);
}

}  // namespace
}  // namespace placer
