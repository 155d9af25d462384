// Exact makespans and memory peaks on tiny graphs, computed by hand, and
// invariants of the simulator on every zoo model and cluster preset.
#include "simulator/simulator.h"

#include <random>

#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "simulator/chrome_trace.h"
#include "profiles/cluster.h"
#include "profiles/cluster.pb.h"
#include "profiles/cost_model.h"
#include "tests/graph/test_models.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

using ::placer::testing::AddInput;
using ::placer::testing::AddNode;
using ::placer::testing::AddOutput;
using ::placer::testing::AddWeight;
using ::placer::testing::EmptyModel;

// Devices computing `flops_per_second` with unlimited memory bandwidth and
// no launch overhead; links of 4000 bytes/s and no latency. A [1, 1000]
// float tensor (4000 bytes) then takes 1 s to send and a Relu on it 1 s
// at 1000 FLOP/s.
Cluster TestCluster(int devices, double flops_per_second = 1000,
                    int64_t memory_bytes = 1 << 30) {
  proto::Cluster m;
  m.set_name("test");
  for (int i = 0; i < devices; ++i) {
    proto::Device* d = m.add_devices();
    d->set_name("/dev:" + std::to_string(i));
    d->set_kind(proto::CPU);
    d->set_peak_flops(flops_per_second);
    d->set_memory_bandwidth(1e30);
    d->set_memory_bytes(memory_bytes);
  }
  m.mutable_default_link()->set_bandwidth(4000);
  return *Cluster::FromProto(m, "test");
}

struct Fixture {
  Graph graph;
  TrainingView view;
  Cluster cluster;
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewTopologicalReadyOrder();

  Fixture(const onnx::ModelProto& m, Cluster c)
      : graph(*ImportOnnxModel(m, "test", {})),
        view(BuildTrainingView(graph)),
        cluster(std::move(c)) {}

  SimulationResult Run(const std::map<std::string, int>& where,
                       bool record = false, bool later = false) {
    Placement p;
    p.device_of_op.assign(graph.ops().size(), 0);
    for (const auto& [key, d] : where) {
      int op = graph.FindOp(key);
      EXPECT_GE(op, 0) << key;
      p.device_of_op[op] = d;
    }
    SimulationContext c =
        SimulationContext::Create(view, cluster, *costs, *order);
    SimulationOptions options;
    options.record_schedule = record;
    options.later_micro_batch = later;
    absl::StatusOr<SimulationResult> r = Simulate(c, p, options);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }
};

onnx::ModelProto Relus(std::vector<std::array<std::string, 3>> nodes) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 1000});
  for (const auto& [type, name, input] : nodes) {
    if (type == "Add") {
      AddNode(g, "Add", name, {input.substr(0, input.find(',')),
                               input.substr(input.find(',') + 1)},
              {name});
    } else {
      AddNode(g, type, name, {input}, {name});
    }
  }
  AddOutput(g, nodes.back()[1]);
  return m;
}

TEST(SimulatorTest, ChainOnOneDeviceIsTheSumOfItsOps) {
  Fixture f(Relus({{"Relu", "a", "x"}, {"Relu", "b", "a"}, {"Relu", "c", "b"}}),
            TestCluster(1));
  SimulationResult r = f.Run({});
  EXPECT_DOUBLE_EQ(r.step_seconds, 3);
  EXPECT_EQ(r.bytes_moved, 0);
  EXPECT_DOUBLE_EQ(r.busy_seconds[0], 3);
  // x, then one input and one output alive at a time: 8000 bytes.
  EXPECT_EQ(r.peak_memory_bytes[0], 8000);
  // At the peak: x (a graph input) and a's output (an activation).
  ASSERT_EQ(r.peak_breakdown.size(), 1u);
  EXPECT_EQ(r.peak_breakdown[0].inputs, 4000);
  EXPECT_EQ(r.peak_breakdown[0].activations, 4000);
  EXPECT_EQ(r.peak_breakdown[0].parameters + r.peak_breakdown[0].gradients +
                r.peak_breakdown[0].workspace,
            0);
  EXPECT_EQ(r.critical_path.size(), 3u);
}

// a on dev0 feeds b (dev0) and c (dev1); d = b + c on dev0.
// a [0,1]; b [1,2]; a -> dev1 [1,2]; c [2,3]; c -> dev0 [3,4]; d [4,5].
TEST(SimulatorTest, DiamondAcrossALink) {
  Fixture f(Relus({{"Relu", "a", "x"},
                   {"Relu", "b", "a"},
                   {"Relu", "c", "a"},
                   {"Add", "d", "b,c"}}),
            TestCluster(2));
  SimulationResult r = f.Run({{"c", 1}});
  EXPECT_DOUBLE_EQ(r.step_seconds, 5);
  EXPECT_EQ(r.bytes_moved, 8000);
  EXPECT_EQ(r.transfers_count, 2);
  // Critical path: a, send a, c, send c, d.
  ASSERT_EQ(r.critical_path.size(), 5u);
  EXPECT_TRUE(r.critical_path[1].is_transfer);
  EXPECT_DOUBLE_EQ(r.critical_path[4].start_seconds, 4);
}

// The roofline, for test cost models to change one thing of.
class RooflineBased : public CostModel {
 public:
  double NodeSeconds(const TrainingView& view, int node,
                     const Device& device) const override {
    return roofline_->NodeSeconds(view, node, device);
  }
  double TransferSeconds(int64_t bytes, const Cluster& cluster, int src,
                         int dst) const override {
    return roofline_->TransferSeconds(bytes, cluster, src, dst);
  }
  bool IsGuess(const TrainingView& view, int node) const override {
    return roofline_->IsGuess(view, node);
  }
  double AccumulateSeconds(const TrainingView& view, int update_node,
                           const Device& device) const override {
    return roofline_->AccumulateSeconds(view, update_node, device);
  }

 protected:
  std::unique_ptr<CostModel> roofline_ = NewRooflineCostModel();
};

// Devices of one host slow each other: a node takes the roofline
// (AloneNodeSeconds) on a device that is the only one of its host in use,
// twice that (NodeSeconds) otherwise.
class HostContention : public RooflineBased {
 public:
  double NodeSeconds(const TrainingView& view, int node,
                     const Device& device) const override {
    return 2 * roofline_->NodeSeconds(view, node, device);
  }
  double AloneNodeSeconds(const TrainingView& view, int node,
                          const Device& device) const override {
    return roofline_->NodeSeconds(view, node, device);
  }
};

// b1 -> b2 and c1 read x; d = b2 + c1. Every op 1 s alone, 2 s beside
// another device of its host in use.
// All on dev0: alone, 4 x 1 s = 4.
// c1 on dev1, one host: everything slowed: b1 [0,2], c1 [0,2], b2 [2,4],
// c1 -> dev0 [2,3], d [4,6] = 6 (dev1 idle after 2 s still counts).
// c1 on dev1 of another host: b1, c1 [0,1]; b2 [1,2]; send [1,2]; d [2,3].
TEST(SimulatorTest, DevicesOfOneHostSlowEachOther) {
  auto model = Relus({{"Relu", "b1", "x"},
                      {"Relu", "b2", "b1"},
                      {"Relu", "c1", "x"},
                      {"Add", "d", "b2,c1"}});
  Fixture f(model, TestCluster(2));
  f.costs = std::make_unique<HostContention>();
  EXPECT_DOUBLE_EQ(f.Run({}).step_seconds, 4);
  SimulationResult r = f.Run({{"c1", 1}});
  EXPECT_DOUBLE_EQ(r.step_seconds, 6);
  EXPECT_DOUBLE_EQ(r.busy_seconds[0], 3 * 2);
  EXPECT_DOUBLE_EQ(r.busy_seconds[1], 2);

  proto::Cluster m;
  for (int d = 0; d < 2; ++d) {
    proto::Device* device = m.add_devices();
    device->set_name("/dev:" + std::to_string(d));
    device->set_kind(proto::CPU);
    device->set_peak_flops(1000);
    device->set_memory_bandwidth(1e30);
    device->set_memory_bytes(1 << 30);
    device->set_host(d == 0 ? "a" : "b");
  }
  m.mutable_default_link()->set_bandwidth(4000);
  Fixture g(model, *Cluster::FromProto(m, "two_hosts"));
  g.costs = std::make_unique<HostContention>();
  SimulationResult apart = g.Run({{"c1", 1}});
  EXPECT_DOUBLE_EQ(apart.step_seconds, 3);
  EXPECT_DOUBLE_EQ(apart.busy_seconds[0], 3);
  // The roofline alone does not tell the two apart: 3 s on one host too.
  Fixture h(model, TestCluster(2));
  EXPECT_DOUBLE_EQ(h.Run({{"c1", 1}}).step_seconds, 3);
}

// a on dev0 feeds b and c, both on dev1: a is sent once.
// a [0,1]; send [1,2]; b [2,3]; c [3,4].
TEST(SimulatorTest, FanOutSendsATensorOnce) {
  Fixture f(Relus({{"Relu", "a", "x"},
                   {"Relu", "b", "a"},
                   {"Relu", "c", "a"},
                   {"Add", "d", "b,c"}}),
            TestCluster(2));
  SimulationResult r = f.Run({{"b", 1}, {"c", 1}, {"d", 1}});
  EXPECT_EQ(r.transfers_count, 1);
  EXPECT_EQ(r.bytes_moved, 4000);
  EXPECT_DOUBLE_EQ(r.step_seconds, 5);  // d [4,5] after b, c on dev1
}

// Split (0 s) on dev0 writes two 4000-byte halves for an Add on dev1 (1 s
// for 1000 FLOPs). One link direction: sends [0,1] and [1,2]; Add [2,3].
// Parallel links would have given 2 s.
TEST(SimulatorTest, TwoTensorsContendForOneLink) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 2000});
  auto* split = AddNode(g, "Split", "split", {"x"}, {"s0", "s1"});
  onnx::AttributeProto axis;
  axis.set_name("axis");
  axis.set_type(onnx::AttributeProto::INT);
  axis.set_i(1);
  *split->add_attribute() = axis;
  AddNode(g, "Add", "add", {"s0", "s1"}, {"y"});
  AddOutput(g, "y");
  Fixture f(m, TestCluster(2));
  SimulationResult r = f.Run({{"add", 1}});
  EXPECT_DOUBLE_EQ(r.step_seconds, 3);
  ASSERT_EQ(r.transfers.size(), 2u);
  EXPECT_DOUBLE_EQ(r.transfers[0].end_seconds, 1);
  EXPECT_DOUBLE_EQ(r.transfers[1].start_seconds, 1);
  EXPECT_DOUBLE_EQ(r.transfers[1].end_seconds, 2);
}

// y = x W with x [1,2], W [2,2] trained: forward (8 FLOPs), backward (dW
// only, 8 FLOPs), update (4 FLOPs x 4 elements) at 8 FLOP/s: 1 + 1 + 2 s.
// Memory: W and its momentum 32 B resident; x 8 B; y 8 B while mm runs:
// 48 B; then y (unread) freed; grad:mm writes dW 16 B while x is still
// held: 32 + 8 + 16 = 56 B peak.
TEST(SimulatorTest, TrainingStepMemoryPeak) {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {1, 2});
  AddWeight(g, "w", {2, 2});
  AddNode(g, "MatMul", "mm", {"x", "w"}, {"y"});
  AddOutput(g, "y");
  Fixture f(m, TestCluster(1, 8, /*memory_bytes=*/56));
  SimulationResult r = f.Run({});
  EXPECT_DOUBLE_EQ(r.step_seconds, 4);
  EXPECT_EQ(r.peak_memory_bytes[0], 56);
  EXPECT_FALSE(r.oom);
  ASSERT_EQ(r.peak_breakdown.size(), 1u);
  EXPECT_EQ(r.peak_breakdown[0].parameters, 32);  // w and its momentum
  Fixture tight(m, TestCluster(1, 8, /*memory_bytes=*/55));
  EXPECT_TRUE(tight.Run({}).oom);
}

// A value lives until its last reader, and a backward reads only what its
// op keeps (graph/saved_for_backward.h): x -> MatMul W -> y -> Transpose ->
// t -> Relu -> r, every activation 32 bytes, W 16 (+ momentum 16).
//   resident 32, x 32: 64; mm writes y: 96; tr writes t: 128, frees y (only
//   tr read it): 96; relu writes r: 128, frees t (Relu keeps its output,
//   not its input): 96; grad:relu reads r, writes dt: 128, frees r: 96;
//   grad:tr writes dy: 128, frees dt: 96; grad:mm reads x, W and dy,
//   writes dW: 112, frees x and dy. Peak 128.
// Were every backward to keep its op's inputs, y and t would live to
// grad:tr and grad:relu: 160 after relu and again at each of them.
TEST(SimulatorTest, ABackwardKeepsOnlyWhatItsOpNeeds) {
  Fixture f(testing::MatMulTransposeRelu(), TestCluster(1, 8));
  SimulationResult r = f.Run({});
  EXPECT_EQ(r.peak_memory_bytes[0], 128);
  Fixture tight(testing::MatMulTransposeRelu(),
                TestCluster(1, 8, /*memory_bytes=*/127));
  EXPECT_TRUE(tight.Run({}).oom);
}

// W homed on A (m0 reads it first) and read by m1..m3 on B, at 8 FLOP/s:
// forward 1 s each (8 FLOPs); backward 2 s (dW and dy) and 1 s for m0 (dW
// only); the update 3.5 s (4 x 4 + 3 adds x 4 elements). Links: W (16 B)
// 0.004 s, y (8 B) 0.002 s.
//   A: m0 [0, 1]; W -> B [0, .004]; y0 -> B [1, 1.002].
//   B: m1 [1.002, 2.002], m2, m3 [.., 4.002]; grad:m3 [4.002, 6.002],
//      grad:m2 [.., 8.002], grad:m1 [.., 10.002]: B's three partials of
//      W in one buffer, sent once [10.002, 10.006], then dy0 [.., 10.008].
//   A: grad:m0 [10.008, 11.008]: the backward ends; update [11.008,
//      14.508]. (B's buffer leaves once B's last partial is made, as
//      autograd sends a copied weight's gradient home during the backward;
//      the update waits for the whole backward.)
// Memory, A: W + momentum 32, x 8 (until grad:m0); y0 8 until sent (48);
// B's buffer of W 16 arrives and stays (56), dy0 8 (64); grad:m0 writes
// its partial 16: 80 peak, added into the buffer and freed.
// B: W 16, y0 8, y1 8, y2 8 (y3 8 freed unread: 48 peak so far); grad:m3
// writes dW 16 + dy2 8 (64), frees y2, keeps both as buffers (56);
// grad:m2 writes 24 more: 80 peak; then everything frees down to the two
// buffers in flight. Without accumulation, A would receive three 16-byte
// partials and keep them until the update.
TEST(SimulatorTest, PartialGradientsAreSummedWhereTheyAreMade) {
  Fixture f(testing::SharedWeightChain(), TestCluster(2, 8));
  SimulationResult r = f.Run({{"m1", 1}, {"m2", 1}, {"m3", 1}});
  EXPECT_NEAR(r.step_seconds, 14.508, 1e-9);
  ASSERT_EQ(r.transfers.size(), 4u);
  int w = f.graph.FindTensor("w");
  int gradients_home = 0;
  for (const ScheduledTransfer& t : r.transfers) {
    if (t.gradient_sum < 0) continue;
    EXPECT_EQ(t.src, 1);
    EXPECT_EQ(t.dst, 0);
    const GradientSum& sum = f.view.gradient_sums()[t.gradient_sum];
    if (sum.tensor != w) continue;
    ++gradients_home;
    EXPECT_EQ(TransferName(f.view, t), "grad:w (summed)");
    EXPECT_EQ(t.bytes, 16);
    EXPECT_NEAR(t.start_seconds, 10.002, 1e-9);
    EXPECT_NEAR(t.end_seconds, 10.006, 1e-9);
  }
  EXPECT_EQ(gradients_home, 1);
  EXPECT_EQ(r.bytes_moved, 16 + 8 + 16 + 8);
  EXPECT_EQ(r.peak_memory_bytes, (std::vector<int64_t>{80, 80}));
  // As a later micro-batch of an accumulation loop (the same events): A
  // holds W's accumulator (16) from the start, and W's sum is complete
  // once B's buffer and grad:m0's partial have both reached A; so at
  // grad:m0's start A holds 80 + 16 = 96, and once grad:m0 ends the sum
  // goes into the accumulator. B holds no accumulator: 80.
  SimulationResult later =
      f.Run({{"m1", 1}, {"m2", 1}, {"m3", 1}}, false, /*later=*/true);
  EXPECT_EQ(later.peak_memory_bytes, r.peak_memory_bytes);
  EXPECT_EQ(later.accumulator_bytes, (std::vector<int64_t>{16, 0}));
  EXPECT_EQ(later.later_peak_memory_bytes, (std::vector<int64_t>{96, 80}));
  EXPECT_EQ(later.later_peak_breakdown[0].gradients, 16 + 16 + 8 + 16);
  // On one device nothing moves; W's four partials share one buffer: W and
  // momentum 32, x 8, y0..y2 24 (y3 freed unread); grad:m3 writes 24 (88),
  // frees y2 and keeps dW and dy2 as buffers (80); grad:m2 writes 24 more:
  // 104 peak; after it each backward frees as much as it writes.
  SimulationResult one = f.Run({});
  EXPECT_EQ(one.bytes_moved, 0);
  EXPECT_EQ(one.peak_memory_bytes[0], 104);
}

// The roofline, plus 0.5 s for each partial gradient added into a buffer
// its device already holds.
class HalfSecondAdds : public RooflineBased {
 public:
  double PartialAddSeconds(const TrainingView&, int,
                           const Device&) const override {
    return 0.5;
  }
};

// The adds take the device's time after the node that made the partial.
// The placement above: on B, grad:m3's partial of W becomes B's buffer,
// grad:m2's and grad:m1's are added (+0.5 s each: B's buffer is sent at
// 11.002, arrives at 11.006 and becomes A's; dy0 at 11.008); on A,
// grad:m0 [11.008, 12.008] adds its partial into that buffer (+0.5), the
// update [12.508, 16.008]. On one device: three adds, 1.5 s on a device
// that is never idle. Memory is as without the adds.
TEST(SimulatorTest, AddingAPartialIntoABufferTakesTheDevicesTime) {
  Fixture f(testing::SharedWeightChain(), TestCluster(2, 8));
  const SimulationResult before = f.Run({{"m1", 1}, {"m2", 1}, {"m3", 1}});
  const SimulationResult one_before = f.Run({});
  f.costs = std::make_unique<HalfSecondAdds>();
  SimulationResult r = f.Run({{"m1", 1}, {"m2", 1}, {"m3", 1}});
  EXPECT_NEAR(r.step_seconds, 16.008, 1e-9);
  EXPECT_NEAR(r.busy_seconds[1] - before.busy_seconds[1], 1.0, 1e-9);
  EXPECT_NEAR(r.busy_seconds[0] - before.busy_seconds[0], 0.5, 1e-9);
  EXPECT_EQ(r.peak_memory_bytes, before.peak_memory_bytes);
  SimulationResult one = f.Run({});
  EXPECT_NEAR(one.step_seconds, one_before.step_seconds + 1.5, 1e-9);
  EXPECT_EQ(one.peak_memory_bytes, one_before.peak_memory_bytes);
}

TEST(SimulatorTest, BadPlacementsAreErrors) {
  Fixture f(Relus({{"Relu", "a", "x"}}), TestCluster(2));
  SimulationContext c =
      SimulationContext::Create(f.view, f.cluster, *f.costs, *f.order);
  EXPECT_FALSE(Simulate(c, Placement{{}}).ok());
  absl::Status s = Simulate(c, Placement{{2}}).status();
  EXPECT_NE(s.message().find("'a'"), std::string::npos) << s;
}

TEST(SimulatorTest, TraceIsAValidChromeTrace) {
  Fixture f(Relus({{"Relu", "a", "x"},
                   {"Relu", "b", "a"},
                   {"Relu", "c", "a"},
                   {"Add", "d", "b,c"}}),
            TestCluster(2));
  SimulationResult r = f.Run({{"c", 1}}, /*record=*/true);
  SimulationContext c =
      SimulationContext::Create(f.view, f.cluster, *f.costs, *f.order);
  std::string json = ChromeTraceJson(c, r);
  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &trace).ok());
  const auto& events = trace.fields().at("traceEvents").list_value();
  int complete = 0, transfers = 0;
  for (const auto& e : events.values()) {
    const auto& f = e.struct_value().fields();
    ASSERT_TRUE(f.count("ph") && f.count("pid") && f.count("name"));
    if (f.at("ph").string_value() != "X") continue;
    ++complete;
    EXPECT_GE(f.at("ts").number_value(), 0);
    EXPECT_GE(f.at("dur").number_value(), 0);
    transfers += f.at("cat").string_value() == "transfer";
  }
  EXPECT_EQ(complete, 4 + 2);
  EXPECT_EQ(transfers, 2);
}

// Every zoo model on every preset: a one-device placement simulates to the
// sum of its nodes' times with no transfers; random and round-robin
// placements never beat the lower bound; results repeat exactly.
TEST(SimulatorTest, ZooModelsOnPresets) {
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  for (const zoo::ZooModel& model : zoo::ZooModels()) {
    if (model.published_size) continue;  // gpt and llama are their builders
    zoo::ZooParams p;
    p.weights = false;
    p.seq_len = model.defaults.seq_len > 0 ? 6 : 0;
    p.batch_size = 8;
    Graph g = *ImportOnnxModel(*zoo::BuildZooModel(model.name, p),
                               model.name, {});
    TrainingView view = BuildTrainingView(g);
    for (const std::string& preset : PresetClusterNames()) {
      SCOPED_TRACE(model.name + " on " + preset);
      Cluster cluster = *LoadCluster(preset);
      SimulationContext c =
          SimulationContext::Create(view, cluster, *costs, *order);
      const int n = static_cast<int>(g.ops().size());
      const int last = cluster.num_devices() - 1;
      Placement one{std::vector<int>(n, last)};
      SimulationResult r = *Simulate(c, one);
      double sum = 0;
      for (int i = 0; i < c.num_nodes(); ++i) sum += c.node_seconds(i, last);
      EXPECT_NEAR(r.step_seconds, sum, 1e-9 * sum);
      EXPECT_EQ(r.bytes_moved, 0);
      EXPECT_GE(r.step_seconds, r.lower_bound_seconds * (1 - 1e-12));
      std::mt19937 rng(7);
      Placement random{std::vector<int>(n)};
      for (int& d : random.device_of_op) d = rng() % cluster.num_devices();
      Placement chunks{std::vector<int>(n)};
      for (int k = 0; k < n; ++k) {
        chunks.device_of_op[g.topological_order()[k]] =
            k * cluster.num_devices() / n;
      }
      for (const Placement& pl : {random, chunks}) {
        SimulationResult a = *Simulate(c, pl);
        SimulationResult b = *Simulate(c, pl);
        EXPECT_GE(a.step_seconds, a.lower_bound_seconds * (1 - 1e-12));
        EXPECT_EQ(a.step_seconds, b.step_seconds);
        EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
        EXPECT_EQ(a.bytes_moved, b.bytes_moved);
        // What is live at each peak adds up to it.
        for (int d = 0; d < cluster.num_devices(); ++d) {
          const MemoryBreakdown& at = a.peak_breakdown[d];
          EXPECT_EQ(at.parameters + at.activations + at.gradients +
                        at.workspace + at.inputs,
                    a.peak_memory_bytes[d])
              << "device " << d;
        }
      }
    }
  }
}

}  // namespace
}  // namespace placer
