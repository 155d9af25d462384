#include "placer/plan_report.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
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
}

}  // namespace
}  // namespace placer
