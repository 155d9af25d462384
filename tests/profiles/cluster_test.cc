#include "profiles/cluster.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiles/cost_model.h"

namespace placer {
namespace {

using ::testing::HasSubstr;

TEST(ClusterTest, EveryPresetLoads) {
  std::vector<std::string> names = PresetClusterNames();
  for (const char* expected : {"p100x2", "p100x4", "p100x8", "v100x4",
                               "v100x8", "h100x8", "cpu1_gpu2", "cpu2"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end())
        << expected;
  }
  for (const std::string& name : names) {
    absl::StatusOr<Cluster> c = LoadCluster(name);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->name(), name);
  }
  Cluster p100 = *LoadCluster("p100x4");
  EXPECT_EQ(p100.num_devices(), 4);
  EXPECT_EQ(p100.device(2).name, "/gpu:2");
  EXPECT_DOUBLE_EQ(p100.link(0, 3).bandwidth, 1.2e10);
  Cluster mixed = *LoadCluster("cpu1_gpu2");
  EXPECT_EQ(mixed.device(0).kind, DeviceKind::kCpu);
  EXPECT_EQ(mixed.device(1).kind, DeviceKind::kGpu);
}

TEST(ClusterTest, TextAndJsonWithLinkOverrides) {
  const char* text = R"(
    name: "pair"
    devices { name: "a" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11
              memory_bytes: 1000 }
    devices { name: "b" kind: CPU peak_flops: 1e11 memory_bandwidth: 1e10
              memory_bytes: 2000 op_overhead_seconds: 1e-6 }
    default_link { latency_seconds: 1e-5 bandwidth: 1e9 }
    links { src: "a" dst: "b" latency_seconds: 2e-5 bandwidth: 5e8 })";
  absl::StatusOr<Cluster> c = ParseCluster(text, "pair.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->link(0, 1).bandwidth, 5e8);
  EXPECT_DOUBLE_EQ(c->link(1, 0).bandwidth, 1e9);  // full duplex default
  const char* json = R"({"name": "pair", "devices": [
      {"name": "a", "kind": "GPU", "peak_flops": 1e12,
       "memory_bandwidth": 1e11, "memory_bytes": "1000"},
      {"name": "b", "kind": "CPU", "peak_flops": 1e11,
       "memory_bandwidth": 1e10, "memory_bytes": 2000}],
      "default_link": {"latency_seconds": 1e-5, "bandwidth": 1e9}})";
  absl::StatusOr<Cluster> j = ParseCluster(json, "pair.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->device(1).memory_bytes, 2000);
  // Roofline: 1e6 FLOPs at 1e11 FLOP/s plus the overhead; transfers pay
  // latency plus bytes over bandwidth.
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  EXPECT_DOUBLE_EQ(costs->TransferSeconds(1000000, *c, 0, 1),
                   2e-5 + 1e6 / 5e8);
}

// Tensor-core rates per precision; a device without one computes at its
// peak_flops, and a negative rate names the device.
TEST(ClusterTest, PeakFlopsPerPrecision) {
  Cluster h100 = *LoadCluster("h100x8");
  EXPECT_DOUBLE_EQ(h100.device(0).PeakFlops(Precision::kFp32), 6.7e13);
  EXPECT_DOUBLE_EQ(h100.device(0).PeakFlops(Precision::kBf16), 9.89e14);
  EXPECT_DOUBLE_EQ(h100.device(0).PeakFlops(Precision::kFp16), 9.89e14);
  Cluster v100 = *LoadCluster("v100x4");
  EXPECT_DOUBLE_EQ(v100.device(0).PeakFlops(Precision::kBf16), 1.57e13);
  EXPECT_DOUBLE_EQ(v100.device(0).PeakFlops(Precision::kFp16), 1.25e14);
  absl::StatusOr<Cluster> bad = ParseCluster(R"(
    name: "bad"
    devices { name: "g" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11
              memory_bytes: 1000 bf16_peak_flops: -1 })",
                                             "bad.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.pbtxt"));
  EXPECT_THAT(bad.status().message(), HasSubstr("bf16_peak_flops"));
}

// What a device achieves: its peaks times the fractions it says; unsaid,
// the peaks. fp32 has no tensor-core fraction (the products of fp32 nodes
// run at peak_flops); a fraction outside (0, 1] names its field.
TEST(ClusterTest, AchievedFractionsOfThePeaks) {
  absl::StatusOr<Cluster> c = ParseCluster(R"(
    name: "measured"
    devices { name: "g" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11
              memory_bytes: 1000 bf16_peak_flops: 8e12
              achieved { tensor_core_fraction: 0.5 attention_fraction: 0.25
                         memory_fraction: 0.8 } }
    devices { name: "h" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11
              memory_bytes: 1000 bf16_peak_flops: 8e12 }
    default_link { latency_seconds: 0 bandwidth: 1e9 })",
                                           "measured.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  const Device& g = c->device(0);
  EXPECT_DOUBLE_EQ(g.AchievedFlops(Precision::kBf16, false), 4e12);
  EXPECT_DOUBLE_EQ(g.AchievedFlops(Precision::kBf16, true), 2e12);
  EXPECT_DOUBLE_EQ(g.AchievedFlops(Precision::kFp16, false), 1e12);
  EXPECT_DOUBLE_EQ(g.AchievedFlops(Precision::kFp32, true), 1e12);
  EXPECT_DOUBLE_EQ(g.AchievedBandwidth(), 8e10);
  const Device& h = c->device(1);
  EXPECT_DOUBLE_EQ(h.AchievedFlops(Precision::kBf16, true), 8e12);
  EXPECT_DOUBLE_EQ(h.AchievedBandwidth(), 1e11);
  EXPECT_FALSE(g.SameRates(h));
  EXPECT_TRUE(g.SameRates(g));
  // Without an fp8 rate, fp8 products run at bf16's.
  EXPECT_DOUBLE_EQ(g.PeakFlops(Precision::kFp8), 8e12);
  EXPECT_DOUBLE_EQ(g.AchievedFlops(Precision::kFp8, false), 4e12);
  absl::StatusOr<Cluster> hopper = ParseCluster(R"(
    name: "hopper"
    devices { name: "g" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11
              memory_bytes: 1000 bf16_peak_flops: 8e12 fp8_peak_flops: 16e12
              achieved { tensor_core_fraction: 0.5 fp8_fraction: 0.25 } })",
                                                "hopper.pbtxt");
  ASSERT_TRUE(hopper.ok()) << hopper.status();
  EXPECT_DOUBLE_EQ(hopper->device(0).PeakFlops(Precision::kFp8), 16e12);
  EXPECT_DOUBLE_EQ(hopper->device(0).AchievedFlops(Precision::kFp8, false),
                   4e12);
  EXPECT_DOUBLE_EQ(hopper->device(0).AchievedFlops(Precision::kBf16, false),
                   4e12);
  std::string text = R"(
    name: "bad"
    devices { name: "g" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11
              memory_bytes: 1000 achieved { memory_fraction: 1.5 } })";
  absl::StatusOr<Cluster> bad = ParseCluster(text, "bad.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("bad.pbtxt: devices[0] ('g'): achieved.memory_fraction"));
}

// A search placing ops on part of a cluster hands the policy these
// devices alone, in the order given, with the links between them.
TEST(ClusterTest, ASubsetKeepsItsDevicesAndLinks) {
  const char* text = R"(
    name: "three"
    devices { name: "a" kind: GPU peak_flops: 1e12 memory_bandwidth: 1e11
              memory_bytes: 1000 }
    devices { name: "b" kind: GPU peak_flops: 2e12 memory_bandwidth: 1e11
              memory_bytes: 2000 }
    devices { name: "c" kind: CPU peak_flops: 1e11 memory_bandwidth: 1e10
              memory_bytes: 3000 }
    default_link { latency_seconds: 1e-5 bandwidth: 1e9 }
    links { src: "c" dst: "a" latency_seconds: 2e-5 bandwidth: 5e8 })";
  absl::StatusOr<Cluster> c = ParseCluster(text, "three.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  const Cluster part = c->Subset({2, 0});
  EXPECT_EQ(part.name(), "three[c,a]");
  ASSERT_EQ(part.num_devices(), 2);
  EXPECT_EQ(part.device(0).name, "c");
  EXPECT_EQ(part.device(0).memory_bytes, 3000);
  EXPECT_EQ(part.device(1).name, "a");
  EXPECT_DOUBLE_EQ(part.link(0, 1).bandwidth, 5e8);  // c -> a
  EXPECT_DOUBLE_EQ(part.link(0, 1).latency_seconds, 2e-5);
  EXPECT_DOUBLE_EQ(part.link(1, 0).bandwidth, 1e9);  // a -> c: the default
  EXPECT_EQ(part.FindDevice("b"), -1);
}

TEST(ClusterTest, WhereDevicesLive) {
  const std::string two =
      "devices { name: \"a\" kind: CPU peak_flops: 1 memory_bandwidth: 1 "
      "memory_bytes: 1 process: 1 host: \"node7\" }\n"
      "devices { name: \"b\" kind: CPU peak_flops: 1 memory_bandwidth: 1 "
      "memory_bytes: 1 }\n"
      "default_link { latency_seconds: 0 bandwidth: 1 }\n";
  absl::StatusOr<Cluster> c = ParseCluster(two, "two.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->device(0).process, 1);
  EXPECT_EQ(c->device(0).host, "node7");
  EXPECT_EQ(c->device(1).process, -1);  // unsaid
  EXPECT_EQ(c->device(1).host, "");
  std::string bad = two;
  bad.replace(bad.find("process: 1"), 10, "process: -3");
  absl::StatusOr<Cluster> b = ParseCluster(bad, "bad.pbtxt");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()),
              ::testing::HasSubstr("bad.pbtxt: devices[0] ('a'): process"));
}

// dgx_h100:nodes=N is N hosts of the preset's 8 GPUs: NVLink inside a host,
// a NIC per GPU between hosts, each copy named for its host; the file form
// says the same with nodes and between_nodes.
TEST(ClusterTest, ClustersOfHosts) {
  absl::StatusOr<Cluster> one = LoadCluster("dgx_h100");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->num_devices(), 8);
  EXPECT_EQ(one->device(0).name, "/gpu:0");
  EXPECT_DOUBLE_EQ(one->device(0).bf16_peak_flops, 9.89e14);
  // The rates measured on an H100 (scripts/gpu_rates.py), on every copy.
  EXPECT_DOUBLE_EQ(one->device(0).tensor_core_fraction, 0.69);
  EXPECT_DOUBLE_EQ(one->device(7).attention_fraction, 0.47);
  EXPECT_DOUBLE_EQ(one->device(3).memory_fraction, 0.68);
  EXPECT_DOUBLE_EQ(one->device(5).AchievedFlops(Precision::kFp8, false),
                   1.979e15 * 0.6);
  absl::StatusOr<Cluster> two = LoadCluster("dgx_h100:nodes=2");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->name(), "dgx_h100:nodes=2");
  ASSERT_EQ(two->num_devices(), 16);
  EXPECT_EQ(two->device(11).name, "/node:1/gpu:3");
  EXPECT_EQ(two->device(11).host, "node1");
  EXPECT_TRUE(two->device(11).SameRates(two->device(0)));
  EXPECT_EQ(two->device(2).host, "node0");
  EXPECT_DOUBLE_EQ(two->link(8, 15).bandwidth, 4.5e11);   // inside node1
  EXPECT_DOUBLE_EQ(two->link(3, 12).bandwidth, 5e10);     // node0 -> node1
  EXPECT_DOUBLE_EQ(two->link(12, 3).latency_seconds, 5e-6);
  absl::StatusOr<Cluster> a100 = LoadCluster("dgx_a100:nodes=128");
  ASSERT_TRUE(a100.ok()) << a100.status();
  EXPECT_EQ(a100->num_devices(), 1024);
  EXPECT_DOUBLE_EQ(a100->link(0, 1023).bandwidth, 2.5e10);
  EXPECT_DOUBLE_EQ(a100->link(1016, 1023).bandwidth, 3e11);

  const std::string host =
      "devices { name: \"/gpu:0\" kind: GPU peak_flops: 1 memory_bandwidth: 1 "
      "memory_bytes: 1 }\n"
      "devices { name: \"/gpu:1\" kind: GPU peak_flops: 1 memory_bandwidth: 1 "
      "memory_bytes: 1 }\n"
      "default_link { latency_seconds: 0 bandwidth: 8 }\n"
      "links { src: \"/gpu:1\" dst: \"/gpu:0\" latency_seconds: 0 "
      "bandwidth: 4 }\n";
  absl::StatusOr<Cluster> file =
      ParseCluster(host + "nodes: 3 between_nodes { latency_seconds: 1 "
                          "bandwidth: 2 }",
                   "hosts.pbtxt");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->num_devices(), 6);
  EXPECT_DOUBLE_EQ(file->link(4, 5).bandwidth, 8);  // node2: default
  EXPECT_DOUBLE_EQ(file->link(5, 4).bandwidth, 4);  // node2: the override
  EXPECT_DOUBLE_EQ(file->link(1, 4).bandwidth, 2);  // node0 -> node2

  absl::Status s = ParseCluster(host + "nodes: 2", "hosts.pbtxt").status();
  EXPECT_THAT(s.message(), HasSubstr("hosts.pbtxt: between_nodes"));
  std::string named = host;
  named.replace(named.find("memory_bytes: 1 }"), 17,
                "memory_bytes: 1 host: \"h\" }");
  s = ParseCluster(named + "nodes: 2 between_nodes { bandwidth: 1 }",
                   "named.pbtxt")
          .status();
  EXPECT_THAT(s.message(), HasSubstr("devices[0] ('/gpu:0'): names a host"));
  EXPECT_THAT(LoadCluster("dgx_h100:nodes=129").status().message(),
              HasSubstr("1032 devices (129 nodes of 8); placer takes at most "
                        "1024"));
  EXPECT_THAT(LoadCluster("dgx_h100:nodes=0").status().message(),
              HasSubstr("':nodes=N' (N >= 1)"));
  EXPECT_THAT(LoadCluster("dgx_h100:gpus=4").status().message(),
              HasSubstr("':nodes=N' (N >= 1)"));
  EXPECT_THAT(LoadCluster("p100x4:nodes=2").status().message(),
              HasSubstr("is not a cluster of hosts"));
  // The error lists the presets that are.
  EXPECT_THAT(LoadCluster("p100x4:nodes=2").status().message(),
              HasSubstr("these are: dgx_a100, dgx_h100, grand_teton_h100"));
}

TEST(ClusterTest, GrandTetonIsTorchtitansHost) {
  // torchtitan's benchmark hosts: 96 GB HBM2e at 2.4 TB/s, 400 Gb/s a GPU
  // between hosts; the peaks are the H100 SXM's (the upper end).
  absl::StatusOr<Cluster> c = LoadCluster("grand_teton_h100:nodes=2");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_devices(), 16);
  EXPECT_EQ(c->device(9).memory_bytes, int64_t{96} << 30);
  EXPECT_DOUBLE_EQ(c->device(9).memory_bandwidth, 2.4e12);
  EXPECT_DOUBLE_EQ(c->device(9).bf16_peak_flops, 9.89e14);
  EXPECT_DOUBLE_EQ(c->link(0, 8).bandwidth, 5e10);
}

TEST(ClusterTest, SizesAreBoundedBeforeAnythingIsAllocated) {
  // 20,000 devices would ask for a 6.4 GB link matrix (the CLI died of
  // std::bad_alloc): refused by count, naming the file.
  std::string text;
  for (int d = 0; d <= kMaxDevices; ++d) {
    text += "devices { name: \"/cpu:" + std::to_string(d) +
            "\" kind: CPU peak_flops: 1 memory_bandwidth: 1 memory_bytes: 1 }\n";
  }
  absl::Status s = ParseCluster(text, "big.pbtxt").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("big.pbtxt: 1025 devices; placer takes "
                                     "at most 1024"));
  s = ParseCluster("devices { name: \"" + std::string(300, 'x') +
                       "\" kind: CPU peak_flops: 1 memory_bandwidth: 1 "
                       "memory_bytes: 1 }",
                   "long.pbtxt")
          .status();
  EXPECT_THAT(s.message(), HasSubstr("a name of 300 bytes; at most 256"));
}

TEST(ClusterTest, ErrorsNameTheLineOrField) {
  absl::Status s = ParseCluster("name: \"x\"\ndevices { nme: \"a\" }",
                                "bad.pbtxt")
                       .status();
  EXPECT_THAT(s.message(), HasSubstr("bad.pbtxt: line 2"));
  EXPECT_THAT(s.message(), HasSubstr("nme"));
  s = ParseCluster(R"({"devices": [{"name": 3}]})", "bad.json").status();
  EXPECT_THAT(s.message(), HasSubstr("bad.json"));
  s = ParseCluster(
          "devices { name: \"a\" kind: GPU peak_flops: 0 memory_bandwidth: 1 "
          "memory_bytes: 1 }",
          "zero.pbtxt")
          .status();
  EXPECT_THAT(s.message(), HasSubstr("devices[0] ('a'): peak_flops"));
  s = ParseCluster(
          "devices { name: \"a\" kind: GPU peak_flops: 1 memory_bandwidth: 1 "
          "memory_bytes: 1 }\n"
          "devices { name: \"a\" kind: GPU peak_flops: 1 memory_bandwidth: 1 "
          "memory_bytes: 1 }",
          "dup.pbtxt")
          .status();
  EXPECT_THAT(s.message(), HasSubstr("duplicate device name"));
  s = ParseCluster(
          "devices { name: \"a\" kind: GPU peak_flops: 1 memory_bandwidth: 1 "
          "memory_bytes: 1 }\n"
          "devices { name: \"b\" kind: GPU peak_flops: 1 memory_bandwidth: 1 "
          "memory_bytes: 1 }",
          "nolink.pbtxt")
          .status();
  EXPECT_THAT(s.message(), HasSubstr("default_link"));
  EXPECT_THAT(LoadCluster("p100x3").status().message(),
              HasSubstr("unknown cluster 'p100x3'"));
  EXPECT_THAT(LoadCluster("/no/such.pbtxt").status().message(),
              HasSubstr("/no/such.pbtxt"));
}

}  // namespace
}  // namespace placer
