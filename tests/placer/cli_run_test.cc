// profile, run and calibrate end to end (placer_torch): placer run as a user
// would, what it prints and writes checked.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "tests/placer/run_placer.h"

namespace {

using ::placer::test::Json;
using ::placer::test::Number;
using ::placer::test::RunCommand;
using ::placer::test::RunPlacer;
using ::placer::test::RunResult;
using ::placer::test::TmpFile;
using ::placer::test::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;

// Ctrl-C while ops are timed writes what was measured, marked stopped;
// --resume with the same -o keeps those timings and measures the rest.
TEST(CliTest, ProfileStoppedBySignalIsResumed) {
  const std::string out = TmpFile("stopped_profile.pbtxt");
  const std::string log = TmpFile("stopped_profile.log");
  const std::string pid_file = TmpFile("stopped_profile.pid");
  const std::string rc_file = TmpFile("stopped_profile.rc");
  RunCommand("rm -f " + out + " " + pid_file + " " + rc_file);
  // zoo:gnmt2 op by op takes minutes (its last signatures are slow).
  const std::string profile =
      "placer/placer profile zoo:gnmt2 --cluster cpu2 --repeats 1 "
      "--warmup 0 -o " +
      out;
  RunCommand("(" + profile + " --budget 10m >" + log + " 2>&1 & echo $! >" +
             pid_file + "; wait $!; echo $? >" + rc_file + ") >/dev/null &");
  for (int i = 0; i < 600 && RunCommand("grep -q '25 signatures' " + log +
                                        " && test -s " + pid_file)
                                     .exit_code != 0;
       ++i) {
    usleep(100000);
  }
  const int pid = std::atoi(RunCommand("cat " + pid_file).out.c_str());
  ASSERT_GT(pid, 0);
  RunCommand("kill -INT " + std::to_string(pid));
  int waited = 0;
  for (; waited < 400 && RunCommand("test -s " + rc_file).exit_code != 0;
       ++waited) {
    usleep(50000);
  }
  if (waited >= 400) RunCommand("kill -9 " + std::to_string(pid));
  ASSERT_LT(waited, 400) << "still running 20 s after SIGINT";
  EXPECT_EQ(std::atoi(RunCommand("cat " + rc_file).out.c_str()), 130);
  const std::string text = RunCommand("cat " + log).out;
  EXPECT_THAT(text, HasSubstr("stopped by signal before "));
  EXPECT_THAT(text, HasSubstr("the same command with --resume"));
  // "wrote OUT: N node signatures, ...": N measured before the stop.
  const std::string said = "wrote " + out + ": ";
  const size_t at = text.find(said);
  ASSERT_NE(at, std::string::npos) << text;
  const int measured = std::atoi(text.c_str() + at + said.size());
  EXPECT_GE(measured, 25) << text;
  EXPECT_THAT(RunCommand("grep source " + out).out, HasSubstr("; stopped"));
  // Resumed: what it measured is kept; the rest is timed, as far as a
  // one-second budget goes, and the profile is written whole.
  RunResult resumed =
      RunCommand(profile.substr(0, profile.find(" -o")) +
                 " --budget 1 --reference-steps 0 --resume -o " + out);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_THAT(resumed.out,
              HasSubstr(std::to_string(measured) +
                        " node signatures kept from the profile resumed"));
  EXPECT_THAT(RunCommand("grep source " + out).out, Not(HasSubstr("stopped")));
  // Nothing to resume, or a profile measured otherwise: clear errors.
  RunResult missing =
      RunPlacer("profile zoo:diamond --cluster cpu2 --resume -o " +
                TmpFile("no_such_profile.pbtxt"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.out, HasSubstr("--resume: "));
  EXPECT_THAT(missing.out, HasSubstr("no_such_profile.pbtxt"));
  RunResult other = RunPlacer(
      "profile zoo:gnmt2 --cluster cpu2 --repeats 2 "
      "--budget 1 --resume -o " +
      out);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_THAT(other.out, HasSubstr("resume with the same"));
}

TEST(CliTest, ProfileThenSimulateWithIt) {
  std::string profile = TmpFile("profile.pbtxt");
  RunResult r = RunPlacer("profile zoo:diamond --batch 2 --hidden 3 "
                          "--cluster cpu2 --repeats 1 --warmup 0 -o " +
                          profile);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // diamond's 11 nodes have 6 distinct signatures: forward MatMul (x3)
  // and Add; backward Add, MatMul with dW only (top), MatMul with both
  // gradients (left, right); the update (x3).
  EXPECT_THAT(r.out, HasSubstr("6 node signatures, 2 links measured"));
  EXPECT_THAT(r.out, HasSubstr("0 failed"));
  EXPECT_THAT(r.out, HasSubstr("0 of 6 node signatures left to the roofline"));
  // In-step times of a reference placement overlay the op-by-op ones,
  // unless --reference-steps 0.
  EXPECT_THAT(r.out, HasSubstr("overlaid with 5 steps of a reference placement"));
  RunResult op_by_op = RunPlacer(
      "profile zoo:diamond --batch 2 --hidden 3 --cluster cpu2 --repeats 1 "
      "--warmup 0 --reference-steps 0 -o " + TmpFile("op_by_op.pbtxt"));
  ASSERT_EQ(op_by_op.exit_code, 0) << op_by_op.out;
  EXPECT_THAT(op_by_op.out, Not(HasSubstr("reference placement")));
  EXPECT_THAT(op_by_op.out, HasSubstr("0 of 6 node signatures left to the roofline"));
  // A budget too small for any op: op by op, all six are left to the
  // roofline; with the reference steps, every one is timed inside them.
  const std::string tiny =
      "profile zoo:diamond --batch 2 --hidden 3 --cluster cpu2 --repeats 1 "
      "--warmup 0 --budget 0.001 ";
  RunResult starved =
      RunPlacer(tiny + "--reference-steps 0 -o " + TmpFile("starved.pbtxt"));
  ASSERT_EQ(starved.exit_code, 0) << starved.out;
  EXPECT_THAT(starved.out, HasSubstr("raise it to measure them"));
  EXPECT_THAT(starved.out, HasSubstr("6 of 6 node signatures left to the roofline"));
  RunResult stepped = RunPlacer(tiny + "-o " + TmpFile("stepped.pbtxt"));
  ASSERT_EQ(stepped.exit_code, 0) << stepped.out;
  EXPECT_THAT(stepped.out, HasSubstr("timed inside the reference steps only"));
  EXPECT_THAT(stepped.out, HasSubstr("0 of 6 node signatures left to the roofline"));
  std::string placement = TmpFile("diamond_p.json");
  WriteFile(placement, R"({"assignment": {"top": "/cpu:0", "left": "/cpu:0",
      "right": "/cpu:1", "join": "/cpu:0"}})");
  RunResult roofline = RunPlacer(
      "simulate zoo:diamond --batch 2 --hidden 3 --cluster cpu2 --json "
      "--placement " + placement);
  RunResult measured = RunPlacer(
      "simulate zoo:diamond --batch 2 --hidden 3 --cluster cpu2 --json "
      "--placement " + placement + " --profile " + profile);
  ASSERT_EQ(measured.exit_code, 0) << measured.out;
  EXPECT_NE(Number(Json(measured.out), "step_seconds"),
            Number(Json(roofline.out), "step_seconds"));
  EXPECT_EQ(Number(Json(measured.out), "estimated_nodes"), 0);
  // GPUs: none in cpu2; in cpu1_h100x1, none that this (CPU) LibTorch sees.
  RunResult no_gpu = RunPlacer("profile --devices gpu -o x");
  EXPECT_EQ(no_gpu.exit_code, 1);
  EXPECT_NE(no_gpu.out.find("'cpu2' has no gpu device"), std::string::npos)
      << no_gpu.out;
  RunResult no_cuda =
      RunPlacer("profile --devices cpu,gpu --cluster cpu1_h100x1 -o x");
  EXPECT_EQ(no_cuda.exit_code, 1);
  EXPECT_NE(no_cuda.out.find("/gpu:0 is a GPU but this LibTorch sees 0"),
            std::string::npos)
      << no_cuda.out;
  EXPECT_NE(RunPlacer("profile --devices tpu -o x").exit_code, 0);
}

TEST(CliTest, RunTrainsAPlacementAndWritesAProfile) {
  std::string placement = TmpFile("run_p.json");
  WriteFile(placement, R"({"assignment": {"top": "/cpu:0", "left": "/cpu:0",
      "right": "/cpu:1", "join": "/cpu:0"}})");
  std::string profile = TmpFile("run_profile.pbtxt");
  RunResult r = RunPlacer(
      "run zoo:diamond --batch 8 --hidden 16 --cluster cpu2 --steps 3 "
      "--warmup 1 --json --placement " + placement + " --profile-out " +
      profile);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::string json = r.out.substr(0, r.out.find('\n'));
  google::protobuf::Struct s = Json(json);
  EXPECT_GT(Number(s, "measured_step_seconds"), 0);
  EXPECT_GT(Number(s, "simulated_step_seconds"), 0);
  ASSERT_EQ(s.fields().at("losses").list_value().values_size(), 4);
  // The same batch every step: the loss falls.
  const auto& losses = s.fields().at("losses").list_value();
  EXPECT_LT(losses.values(3).number_value(), losses.values(0).number_value());
  // Each direction between the devices carries what the simulator moves:
  // as many copies and bytes per step.
  const auto& links = s.fields().at("links").list_value();
  ASSERT_EQ(links.values_size(), 2) << json;
  for (const auto& v : links.values()) {
    const google::protobuf::Struct& l = v.struct_value();
    EXPECT_NE(l.fields().at("src").string_value(),
              l.fields().at("dst").string_value());
    EXPECT_GE(Number(l, "copies"), 1);
    EXPECT_EQ(Number(l, "copies"), Number(l, "simulated_copies")) << json;
    EXPECT_EQ(Number(l, "bytes"), Number(l, "simulated_bytes")) << json;
    EXPECT_GT(Number(l, "seconds"), 0);
    EXPECT_GT(Number(l, "simulated_seconds"), 0);
  }
  // The profile it wrote drives the simulator.
  RunResult sim = RunPlacer(
      "simulate zoo:diamond --batch 8 --hidden 16 --cluster cpu2 --json "
      "--placement " + placement + " --profile " + profile);
  ASSERT_EQ(sim.exit_code, 0) << sim.out;
  EXPECT_EQ(Number(Json(sim.out), "estimated_nodes"), 0);
  // A placement that does not fit the model is named.
  std::string bad = TmpFile("run_bad.json");
  WriteFile(bad, R"({"assignment": {"top": "/cpu:0"}})");
  RunResult missing = RunPlacer(
      "run zoo:diamond --batch 8 --hidden 16 --cluster cpu2 --placement " + bad);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.out, HasSubstr("left"));
  // A strategy's run writes its node times too (every micro-batch's run,
  // on each replica's device): they price every node of the placement.
  std::string strategy = TmpFile("run_strategy.json");
  ASSERT_EQ(RunPlacer("place zoo:diamond --batch 8 --hidden 16 --cluster cpu2 "
                      "--parallelism pipeline --micro-batches 2 --budget 1 -o " +
                      strategy)
                .exit_code,
            0);
  std::string from_strategy = TmpFile("run_strategy_profile.pbtxt");
  RunResult pipelined = RunPlacer(
      "run zoo:diamond --batch 8 --hidden 16 --cluster cpu2 --steps 2 "
      "--warmup 1 --placement " + strategy + " --profile-out " + from_strategy);
  ASSERT_EQ(pipelined.exit_code, 0) << pipelined.out;
  EXPECT_THAT(pipelined.out, HasSubstr("node signatures"));
  RunResult priced = RunPlacer(
      "simulate zoo:diamond --batch 8 --hidden 16 --cluster cpu2 --json "
      "--placement " + placement + " --profile " + from_strategy);
  ASSERT_EQ(priced.exit_code, 0) << priced.out;
  EXPECT_EQ(Number(Json(priced.out), "estimated_nodes"), 0);
}

// Places `model` (a file and its flags) with m_etf on cpu2, trains it
// `steps` steps, and returns the losses, each checked finite and positive.
std::vector<double> PlaceThenRun(const std::string& model, int steps) {
  std::string placement = TmpFile("place_then_run.json");
  RunResult placed = RunPlacer("place " + model +
                               " --cluster cpu2 --policy m_etf -o " + placement);
  EXPECT_EQ(placed.exit_code, 0) << placed.out;
  RunResult r = RunPlacer("run " + model + " --cluster cpu2 --steps " +
                          std::to_string(steps) +
                          " --warmup 0 --json --placement " + placement);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  if (r.exit_code != 0) return {};
  google::protobuf::Struct s = Json(r.out.substr(0, r.out.find('\n')));
  EXPECT_GT(Number(s, "measured_step_seconds"), 0);
  std::vector<double> losses;
  for (const auto& l : s.fields().at("losses").list_value().values()) {
    EXPECT_TRUE(std::isfinite(l.number_value()));
    EXPECT_GT(l.number_value(), 0);
    losses.push_back(l.number_value());
  }
  EXPECT_EQ(static_cast<int>(losses.size()), steps);
  return losses;
}

// Users' models as PyTorch exports them for training: place, then train
// the placement on this machine's two CPU devices (issue 18).
TEST(CliTest, PlaceThenRunTrainingModeExports) {
  SCOPED_TRACE("resnet50");
  PlaceThenRun("tests/fixtures/corpus/resnet50.train.op13.onnx "
               "--input-shape input=4x3x64x64", 5);
  SCOPED_TRACE("lstm");
  PlaceThenRun("tests/fixtures/corpus/lstm.train.op17.onnx "
               "--input-shape tokens=4x16", 5);
}

// The model families of today, with their loss in the graph: integer
// targets through a Reshape, an int64 attention mask and token types,
// GroupNorm/Resize/ConvTranspose, top-k routing. Placed on two CPUs and
// trained three steps: the loss of the fixed batch goes down.
TEST(CliTest, PlaceThenRunTheModelsOfToday) {
  for (const char* family :
       {"llama", "llama_moe", "gpt2", "unet", "bert_masked"}) {
    SCOPED_TRACE(family);
    std::vector<double> losses = PlaceThenRun(
        std::string("tests/fixtures/corpus/") + family + ".train.op17.onnx", 3);
    ASSERT_EQ(losses.size(), 3u);
    EXPECT_LT(losses[2], losses[0]);
  }
}

TEST(CliTest, CalibrateReportsErrorAndRankCorrelation) {
  RunResult r = RunPlacer(
      "calibrate zoo:wide:batch=8,hidden=32 --cluster cpu2 --placements 4 "
      "--steps 2 --warmup 1 --rounds 1 --repeats 1 --budget 1 "
      "--evaluations 20");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("all models: 4 placements"));
  EXPECT_THAT(r.out, HasSubstr("Spearman rho"));
  // Per model, what a search trusting the simulator would have picked.
  EXPECT_THAT(r.out, HasSubstr("+ reference's pick:"));
  // Rounds in turn: every placement measured in each, all rows kept.
  RunResult rounds = RunPlacer(
      "calibrate zoo:wide:batch=8,hidden=32 --cluster cpu2 --placements 3 "
      "--steps 1 --warmup 0 --rounds 2 --repeats 1 --budget 1 "
      "--evaluations 20");
  ASSERT_EQ(rounds.exit_code, 0) << rounds.out;
  EXPECT_THAT(rounds.out, HasSubstr("round 2 of 2"));
  EXPECT_THAT(rounds.out, HasSubstr("all models: 3 placements"));
  // With two rounds, how well they rank the placements against each other.
  EXPECT_THAT(rounds.out, HasSubstr("the rounds against each other"));
  EXPECT_THAT(r.out, Not(HasSubstr("the rounds against each other")));
  // And how well the simulator ranks each round on its own.
  EXPECT_THAT(rounds.out, HasSubstr("+ reference against each round"));
  EXPECT_THAT(r.out, Not(HasSubstr("against each round")));
  RunResult none = RunPlacer("calibrate zoo:wide --rounds 0");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_THAT(none.out, HasSubstr("--rounds must be at least 1"));
}

}  // namespace
