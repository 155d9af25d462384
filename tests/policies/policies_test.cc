// Every policy on small models and clusters: valid placements (every op on
// a device, pins kept, memory within limits), clear infeasibility errors,
// determinism.
#include "policies/policies.h"
#include "policies/policy.h"

#include <limits>
#include <map>

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/match.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "policies/device_loads.h"
#include "policies/group_graph.h"
#include "profiles/cluster.h"
#include "tests/graph/test_models.h"
#include "tests/policies/scenario.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

using ::testing::HasSubstr;

PolicyOptions Quick() {
  PolicyOptions o;
  o.budget_seconds = 60;
  o.max_evaluations = 40;  // machine-independent stopping point
  return o;
}

TEST(PoliciesTest, EveryPolicyPlacesValidly) {
  for (const auto& [model, preset] :
       std::vector<std::pair<std::string, std::string>>{
           {"gnmt2", "p100x4"}, {"transformer_big", "v100x4"},
           {"resnet50", "cpu1_gpu2"}, {"wide", "cpu2"}}) {
    Scenario s(model, preset);
    for (const PolicyInfo& info : Policies()) {
      SCOPED_TRACE(model + " on " + preset + " by " + info.name);
      absl::StatusOr<Placement> p = info.make()->Place(s.input(), Quick());
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_EQ(p->device_of_op.size(), s.graph.ops().size());
      for (int d : p->device_of_op) {
        EXPECT_GE(d, 0);
        EXPECT_LT(d, s.cluster.num_devices());
      }
      absl::StatusOr<SimulationResult> r =
          CheckPlacement(s.input(), Quick(), *p);
      EXPECT_TRUE(r.ok()) << r.status();
    }
  }
}

TEST(PoliciesTest, PinnedOpsStayPut) {
  Scenario s("gnmt2", "p100x4");
  PolicyOptions o = Quick();
  int first = s.graph.topological_order().front();
  int last = s.graph.topological_order().back();
  o.pinned = {{first, 3}, {last, 2}};
  for (const PolicyInfo& info : Policies()) {
    SCOPED_TRACE(info.name);
    absl::StatusOr<Placement> p = info.make()->Place(s.input(), o);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->device_of_op[first], 3);
    EXPECT_EQ(p->device_of_op[last], 2);
  }
}

TEST(PoliciesTest, SameSeedSamePlacement) {
  Scenario s("gnmt2", "p100x4");
  for (const PolicyInfo& info : Policies()) {
    SCOPED_TRACE(info.name);
    absl::StatusOr<Placement> a = info.make()->Place(s.input(), Quick());
    absl::StatusOr<Placement> b = info.make()->Place(s.input(), Quick());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->device_of_op, b->device_of_op);
  }
}

// A stop request ends a search early with the best placement so far;
// progress reports never get worse and count evaluations up.
TEST(PoliciesTest, SearchesStopOnRequestAndReportProgress) {
  Scenario s("gnmt2", "p100x4");
  for (const std::string name : {"local_search", "best"}) {
    SCOPED_TRACE(name);
    PolicyOptions o;
    o.max_evaluations = 0;
    o.budget_seconds = 600;  // only the stop request ends it
    std::vector<SearchProgress> seen;
    o.on_progress = [&](const SearchProgress& p) { seen.push_back(p); };
    o.progress_interval_seconds = 0;
    int64_t checks = 0;
    o.should_stop = [&] { return ++checks > 30; };
    absl::StatusOr<Placement> p = (*NewPolicy(name))->Place(s.input(), o);
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<SimulationResult> r = CheckPlacement(s.input(), o, *p);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_FALSE(seen.empty());
    for (size_t k = 1; k < seen.size(); ++k) {
      EXPECT_GE(seen[k].evaluations, seen[k - 1].evaluations);
      if (seen[k - 1].best_step_seconds > 0) {
        EXPECT_LE(seen[k].best_step_seconds, seen[k - 1].best_step_seconds);
      }
    }
    EXPECT_NEAR(seen.back().best_step_seconds, r->step_seconds,
                1e-9 * r->step_seconds);
    EXPECT_LE(seen.back().evaluations, 40);
  }
}

// Limits that one device cannot meet but four can: single fails with the
// device and the overflow; the portfolio spreads the model within limits.
TEST(PoliciesTest, MemoryTightClusterForcesSpreading) {
  Scenario s("gnmt2", "p100x4");
  PolicyInput in = s.input();
  absl::StatusOr<SimulationResult> one = Simulate(
      *s.sim, Placement{std::vector<int>(s.graph.ops().size(), 0)});
  ASSERT_TRUE(one.ok());
  PolicyOptions o = Quick();
  o.memory_limit_bytes.assign(4, one->peak_memory_bytes[0] * 6 / 10);
  absl::StatusOr<Placement> single = NewPolicy("single").value()->Place(in, o);
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(single.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(single.status().message(), HasSubstr("/gpu:0 needs"));
  EXPECT_THAT(single.status().message(), HasSubstr("over its limit"));
  absl::StatusOr<Placement> best = NewPolicy("best").value()->Place(in, o);
  ASSERT_TRUE(best.ok()) << best.status();
  absl::StatusOr<SimulationResult> r = CheckPlacement(in, o, *best);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<int> used(best->device_of_op.begin(), best->device_of_op.end());
  EXPECT_GE(used.size(), 2u);
}

// single simulates one device of each alike set (same node times, same
// limit): on identical devices it takes the first; a device whose limit
// differs is a set of its own, and the only one that fits is taken.
TEST(PoliciesTest, SingleTriesEachDistinctDevice) {
  Scenario s("gnmt2", "p100x4");
  PolicyInput in = s.input();
  absl::StatusOr<SimulationResult> one = Simulate(
      *s.sim, Placement{std::vector<int>(s.graph.ops().size(), 0)});
  ASSERT_TRUE(one.ok());
  PolicyOptions o = Quick();
  absl::StatusOr<Placement> alike = NewPolicy("single").value()->Place(in, o);
  ASSERT_TRUE(alike.ok()) << alike.status();
  EXPECT_EQ(alike->device_of_op[0], 0);
  const int64_t peak = one->peak_memory_bytes[0];
  o.memory_limit_bytes = {peak / 2, peak / 2, peak * 2, peak / 2};
  absl::StatusOr<Placement> roomy = NewPolicy("single").value()->Place(in, o);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  for (int d : roomy->device_of_op) EXPECT_EQ(d, 2);
}

TEST(PoliciesTest, ImpossibleLimitsAreClearErrors) {
  Scenario s("chain", "cpu2", [] {
    zoo::ZooParams p;
    p.batch_size = 4;
    p.hidden = 16;
    return p;
  }());
  PolicyOptions o = Quick();
  o.memory_limit_bytes = {100, 100};
  for (const PolicyInfo& info : Policies()) {
    SCOPED_TRACE(info.name);
    absl::StatusOr<Placement> p = info.make()->Place(s.input(), o);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted)
        << p.status();
  }
  EXPECT_THAT(NewPolicy("nope").status().message(),
              HasSubstr("unknown policy 'nope'"));
}

// Memory-complete best: with each device given a third (4 devices) or a
// quarter (8 devices) of a zoo model's single-device peak, best finds a
// placement wherever the limit clearly allows one, falling back on
// memory_first where every heuristic is over the limit (measured: GNMT-2
// at both shares). No placement fits where a node's inputs and
// outputs (a gradient sum counted once), or a parameter with its momentum
// and summed gradient (and a second partial being added where its home
// makes one of several), are over the limit (the toy diamond at a quarter;
// RNNLM at a quarter: an LSTM weight's home needs 4 x 64 KB of 258 KB):
// the error then says no placement fits and names that node or parameter
// and the largest limit. Limits within 10% of that bound may or may not be
// reachable and are not asserted (the diamond at a third is not reached).
TEST(PoliciesTest, BestFitsWhereverMemoryAllows) {
  int fallbacks = 0, impossible = 0;
  for (const zoo::ZooModel& model : zoo::ZooModels()) {
    if (model.published_size) continue;  // gpt and llama are their builders
    for (const auto& [preset, share] :
         std::vector<std::pair<std::string, int>>{{"p100x4", 3},
                                                  {"v100x8", 4}}) {
      SCOPED_TRACE(model.name + " on " + preset + " at 1/" +
                   std::to_string(share));
      zoo::ZooParams params = Scenario::Small();
      if (model.name == "inception_v3") params.image_size = 96;
      Scenario s(model.name, preset, params);
      const int devices = s.cluster.num_devices();
      const int64_t limit = s.single_device_peak_bytes() / share;
      int64_t least = 0;
      for (int i = 0; i < static_cast<int>(s.view.nodes().size()); ++i) {
        const TrainingNode& n = s.view.node(i);
        int64_t bytes = 0;
        for (int v : n.inputs) {
          if (s.view.sum_of(v) < 0) bytes += s.view.value(v).bytes;
        }
        for (int sum : s.view.sums_read_by(i)) {
          bytes += s.view.gradient_sums()[sum].bytes;  // one buffer
        }
        for (int v : n.outputs) bytes += s.view.value(v).bytes;
        least = std::max(least, bytes);
      }
      // A parameter's home: it, its momentum and its summed gradient, and
      // a second partial being added when the home makes one of several.
      for (int group = 0; group < s.view.num_groups(); ++group) {
        for (int v : s.view.group_parameters(group)) {
          int64_t copies = 3;
          for (const GradientSum& sum : s.view.gradient_sums()) {
            if (sum.tensor != v || sum.partials.size() < 2) continue;
            for (int p : sum.partials) {
              const int maker = s.view.value(p).producer;
              if (s.view.node(maker).forward_op == group) copies = 4;
            }
          }
          least = std::max(least, copies * s.view.value(v).bytes);
        }
      }
      PolicyOptions o = Quick();
      o.max_evaluations = 5000;  // memory_first's repair simulates moves
      o.memory_limit_bytes.assign(devices, limit);
      absl::StatusOr<HeuristicWinner> h = BestHeuristic(s.input(), o);
      if (least > limit) {
        ++impossible;
        ASSERT_FALSE(h.ok());
        EXPECT_EQ(h.status().code(), absl::StatusCode::kResourceExhausted);
        EXPECT_THAT(h.status().message(), HasSubstr("no placement fits"));
        EXPECT_THAT(h.status().message(), HasSubstr("/gpu:"));
        continue;
      }
      if (least > 0.9 * limit) continue;
      // RNNLM at a third over four devices: since updates wait for the
      // whole backward, each weight's home holds its summed gradient until
      // then beside the weight and its momentum, and no policy has reached
      // the limit (2026-11-30: memory_first's repair stops 71 KB over on
      // one device, 184 KB over on all four, after 7 moves); not asserted.
      if (model.name == "rnnlm" && devices == 4) continue;
      ASSERT_TRUE(h.ok()) << h.status();
      fallbacks += h->policy == "memory_first";
      absl::StatusOr<Placement> p = (*NewPolicy("best"))->Place(s.input(), o);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_TRUE(CheckPlacement(s.input(), o, *p).ok());
    }
  }
  EXPECT_GT(fallbacks, 0);  // the heuristics alone fail somewhere
  EXPECT_GT(impossible, 0);
}

// On a tight cluster where some heuristics fit and others are over a
// limit, the portfolio also looks at memory_first (a tenth of the budget)
// and takes it when faster: PyTorch's training-mode DenseNet-121 export
// (opset 17) on four P100s at a third of its single-device peak: hash and
// metis fit, the others are over; memory_first's fill, keeping consecutive
// blocks together, is faster (measured 2026-12-02: 9.00 ms against
// metis's 9.35). Its fills search by bisection, a few hundred simulations
// (it stops once one fits: 0.05 s), so the evaluation cap here is not
// Quick()'s 40, of which the look would get 4.
TEST(PoliciesTest, BestHeuristicLooksAtMemoryFirstOnATightCluster) {
  absl::StatusOr<Graph> g = ImportOnnxFile(
      "tests/fixtures/corpus/densenet121.train.op17.onnx", {});
  ASSERT_TRUE(g.ok()) << g.status();
  Scenario s(std::move(*g), "p100x4");
  PolicyOptions o = Quick();
  o.max_evaluations = 20000;
  o.memory_limit_bytes.assign(s.cluster.num_devices(),
                              s.single_device_peak_bytes() / 3);
  int fit = 0, over = 0;
  double fastest = 0;
  for (const char* heuristic : {"single", "expert", "hash", "critical_path",
                                "metis", "heft", "m_etf", "m_sct", "m_topo"}) {
    absl::StatusOr<Placement> p = (*NewPolicy(heuristic))->Place(s.input(), o);
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
      ++over;
      continue;
    }
    absl::StatusOr<SimulationResult> r = Simulate(*s.sim, *p);
    ASSERT_TRUE(r.ok()) << r.status();
    if (CheckPlacement(s.input(), o, *p).ok()) {
      ++fit;
      if (fastest == 0 || r->step_seconds < fastest) fastest = r->step_seconds;
    }
  }
  ASSERT_GT(fit, 0);
  ASSERT_GT(over, 0);
  absl::StatusOr<HeuristicWinner> h = BestHeuristic(s.input(), o);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->policy, "memory_first");
  EXPECT_LT(h->step_seconds, fastest);
  EXPECT_TRUE(CheckPlacement(s.input(), o, h->placement).ok());
}

// METIS prints to stdout when a recursive bisection leaves a side empty, as
// PyTorch's training-mode AlexNet export (its fully connected layers far
// heavier than the rest) on eight V100s makes it do; `place --json` writes
// its report to stdout, so the policy sends those lines to stderr.
TEST(PoliciesTest, MetisLeavesStdoutToTheCaller) {
  absl::StatusOr<Graph> g =
      ImportOnnxFile("tests/fixtures/corpus/alexnet.train.op17.onnx", {});
  ASSERT_TRUE(g.ok()) << g.status();
  Scenario s(std::move(*g), "v100x8");
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Placement> p =
      (*NewPolicy("metis"))->Place(s.input(), Quick());
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("Cannot bisect"), std::string::npos) << err;
}

// Every device limited to 1/share of the model's single-device peak less
// the default 5% headroom, as `scripts/tight_clusters.sh` clusters are.
PolicyOptions AtAShareOfThePeak(const Scenario& s, int share,
                                int64_t evaluations) {
  PolicyOptions o;
  o.budget_seconds = 600;
  o.max_evaluations = evaluations;
  o.memory_limit_bytes.assign(
      s.cluster.num_devices(),
      static_cast<int64_t>(0.95 * static_cast<double>(
                                      s.single_device_peak_bytes() / share)));
  return o;
}

// The zoo's GNMT-2 at its full size on four P100s, each given half of its
// single-device peak less the default 5% headroom: every heuristic stops
// over the limit (the softmax's steps fit on no device), memory_first
// places it. At a third (four P100s) and a quarter (eight V100s) the
// backward of the loss alone (the logits it keeps, 410 MB, and their
// gradient) is over every device: the error says so without searching.
TEST(MemoryFirstTest, PlacesGnmt2AtAHalfAndNamesTheNodeThatCannotFit) {
  for (const auto& [preset, share] :
       std::vector<std::pair<std::string, int>>{
           {"p100x4", 2}, {"p100x4", 3}, {"v100x8", 4}}) {
    SCOPED_TRACE(preset + " at 1/" + std::to_string(share));
    Scenario s("gnmt2", preset, zoo::ZooParams{});  // the zoo's defaults
    PolicyOptions o = AtAShareOfThePeak(s, share, /*evaluations=*/8000);
    absl::StatusOr<Placement> p =
        (*NewPolicy("memory_first"))->Place(s.input(), o);
    if (share == 2) {
      for (const char* heuristic : {"expert", "hash", "critical_path", "metis",
                                    "heft", "m_etf", "m_sct", "m_topo"}) {
        EXPECT_FALSE((*NewPolicy(heuristic))->Place(s.input(), o).ok())
            << heuristic;
      }
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_TRUE(CheckPlacement(s.input(), o, *p).ok());
      continue;
    }
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(p.status().message(),
                HasSubstr("no placement fits: node 'grad:loss' needs "
                          "819225600 bytes"));
  }
}

// A weight read by several ops whose home (its first reader's device)
// makes one of its partial gradients: whatever the placement, the home
// holds the weight, its momentum, the gradient's buffer and a second
// contribution being added into it, 4 x 16 bytes for SharedWeightChain's
// W (m0..m3 each read it). Every placement of the four ops on two devices
// is simulated and none goes below that on m0's device; with both devices
// limited to a byte less, memory_first says at once that nothing fits and
// names W, which its earlier floor (W, momentum and gradient: 48 bytes;
// the largest node's inputs and outputs) did not rule out.
TEST(MemoryFirstTest, NamesAWeightWhoseHomeMustAddTwoPartials) {
  absl::StatusOr<Graph> g =
      ImportOnnxModel(testing::SharedWeightChain(), "shared", {});
  ASSERT_TRUE(g.ok()) << g.status();
  Scenario s(std::move(*g), "cpu2");
  const int ops = static_cast<int>(s.graph.ops().size());
  ASSERT_EQ(ops, 4);
  int64_t least_at_home = std::numeric_limits<int64_t>::max();
  int64_t least_anywhere = std::numeric_limits<int64_t>::max();
  for (int mask = 0; mask < (1 << ops); ++mask) {
    std::vector<int> device(ops);
    for (int i = 0; i < ops; ++i) device[i] = (mask >> i) & 1;
    absl::StatusOr<SimulationResult> r = Simulate(*s.sim, Placement{device});
    ASSERT_TRUE(r.ok()) << r.status();
    least_at_home = std::min(least_at_home, r->peak_memory_bytes[device[0]]);
    least_anywhere =
        std::min(least_anywhere, *std::max_element(r->peak_memory_bytes.begin(),
                                                   r->peak_memory_bytes.end()));
  }
  EXPECT_GE(least_at_home, 4 * 16);
  EXPECT_GE(least_anywhere, least_at_home);

  PolicyOptions o;
  o.budget_seconds = 60;
  o.max_evaluations = 1000;
  o.memory_limit_bytes.assign(s.cluster.num_devices(), 4 * 16 - 1);
  absl::StatusOr<Placement> p =
      (*NewPolicy("memory_first"))->Place(s.input(), o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(p.status().message(),
              HasSubstr("no placement fits: parameter 'w' needs 64 bytes at "
                        "its home (with its optimizer state, its summed "
                        "gradient and a second of its 4 partial gradients"));
  // With room for that, memory_first searches and places it.
  o.memory_limit_bytes.assign(s.cluster.num_devices(), least_anywhere);
  p = (*NewPolicy("memory_first"))->Place(s.input(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(CheckPlacement(s.input(), o, *p).ok());
}

// One fused LSTM layer is one op, so every placement puts its forward,
// backward, weights and momentum on one device: its single-device peak is
// every placement's. The floor's node bound counts what is there while the
// layer's forward runs, its group's parameters with momentum, its steps'
// saved state and its input projections included, and reaches that peak
// exactly: a byte less and memory_first names the node at once; at the
// peak it places.
TEST(MemoryFirstTest, NamesARecurrentLayerThatFitsNowhere) {
  absl::StatusOr<Graph> g = ImportOnnxModel(
      testing::RecurrentLayer("LSTM", 6, 4, 8, 16, false), "lstm", {});
  ASSERT_TRUE(g.ok()) << g.status();
  Scenario s(std::move(*g), "cpu2");
  ASSERT_EQ(s.graph.ops().size(), 1u);
  absl::StatusOr<SimulationResult> r = Simulate(*s.sim, Placement{{0}});
  ASSERT_TRUE(r.ok()) << r.status();
  const int64_t peak = r->peak_memory_bytes[0];
  PolicyOptions o = Quick();
  o.memory_limit_bytes.assign(s.cluster.num_devices(), peak - 1);
  absl::StatusOr<Placement> p =
      (*NewPolicy("memory_first"))->Place(s.input(), o);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr(absl::StrCat("no placement fits: node 'rnn' needs ",
                                     peak, " bytes while it runs")))
      << std::string(p.status().message());
  o.memory_limit_bytes.assign(s.cluster.num_devices(), peak);
  p = (*NewPolicy("memory_first"))->Place(s.input(), o);
  ASSERT_TRUE(p.ok()) << p.status();
}

// The zoo's Inception-V3 at its full size on eight V100s, each given a
// quarter of its single-device peak less the default 5% headroom: one
// placement unit (small groups coarsened into their producers, the stem's)
// is over every limit alone (measured: 797 MB of 758), so memory_first
// over those units stops there; again with every colocation group a unit
// of its own it fits.
TEST(MemoryFirstTest, SplitsAUnitOverEveryLimitIntoItsGroups) {
  Scenario s("inception_v3", "v100x8", zoo::ZooParams{});
  PolicyOptions o = AtAShareOfThePeak(s, 4, /*evaluations=*/20000);
  absl::StatusOr<Placement> p =
      (*NewPolicy("memory_first"))->Place(s.input(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(CheckPlacement(s.input(), o, *p).ok());
}

// On an unrolled NMT model the critical-path heuristic beats hashing, and
// the portfolio is never worse than any of its members.
TEST(PoliciesTest, QualityOrderingOnGnmt) {
  Scenario s("gnmt2", "p100x4");
  std::map<std::string, double> step;
  for (const PolicyInfo& info : Policies()) {
    absl::StatusOr<Placement> p = info.make()->Place(s.input(), Quick());
    ASSERT_TRUE(p.ok()) << info.name << ": " << p.status();
    step[info.name] = Simulate(*s.sim, *p)->step_seconds;
  }
  EXPECT_LT(step["critical_path"], step["hash"]);
  for (const auto& [name, seconds] : step) {
    EXPECT_LE(step["best"], seconds) << name;
  }
}

// The scope of a GNMT op that reads a layer's weights: "encoder.l0" for
// "encoder.l0/t3/MatMul_h", "decoder/t2/l1" -> "decoder/l1"; "" otherwise.
std::string LayerScope(const std::string& key) {
  if (key.rfind("encoder.l", 0) == 0) return key.substr(0, key.find('/'));
  size_t l = key.find("/l");
  if (key.rfind("decoder/t", 0) == 0 && l != std::string::npos &&
      l + 2 < key.size() && isdigit(key[l + 2])) {
    return "decoder" + key.substr(l, 3);
  }
  return "";
}

TEST(GroupGraphTest, ParameterFamiliesAreTheUnrolledLayers) {
  Scenario s("gnmt2", "p100x4");
  PolicyOptions o;
  GroupGraph units = PlacementUnits(s.input(), o);
  std::vector<int> family = ParameterFamilies(
      s.view, units, std::vector<bool>(units.num_units(), false));
  // The ops that read a layer's W, R and b at each time step: one family
  // per layer, different layers apart.
  std::map<std::string, std::set<int>> families_of_layer;
  for (int g = 0; g < s.view.num_groups(); ++g) {
    int u = units.unit_of(g);
    const std::string& key = s.view.forward().op(g).key;
    if (!absl::EndsWith(key, "/MatMul_x") &&
        !absl::EndsWith(key, "/MatMul_h") &&
        !absl::EndsWith(key, "/Add_bias")) {
      continue;
    }
    std::string layer = LayerScope(key);
    if (!layer.empty()) families_of_layer[layer].insert(family[u]);
  }
  ASSERT_EQ(families_of_layer.size(), 4u);  // encoder.l0/l1, decoder/l0/l1
  std::set<int> seen;
  for (const auto& [layer, families] : families_of_layer) {
    EXPECT_EQ(families.size(), 1u) << layer;
    EXPECT_TRUE(seen.insert(*families.begin()).second) << layer;
  }
  // A unit marked alone is its own family.
  std::vector<bool> alone(units.num_units(), false);
  alone[0] = true;
  std::vector<int> apart = ParameterFamilies(s.view, units, alone);
  EXPECT_EQ(std::count(apart.begin(), apart.end(), apart[0]), 1);
}

TEST(GroupGraphTest, MergeFamiliesKeepsFamiliesWholeDownToTheCount) {
  Scenario s("gnmt2", "p100x4");
  GroupGraph units = PlacementUnits(s.input(), PolicyOptions{});
  std::vector<int> family = ParameterFamilies(
      s.view, units, std::vector<bool>(units.num_units(), false));
  const int families =
      *std::max_element(family.begin(), family.end()) + 1;
  ASSERT_GT(families, 8);
  for (int parts : {1, 4, 8, families, families + 5}) {
    std::vector<int> group = MergeFamilies(units, family, parts);
    ASSERT_EQ(group.size(), family.size());
    const int count = *std::max_element(group.begin(), group.end()) + 1;
    EXPECT_EQ(count, std::min(parts, families)) << parts;
    // Never splits a family; numbered by first unit in topological order.
    std::map<int, int> group_of_family;
    int next = 0;
    for (int u : units.order()) {
      auto [it, fresh] = group_of_family.try_emplace(family[u], group[u]);
      EXPECT_EQ(it->second, group[u]) << "family " << family[u] << " split";
      if (group[u] == next) ++next;
      EXPECT_LT(group[u], next) << "numbering";
    }
    EXPECT_EQ(MergeFamilies(units, family, parts), group);  // deterministic
  }
}

TEST(PoliciesTest, ListSchedulersKeepEachLayerOnOneDevice) {
  // With memory to spare, no time step of a layer is split from its
  // weights (each such split costs a weight-sized gradient transfer).
  Scenario s("gnmt2", "p100x4");
  for (const char* name : {"heft", "m_etf", "m_sct"}) {
    absl::StatusOr<Placement> p = (*NewPolicy(name))->Place(s.input(), Quick());
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    std::map<std::string, std::set<int>> devices_of_layer;
    for (int g = 0; g < s.view.num_groups(); ++g) {
      std::string layer = LayerScope(s.view.forward().op(g).key);
      if (!layer.empty()) devices_of_layer[layer].insert(p->device_of_op[g]);
    }
    ASSERT_EQ(devices_of_layer.size(), 4u) << name;
    for (const auto& [layer, devices] : devices_of_layer) {
      EXPECT_EQ(devices.size(), 1u) << name << " " << layer;
    }
  }
}

// The bar: on GNMT-4 and GNMT-8 over four P100s (where no single
// device holds either model), the list schedulers and local search beat
// the experts' one-layer-per-device placement.
TEST(PoliciesTest, ListSchedulersAndLocalSearchBeatExpertOnGnmt) {
  for (const char* model : {"gnmt4", "gnmt8"}) {
    Scenario s(model, "p100x4", zoo::ZooParams());  // the zoo's full size
    std::map<std::string, double> step;
    for (const char* name :
         {"single", "expert", "m_etf", "m_sct", "local_search"}) {
      absl::StatusOr<Placement> p =
          (*NewPolicy(name))->Place(s.input(), Quick());
      ASSERT_TRUE(p.ok()) << model << " " << name << ": " << p.status();
      step[name] = Simulate(*s.sim, *p)->step_seconds;
    }
    // With partial gradients accumulated both fit on one P100 (6.7 and
    // 10.4 GB); four are faster.
    for (const char* name : {"m_etf", "m_sct", "local_search"}) {
      EXPECT_LT(step[name], step["expert"]) << model << " " << name;
      EXPECT_LT(step[name], step["single"]) << model << " " << name;
    }
  }
}

}  // namespace
}  // namespace placer
