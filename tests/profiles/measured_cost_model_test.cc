#include "profiles/measured_cost_model.h"

#include <algorithm>
#include <cstdio>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "profiles/cluster.h"
#include "runtime/profiler.h"
#include "profiles/signature.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Tmp(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

struct Diamond {
  Graph graph;
  TrainingView view;
  Diamond() {
    zoo::ZooParams p;
    p.batch_size = 4;
    p.hidden = 8;
    graph = *ImportOnnxModel(*zoo::BuildZooModel("diamond", p), "d", {});
    view = BuildTrainingView(graph);
  }
};

TEST(SignatureTest, NamesKindOpShapesAttributesAndGradients) {
  Diamond d;
  EXPECT_EQ(NodeSignature(d.view, d.graph.FindOp("top")),
            "forward MatMul(float32[4,8],float32[8,8]){}");
  EXPECT_EQ(NodeSignature(d.view, d.view.backward_node(d.graph.FindOp("top"))),
            "backward MatMul(float32[4,8],float32[8,8]){} grads=01");
  EXPECT_EQ(NodeSignature(d.view, d.view.backward_node(d.graph.FindOp("left"))),
            "backward MatMul(float32[4,8],float32[8,8]){} grads=11");
  int update = static_cast<int>(d.view.nodes().size()) - 1;
  EXPECT_EQ(NodeSignature(d.view, update), "update float32[8,8] partials=1");
  EXPECT_EQ(AccumulateSignature(d.view, update), "accumulate float32[8,8]");
}

TEST(MeasuredCostModelTest, AccumulationMeasuredOrTheRoofline) {
  Diamond d;
  Cluster cluster = *LoadCluster("cpu2");
  const Device& cpu = cluster.device(0);
  const int update = static_cast<int>(d.view.nodes().size()) - 1;
  std::unique_ptr<CostModel> roofline = NewRooflineCostModel();
  // 64 float32 elements: the buffer and the gradient read, the buffer
  // written.
  EXPECT_DOUBLE_EQ(roofline->AccumulateSeconds(d.view, update, cpu),
                   cpu.op_overhead_seconds +
                       std::max(64 / cpu.peak_flops,
                                3 * 256 / cpu.memory_bandwidth));
  MeasuredProfile p;
  p.ops[{AccumulateSignature(d.view, update), DeviceKind::kCpu}] = {2e-6, 5};
  std::unique_ptr<CostModel> measured =
      NewMeasuredCostModel(p, NewRooflineCostModel());
  EXPECT_DOUBLE_EQ(measured->AccumulateSeconds(d.view, update, cpu), 2e-6);
  EXPECT_DOUBLE_EQ(NewMeasuredCostModel({}, NewRooflineCostModel())
                       ->AccumulateSeconds(d.view, update, cpu),
                   roofline->AccumulateSeconds(d.view, update, cpu));
}

// The roofline runs a node at the device's achieved rates: bf16 products
// at the tensor-core fraction of the bf16 peak, fused attention (forward
// and backward) at the attention fraction, bytes at the memory fraction
// of the bandwidth; fp32 nodes' FLOPs at peak_flops.
TEST(RooflineTest, RunsNodesAtTheAchievedRates) {
  zoo::ZooParams p;
  p.layers = 1;
  p.hidden = 32;
  p.heads = 4;
  p.seq_len = 16;
  p.vocab = 50;
  ImportOptions import;
  import.fuse_attention = true;
  Graph graph =
      *ImportOnnxModel(*zoo::BuildZooModel("gpt", p), "gpt", import);
  TrainingOptions options;
  options.precision = Precision::kBf16;
  TrainingView view = BuildTrainingView(graph, options);
  Cluster cluster = *ParseCluster(R"(
    name: "measured"
    devices { name: "g" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e14
              memory_bytes: 1000000000 bf16_peak_flops: 8e12
              op_overhead_seconds: 1e-6
              achieved { tensor_core_fraction: 0.5 attention_fraction: 0.25
                         memory_fraction: 0.8 } })",
                                  "measured.pbtxt");
  const Device& g = cluster.device(0);
  std::unique_ptr<CostModel> roofline = NewRooflineCostModel();
  // Compute-bound nodes (their FLOPs' time over their bytes') and, for the
  // memory fraction, a data movement (no FLOPs).
  auto expect = [&](int node, double flops_per_second) {
    const OpCost& c = view.node(node).cost;
    const double bytes_seconds = c.bytes_accessed / 8e13;
    if (c.flops > 0) {
      EXPECT_GT(c.flops / flops_per_second, bytes_seconds)
          << view.node(node).key;
    }
    EXPECT_DOUBLE_EQ(roofline->NodeSeconds(view, node, g),
                     1e-6 + std::max(c.flops / flops_per_second,
                                     bytes_seconds))
        << view.node(node).key;
  };
  int attention = -1, product = -1, fp32 = -1, movement = -1;
  for (int i = 0; i < static_cast<int>(graph.ops().size()); ++i) {
    const TrainingNode& n = view.node(i);
    if (n.fused_attention) {
      attention = i;
    } else if (n.compute_precision == Precision::kBf16 && n.cost.flops > 0) {
      product = i;
    } else if (n.cost.flops > 0) {
      fp32 = i;
    } else if (n.cost.bytes_accessed > 0) {
      movement = i;
    }
  }
  ASSERT_GE(attention, 0);
  ASSERT_GE(product, 0);
  ASSERT_GE(fp32, 0);
  ASSERT_GE(movement, 0);
  expect(movement, 1e12);
  expect(attention, 2e12);
  const int attention_backward = view.backward_node(attention);
  ASSERT_GE(attention_backward, 0);
  EXPECT_TRUE(view.node(attention_backward).fused_attention);
  expect(attention_backward, 2e12);
  expect(product, 4e12);
  expect(view.backward_node(product), 4e12);
  expect(fp32, 1e12);
}

TEST(FitLinkTest, RecoversLatencyAndBandwidthExactly) {
  std::vector<LinkSample> samples;
  for (int64_t bytes : {1, 1000, 1000000, 100000000}) {
    samples.push_back({bytes, 2e-6 + static_cast<double>(bytes) / 5e9});
  }
  absl::StatusOr<LinkParams> fit = FitLink(samples);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->latency_seconds, 2e-6, 1e-12);
  EXPECT_NEAR(fit->bandwidth, 5e9, 1e-3 * 5e9);
  EXPECT_FALSE(FitLink({{10, 1e-6}}).ok());
  EXPECT_FALSE(FitLink({{10, 2e-6}, {1000, 1e-6}}).ok());
}

TEST(MeasuredCostModelTest, MeasurementsWinAndTheRestFallsBack) {
  Diamond d;
  Cluster cluster = *LoadCluster("cpu2");
  MeasuredProfile p;
  int top = d.graph.FindOp("top");
  p.ops[{NodeSignature(d.view, top), DeviceKind::kCpu}] = {0.25, 5};
  p.links[{"/cpu:0", "/cpu:1"}] = {{1e-3, 1e6}, {}};
  std::unique_ptr<CostModel> roofline = NewRooflineCostModel();
  std::unique_ptr<CostModel> measured =
      NewMeasuredCostModel(p, NewRooflineCostModel());
  const Device& cpu = cluster.device(0);
  // "top", "left" and "right" have the same signature: all measured.
  EXPECT_DOUBLE_EQ(measured->NodeSeconds(d.view, top, cpu), 0.25);
  EXPECT_DOUBLE_EQ(measured->NodeSeconds(d.view, d.graph.FindOp("left"), cpu),
                   0.25);
  int join = d.graph.FindOp("join");
  EXPECT_DOUBLE_EQ(measured->NodeSeconds(d.view, join, cpu),
                   roofline->NodeSeconds(d.view, join, cpu));
  EXPECT_DOUBLE_EQ(measured->TransferSeconds(1000, cluster, 0, 1), 2e-3);
  EXPECT_DOUBLE_EQ(measured->TransferSeconds(1000, cluster, 1, 0),
                   roofline->TransferSeconds(1000, cluster, 1, 0));
}

// Every transfer pays two hand-offs on top of the link: measured links
// and fallen-back ones alike; an overlay's measured hand-off wins, an
// unmeasured one (0) keeps the base's.
TEST(MeasuredCostModelTest, TransfersPayTwoHandoffs) {
  Cluster cluster = *LoadCluster("cpu2");
  MeasuredProfile p;
  p.links[{"/cpu:0", "/cpu:1"}] = {{1e-3, 1e6}, {}};
  p.handoff_seconds = 2.5e-5;
  std::unique_ptr<CostModel> roofline = NewRooflineCostModel();
  std::unique_ptr<CostModel> measured =
      NewMeasuredCostModel(p, NewRooflineCostModel());
  EXPECT_DOUBLE_EQ(measured->TransferSeconds(1000, cluster, 0, 1),
                   5e-5 + 1e-3 + 1e-3);
  EXPECT_DOUBLE_EQ(measured->TransferSeconds(1000, cluster, 1, 0),
                   5e-5 + roofline->TransferSeconds(1000, cluster, 1, 0));
  MeasuredProfile unmeasured;
  EXPECT_DOUBLE_EQ(MergeProfiles(p, unmeasured).handoff_seconds, 2.5e-5);
  MeasuredProfile overlay;
  overlay.handoff_seconds = 4e-5;
  EXPECT_DOUBLE_EQ(MergeProfiles(p, overlay).handoff_seconds, 4e-5);
}

// A time measured alone (no other device of the host busy) answers
// AloneNodeSeconds; NodeSeconds keeps the shared time; where only the
// shared time or nothing was measured, both give the same. Alone times
// survive a save and load, overlay the base's, and give a signature with no
// other time that one too.
TEST(MeasuredCostModelTest, AloneTimesWhereMeasured) {
  Diamond d;
  Cluster cluster = *LoadCluster("cpu2");
  const Device& cpu = cluster.device(0);
  int top = d.graph.FindOp("top"), join = d.graph.FindOp("join");
  std::string sig = NodeSignature(d.view, top);
  MeasuredProfile p;
  p.ops[{sig, DeviceKind::kCpu}] = {0.25, 5};
  p.alone_ops[{sig, DeviceKind::kCpu}] = 0.125;
  std::unique_ptr<CostModel> roofline = NewRooflineCostModel();
  std::unique_ptr<CostModel> m = NewMeasuredCostModel(p, NewRooflineCostModel());
  EXPECT_DOUBLE_EQ(m->NodeSeconds(d.view, top, cpu), 0.25);
  EXPECT_DOUBLE_EQ(m->AloneNodeSeconds(d.view, top, cpu), 0.125);
  EXPECT_DOUBLE_EQ(m->AloneNodeSeconds(d.view, join, cpu),
                   roofline->NodeSeconds(d.view, join, cpu));
  EXPECT_DOUBLE_EQ(roofline->AloneNodeSeconds(d.view, join, cpu),
                   roofline->NodeSeconds(d.view, join, cpu));

  ASSERT_TRUE(SaveProfile(p, Tmp("alone.pbtxt")).ok());
  absl::StatusOr<MeasuredProfile> back = LoadProfile(Tmp("alone.pbtxt"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->alone_ops, p.alone_ops);
  EXPECT_EQ(back->ops, p.ops);

  MeasuredProfile overlay;
  std::string join_sig = NodeSignature(d.view, join);
  overlay.alone_ops[{sig, DeviceKind::kCpu}] = 0.1;
  overlay.alone_ops[{join_sig, DeviceKind::kCpu}] = 0.5;
  MeasuredProfile merged = MergeProfiles(p, overlay);
  EXPECT_DOUBLE_EQ(merged.alone_ops.at({sig, DeviceKind::kCpu}), 0.1);
  EXPECT_DOUBLE_EQ(merged.ops.at({sig, DeviceKind::kCpu}).first, 0.25);
  EXPECT_DOUBLE_EQ(merged.ops.at({join_sig, DeviceKind::kCpu}).first, 0.5);

  FILE* bad = fopen(Tmp("bad_alone.pbtxt").c_str(), "w");
  fputs("ops { signature: \"s\" device_kind: CPU seconds: 1 "
        "alone_seconds: -2 }\n", bad);
  fclose(bad);
  EXPECT_THAT(LoadProfile(Tmp("bad_alone.pbtxt")).status().message(),
              HasSubstr("bad_alone.pbtxt: ops[0] (s): alone_seconds must be "
                        "finite and >= 0"));
}

TEST(MeasuredCostModelTest, SaveLoadRoundTripAndErrors) {
  MeasuredProfile p;
  p.source = "test";
  p.ops[{"forward Relu(float32[2]){}", DeviceKind::kGpu}] = {1.5e-6, 7};
  p.links[{"a", "b"}] = {{1e-6, 2e9}, {{1, 1e-6}, {1000, 1.5e-6}}};
  p.handoff_seconds = 3e-5;
  for (const char* name : {"p.pbtxt", "p.json"}) {
    ASSERT_TRUE(SaveProfile(p, Tmp(name)).ok());
    absl::StatusOr<MeasuredProfile> back = LoadProfile(Tmp(name));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->ops, p.ops);
    EXPECT_EQ(back->links.at({"a", "b"}).samples.size(), 2u);
    EXPECT_DOUBLE_EQ(back->handoff_seconds, 3e-5);
  }
  FILE* negative = fopen(Tmp("negative.pbtxt").c_str(), "w");
  fputs("source: \"x\"\nhandoff_seconds: -1e-6\n", negative);
  fclose(negative);
  EXPECT_THAT(LoadProfile(Tmp("negative.pbtxt")).status().message(),
              HasSubstr("negative.pbtxt: handoff_seconds must be finite"));
  FILE* f = fopen(Tmp("bad.pbtxt").c_str(), "w");
  fputs("source: \"x\"\nops { signatur: \"y\" }\n", f);
  fclose(f);
  EXPECT_THAT(LoadProfile(Tmp("bad.pbtxt")).status().message(),
              HasSubstr("bad.pbtxt: line 2"));
}

// Few repeats and copies up to 1 MiB: quick, still a fit.
ProfilerOptions QuickOptions() {
  ProfilerOptions o;
  o.warmup = 1;
  o.repeats = 3;
  o.max_link_bytes = 1 << 20;
  return o;
}

// The profiler times every node of a small model and the CPU link.
TEST(ProfilerTest, MeasuresEveryNodeSignatureAndTheLink) {
  Diamond d;
  Cluster cluster = *LoadCluster("cpu2");
  ProfilerOptions o = QuickOptions();
  std::vector<std::string> lines;
  absl::StatusOr<ProfileReport> r = ProfileDevices(
      &d.view, cluster, o, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->failed_signatures, 0);
  EXPECT_EQ(r->nodes_without_kernel, 0);
  for (int n = 0; n < static_cast<int>(d.view.nodes().size()); ++n) {
    auto it = r->profile.ops.find({NodeSignature(d.view, n), DeviceKind::kCpu});
    ASSERT_NE(it, r->profile.ops.end()) << d.view.node(n).key;
    EXPECT_GT(it->second.first, 0);
    if (d.view.node(n).kind == NodeKind::kUpdate) {
      auto added =
          r->profile.ops.find({AccumulateSignature(d.view, n), DeviceKind::kCpu});
      ASSERT_NE(added, r->profile.ops.end()) << d.view.node(n).key;
      EXPECT_GT(added->second.first, 0);
    }
  }
  // Every gradient sum with several partials: its addition, timed warm,
  // and what the measured model charges for it (top's output is read by
  // left and right).
  int sums = 0;
  std::unique_ptr<CostModel> measured =
      NewMeasuredCostModel(r->profile, NewRooflineCostModel());
  for (int s = 0; s < static_cast<int>(d.view.gradient_sums().size()); ++s) {
    if (d.view.gradient_sums()[s].partials.size() < 2) continue;
    ++sums;
    EXPECT_EQ(PartialAddSignature(d.view, s), "add float32[4,8]");
    auto added =
        r->profile.ops.find({PartialAddSignature(d.view, s), DeviceKind::kCpu});
    ASSERT_NE(added, r->profile.ops.end());
    EXPECT_GT(added->second.first, 0);
    EXPECT_DOUBLE_EQ(
        measured->PartialAddSeconds(d.view, s, cluster.device(0)),
        added->second.first);
    EXPECT_EQ(NewRooflineCostModel()->PartialAddSeconds(d.view, s,
                                                        cluster.device(0)),
              0);
  }
  EXPECT_EQ(sums, 1);
  ASSERT_EQ(r->profile.links.size(), 2u);
  const MeasuredLink& link = r->profile.links.begin()->second;
  EXPECT_EQ(link.samples.size(), 11u);  // 1 B .. 1 MiB in x4 steps
  EXPECT_GT(link.fit.bandwidth, 1e8);
  EXPECT_FALSE(lines.empty());
  // The measured model now reports no guessed node.
  std::unique_ptr<CostModel> m =
      NewMeasuredCostModel(r->profile, NewRooflineCostModel());
  for (int n = 0; n < static_cast<int>(d.view.nodes().size()); ++n) {
    EXPECT_FALSE(m->IsGuess(d.view, n));
  }
}

// A profile stopped part way keeps what it measured and says what it did
// not reach; resumed from it, the rest is measured and what it had is kept
// as it was, so that stopping and resuming covers every signature once.
TEST(ProfilerTest, StopsWhenAskedAndResumesWhereItStopped) {
  Diamond d;
  Cluster cluster = *LoadCluster("cpu2");
  auto quiet = [](const std::string&) {};
  ProfilerOptions o = QuickOptions();
  absl::StatusOr<ProfileReport> full =
      ProfileDevices(&d.view, cluster, o, quiet);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->measured_signatures, 6);
  EXPECT_FALSE(full->stopped);

  // Asked before the link fit and each timing: stop at the fourth ask.
  int asks = 0;
  o.stop = [&] { return ++asks >= 4; };
  absl::StatusOr<ProfileReport> stopped =
      ProfileDevices(&d.view, cluster, o, quiet);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(stopped->stopped);
  EXPECT_GT(stopped->measured_signatures, 0);
  EXPECT_GT(stopped->signatures_stopped, 0);
  EXPECT_EQ(stopped->measured_signatures + stopped->signatures_stopped, 6);
  EXPECT_EQ(stopped->profile.links.size(), 2u);  // the link came first
  EXPECT_THAT(
      stopped->profile.source,
      HasSubstr(absl::StrCat("; stopped with ", stopped->signatures_stopped,
                             " node signatures not measured")));
  EXPECT_LT(stopped->profile.ops.size(), full->profile.ops.size());

  o.stop = nullptr;
  o.resume = stopped->profile;
  absl::StatusOr<ProfileReport> resumed =
      ProfileDevices(&d.view, cluster, o, quiet);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_FALSE(resumed->stopped);
  EXPECT_EQ(resumed->resumed_signatures, stopped->measured_signatures);
  EXPECT_EQ(resumed->measured_signatures, stopped->signatures_stopped);
  EXPECT_THAT(resumed->profile.source, Not(HasSubstr("stopped")));
  // Every op timing the whole run has, once; the stopped run's unchanged.
  EXPECT_EQ(resumed->profile.ops.size(), full->profile.ops.size());
  for (const auto& [key, value] : full->profile.ops) {
    EXPECT_EQ(resumed->profile.ops.count(key), 1u) << key.first;
  }
  for (const auto& [key, value] : stopped->profile.ops) {
    ASSERT_EQ(resumed->profile.ops.count(key), 1u) << key.first;
    EXPECT_EQ(resumed->profile.ops.at(key), value) << key.first;
  }

  // A profile measured with other settings is not resumed.
  o.repeats = 4;
  absl::StatusOr<ProfileReport> other =
      ProfileDevices(&d.view, cluster, o, quiet);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("median of 3"));
  EXPECT_THAT(other.status().message(), HasSubstr("median of 4"));
  // "median of 3" begins "median of 30" too: settings are whole words.
  o.repeats = 3;
  o.resume->source =
      "placer profile --devices cpu, 1 thread(s) per CPU, 1 warm-up, median "
      "of 30";
  EXPECT_EQ(ProfileDevices(&d.view, cluster, o, quiet).status().code(),
            absl::StatusCode::kFailedPrecondition);
  o.resume->source += "; stopped with 2 node signatures not measured";
  EXPECT_EQ(ProfileDevices(&d.view, cluster, o, quiet).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Kinds are measured only where asked (or where the cluster has them); a
// GPU needs a CUDA LibTorch that sees it, and with one the GPU's ops and
// both directions of the CPU-GPU link are measured.
TEST(ProfilerTest, MeasuresTheKindsAskedForAndGpusOnlyWithCuda) {
  Diamond d;
  Cluster cluster = *LoadCluster("cpu1_gpu2");
  ProfilerOptions o = QuickOptions();
  auto quiet = [](const std::string&) {};
  o.kinds = {DeviceKind::kCpu};
  absl::StatusOr<ProfileReport> cpu = ProfileDevices(&d.view, cluster, o, quiet);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(cpu->profile.links.empty());  // one CPU device: no link
  for (const auto& [key, value] : cpu->profile.ops) {
    EXPECT_EQ(key.second, DeviceKind::kCpu);
  }
  EXPECT_FALSE(cpu->profile.ops.empty());

  o.kinds = {};
  absl::StatusOr<Cluster> one_gpu = ParseCluster(
      "name: \"cg\" devices { name: \"/cpu:0\" kind: CPU peak_flops: 1e11 "
      "memory_bandwidth: 1e10 memory_bytes: 1000000000 } devices { name: "
      "\"/gpu:0\" kind: GPU peak_flops: 1e13 memory_bandwidth: 1e12 "
      "memory_bytes: 1000000000 } default_link { latency_seconds: 1e-5 "
      "bandwidth: 1e10 }",
      "cg.pbtxt");
  ASSERT_TRUE(one_gpu.ok()) << one_gpu.status();
  absl::StatusOr<ProfileReport> both =
      ProfileDevices(&d.view, *one_gpu, o, quiet);
  if (!torch::cuda::is_available()) {
    ASSERT_FALSE(both.ok());
    EXPECT_NE(both.status().message().find("/gpu:0"), std::string::npos)
        << both.status();
    return;
  }
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->failed_signatures, 0);
  for (int n = 0; n < static_cast<int>(d.view.nodes().size()); ++n) {
    for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kGpu}) {
      auto it = both->profile.ops.find({NodeSignature(d.view, n), k});
      ASSERT_NE(it, both->profile.ops.end()) << d.view.node(n).key;
      EXPECT_GT(it->second.first, 0);
    }
  }
  ASSERT_EQ(both->profile.links.size(), 2u);
  for (const auto& [pair, link] : both->profile.links) {
    EXPECT_GT(link.fit.bandwidth, 1e8) << pair.first << " -> " << pair.second;
  }
}

}  // namespace
}  // namespace placer
