// The hierarchical RL placer's trainer and policy: determinism (same seed
// and samples, same result), exact resumption from a checkpoint, warm
// start, learning, zero-shot placement through the `rl` policy, and
// checkpoint errors. Its features and model: rl_model_test.cc.
#include <atomic>
#include <cmath>
#include <new>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "graph/onnx_import.h"
#include "graph/training_view.h"
#include "simulator/evaluator.h"
#include "policies/policies.h"
#include "policies/rl/features.h"
#include "policies/rl/model.h"
#include "policies/rl/trainer.h"
#include "profiles/cluster.h"
#include "tests/policies/scenario.h"
#include "zoo/zoo.h"

namespace placer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

RlTask Task(const Scenario& s, const std::string& name) {
  RlTask t;
  t.name = name;
  t.input = &s.input();
  const SimulationContext* context = s.sim.get();
  t.make_evaluator = [context] { return NewSimulatorEvaluator(*context); };
  return t;
}

std::string TempDir(const std::string& name) {
  std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

RlTrainerOptions Small(int64_t samples) {
  RlTrainerOptions o;
  o.model.groups = 8;
  o.model.placer_hidden = 32;
  o.model.grouper_hidden = 32;
  o.samples_per_step = 8;
  o.max_samples = samples;
  o.imitation_steps = 60;
  o.grouper_prior_steps = 20;
  o.noise_samples = 200;
  o.greedy_every = 5;
  return o;
}

std::unique_ptr<RlTrainer> Make(const Scenario& s, RlTrainerOptions o) {
  absl::StatusOr<std::unique_ptr<RlTrainer>> t =
      RlTrainer::Create({Task(s, "gnmt2")}, o);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(*t);
}

// The curve without wall-clock time.
std::vector<std::vector<double>> Rows(const RlTrainer& t) {
  std::vector<std::vector<double>> out;
  for (const RlCurveRow& r : t.curve()) {
    out.push_back({static_cast<double>(r.step), static_cast<double>(r.samples),
                   static_cast<double>(r.task), r.batch_mean_seconds,
                   r.batch_best_seconds, r.best_seconds,
                   static_cast<double>(r.invalid), r.greedy_seconds});
  }
  return out;
}

TEST(RlTrainerTest, SameSeedSameSamplesSameResult) {
  Scenario s("gnmt2", "p100x4");
  RlTrainerOptions o = Small(96);
  o.threads = 1;
  std::unique_ptr<RlTrainer> a = Make(s, o);
  ASSERT_TRUE(a->Train().ok());
  o.threads = 3;  // threads never change results
  std::unique_ptr<RlTrainer> b = Make(s, o);
  ASSERT_TRUE(b->Train().ok());
  EXPECT_EQ(Rows(*a), Rows(*b));
  ASSERT_TRUE(a->best(0).placement && b->best(0).placement);
  EXPECT_EQ(a->best(0).placement->device_of_op,
            b->best(0).placement->device_of_op);
  EXPECT_EQ(a->EvaluateGreedy(), b->EvaluateGreedy());

  o.seed = 2;
  std::unique_ptr<RlTrainer> c = Make(s, o);
  ASSERT_TRUE(c->Train().ok());
  EXPECT_NE(Rows(*a), Rows(*c));
}

TEST(RlTrainerTest, ResumeGoesOnExactlyAsIfNeverStopped) {
  Scenario s("gnmt2", "p100x4");
  for (bool warm : {false, true}) {
    SCOPED_TRACE(warm ? "warm start" : "cold start");
    RlTrainerOptions o = Small(128);
    o.warm_start = warm;
    o.checkpoint_dir = TempDir(warm ? "whole_w" : "whole_c");
    std::unique_ptr<RlTrainer> whole = Make(s, o);
    ASSERT_TRUE(whole->Train().ok());

    o.checkpoint_dir = TempDir(warm ? "halves_w" : "halves_c");
    o.max_samples = 64;
    std::unique_ptr<RlTrainer> first = Make(s, o);
    ASSERT_TRUE(first->Train().ok());  // saves at the end
    o.max_samples = 128;
    std::unique_ptr<RlTrainer> second = Make(s, o);
    ASSERT_TRUE(second->Resume().ok());
    EXPECT_EQ(second->samples(), 64);
    ASSERT_TRUE(second->Train().ok());

    EXPECT_EQ(Rows(*whole), Rows(*second));
    EXPECT_EQ(whole->best(0).placement->device_of_op,
              second->best(0).placement->device_of_op);
    EXPECT_EQ(whole->best(0).step_seconds, second->best(0).step_seconds);
    EXPECT_EQ(whole->EvaluateGreedy(), second->EvaluateGreedy());
  }
}

TEST(RlTrainerTest, WarmStartImitatesTheBestHeuristic) {
  Scenario s("gnmt2", "p100x4");
  RlTrainerOptions o = Small(8);
  o.warm_start = true;
  o.imitation_steps = 150;
  o.greedy_every = 0;
  std::unique_ptr<RlTrainer> t = Make(s, o);
  ASSERT_TRUE(t->Train().ok());
  absl::StatusOr<HeuristicWinner> h = BestHeuristic(s.input(), PolicyOptions{});
  ASSERT_TRUE(h.ok());
  // The best is never worse than the heuristic it started from.
  EXPECT_LE(t->best(0).step_seconds, h->step_seconds);
  // The model's own most likely placement is the imitation's target: the
  // structural groups, each on the device holding most of its compute in
  // the heuristic's placement.
  RlGraph g = BuildRlGraph(s.input(), PolicyOptions{});
  std::vector<int> group = g.StructuralGroups(o.model.groups);
  std::vector<std::vector<double>> weight(o.model.groups,
                                          std::vector<double>(4, 0));
  for (int u = 0; u < g.num_units(); ++u) {
    weight[group[u]][h->placement.device_of_op[g.units.members(u).front()]] +=
        g.units.min_seconds(u) + 1e-12;
  }
  std::vector<int> device(g.num_units());
  for (int u = 0; u < g.num_units(); ++u) {
    const std::vector<double>& w = weight[group[u]];
    device[u] = static_cast<int>(std::max_element(w.begin(), w.end()) -
                                 w.begin());
  }
  absl::StatusOr<SimulationResult> target = Simulate(*s.sim, g.Expand(device));
  ASSERT_TRUE(target.ok());
  double greedy = t->EvaluateGreedy()[0];
  ASSERT_GT(greedy, 0);
  EXPECT_NEAR(greedy, target->step_seconds, 1e-9)
      << "heuristic " << h->step_seconds;
}

TEST(RlTrainerTest, LearningShortensTheSampledSteps) {
  Scenario s("gnmt2", "p100x4");
  RlTrainerOptions o;
  o.model.groups = 8;
  o.samples_per_step = 64;
  o.sample_groups = false;  // the Placer learns over the Grouper's prior
  o.max_samples = 6400;
  std::unique_ptr<RlTrainer> t = Make(s, o);
  ASSERT_TRUE(t->Train().ok());
  const std::vector<RlCurveRow>& curve = t->curve();
  ASSERT_EQ(curve.size(), 100u);
  auto mean = [&](size_t from, size_t to) {
    double sum = 0;
    int count = 0;
    for (size_t i = from; i < to; ++i) {
      if (curve[i].batch_mean_seconds > 0) {
        sum += curve[i].batch_mean_seconds;
        ++count;
      }
    }
    return count ? sum / count : 0;
  };
  double first = mean(0, 10), last = mean(curve.size() - 10, curve.size());
  EXPECT_GT(first, 0);
  EXPECT_GT(last, 0);
  EXPECT_LT(last, 0.95 * first) << "first " << first << " last " << last;
  EXPECT_LT(t->best(0).step_seconds, first);
  // From random placements of its groups to within 10% of the best
  // heuristic (measured: 2.6%).
  absl::StatusOr<HeuristicWinner> h = BestHeuristic(s.input(), PolicyOptions{});
  ASSERT_TRUE(h.ok());
  EXPECT_LT(t->best(0).step_seconds, 1.10 * h->step_seconds)
      << t->best(0).step_seconds << " vs " << h->policy << " "
      << h->step_seconds;
}

// The headline's own setting, GNMT-4 at full size over four P100s with the
// default options, for the first 24 steps. Measured before partial
// gradients were accumulated: with the exploration controls off
// (entropy_target 0, max_kl_per_choice 0: the trainer as it was) every
// batch drew 3 placements from step 16 on and the best stalled at 0.655x
// the random groupings' mean step; with them, 0.57x. With accumulation
// (spread placements cost less, so the random mean is lower): off, 0.712x;
// on, 0.669x, the batches all distinct, entropy >= 1.0 nats per choice.
// Since updates wait for the whole backward (2026-11-30): off, 0.769x;
// on, 0.711x.
TEST(RlTrainerTest, Gnmt4KeepsExploringWhileItLearns) {
  Scenario s("gnmt4", "p100x4", zoo::ZooParams{});
  RlTrainerOptions o;
  o.max_samples = 24 * 64;
  std::unique_ptr<RlTrainer> t = Make(s, o);
  ASSERT_TRUE(t->Train().ok());
  const std::vector<RlCurveRow>& curve = t->curve();
  ASSERT_EQ(curve.size(), 24u);
  for (const RlCurveRow& r : curve) {
    SCOPED_TRACE(absl::StrCat("step ", r.step));
    EXPECT_GE(r.distinct_placements, 32);
    EXPECT_GE(r.entropy_per_choice, 0.5);
    EXPECT_LE(r.step_kl_per_choice, o.max_kl_per_choice);
  }
  const double random_mean = curve[0].batch_mean_seconds;
  EXPECT_LT(t->best(0).step_seconds, 0.74 * random_mean)
      << t->best(0).step_seconds << " vs random groupings' mean "
      << random_mean;
}

TEST(RlPolicyTest, ZeroShotAndFineTunedPlacementsAreValid) {
  Scenario train("gnmt2", "p100x4");
  RlTrainerOptions o;  // the rl policy's model options: the defaults
  o.max_samples = 64;
  o.checkpoint_dir = TempDir("policy");
  std::unique_ptr<RlTrainer> t = Make(train, o);
  ASSERT_TRUE(t->Train().ok());

  Scenario unseen("transformer_big", "p100x4");
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> rl = NewPolicy("rl");
  ASSERT_TRUE(rl.ok()) << rl.status();
  PolicyOptions po;
  po.checkpoint_dir = o.checkpoint_dir;
  po.max_evaluations = 1;  // zero-shot
  po.pinned[0] = 3;
  absl::StatusOr<Placement> zero = (*rl)->Place(unseen.input(), po);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->device_of_op[0], 3);
  EXPECT_TRUE(CheckPlacement(unseen.input(), po, *zero).ok());

  po.max_evaluations = 65;  // greedy, then 64 samples of fine-tuning
  absl::StatusOr<Placement> tuned = (*rl)->Place(unseen.input(), po);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  absl::StatusOr<SimulationResult> a =
      CheckPlacement(unseen.input(), po, *zero);
  absl::StatusOr<SimulationResult> b =
      CheckPlacement(unseen.input(), po, *tuned);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LE(b->step_seconds, a->step_seconds);

  // Zero-shot and fine-tuned alike never answer worse than the best
  // heuristic, and the last progress report says when it is the answer.
  absl::StatusOr<HeuristicWinner> h = BestHeuristic(unseen.input(), po);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_LE(a->step_seconds, h->step_seconds + 1e-12);
  EXPECT_LE(b->step_seconds, h->step_seconds + 1e-12);
  std::string stage;
  po.on_progress = [&](const SearchProgress& p) { stage = p.stage; };
  po.max_evaluations = 1;
  ASSERT_TRUE((*rl)->Place(unseen.input(), po).ok());
  if (a->step_seconds == h->step_seconds) {
    EXPECT_THAT(stage, HasSubstr("did not beat the best heuristic"));
  }

  // A model for another device count: one readable sentence.
  Scenario eight("gnmt2", "p100x8");
  po = PolicyOptions();
  po.checkpoint_dir = o.checkpoint_dir;
  po.max_evaluations = 1;
  absl::StatusOr<Placement> wrong = (*rl)->Place(eight.input(), po);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(),
              HasSubstr("trained for 4 devices; this cluster has 8"));
}

// The rl policy's zero-shot placement (one evaluation) of `s` from the
// checkpoint in `checkpoint_dir`: valid, and never slower than the best
// heuristic there.
void ExpectZeroShotNoWorseThanTheBestHeuristic(
    const Scenario& s, const std::string& checkpoint_dir) {
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> rl = NewPolicy("rl");
  ASSERT_TRUE(rl.ok()) << rl.status();
  PolicyOptions po;
  po.checkpoint_dir = checkpoint_dir;
  po.max_evaluations = 1;
  absl::StatusOr<Placement> zero = (*rl)->Place(s.input(), po);
  ASSERT_TRUE(zero.ok()) << zero.status();
  absl::StatusOr<SimulationResult> r = CheckPlacement(s.input(), po, *zero);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<HeuristicWinner> h = BestHeuristic(s.input(), po);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_LE(r->step_seconds, h->step_seconds + 1e-12);
}

// A device-agnostic model reading the best heuristic's placement trains, is
// checkpointed as such, and places graphs and clusters it never saw: its
// own zero-shot placement (greedy, no heuristic floor) within 10% of the
// best heuristic there (docs/rl.md's held-out figures, at test sizes); and
// through the rl policy, valid and never worse than the heuristic.
TEST(RlPolicyTest, HeuristicInputCheckpointPlacesZeroShotWithinTenPercent) {
  Scenario train("gnmt2", "p100x4");
  RlTrainerOptions o = Small(64);
  o.model.heuristic_input = true;
  o.model.device_agnostic = true;
  o.checkpoint_dir = TempDir("heuristic_input");
  std::unique_ptr<RlTrainer> t = Make(train, o);
  ASSERT_TRUE(t->Train().ok());
  absl::StatusOr<RlModelOptions> read =
      RlTrainer::ReadModelOptions(o.checkpoint_dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->heuristic_input);

  const std::pair<const char*, const char*> unseen_cases[] = {
      {"transformer_big", "p100x4"},
      {"rnnlm", "v100x8"},
      {"gnmt4", "cpu1_gpu2"}};
  for (const auto& [model, preset] : unseen_cases) {
    SCOPED_TRACE(absl::StrCat(model, " on ", preset));
    Scenario unseen(model, preset);
    absl::StatusOr<HeuristicWinner> h =
        BestHeuristic(unseen.input(), PolicyOptions{});
    ASSERT_TRUE(h.ok()) << h.status();
    RlTrainerOptions zo;
    zo.model = *read;
    zo.max_samples = 1;
    absl::StatusOr<std::unique_ptr<RlTrainer>> zero_shot =
        RlTrainer::Create({Task(unseen, "unseen")}, zo);
    ASSERT_TRUE(zero_shot.ok()) << zero_shot.status();
    ASSERT_TRUE((*zero_shot)->LoadModel(o.checkpoint_dir).ok());
    (*zero_shot)->EvaluateGreedy();
    const double own = (*zero_shot)->learned_seconds(0);
    std::printf("%s on %s: zero-shot %.6f s, best heuristic %.6f s (%s)\n",
                model, preset, own, h->step_seconds, h->policy.c_str());
    EXPECT_GT(own, 0);
    EXPECT_LE(own, 1.10 * h->step_seconds);
    ExpectZeroShotNoWorseThanTheBestHeuristic(unseen, o.checkpoint_dir);
  }
}

// A device-agnostic checkpoint trained on 4 P100s places, zero-shot, on
// 8 V100s and on a CPU with two GPUs (valid placements, never worse than
// the best heuristic there); the default model refuses (above).
TEST(RlPolicyTest, DeviceAgnosticCheckpointPlacesOnUnseenClusters) {
  Scenario train("gnmt2", "p100x4");
  RlTrainerOptions o;
  o.model.device_agnostic = true;
  o.max_samples = 64;
  o.checkpoint_dir = TempDir("agnostic");
  std::unique_ptr<RlTrainer> t = Make(train, o);
  ASSERT_TRUE(t->Train().ok());
  absl::StatusOr<RlModelOptions> read =
      RlTrainer::ReadModelOptions(o.checkpoint_dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->device_agnostic);
  {
    // Graphs on clusters of 4 and 3 devices train one model in turn.
    Scenario three("gnmt2", "cpu1_gpu2");
    RlTrainerOptions mixed = Small(32);
    mixed.model.device_agnostic = true;
    absl::StatusOr<std::unique_ptr<RlTrainer>> both = RlTrainer::Create(
        {Task(train, "four"), Task(three, "three")}, mixed);
    ASSERT_TRUE(both.ok()) << both.status();
    ASSERT_TRUE((*both)->Train().ok());
    EXPECT_GT((*both)->best(0).step_seconds, 0);
    EXPECT_GT((*both)->best(1).step_seconds, 0);
  }
  for (const char* preset : {"v100x8", "cpu1_gpu2"}) {
    SCOPED_TRACE(preset);
    Scenario unseen("gnmt2", preset);
    ExpectZeroShotNoWorseThanTheBestHeuristic(unseen, o.checkpoint_dir);
  }
}

TEST(RlPolicyTest, WithoutACheckpointNeverWorseThanTheBestHeuristic) {
  Scenario s("gnmt2", "p100x4");
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> rl = NewPolicy("rl");
  ASSERT_TRUE(rl.ok()) << rl.status();
  PolicyOptions po;
  po.max_evaluations = 129;  // a cold start: 128 samples
  absl::StatusOr<Placement> p = (*rl)->Place(s.input(), po);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<SimulationResult> r = CheckPlacement(s.input(), po, *p);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<HeuristicWinner> h = BestHeuristic(s.input(), po);
  ASSERT_TRUE(h.ok());
  EXPECT_LE(r->step_seconds, h->step_seconds);
}

TEST(RlTrainerTest, CheckpointErrorsNameTheFile) {
  Scenario s("gnmt2", "p100x4");
  RlTrainerOptions o = Small(16);
  o.checkpoint_dir = TempDir("errors");
  std::unique_ptr<RlTrainer> t = Make(s, o);
  absl::Status missing = t->Resume();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("checkpoint.pt"));

  ASSERT_TRUE(t->Train().ok());
  // One flipped byte inside a stored tensor: caught by the archive's
  // checksums before LibTorch reads it (fuzzing found such a file costing
  // LibTorch's loader 2 s and 3.8 GB).
  {
    const std::string path = o.checkpoint_dir + "/checkpoint.pt";
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::string damaged = bytes;
    size_t at = damaged.find("archive/data/0");
    ASSERT_NE(at, std::string::npos);
    damaged[at + 200] ^= 0x01;  // past the local header, in the data
    std::ofstream(path, std::ios::binary) << damaged;
    std::unique_ptr<RlTrainer> flipped = Make(s, o);
    absl::Status s1 = flipped->Resume();
    EXPECT_EQ(s1.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(s1.message(), HasSubstr("checksum"));
    std::ofstream(path, std::ios::binary) << bytes;
  }
  o.learning_rate = 0.5;
  std::unique_ptr<RlTrainer> other = Make(s, o);
  absl::Status mismatch = other->Resume();
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(mismatch.message(), HasSubstr("lr=0.5"));

  std::ofstream(o.checkpoint_dir + "/checkpoint.pt") << "not a checkpoint";
  RlTrainerOptions same = Small(16);
  same.checkpoint_dir = o.checkpoint_dir;
  std::unique_ptr<RlTrainer> torn = Make(s, same);
  absl::Status corrupt = torn->Resume();
  EXPECT_EQ(corrupt.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(corrupt.message(), HasSubstr("checkpoint.pt"));
  EXPECT_THAT(torn->LoadModel(o.checkpoint_dir).message(),
              HasSubstr("not a readable checkpoint"));
}

TEST(RlTrainerTest, BadOptionsAreErrors) {
  Scenario s("gnmt2", "p100x4");
  RlTrainerOptions o = Small(0);
  EXPECT_THAT(RlTrainer::Create({Task(s, "a")}, o).status().message(),
              HasSubstr("must bound training"));
  o = Small(8);
  o.model.groups = 2;
  EXPECT_THAT(RlTrainer::Create({Task(s, "a")}, o).status().message(),
              HasSubstr("cannot cover 4 devices"));
  Scenario two("gnmt2", "cpu2");
  o = Small(8);
  EXPECT_THAT(
      RlTrainer::Create({Task(s, "a"), Task(two, "b")}, o).status().message(),
      HasSubstr("one model places on one device count"));
  o = Small(8);
  o.max_kl_per_choice = -1;
  EXPECT_THAT(RlTrainer::Create({Task(s, "a")}, o).status().message(),
              HasSubstr("KL limit must be >= 0"));
  o = Small(8);
  o.model.sage_layers = kMaxSageLayers + 1;
  EXPECT_THAT(RlTrainer::Create({Task(s, "a")}, o).status().message(),
              HasSubstr("GraphSAGE layers must be 0..8"));
  o.model.sage_layers = 2;
  o.model.sage_hidden = kMaxSageHidden + 1;
  EXPECT_THAT(RlTrainer::Create({Task(s, "a")}, o).status().message(),
              HasSubstr("width 1..1024"));
}

}  // namespace
}  // namespace placer

namespace placer {
namespace {

// Fault injection: an evaluator that throws (as LibTorch does on out of
// memory) on one call. Before, the exception reached the trainer's
// std::thread and terminated the process.
class ThrowingEvaluator : public StepEvaluator {
 public:
  ThrowingEvaluator(std::unique_ptr<StepEvaluator> inner,
                    std::shared_ptr<std::atomic<int>> calls, int throw_at)
      : inner_(std::move(inner)), calls_(std::move(calls)),
        throw_at_(throw_at) {}
  absl::StatusOr<Evaluation> Evaluate(const Placement& p) override {
    if (++*calls_ == throw_at_) throw std::bad_alloc();
    return inner_->Evaluate(p);
  }

 private:
  std::unique_ptr<StepEvaluator> inner_;
  std::shared_ptr<std::atomic<int>> calls_;
  int throw_at_;
};

TEST(RlTrainerTest, AnEvaluatorThatThrowsFailsTheStepThenTrainingGoesOn) {
  Scenario s("gnmt2", "p100x4");
  auto calls = std::make_shared<std::atomic<int>>(0);
  RlTask task = Task(s, "gnmt2");
  const SimulationContext* context = s.sim.get();
  task.make_evaluator = [context, calls] {
    return std::unique_ptr<StepEvaluator>(new ThrowingEvaluator(
        NewSimulatorEvaluator(*context), calls, /*throw_at=*/20));
  };
  RlTrainerOptions o = Small(64);
  o.threads = 2;
  absl::StatusOr<std::unique_ptr<RlTrainer>> t = RlTrainer::Create({task}, o);
  ASSERT_TRUE(t.ok()) << t.status();
  absl::Status first = (*t)->Train();
  EXPECT_EQ(first.code(), absl::StatusCode::kResourceExhausted) << first;
  EXPECT_THAT(first.message(), HasSubstr("evaluating a placement of gnmt2"));
  const size_t steps_before = (*t)->curve().size();
  absl::Status second = (*t)->Train();  // the evaluator works again
  EXPECT_TRUE(second.ok()) << second;
  EXPECT_GT((*t)->curve().size(), steps_before);
  EXPECT_GE((*t)->samples(), 64);
}

}  // namespace
}  // namespace placer
