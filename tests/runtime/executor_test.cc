// The executor against itself and against the simulator's contract: a
// placement across devices computes what one device computes, training
// lowers the loss, failed steps and missing kernels are clear errors,
// measurements become profiles, CPUs and GPUs mix. Its memory:
// strategy_memory_test.cc.
#include "runtime/executor.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "profiles/signature.h"
#include "runtime/cpu_cores.h"
#include "runtime/measurement.h"
#include "runtime/strategy_executor.h"
#include "runtime/torch_devices.h"
#include "runtime/torch_ops.h"
#include "simulator/evaluator.h"
#include "tests/graph/test_models.h"
#include "tests/runtime/cpu_cluster.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

struct Model {
  Graph graph;
  TrainingView view;
};

std::unique_ptr<Model> Load(const std::string& name, zoo::ZooParams p) {
  absl::StatusOr<onnx::ModelProto> proto = zoo::BuildZooModel(name, p);
  EXPECT_TRUE(proto.ok()) << proto.status();
  auto m = std::make_unique<Model>();
  absl::StatusOr<Graph> g = ImportOnnxModel(*proto, name, {});
  EXPECT_TRUE(g.ok()) << g.status();
  m->graph = std::move(*g);
  m->view = BuildTrainingView(m->graph);
  return m;
}

struct Small {
  std::string name;
  zoo::ZooParams params;
};

std::vector<Small> SmallModels() {
  std::vector<Small> models;
  zoo::ZooParams p;
  p.batch_size = 4;
  p.hidden = 16;
  models.push_back({"diamond", p});
  models.push_back({"wide", p});
  zoo::ZooParams rnn;
  rnn.batch_size = 4;
  rnn.hidden = 16;
  rnn.seq_len = 3;
  rnn.vocab = 20;
  models.push_back({"gnmt2", rnn});
  models.push_back({"rnnlm", rnn});
  zoo::ZooParams tr = rnn;
  tr.layers = 1;
  models.push_back({"transformer_big", tr});
  zoo::ZooParams cnn;
  cnn.batch_size = 2;
  cnn.image_size = 32;
  models.push_back({"resnet50", cnn});
  return models;
}

// Runs `steps` steps of both and expects the same loss at each,
// then the same parameters (so the gradients were the same); returns the
// pairs of step reports.
std::vector<std::pair<StepReport, StepReport>> ExpectSameTraining(
    const Graph& g, StepRunner& a, StepRunner& b, int steps) {
  std::vector<std::pair<StepReport, StepReport>> reports;
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<StepReport> ra = a.Step();
    absl::StatusOr<StepReport> rb = b.Step();
    EXPECT_TRUE(ra.ok()) << ra.status();
    EXPECT_TRUE(rb.ok()) << rb.status();
    if (!ra.ok() || !rb.ok()) return reports;
    EXPECT_NEAR(ra->loss, rb->loss, 1e-4 * (1 + std::abs(ra->loss)))
        << "step " << step;
    reports.push_back({*ra, *rb});
  }
  int compared = 0;
  for (const Tensor& t : g.tensors()) {
    if (t.kind != TensorKind::kParameter || t.consumers.empty()) continue;
    absl::StatusOr<torch::Tensor> wa = a.Resident(t.name);
    absl::StatusOr<torch::Tensor> wb = b.Resident(t.name);
    EXPECT_TRUE(wa.ok()) << wa.status();
    EXPECT_TRUE(wb.ok()) << wb.status();
    if (!wa.ok() || !wb.ok()) continue;
    EXPECT_TRUE(wb->device().is_cpu()) << t.name;
    EXPECT_TRUE(torch::allclose(*wa, *wb, 1e-4, 1e-5)) << t.name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
  return reports;
}

TEST(ExecutorTest, PlacementAcrossDevicesMatchesOneDevice) {
  for (const Small& s : SmallModels()) {
    SCOPED_TRACE(s.name);
    std::unique_ptr<Model> m = Load(s.name, s.params);
    Cluster one = Cpus(1), three = Cpus(3);
    Placement single{std::vector<int>(m->graph.ops().size(), 0)};
    auto a = StrategyExecutor::Create(m->view, one, single);
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = StrategyExecutor::Create(m->view, three, RoundRobin(m->graph, 3));
    ASSERT_TRUE(b.ok()) << b.status();
    for (const auto& [ra, rb] : ExpectSameTraining(m->graph, **a, **b, 3)) {
      EXPECT_TRUE(std::isfinite(ra.loss));
      EXPECT_TRUE(ra.transfers.empty());
      EXPECT_FALSE(rb.transfers.empty());
    }
  }
}

TEST(ExecutorTest, TrainingLowersTheLoss) {
  for (const Small& s : SmallModels()) {
    SCOPED_TRACE(s.name);
    std::unique_ptr<Model> m = Load(s.name, s.params);
    Cluster two = Cpus(2);
    ExecutorOptions o;
    o.update.learning_rate = 0.1;
    auto e = StrategyExecutor::Create(m->view, two, RoundRobin(m->graph, 2), o);
    ASSERT_TRUE(e.ok()) << e.status();
    double first = 0, last = 0;
    for (int step = 0; step < 15; ++step) {
      absl::StatusOr<StepReport> r = (*e)->Step();
      ASSERT_TRUE(r.ok()) << r.status();
      if (step == 0) first = r->loss;
      last = r->loss;
    }
    EXPECT_LT(last, 0.9 * first) << "first " << first << " last " << last;
  }
}

// The whole graph forward on one thread with autograd through every op:
// the reference gradient of each parameter.
// Whole-graph autograd from the executor's current tensors, computed in
// `type` (floating-point tensors cast to it), on the CPU.
std::map<std::string, torch::Tensor> ReferenceGradients(
    const Graph& g, StepRunner& e, torch::ScalarType type = torch::kFloat) {
  auto cast = [type](torch::Tensor t) {
    return t.defined() && t.is_floating_point() ? t.to(type) : t;
  };
  std::vector<torch::Tensor> env(g.tensors().size());
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  for (size_t t = 0; t < g.tensors().size(); ++t) {
    const Tensor& tensor = g.tensor(t);
    if (tensor.producer >= 0) continue;
    absl::StatusOr<torch::Tensor> r = e.Resident(tensor.name);
    if (!r.ok()) continue;
    env[t] = cast(*r);
    if (tensor.kind == TensorKind::kParameter) {
      env[t].requires_grad_(true);
      names.push_back(tensor.name);
      params.push_back(env[t]);
    }
  }
  torch::Tensor loss = torch::zeros({}, type);
  for (int i : g.topological_order()) {
    const Op& op = g.op(i);
    std::vector<torch::Tensor> in;
    for (int t : op.inputs) in.push_back(t < 0 ? torch::Tensor() : env[t]);
    bool folded = true;
    for (int t : op.outputs) {
      folded &= t < 0 || (g.tensor(t).data && !g.tensor(t).data->raw.empty());
    }
    if (folded) {
      for (int t : op.outputs) {
        if (t >= 0) env[t] = cast(*TensorFromData(*g.tensor(t).data));
      }
      continue;
    }
    absl::StatusOr<std::vector<torch::Tensor>> out = RunTorchOp(op, in);
    EXPECT_TRUE(out.ok()) << out.status();
    for (size_t k = 0; k < op.outputs.size() && k < out->size(); ++k) {
      if (op.outputs[k] >= 0) env[op.outputs[k]] = (*out)[k];
    }
  }
  for (int t : g.outputs()) loss = loss + env[t];
  std::vector<torch::Tensor> grads = torch::autograd::grad(
      {loss}, params, {}, false, false, /*allow_unused=*/true);
  std::map<std::string, torch::Tensor> result;
  for (size_t k = 0; k < names.size(); ++k) {
    result[names[k]] = grads[k].defined() ? grads[k] : torch::zeros_like(params[k]);
  }
  return result;
}

TEST(ExecutorTest, GradientsMatchAutogradOverTheWholeGraph) {
  for (const Small& s : SmallModels()) {
    if (s.name == "diamond" || s.name == "wide") continue;  // no loss op
    SCOPED_TRACE(s.name);
    std::unique_ptr<Model> m = Load(s.name, s.params);
    ExecutorOptions o;
    o.update.learning_rate = 1.0;
    auto e = StrategyExecutor::Create(m->view, Cpus(2), RoundRobin(m->graph, 2), o);
    ASSERT_TRUE(e.ok()) << e.status();
    std::map<std::string, torch::Tensor> expected =
        ReferenceGradients(m->graph, **e);
    std::map<std::string, torch::Tensor> before;
    for (const auto& [name, g] : expected) before[name] = *(*e)->Resident(name);
    ASSERT_TRUE((*e)->Step().ok());
    int nonzero = 0;
    for (const auto& [name, g] : expected) {
      // First step: momentum is the gradient, so w1 = w0 - lr * g.
      torch::Tensor got = before[name] - *(*e)->Resident(name);
      EXPECT_TRUE(torch::allclose(got, g, 1e-3, 1e-5))
          << name << " max diff " << (got - g).abs().max().item<double>();
      nonzero += g.abs().sum().item<double>() > 0;
    }
    EXPECT_GT(nonzero, 0);
  }
}

// PyTorch-exported files (tests/fixtures, weights stripped: seeded
// initialization): a three-device placement computes what one device
// computes, and its gradients are whole-graph autograd's.
TEST(ExecutorTest, PyTorchExportsRunAndMatchAutograd) {
  struct Fixture {
    std::string path;
    ImportOptions options;
  };
  std::vector<Fixture> fixtures(2);
  fixtures[0].path = "tests/fixtures/resnet50.onnx";  // batch fixed at 2
  fixtures[1].path = "tests/fixtures/transformer.onnx";
  fixtures[1].options.batch_size = 2;
  fixtures[1].options.dim_values = {{"src_len", 6}, {"tgt_len", 5}};
  for (const Fixture& f : fixtures) {
    SCOPED_TRACE(f.path);
    absl::StatusOr<Graph> g = ImportOnnxFile(f.path, f.options);
    ASSERT_TRUE(g.ok()) << g.status();
    TrainingView view = BuildTrainingView(*g);
    ExecutorOptions o;
    o.update.learning_rate = 1.0;
    o.update.momentum = 0;
    Placement one{std::vector<int>(g->ops().size(), 0)};
    auto a = StrategyExecutor::Create(view, Cpus(1), one, o);
    auto b = StrategyExecutor::Create(view, Cpus(3), RoundRobin(*g, 3), o);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    std::map<std::string, torch::Tensor> before;
    for (const Tensor& t : g->tensors()) {
      if (t.kind == TensorKind::kParameter && !t.consumers.empty()) {
        before[t.name] = *(*a)->Resident(t.name);
      }
    }
    absl::StatusOr<StepReport> ra = (*a)->Step();
    absl::StatusOr<StepReport> rb = (*b)->Step();
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    EXPECT_NEAR(ra->loss, rb->loss, 1e-4 * (1 + std::abs(ra->loss)));
    int moved = 0;
    for (const auto& [name, w0] : before) {
      torch::Tensor ga = w0 - *(*a)->Resident(name);
      torch::Tensor gb = w0 - *(*b)->Resident(name);
      EXPECT_TRUE(torch::allclose(ga, gb, 1e-3, 1e-5)) << name;
      moved += ga.abs().sum().item<double>() > 0;
    }
    EXPECT_GT(moved, static_cast<int>(before.size()) / 2);
  }
}

// LevelDB-style fault injection: a node that fails once fails its step
// with its key; the executor drains what the step left and the next steps
// are those of a fresh executor (no update runs while a forward node is
// pending, so the parameters were untouched).
TEST(ExecutorTest, AStepSucceedsAfterAFailedOne) {
  zoo::ZooParams p;
  p.batch_size = 4;
  p.hidden = 16;
  p.seq_len = 3;
  std::unique_ptr<Model> m = Load("gnmt2", p);
  // A forward node in the middle of the order, on the second of 2 devices.
  std::string victim;
  int seen = 0;
  for (int op : m->graph.topological_order()) {
    if (++seen == static_cast<int>(m->graph.ops().size()) / 2) {
      victim = m->graph.op(op).key;
    }
  }
  ASSERT_FALSE(victim.empty());
  int failures_left = 1;
  ExecutorOptions faulty;
  faulty.before_node = [&](const TrainingNode& node) {
    if (node.kind == NodeKind::kForward && node.key == victim &&
        failures_left > 0) {
      --failures_left;
      return absl::InternalError("injected");
    }
    return absl::OkStatus();
  };
  const Cluster two = Cpus(2);
  const Placement placement = RoundRobin(m->graph, 2);
  auto e = StrategyExecutor::Create(m->view, two, placement, faulty);
  auto fresh = StrategyExecutor::Create(m->view, two, placement);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<StepReport> failed = (*e)->Step();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(failed.status().message().find(victim), std::string::npos)
      << failed.status();
  EXPECT_EQ(failures_left, 0);
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<StepReport> a = (*e)->Step();
    absl::StatusOr<StepReport> b = (*fresh)->Step();
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_NEAR(a->loss, b->loss, 1e-6 * std::abs(b->loss)) << step;
  }
}

// Each device's worker runs on a thread other than the caller's; with
// pin_cpu_devices, on a core of its own (runtime/cpu_cores.h): every node
// on /cpu:k sees only the k-th core the process may use; unpinned, every
// core. A step of one device's work, unpinned, runs on the calling thread
// (no worker thread made and woken for it), which keeps its intra-op
// thread count.
TEST(ExecutorTest, WorkersRunOnThreadsAndCoresOfTheirOwn) {
  const std::vector<int> allowed = AllowedCores();
  if (allowed.size() < 2) GTEST_SKIP() << "needs two cores";
  zoo::ZooParams p;
  p.batch_size = 4;
  p.hidden = 16;
  p.seq_len = 3;
  std::unique_ptr<Model> m = Load("gnmt2", p);
  const int intra_op_threads = at::get_num_threads();
  at::set_num_threads(2);
  using Seen = std::set<std::pair<int, std::vector<int>>>;  // device, cores
  for (const auto& [devices, pin] :
       std::vector<std::pair<int, bool>>{{2, true}, {2, false}, {1, false}}) {
    const Placement placement = RoundRobin(m->graph, devices);
    std::mutex mu;
    Seen seen;
    std::set<std::thread::id> threads;
    ExecutorOptions options;
    options.pin_cpu_devices = pin;
    options.before_node = [&](const TrainingNode& node) {
      const int d = placement.device_of_op[node.forward_op];
      std::vector<int> cores = AllowedCores();
      std::lock_guard<std::mutex> lock(mu);
      seen.insert({d, std::move(cores)});
      threads.insert(std::this_thread::get_id());
      return absl::OkStatus();
    };
    auto e =
        StrategyExecutor::Create(m->view, Cpus(devices), placement, options);
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_TRUE((*e)->Step().ok());
    EXPECT_EQ(at::get_num_threads(), 2);
    const Seen want = devices == 1 ? Seen{{0, allowed}}
                      : pin ? Seen{{0, {allowed[0]}}, {1, {allowed[1]}}}
                            : Seen{{0, allowed}, {1, allowed}};
    EXPECT_EQ(seen, want) << devices << " device(s), pinned: " << pin;
    EXPECT_EQ(threads.count(std::this_thread::get_id()), devices == 1 ? 1 : 0);
    EXPECT_EQ(threads.size(), devices == 1 ? 1u : 2u);
  }
  at::set_num_threads(intra_op_threads);
}

// The simulator's hand-computed case (tests/simulator/simulator_test.cc,
// PartialGradientsAreSummedWhereTheyAreMade): W homed on device 0, read by
// m1..m3 on device 1. The executor copies one 16-byte buffer of W's partial
// gradients home once device 1 has made its last partial, as the
// simulator does (and autograd sends a copied weight's gradient home), and
// its memory timeline peaks at the simulator's 80 and 80 bytes (104 on one
// device; StrategyMemoryTest works them out). Its order of events on each
// device is fixed by the dataflow, so the peaks are too.
TEST(ExecutorTest, PartialGradientsAreSummedWhereTheyAreMade) {
  Model m;
  absl::StatusOr<Graph> g =
      ImportOnnxModel(testing::SharedWeightChain(), "chain", {});
  ASSERT_TRUE(g.ok()) << g.status();
  m.graph = std::move(*g);
  m.view = BuildTrainingView(m.graph);
  Placement split{std::vector<int>(m.graph.ops().size(), 0)};
  for (const char* key : {"m1", "m2", "m3"}) {
    split.device_of_op[m.graph.FindOp(key)] = 1;
  }
  Placement one{std::vector<int>(m.graph.ops().size(), 0)};
  auto a = StrategyExecutor::Create(m.view, Cpus(2), split);
  auto b = StrategyExecutor::Create(m.view, Cpus(2), one);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  auto reports = ExpectSameTraining(m.graph, **a, **b, 3);
  ASSERT_EQ(reports.size(), 3u);
  const int w = m.graph.FindTensor("w");
  for (const auto& [split_step, one_step] : reports) {
    EXPECT_EQ(split_step.peak_memory_bytes, (std::vector<int64_t>{80, 80}));
    EXPECT_EQ(one_step.peak_memory_bytes, (std::vector<int64_t>{104, 0}));
    int gradients_of_w = 0;
    int64_t moved = 0;
    for (const MeasuredTransfer& t : split_step.transfers) {
      moved += t.bytes;
      const TrainingValue& v = m.view.value(t.value);
      if (v.kind != ValueKind::kGradient || v.tensor != w) continue;
      ++gradients_of_w;
      EXPECT_EQ(t.src, 1);
      EXPECT_EQ(t.dst, 0);
      EXPECT_EQ(t.bytes, 16);
    }
    EXPECT_EQ(gradients_of_w, 1);
    EXPECT_EQ(split_step.transfers.size(), 4u);
    EXPECT_EQ(moved, 48);
    EXPECT_TRUE(one_step.transfers.empty());
  }
}

TEST(ExecutorTest, MeasurementFollowsTheProtocolAndBecomesAProfile) {
  zoo::ZooParams p;
  p.batch_size = 8;
  p.hidden = 32;
  p.layers = 4;
  // A chain dealt round robin: every value crosses, so a worker waits for
  // the other at each node (a diamond's few crossings could all find their
  // value made while the waiting worker was descheduled: no hand-off
  // measured in one loaded run of three).
  std::unique_ptr<Model> m = Load("chain", p);
  Cluster two = Cpus(2);
  Placement placement = RoundRobin(m->graph, 2);
  auto e = StrategyExecutor::Create(m->view, two, placement);
  ASSERT_TRUE(e.ok()) << e.status();
  MeasureOptions o;
  o.steps = 3;
  o.warmup = 2;
  absl::StatusOr<Measurement> r = MeasureSteps(**e, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->step_times.size(), 5u);
  ASSERT_EQ(r->losses.size(), 5u);
  EXPECT_EQ(r->step_seconds, Median({r->step_times[2], r->step_times[3],
                                     r->step_times[4]}));
  // Every node once, on its placed device, in each of the 3 steps.
  ASSERT_EQ(r->nodes.size(), m->view.nodes().size());
  for (const MeasuredNode& node : r->nodes) {
    EXPECT_EQ(node.device,
              placement.device_of_op[m->view.node(node.node).forward_op]);
    EXPECT_EQ(node.runs, 3) << m->view.node(node.node).key;
    EXPECT_GT(node.seconds, 0);
  }
  MeasuredProfile profile = ProfileFromMeasurement(m->view, two, *r);
  for (int i = 0; i < static_cast<int>(m->view.nodes().size()); ++i) {
    EXPECT_TRUE(profile.ops.count({NodeSignature(m->view, i), DeviceKind::kCpu}))
        << m->view.node(i).key;
  }
  // Round robin over two devices: values cross, so workers are woken. At
  // most one hand-off per node and per transfer of the 3 measured steps,
  // each shorter than its step; the profile's is their trimmed mean.
  const size_t nodes = m->view.nodes().size();
  ASSERT_FALSE(r->handoff_seconds.empty());
  EXPECT_LE(r->handoff_seconds.size(), 3 * nodes + r->transfers.size());
  const double longest_step =
      *std::max_element(r->step_times.begin(), r->step_times.end());
  for (double h : r->handoff_seconds) {
    EXPECT_GT(h, 0);
    EXPECT_LT(h, longest_step);
  }
  EXPECT_DOUBLE_EQ(profile.handoff_seconds,
                   TrimmedMean(r->handoff_seconds, 0.05));
  // Two devices of one host ran side by side: no alone times. On one
  // device of the two, every time is an alone time too.
  EXPECT_TRUE(profile.alone_ops.empty());
  Placement single{std::vector<int>(m->graph.ops().size(), 1)};
  auto one = StrategyExecutor::Create(m->view, two, single);
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<Measurement> alone = MeasureSteps(**one, o);
  ASSERT_TRUE(alone.ok()) << alone.status();
  MeasuredProfile alone_profile =
      ProfileFromMeasurement(m->view, two, *alone);
  ASSERT_EQ(alone_profile.alone_ops.size(), alone_profile.ops.size());
  for (const auto& [key, timing] : alone_profile.ops) {
    EXPECT_EQ(alone_profile.alone_ops.at(key), timing.first) << key.first;
  }
  // The reference steps on a host of CPU devices only: shared times for
  // every signature, no alone steps (those are measured where a host mixes
  // device kinds: PlacementAcrossCpuAndGpuMatchesCpuAlone).
  absl::StatusOr<MeasuredProfile> overlaid =
      OverlayStepMeasurement(m->view, two, placement, {}, o);
  ASSERT_TRUE(overlaid.ok()) << overlaid.status();
  EXPECT_TRUE(overlaid->alone_ops.empty());
  for (int i = 0; i < static_cast<int>(m->view.nodes().size()); ++i) {
    EXPECT_TRUE(overlaid->ops.count({NodeSignature(m->view, i),
                                     DeviceKind::kCpu}))
        << m->view.node(i).key;
  }
}

TEST(ExecutorTest, EvaluatorsMeasureOrSimulateAndNameOutOfMemory) {
  zoo::ZooParams p;
  p.batch_size = 8;
  p.hidden = 32;
  std::unique_ptr<Model> m = Load("diamond", p);
  Placement placement = RoundRobin(m->graph, 2);
  MeasureOptions o;
  o.steps = 2;
  o.warmup = 1;
  for (int64_t memory : {int64_t{1} << 30, int64_t{1000}}) {
    SCOPED_TRACE(memory);
    Cluster cluster = Cpus(2, memory);
    std::unique_ptr<CostModel> costs = NewRooflineCostModel();
    std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
    SimulationContext context =
        SimulationContext::Create(m->view, cluster, *costs, *order);
    std::unique_ptr<StepEvaluator> simulated = NewSimulatorEvaluator(context);
    std::unique_ptr<StepEvaluator> measured =
        NewExecutorEvaluator(m->view, cluster, o);
    absl::StatusOr<Evaluation> s = simulated->Evaluate(placement);
    absl::StatusOr<Evaluation> r = measured->Evaluate(placement);
    if (memory > 1000) {
      ASSERT_TRUE(s.ok()) << s.status();
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(s->step_seconds, Simulate(context, placement)->step_seconds);
      EXPECT_GT(r->step_seconds, 0);
      // Same counting rules, but which values coexist depends on the real
      // schedule's timing, so the peaks are close rather than equal.
      ASSERT_EQ(r->peak_memory_bytes.size(), 2u);
      for (int d = 0; d < 2; ++d) {
        EXPECT_NEAR(r->peak_memory_bytes[d], s->peak_memory_bytes[d],
                    0.25 * s->peak_memory_bytes[d]);
      }
    } else {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_NE(r.status().message().find("/cpu:"), std::string::npos);
    }
  }
}

TEST(ExecutorTest, OpsWithoutKernelAreListedBeforeAnythingRuns) {
  GraphBuilder b("custom.onnx", "g");
  b.AddSourceTensor("x", TensorKind::kGraphInput);
  b.AddOp("mystery", "FancyOp", "com.example", {"x"}, {"y"});
  b.MarkOutput("y");
  absl::StatusOr<Graph> g = std::move(b).Build();
  ASSERT_TRUE(g.ok()) << g.status();
  absl::Status s = CheckRunnable(*g);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("'mystery' (com.example:FancyOp)"),
            std::string::npos)
      << s;
}

// Where this LibTorch sees a CUDA device: the same models placed across
// the CPU and the GPU(s) compute what the CPU alone computes (ResNet: see
// below). TF32 is turned off so that the GPU's products round as the
// CPU's do.
TEST(ExecutorTest, PlacementAcrossCpuAndGpuMatchesCpuAlone) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const int gpus = std::min<int>(2, torch::cuda::device_count());
  std::string text = "name: \"cpu_gpu\"\n"
      "devices { name: \"/cpu:0\" kind: CPU peak_flops: 8e10 "
      "memory_bandwidth: 1e10 memory_bytes: 8589934592 }\n";
  for (int g = 0; g < gpus; ++g) {
    text += "devices { name: \"/gpu:" + std::to_string(g) +
            "\" kind: GPU peak_flops: 5e13 memory_bandwidth: 2e12 "
            "memory_bytes: 8589934592 }\n";
  }
  text += "default_link { latency_seconds: 1e-5 bandwidth: 2.5e10 }\n";
  absl::StatusOr<Cluster> mixed = ParseCluster(text, "cpu_gpu.pbtxt");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  for (const Small& s : SmallModels()) {
    SCOPED_TRACE(s.name);
    std::unique_ptr<Model> m = Load(s.name, s.params);
    if (s.name == "resnet50") {
      // A deep BatchNormalization net at test sizes is ill-conditioned in
      // float32: on the CPU alone, float32 gradients of some layer-3/4
      // weights differ from float64's by up to 88% of their largest entry
      // (batch 2, 32 px; 33% at batch 8, 64 px). No two float32 devices
      // agree there, so the placement's first-step gradients are held
      // against float64 autograd instead: no further from it than a few
      // times the CPU's own float32 gradients are.
      ExecutorOptions o;
      o.update.learning_rate = 1.0;
      auto e = StrategyExecutor::Create(m->view, *mixed,
                                RoundRobin(m->graph, 1 + gpus), o);
      ASSERT_TRUE(e.ok()) << e.status();
      std::map<std::string, torch::Tensor> exact =
          ReferenceGradients(m->graph, **e, torch::kDouble);
      std::map<std::string, torch::Tensor> cpu32 =
          ReferenceGradients(m->graph, **e);
      std::map<std::string, torch::Tensor> before;
      for (const auto& [name, g] : exact) before[name] = *(*e)->Resident(name);
      absl::StatusOr<StepReport> r = (*e)->Step();
      ASSERT_TRUE(r.ok()) << r.status();
      double placed_error = 0, cpu_error = 0, norm = 0;
      for (const auto& [name, g] : exact) {
        torch::Tensor got = (before[name] - *(*e)->Resident(name)).to(torch::kDouble);
        placed_error += (got - g).pow(2).sum().item<double>();
        cpu_error += (cpu32[name].to(torch::kDouble) - g).pow(2).sum().item<double>();
        norm += g.pow(2).sum().item<double>();
      }
      EXPECT_GT(norm, 0);
      EXPECT_LE(std::sqrt(placed_error), 4 * std::sqrt(cpu_error))
          << "relative to float64: CPU+GPU " << std::sqrt(placed_error / norm)
          << ", CPU float32 " << std::sqrt(cpu_error / norm);
      std::cerr << "resnet50 gradients, relative distance to float64: CPU+GPU "
                << std::sqrt(placed_error / norm) << ", CPU float32 "
                << std::sqrt(cpu_error / norm) << "\n";
      continue;
    }
    Cluster one = Cpus(1);
    Placement single{std::vector<int>(m->graph.ops().size(), 0)};
    auto a = StrategyExecutor::Create(m->view, one, single);
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = StrategyExecutor::Create(m->view, *mixed,
                              RoundRobin(m->graph, 1 + gpus));
    ASSERT_TRUE(b.ok()) << b.status();
    for (const auto& [ra, rb] : ExpectSameTraining(m->graph, **a, **b, 3)) {
      EXPECT_FALSE(rb.transfers.empty());
      EXPECT_GT(rb.busy_seconds[1], 0);  // the GPU ran nodes
    }
    // Untimed, the GPUs' workers queue their nodes and wait only where
    // values cross devices and at their last node: the same training, over
    // the devices and on the first GPU alone.
    ExecutorOptions untimed;
    untimed.time_gpu_nodes = false;
    Placement on_gpu{std::vector<int>(m->graph.ops().size(), 1)};
    for (const Placement& placement : {RoundRobin(m->graph, 1 + gpus), on_gpu}) {
      auto reference = StrategyExecutor::Create(m->view, one, single);
      ASSERT_TRUE(reference.ok()) << reference.status();
      auto queued = StrategyExecutor::Create(m->view, *mixed, placement, untimed);
      ASSERT_TRUE(queued.ok()) << queued.status();
      for (const auto& [ra, rc] :
           ExpectSameTraining(m->graph, **reference, **queued, 3)) {
        EXPECT_EQ(rc.busy_seconds[1], 0);  // not timed
        EXPECT_GT(rc.seconds, 0);
      }
    }
  }
}

// A host with a CPU and a GPU: the reference steps also measure each kind
// alone (every node on /cpu:0, then on /gpu:0), so every node signature
// has an alone time on both kinds (runtime/measurement.h).
TEST(ExecutorTest, ReferenceStepsOnACpuAndGpuHostMeasureEachKindAlone) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<Cluster> mixed = ParseCluster(
      "name: \"cpu_gpu\"\n"
      "devices { name: \"/cpu:0\" kind: CPU peak_flops: 8e10 "
      "memory_bandwidth: 1e10 memory_bytes: 8589934592 }\n"
      "devices { name: \"/gpu:0\" kind: GPU peak_flops: 5e13 "
      "memory_bandwidth: 2e12 memory_bytes: 8589934592 }\n"
      "default_link { latency_seconds: 1e-5 bandwidth: 2.5e10 }\n",
      "cpu_gpu.pbtxt");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  zoo::ZooParams p;
  p.batch_size = 8;
  p.hidden = 32;
  std::unique_ptr<Model> m = Load("diamond", p);
  MeasureOptions o;
  o.steps = 3;
  o.warmup = 1;
  absl::StatusOr<MeasuredProfile> overlaid = OverlayStepMeasurement(
      m->view, *mixed, RoundRobin(m->graph, 2), {}, o);
  ASSERT_TRUE(overlaid.ok()) << overlaid.status();
  for (int i = 0; i < static_cast<int>(m->view.nodes().size()); ++i) {
    for (DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kGpu}) {
      EXPECT_TRUE(overlaid->alone_ops.count({NodeSignature(m->view, i), kind}))
          << m->view.node(i).key;
    }
  }
}

TEST(ExecutorTest, GpuDevicesNeedCuda) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this LibTorch has CUDA";
  absl::StatusOr<Cluster> c = LoadCluster("p100x2");
  ASSERT_TRUE(c.ok());
  absl::StatusOr<std::vector<torch::Device>> d = TorchDevices(*c);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("/gpu:0"), std::string::npos);
}

}  // namespace
}  // namespace placer
