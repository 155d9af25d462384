// The command line's end-to-end checks of what every command shares: inspecting
// models, help, flags, errors and JSON. Each test runs placer as a user
// would and checks what it prints; place and simulate: cli_place_test.cc;
// profile, run and calibrate: cli_run_test.cc; train: cli_train_test.cc;
// strategies from place to run: cli_strategy_test.cc; serve and remote:
// serve_cli_test.cc.
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

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
using ::testing::HasSubstr;
using ::testing::Not;

TEST(CliTest, InspectZooModelAsJson) {
  RunResult r = RunPlacer("inspect zoo:diamond --batch 2 --hidden 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  google::protobuf::Struct s = Json(r.out);
  EXPECT_EQ(Number(s, "nodes"), 4);
  EXPECT_EQ(Number(s, "parameter_bytes"), 3 * 9 * 4);
  // 3 MatMuls of 36 FLOPs and an Add of 6.
  EXPECT_EQ(Number(s, "forward_flops"), 3 * 36 + 6);
  // Backward: top 36 (dW only), left and right 72 each, join 6; updates
  // 3 x 36.
  EXPECT_EQ(Number(s, "training_flops"), 114 + 36 + 144 + 6 + 108);
  EXPECT_EQ(s.fields().at("unknown_ops").list_value().values_size(), 0);
}

TEST(CliTest, ExportThenInspectTheFile) {
  std::string path = TmpFile("chain.onnx");
  RunResult e = RunPlacer("zoo export chain --layers 3 -o " + path);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_THAT(e.out, HasSubstr("6 nodes"));
  RunResult r = RunPlacer("inspect " + path + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Number(Json(r.out), "nodes"), 6);
}

TEST(CliTest, HumanTableListsOpTypes) {
  RunResult r = RunPlacer("inspect zoo:wide --layers 4");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("9 forward ONNX nodes"));
  EXPECT_THAT(r.out, HasSubstr("MatMul"));
  EXPECT_THAT(r.out, HasSubstr("unknown ops      none"));
}

TEST(CliTest, SymbolicDimsFromFlags) {
  const std::string model = "tests/fixtures/transformer.onnx";
  RunResult missing = RunPlacer("inspect " + model);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.out, HasSubstr(model));
  EXPECT_THAT(missing.out, HasSubstr("graph input 'src'"));
  RunResult r = RunPlacer("inspect " + model +
                 " --batch 2 --dim src_len=8,tgt_len=6 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The file's 868 nodes: 527 of them shape arithmetic folded at import.
  EXPECT_EQ(Number(Json(r.out), "nodes"), 341);
  EXPECT_EQ(Number(Json(r.out), "folded_nodes"), 527);
  RunResult shapes = RunPlacer("inspect " + model +
                      " --input-shape src=2x8,tgt=2x6 --json");
  ASSERT_EQ(shapes.exit_code, 0) << shapes.out;
  EXPECT_EQ(Number(Json(shapes.out), "forward_flops"),
            Number(Json(r.out), "forward_flops"));
}

TEST(CliTest, HelpAndVersionExitZero) {
  RunResult help = RunPlacer("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("placer place MODEL"));
  EXPECT_THAT(help.out, HasSubstr("--memory-headroom (default: 0.05)"));
  EXPECT_THAT(help.out, HasSubstr("m_sct"));
  EXPECT_EQ(RunPlacer("place --help").exit_code, 0);
  RunResult version = RunPlacer("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr("placer 0."));
  // Negated booleans are flags too.
  EXPECT_EQ(RunPlacer("inspect zoo:chain --noweights").exit_code, 0);
}

// The flags a help text lists ("  --name (default: ...)").
std::set<std::string> HelpFlags(const std::string& text) {
  std::set<std::string> flags;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  --", 0) == 0) flags.insert(line.substr(4, line.find(' ', 4) - 4));
  }
  return flags;
}

TEST(CliTest, EachCommandsHelpShowsItsOwnUsageAndFlags) {
  RunResult run = RunPlacer("run --help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("placer run MODEL"));
  EXPECT_THAT(run.out, Not(HasSubstr("placer place MODEL")));
  std::set<std::string> run_flags = HelpFlags(run.out);
  EXPECT_TRUE(run_flags.count("nproc"));
  EXPECT_TRUE(run_flags.count("steps"));
  EXPECT_FALSE(run_flags.count("samples-per-step"));  // train's
  // --report is each of place, simulate and remote's.
  for (const char* c : {"place", "simulate", "remote"}) {
    EXPECT_TRUE(HelpFlags(RunPlacer(std::string(c) + " --help").out)
                    .count("report"))
        << c;
  }
  RunResult inspect = RunPlacer("inspect --help");
  EXPECT_THAT(inspect.out, HasSubstr("placer inspect MODEL"));
  std::set<std::string> inspect_flags = HelpFlags(inspect.out);
  EXPECT_TRUE(inspect_flags.count("batch"));
  EXPECT_FALSE(inspect_flags.count("policy"));
  // train's warm start is off by default, and its help says so.
  RunResult train = RunPlacer("train --help");
  EXPECT_THAT(train.out, HasSubstr("--warm-start (default: false)"));
  // Every flag placer has is some command's.
  std::set<std::string> all = HelpFlags(RunPlacer("--help").out);
  std::set<std::string> covered;
  for (const char* c : {"inspect", "zoo", "simulate", "place", "bench",
                        "profile", "run", "worker", "calibrate", "train",
                        "serve", "remote", "token"}) {
    RunResult r = RunPlacer(std::string(c) + " --help");
    EXPECT_EQ(r.exit_code, 0) << c;
    EXPECT_THAT(r.out, HasSubstr(std::string("placer ") + c)) << c;
    for (const std::string& f : HelpFlags(r.out)) covered.insert(f);
  }
  EXPECT_GT(all.size(), 50u);
  for (const std::string& f : all) EXPECT_TRUE(covered.count(f)) << "--" << f;
}

TEST(CliTest, ErrorsAreClearAndExitNonZero) {
  RunResult unknown = RunPlacer("inspect zoo:nope");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.out, HasSubstr("unknown zoo model 'nope'"));
  RunResult garbage = RunPlacer("inspect tests/placer/BUILD.bazel");
  EXPECT_EQ(garbage.exit_code, 1);
  EXPECT_THAT(garbage.out, HasSubstr("tests/placer/BUILD.bazel"));
  EXPECT_EQ(RunPlacer("frobnicate").exit_code, 2);
  RunResult flag = RunPlacer("inspect zoo:gnmt2 --bogus-flag 3");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.out, HasSubstr("unknown flag '--bogus_flag'"));
  EXPECT_EQ(RunPlacer("inspect").exit_code, 2);
  EXPECT_EQ(RunPlacer("zoo export chain").exit_code, 2);
  RunResult recompute = RunPlacer(
      "place zoo:chain --noweights --cluster p100x4 --parallelism data "
      "--recompute some");
  EXPECT_EQ(recompute.exit_code, 2);
  EXPECT_THAT(recompute.out,
              HasSubstr("--recompute: unknown recomputation 'some'; known: "
                        "auto, none, full, selective"));
  RunResult zero = RunPlacer(
      "place zoo:chain --noweights --cluster p100x4 --parallelism data "
      "--zero 4");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_THAT(zero.out, HasSubstr("--zero: ZeRO stage 4 is not modelled; "
                                  "known: 0, 1, 2, 3"));
}

// Flags that would change nothing are errors that say why.
TEST(CliTest, FlagsThatChangeNothingSaySo) {
  const std::string fixed = "tests/fixtures/corpus/resnet18.train.op17.onnx";
  RunResult batch = RunPlacer("inspect " + fixed + " --batch 32");
  EXPECT_EQ(batch.exit_code, 1);
  EXPECT_THAT(batch.out, HasSubstr("--batch 32 changes nothing"));
  EXPECT_THAT(batch.out, HasSubstr("input=1x3x224x224"));
  RunResult dim = RunPlacer("inspect tests/fixtures/transformer.onnx "
                            "--batch 2 --dim foo=3,src_len=4,tgt_len=4");
  EXPECT_EQ(dim.exit_code, 1);
  EXPECT_THAT(dim.out, HasSubstr("--dim foo=3 names no symbolic dim"));
  EXPECT_THAT(dim.out, HasSubstr("src_len"));
  RunResult shape = RunPlacer("inspect " + fixed + " --input-shape x=1x3");
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_THAT(shape.out, HasSubstr("the inputs are input"));
  RunResult hint = RunPlacer("inspect tests/fixtures/transformer.onnx "
                             "--batch 2 --dim tgt_len=4");
  EXPECT_EQ(hint.exit_code, 1);
  EXPECT_THAT(hint.out, HasSubstr("--dim src_len=N"));
  RunResult huge = RunPlacer("inspect zoo:gnmt8:seq_len=1000000");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_THAT(huge.out, HasSubstr("over the limit"));
}

// CPU devices run on cores of their own unless the process may not use a
// core for each (taskset here): then they run unpinned, and it is said.
TEST(CliTest, CpuDevicesWithoutCoresOfTheirOwnAreNoted) {
  const std::string run =
      "placer/placer run zoo:chain:batch=4,hidden=8 --cluster cpu2 "
      "--steps 1 --warmup 0";
  RunResult one_core = RunCommand("taskset -c 0 " + run);
  ASSERT_EQ(one_core.exit_code, 0) << one_core.out;
  EXPECT_THAT(one_core.out,
              HasSubstr("CPU devices run unpinned (--pin_cores): 2 CPU "
                        "devices x 1 thread(s) need 2 cores and this process "
                        "may use 1"));
  RunResult asked_not = RunCommand("taskset -c 0 " + run + " --nopin_cores");
  ASSERT_EQ(asked_not.exit_code, 0) << asked_not.out;
  EXPECT_THAT(asked_not.out, Not(HasSubstr("unpinned")));
  // train measures every model on the cluster: said once, not per model.
  RunResult train = RunCommand(
      "taskset -c 0 placer/placer train zoo:chain:batch=4,hidden=8 "
      "zoo:diamond --cluster cpu2 --reward measured --steps 1 --warmup 0 "
      "--samples 8 --samples_per_step 8 --groups 2 --json");
  ASSERT_EQ(train.exit_code, 0) << train.out;
  const std::string note = "CPU devices run unpinned";
  size_t first = train.out.find(note);
  ASSERT_NE(first, std::string::npos) << train.out;
  EXPECT_EQ(train.out.find(note, first + 1), std::string::npos) << train.out;
}

// Reports that --json turns into one JSON object (the progress and "wrote"
// lines are on stderr, so stdout alone parses).
TEST(CliTest, JsonEverywhere) {
  const char* dir = std::getenv("TEST_TMPDIR");
  RunResult bench = RunCommand(
      std::string("(placer/placer bench --models chain --clusters cpu2 "
                  "--policies single,m_etf --json --out-dir ") +
      (dir ? dir : "/tmp") + " 2>/dev/null)");
  ASSERT_EQ(bench.exit_code, 0) << bench.out;
  google::protobuf::Struct b = Json(bench.out);
  EXPECT_EQ(b.fields().at("results").list_value().values_size(), 2);
  RunResult zoo = RunCommand("(placer/placer zoo list --json 2>/dev/null)");
  ASSERT_EQ(zoo.exit_code, 0) << zoo.out;
  EXPECT_GT(Json(zoo.out).fields().at("models").list_value().values_size(), 5);
  RunResult calibrate = RunCommand(
      "(placer/placer calibrate zoo:chain:batch=4,hidden=8 --cluster cpu2 "
      "--placements 2 --steps 1 --warmup 0 --repeats 1 --budget 1 "
      "--evaluations 5 --json 2>/dev/null)");  // three rounds: the default
  ASSERT_EQ(calibrate.exit_code, 0) << calibrate.out;
  google::protobuf::Struct c = Json(calibrate.out);
  EXPECT_EQ(c.fields().at("rows").list_value().values_size(), 2);
  EXPECT_TRUE(c.fields().at("all").struct_value().fields().contains(
      "spearman_rho"));
  EXPECT_EQ(c.fields()
                .at("rows")
                .list_value()
                .values(0)
                .struct_value()
                .fields()
                .at("measured_rounds_seconds")
                .list_value()
                .values_size(),
            3);
  RunResult train = RunCommand(
      "(placer/placer train zoo:chain:batch=4,hidden=8 --cluster cpu2 "
      "--samples 16 --samples_per_step 8 --groups 2 --json 2>/dev/null)");
  ASSERT_EQ(train.exit_code, 0) << train.out;
  google::protobuf::Struct t = Json(train.out);
  EXPECT_EQ(t.fields().at("models").list_value().values_size(), 1);
  EXPECT_EQ(Number(t, "samples"), 16);
  // With measured rewards the heuristic is measured too, and the model's
  // best again, so that the two compare in one unit.
  RunResult measured = RunCommand(
      "(placer/placer train zoo:chain:batch=4,hidden=8 --cluster cpu2 "
      "--reward measured --steps 1 --warmup 0 --samples 16 "
      "--samples_per_step 8 --groups 2 --json 2>/dev/null)");
  ASSERT_EQ(measured.exit_code, 0) << measured.out;
  const google::protobuf::Struct m = Json(measured.out);
  const auto& row = m.fields()
                        .at("models")
                        .list_value()
                        .values(0)
                        .struct_value()
                        .fields();
  for (const char* field :
       {"rl_step_seconds", "rl_step_seconds_remeasured",
        "heuristic_step_seconds", "heuristic_step_seconds_measured"}) {
    ASSERT_TRUE(row.contains(field)) << field << " in " << measured.out;
    EXPECT_GT(row.at(field).number_value(), 0) << field;
  }
  // Several clusters: every model on each; other device counts need a
  // device-agnostic model, and the error says so.
  const std::string mixed =
      "(placer/placer train zoo:chain:batch=4,hidden=8 --cluster "
      "p100x4,cpu1_gpu2 --samples 16 --samples_per_step 8 --groups 4 --json";
  RunResult refused = RunCommand(mixed + " 2>&1)");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.out, HasSubstr("unless --device-agnostic"));
  RunResult agnostic = RunCommand(mixed + " --device-agnostic 2>/dev/null)");
  ASSERT_EQ(agnostic.exit_code, 0) << agnostic.out;
  const google::protobuf::Struct a = Json(agnostic.out);
  const auto& models = a.fields().at("models").list_value();
  ASSERT_EQ(models.values_size(), 2);
  EXPECT_THAT(models.values(1).struct_value().fields().at("model")
                  .string_value(),
              HasSubstr("@cpu1_gpu2"));
}

TEST(CliTest, ZooListNamesEveryModel) {
  RunResult r = RunPlacer("zoo list");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* name : {"inception_v3", "resnet50", "gnmt2", "gnmt4",
                           "gnmt8", "rnnlm", "transformer_big", "chain",
                           "diamond", "wide", "random_dag"}) {
    EXPECT_THAT(r.out, HasSubstr(name));
  }
}

}  // namespace
