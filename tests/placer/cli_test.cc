// The command line's end-to-end checks: each test runs placer as a user
// would and checks what it prints (serve and remote: serve_cli_test.cc).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/placer/run_placer.h"

namespace {

using ::placer::test::Json;
using ::placer::test::JsonLine;
using ::placer::test::Number;
using ::placer::test::RunCommand;
using ::placer::test::RunPlacer;
using ::placer::test::RunResult;
using ::placer::test::TmpFile;
using ::testing::ContainsRegex;
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
  EXPECT_EQ(Number(Json(r.out), "nodes"), 868);
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

// --attention fused: one FlashAttention op per layer in place of its
// MatMul-Softmax-MatMul core; a value it does not know is an error.
TEST(CliTest, AttentionFusedIsOneOpPerLayer) {
  RunResult fused =
      RunPlacer("inspect zoo:gpt --noweights --layers 2 --attention fused");
  EXPECT_EQ(fused.exit_code, 0) << fused.out;
  EXPECT_THAT(fused.out, ContainsRegex("placer::FusedAttention +2 "));
  EXPECT_THAT(fused.out, Not(HasSubstr("Softmax ")));
  RunResult plain = RunPlacer("inspect zoo:gpt --noweights --layers 2");
  EXPECT_THAT(plain.out, Not(HasSubstr("FusedAttention")));
  RunResult bad = RunPlacer("inspect zoo:gpt --noweights --attention flash");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out,
              HasSubstr("--attention 'flash': expected as-exported or fused"));
}

// --micro-batch-sizes: the search at each micro batch size, over the same
// global batch; the fastest plan of any size is chosen, emitted with its
// size and written so that the model at that batch simulates it alike.
TEST(CliTest, PlaceSearchesMicroBatchSizes) {
  const std::string model =
      "place zoo:gpt --noweights --layers 2 --seq-len 64 --cluster p100x4 "
      "--parallelism data --budget 1 --global-batch 8 ";
  RunResult json = RunPlacer(model + "--micro-batch-sizes 1,2,4 --json");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  google::protobuf::Struct s = JsonLine(json.out);
  ASSERT_TRUE(s.fields().count("results")) << json.out;
  const auto& rows = s.fields().at("results").list_value();
  ASSERT_EQ(rows.values_size(), 4) << json.out;  // single, b=1, b=2, b=4
  std::string fastest;
  double best = 0;
  for (int i = 1; i < rows.values_size(); ++i) {
    const google::protobuf::Struct& r = rows.values(i).struct_value();
    const std::string name = r.fields().at("row").string_value();
    const int size = i == 1 ? 1 : i == 2 ? 2 : 4;
    EXPECT_EQ(name, "data b=" + std::to_string(size));
    if (!r.fields().at("ok").bool_value()) {
      // 8 / 4 = 2 micro-batches cannot feed 4 replicas.
      EXPECT_EQ(size, 4);
      EXPECT_THAT(r.fields().at("error").string_value(),
                  HasSubstr("needs at least 4 micro-batches"));
      continue;
    }
    EXPECT_EQ(Number(r, "micro_batch_size"), size);
    EXPECT_EQ(Number(r, "micro_batches"), 8 / size);
    if (fastest.empty() || Number(r, "step_seconds") < best) {
      fastest = name;
      best = Number(r, "step_seconds");
    }
  }
  EXPECT_EQ(s.fields().at("chosen").string_value(), fastest);
  // The chosen size in Megatron-LM's flags, and its plan file simulated
  // at that batch: the row's step.
  const std::string plan = TmpFile("sizes.json");
  RunResult text = RunPlacer(model +
                             "--micro-batch-sizes 1,2 --emit megatron -o " +
                             plan);
  ASSERT_EQ(text.exit_code, 0) << text.out;
  const std::string size = fastest.substr(fastest.find('=') + 1);
  EXPECT_THAT(text.out, HasSubstr("--micro-batch-size " + size +
                                  " --global-batch-size 8"));
  EXPECT_THAT(text.out, HasSubstr("micro batch size is " + size +
                                  ": give --batch " + size));
  RunResult simulated = RunPlacer(
      "simulate zoo:gpt --noweights --layers 2 --seq-len 64 --cluster p100x4 "
      "--json --batch " + size + " --placement " + plan);
  ASSERT_EQ(simulated.exit_code, 0) << simulated.out;
  EXPECT_DOUBLE_EQ(Number(JsonLine(simulated.out), "step_seconds"), best);
  // Sizes need a global batch, and must divide it.
  RunResult no_global = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --cluster p100x4 --parallelism "
      "data --micro-batch-sizes 1,2");
  EXPECT_EQ(no_global.exit_code, 2);
  EXPECT_THAT(no_global.out, HasSubstr("--micro-batch-sizes needs --global-batch"));
  RunResult odd = RunPlacer(model + "--micro-batch-sizes 3");
  EXPECT_EQ(odd.exit_code, 2);
  EXPECT_THAT(odd.out,
              HasSubstr("--micro-batch-sizes: 3 does not divide --global-batch 8"));
}

// place --parallelism --emit: the chosen strategy in another system's
// terms after the table; without --parallelism, or an unknown system, an
// error that says why.
TEST(CliTest, PlaceEmitsTheChosenStrategy) {
  RunResult ds = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --seq-len 64 --cluster p100x4 "
      "--parallelism data --budget 1 --emit deepspeed");
  EXPECT_EQ(ds.exit_code, 0) << ds.out;
  EXPECT_THAT(ds.out, HasSubstr("deepspeed (the chosen plan, data):\n{\n"
                                "  \"train_batch_size\": 4,\n"
                                "  \"train_micro_batch_size_per_gpu\": 1,"));
  RunResult megatron = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --seq-len 64 --cluster p100x4 "
      "--parallelism data --budget 1 --emit megatron");
  EXPECT_THAT(megatron.out,
              HasSubstr("--tensor-model-parallel-size 1 "
                        "--pipeline-model-parallel-size 1 --micro-batch-size 1 "
                        "--global-batch-size 4 --seq-length 64 "
                        "--overlap-grad-reduce\n"));
  // --global-batch 8 over micro-batches of 2 sequences: 4 per step.
  RunResult global = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --seq-len 64 --batch 2 "
      "--cluster p100x4 --parallelism data --budget 1 --global-batch 8 "
      "--emit megatron");
  EXPECT_EQ(global.exit_code, 0) << global.out;
  EXPECT_THAT(global.out, HasSubstr("--micro-batch-size 2 --global-batch-size 8"));
  RunResult odd = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --batch 2 --cluster p100x4 "
      "--parallelism data --global-batch 7");
  EXPECT_EQ(odd.exit_code, 2);
  EXPECT_THAT(odd.out, HasSubstr("--global-batch 7: not a positive multiple "
                                 "of the graph's batch, 2"));
  // Over the strategy search's pool (40 GPUs, the pool 32), auto leaves
  // the op placement and hybrid rows out and says so.
  RunResult wide = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --seq-len 64 --cluster "
      "dgx_h100:nodes=5 --parallelism auto --budget 1 --micro-batches 40");
  EXPECT_EQ(wide.exit_code, 0) << wide.out;
  EXPECT_THAT(wide.out, HasSubstr("the op placement and hybrid rows are left "
                                  "out: 40 devices are more than the 32"));
  EXPECT_THAT(wide.out, Not(HasSubstr("\nhybrid ")));
  RunResult model = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --cluster p100x4 --emit megatron");
  EXPECT_EQ(model.exit_code, 2) << model.out;
  EXPECT_THAT(model.out, HasSubstr("--emit prints a strategy"));
  RunResult bad = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --cluster p100x4 --parallelism "
      "data --emit alpa");
  EXPECT_THAT(bad.out, HasSubstr(
      "--emit 'alpa': expected megatron, deepspeed or torchtitan"));
  // A published layout fixed by --tensor, --stages and --replicas: the row
  // is that layout; a count that is no count is a usage error.
  RunResult fixed = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --seq-len 64 --cluster h100x8 "
      "--parallelism tensor --tensor 2 --stages 1 --replicas 4 "
      "--micro-batches 8 --precision fp8");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.out;
  EXPECT_THAT(fixed.out, HasSubstr("1 stage x 4 replicas of tensor 2"));
  RunResult word = RunPlacer(
      "place zoo:gpt --noweights --layers 2 --cluster h100x8 --parallelism "
      "tensor --stages two");
  EXPECT_EQ(word.exit_code, 2) << word.out;
  EXPECT_THAT(word.out, HasSubstr("--stages: 'two' is neither auto nor a count"));
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

void WriteFile(const std::string& path, const std::string& text) {
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(text.c_str(), f);
  fclose(f);
}

// diamond (batch 2, hidden 3) on this machine's two CPU devices: the right
// branch on /cpu:1.
TEST(CliTest, SimulateAPlacementFile) {
  std::string placement = TmpFile("diamond.json");
  WriteFile(placement, R"({"model": "zoo:diamond", "policy": "by hand",
      "devices": ["/cpu:0", "/cpu:1"],
      "assignment": {"top": "/cpu:0", "left": "/cpu:0", "right": "/cpu:1",
                     "join": "/cpu:0"}})");
  std::string trace = TmpFile("trace.json");
  RunResult r = RunPlacer(
      "simulate zoo:diamond --batch 2 --hidden 3 --cluster cpu2 "
      "--placement " + placement + " --trace " + trace + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // "wrote TRACE: Chrome trace" (stderr) comes before the JSON (stdout).
  EXPECT_THAT(r.out, HasSubstr("wrote " + trace + ": Chrome trace"));
  google::protobuf::Struct s = Json(r.out.substr(r.out.find('{')));
  EXPECT_GT(Number(s, "step_seconds"), 0);
  EXPECT_GE(Number(s, "step_seconds"), Number(s, "lower_bound_seconds"));
  // top's output goes to /cpu:1 and right's comes back (24 bytes each);
  // in backward, join's gradient for right crosses to /cpu:1 and right's
  // gradient for top comes back; w_right lives on /cpu:1 with right.
  EXPECT_EQ(Number(s, "bytes_moved"), 4 * 24);
  EXPECT_FALSE(s.fields().at("out_of_memory").bool_value());
  EXPECT_EQ(s.fields().at("peak_memory_bytes").struct_value().fields_size(), 2);
  EXPECT_EQ(Number(s, "estimated_nodes"), 0);
  // What was live at each device's peak adds up to it; /cpu:1 holds
  // w_right there.
  for (const char* device : {"/cpu:0", "/cpu:1"}) {
    const google::protobuf::Struct& at = s.fields()
                                             .at("peak_breakdown")
                                             .struct_value()
                                             .fields()
                                             .at(device)
                                             .struct_value();
    double total = 0;
    for (const char* part :
         {"parameters", "activations", "gradients", "workspace", "inputs"}) {
      total += Number(at, part);
    }
    EXPECT_EQ(total, Number(s.fields().at("peak_memory_bytes").struct_value(),
                            device))
        << device;
  }
  EXPECT_GT(Number(s.fields()
                       .at("peak_breakdown")
                       .struct_value()
                       .fields()
                       .at("/cpu:1")
                       .struct_value(),
                   "parameters"),
            0);
  RunResult cat = RunCommand("cat " + trace);
  google::protobuf::Struct t = Json(cat.out);
  EXPECT_GT(t.fields().at("traceEvents").list_value().values_size(), 11);
}

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

// A simulate --json report's peak on /gpu:0.
double PeakOfGpu0(const google::protobuf::Struct& report) {
  return report.fields()
      .at("peak_memory_bytes")
      .struct_value()
      .fields()
      .at("/gpu:0")
      .number_value();
}

// --optimizer: AdamW's two state tensors per parameter against momentum's
// one and SGD's none, on one device: the peaks differ by exactly the
// parameter bytes. Commands that measure profiles refuse other steps.
TEST(CliTest, OptimizerStateIsInThePeakMemory) {
  const std::string model =
      " zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100 --cluster p100x4";
  const std::string placement = TmpFile("optimizer_single.json");
  ASSERT_EQ(
      RunPlacer("place" + model + " --policy single -o " + placement).exit_code,
      0);
  const double parameter_bytes = Number(
      Json(RunPlacer("inspect zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100"
                     " --json")
               .out),
      "parameter_bytes");
  ASSERT_GT(parameter_bytes, 0);
  std::map<std::string, double> peak;
  for (const char* optimizer : {"sgd", "momentum", "adam"}) {
    RunResult r = RunPlacer("simulate" + model + " --placement " + placement +
                            " --json --optimizer " + optimizer);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    peak[optimizer] = PeakOfGpu0(Json(r.out));
  }
  EXPECT_EQ(peak["momentum"] - peak["sgd"], parameter_bytes);
  EXPECT_EQ(peak["adam"] - peak["momentum"], parameter_bytes);
  RunResult bad = RunPlacer("simulate" + model + " --placement " + placement +
                            " --optimizer lion");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, HasSubstr("--optimizer 'lion': expected sgd"));
  RunResult profile = RunPlacer("profile" + model + " --optimizer adam");
  EXPECT_EQ(profile.exit_code, 1);
  EXPECT_THAT(profile.out, HasSubstr("fp32 steps with momentum only"));
}

// --precision bf16: the matrix products at h100x8's tensor-core rate and
// the activations at two bytes make the simulated step faster and its peak
// lower; run trains it on CPUs (the loss falls); fp16 on a CPU, and a
// profile's fp32 measurements under bf16, are errors that say so.
TEST(CliTest, Bf16IsPlannedAtTensorCoreRatesAndRunsOnCpus) {
  const std::string model =
      " zoo:transformer_big:batch=32,seq_len=64,hidden=512,vocab=1000,"
      "layers=2 --cluster h100x8";
  const std::string placement = TmpFile("precision_single.json");
  ASSERT_EQ(
      RunPlacer("place" + model + " --policy single -o " + placement).exit_code,
      0);
  std::map<std::string, google::protobuf::Struct> simulated;
  for (const char* precision : {"fp32", "bf16"}) {
    RunResult r = RunPlacer("simulate" + model + " --placement " + placement +
                            " --json --precision " + precision);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    simulated[precision] = Json(r.out);
  }
  EXPECT_LT(Number(simulated["bf16"], "step_seconds"),
            0.6 * Number(simulated["fp32"], "step_seconds"));
  EXPECT_LT(PeakOfGpu0(simulated["bf16"]), PeakOfGpu0(simulated["fp32"]));
  const std::string llama = "tests/fixtures/corpus/llama.train.op17.onnx";
  const std::string llama_placement = TmpFile("precision_llama.json");
  ASSERT_EQ(RunPlacer("place " + llama + " --cluster cpu2 --policy m_etf -o " +
                      llama_placement)
                .exit_code,
            0);
  RunResult run = RunPlacer("run " + llama +
                            " --cluster cpu2 --steps 3 --warmup 0 --json "
                            "--precision bf16 --optimizer adam --placement " +
                            llama_placement);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const google::protobuf::Struct report =
      Json(run.out.substr(0, run.out.find('\n')));
  std::vector<double> losses;
  for (const auto& l : report.fields().at("losses").list_value().values()) {
    losses.push_back(l.number_value());
  }
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_LT(losses[2], losses[0]);
  RunResult fp16 = RunPlacer("run " + llama +
                             " --cluster cpu2 --steps 1 --precision fp16 "
                             "--placement " +
                             llama_placement);
  EXPECT_EQ(fp16.exit_code, 1);
  EXPECT_THAT(fp16.out, HasSubstr("'/cpu:0' runs on the CPU"));
  RunResult profiled =
      RunPlacer("simulate" + model + " --placement " + placement +
                " --precision bf16 --profile " + TmpFile("absent_profile.pb"));
  EXPECT_EQ(profiled.exit_code, 1);
  EXPECT_THAT(profiled.out, HasSubstr("profiles hold fp32 measurements"));
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

TEST(CliTest, PlacementFileErrorsNameTheProblem) {
  std::string missing = TmpFile("missing.json");
  WriteFile(missing, R"({"assignment": {"top": "/cpu:0", "left": "/cpu:0"}})");
  RunResult r = RunPlacer("simulate zoo:diamond --cluster cpu2 --placement " +
                          missing);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("2 forward ops have no device, e.g. right"));
  std::string bad_device = TmpFile("bad_device.json");
  WriteFile(bad_device, R"({"assignment": {"top": "/gpu:7"}})");
  r = RunPlacer("simulate zoo:diamond --cluster cpu2 --placement " +
                bad_device);
  EXPECT_THAT(r.out, HasSubstr("'/gpu:7'"));
  std::string bad_key = TmpFile("bad_key.json");
  WriteFile(bad_key, R"({"assignment": {"nope": "/cpu:0"}})");
  r = RunPlacer("simulate zoo:diamond --cluster cpu2 --placement " + bad_key);
  EXPECT_THAT(r.out, HasSubstr("'nope'"));
  r = RunPlacer("simulate zoo:diamond --cluster cpu2 --placement " +
                TmpFile("nothing.json"));
  EXPECT_THAT(r.out, HasSubstr("nothing.json"));
  r = RunPlacer("simulate zoo:diamond --cluster p100x3 --placement " +
                bad_key);
  EXPECT_THAT(r.out, HasSubstr("unknown cluster 'p100x3'"));
  EXPECT_EQ(RunPlacer("simulate zoo:diamond --placement x.json").exit_code, 2);
}

TEST(CliTest, PlaceStoppedBySignalWritesTheBestSoFar) {
  const std::string out = TmpFile("stopped.json");
  const std::string log = TmpFile("stopped.log");
  RunCommand("rm -f " + out);
  // A search with a minute's budget, interrupted after its first progress.
  RunResult started = RunCommand(
      "placer/placer place zoo:gnmt2 --cluster p100x4 --policy local_search "
      "--budget 60 -o " + out + " >" + log + " 2>&1 & echo $!");
  int pid = std::atoi(started.out.c_str());
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 300 &&
                  RunCommand("grep -q evaluations " + log).exit_code != 0;
       ++i) {
    usleep(100000);
  }
  RunCommand("kill -INT " + std::to_string(pid));
  int alive = 0;
  for (; alive < 200 &&
         RunCommand("kill -0 " + std::to_string(pid)).exit_code == 0;
       ++alive) {
    usleep(50000);
  }
  EXPECT_LT(alive, 200) << "still running 10 s after SIGINT";
  std::string text = RunCommand("cat " + log).out;
  EXPECT_THAT(text, HasSubstr("stopped by signal"));
  EXPECT_THAT(text, HasSubstr("wrote " + out));
  EXPECT_EQ(RunCommand("test -s " + out).exit_code, 0) << text;
}

TEST(CliTest, PlaceWritesAPlacementThatSimulates) {
  std::string out = TmpFile("placed.json");
  RunResult r = RunPlacer(
      "place zoo:gnmt2 --seq-len 3 --hidden 32 --vocab 50 --batch 4 "
      "--cluster p100x4 --policy m_etf --json -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  google::protobuf::Struct s =
      Json(r.out.substr(0, r.out.find("wrote ")));
  const auto& result = s.fields().at("results").list_value().values(0);
  EXPECT_EQ(result.struct_value().fields().at("policy").string_value(),
            "m_etf");
  double placed =
      result.struct_value().fields().at("step_seconds").number_value();
  RunResult sim = RunPlacer(
      "simulate zoo:gnmt2 --seq-len 3 --hidden 32 --vocab 50 --batch 4 "
      "--cluster p100x4 --json --placement " + out);
  ASSERT_EQ(sim.exit_code, 0) << sim.out;
  EXPECT_DOUBLE_EQ(Number(Json(sim.out), "step_seconds"), placed);
  EXPECT_EQ(RunPlacer("place zoo:chain --cluster cpu2 --policy nope").exit_code,
            1);
}

// --compare shows one line per policy as it ends, and a search's own
// stages under its name.
TEST(CliTest, CompareProgressNamesEachPolicy) {
  RunResult r = RunPlacer(
      "place zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100 --cluster p100x4 "
      "--compare --budget 1 --evaluations 50");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t single = r.out.find("place: single ");
  const size_t heft = r.out.find("place: heft ");
  ASSERT_NE(single, std::string::npos) << r.out;
  ASSERT_NE(heft, std::string::npos) << r.out;
  EXPECT_LT(single, heft);
  EXPECT_LT(single, r.out.find("place: local_search"));
  EXPECT_THAT(r.out, HasSubstr("place: best/heft"));
}

TEST(CliTest, BenchWritesMarkdownAndCsv) {
  const char* dir = std::getenv("TEST_TMPDIR");
  RunResult r = RunPlacer(std::string("bench --models chain,diamond "
                                      "--clusters cpu2 --policies "
                                      "single,hash,m_etf --out-dir ") +
                          (dir ? dir : "/tmp"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("| chain | cpu2 |"));
  EXPECT_THAT(r.out, HasSubstr("| diamond | cpu2 |"));
  RunResult csv = RunCommand(std::string("cat ") + (dir ? dir : "/tmp") +
                             "/bench.csv");
  // A header and 2 models x 1 cluster x 3 policies.
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 7);
  // Without --out-dir, stdout only: nothing lands in the working folder.
  const std::string here = TmpFile("bench_here");
  RunResult unasked = RunCommand(
      "P=$(pwd)/placer/placer && mkdir -p " + here + " && cd " + here +
      " && $P bench --models chain --clusters cpu2 --policies single 2>&1 && "
      "ls");
  ASSERT_EQ(unasked.exit_code, 0) << unasked.out;
  EXPECT_THAT(unasked.out, HasSubstr("| chain | cpu2 |"));
  EXPECT_THAT(unasked.out, Not(HasSubstr("bench.csv")));
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

namespace {

// The "samples" column of a learning curve.
std::vector<long> CurveSamples(const std::string& csv) {
  std::vector<long> out;
  size_t line = csv.find('\n');
  while (line != std::string::npos && line + 1 < csv.size()) {
    size_t comma = csv.find(',', line + 1);
    out.push_back(std::atol(csv.substr(comma + 1).c_str()));
    line = csv.find('\n', line + 1);
  }
  return out;
}

TEST(CliTest, TrainKilledThenResumedLosesNothingThenPlacesAnUnseenModel) {
  std::string dir = TmpFile("rl_checkpoint");
  std::string log = TmpFile("train.log");
  RunCommand("rm -rf " + dir);
  const std::string train =
      "placer/placer train zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100 "
      "--cluster p100x4 --groups 8 --samples_per_step 8 --seed 3 "
      "--checkpoint " + dir;
  // placer execs placer_torch in the same process: kill -9 reaches it.
  RunResult started = RunCommand(train + " --budget 10m --samples 1000000 "
                                 "--checkpoint_every 0.2 >" + log +
                                 " 2>&1 & echo $!");
  int pid = std::atoi(started.out.c_str());
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 600 && RunCommand("test -s " + dir + "/checkpoint.pt")
                                     .exit_code != 0;
       ++i) {
    usleep(100000);
  }
  usleep(1500000);  // a few more checkpoints
  RunCommand("kill -9 " + std::to_string(pid));
  for (int i = 0; i < 100 &&
                  RunCommand("kill -0 " + std::to_string(pid)).exit_code == 0;
       ++i) {
    usleep(50000);
  }
  ASSERT_EQ(RunCommand("test -s " + dir + "/checkpoint.pt").exit_code, 0)
      << RunCommand("cat " + log).out;
  // Killed mid-way: no curve or placement written at the end.
  EXPECT_NE(RunCommand("test -e " + dir + "/curve.csv").exit_code, 0);

  RunResult resumed =
      RunCommand(train + " --resume --samples 1 --budget 10m");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_THAT(resumed.out, HasSubstr("resumed " + dir + "/checkpoint.pt"));
  size_t at = resumed.out.find("checkpoint.pt: ");
  ASSERT_NE(at, std::string::npos);
  long before = std::atol(resumed.out.substr(at + 15).c_str());
  EXPECT_GT(before, 0) << resumed.out;

  RunResult more = RunCommand(train + " --resume --samples " +
                              std::to_string(before + 64) + " --budget 10m");
  ASSERT_EQ(more.exit_code, 0) << more.out;
  // The curve goes on from the checkpoint with no gap: every step from the
  // first sample before the kill to the last one after.
  std::vector<long> samples = CurveSamples(RunCommand("cat " + dir +
                                                      "/curve.csv").out);
  ASSERT_FALSE(samples.empty());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i], 8 * static_cast<long>(i + 1));
  }
  EXPECT_EQ(samples.back(), before + 64);
  EXPECT_EQ(RunCommand("test -s " + dir + "/best_0.json").exit_code, 0);

  // Starting afresh on an existing checkpoint is refused.
  RunResult clash = RunCommand(train + " --samples 8");
  EXPECT_NE(clash.exit_code, 0);
  EXPECT_THAT(clash.out, HasSubstr("--resume"));

  // The trained model places a model it never saw: zero-shot, then with a
  // short fine-tune.
  const std::string unseen =
      "place zoo:transformer_big:batch=8,seq_len=4,hidden=64,vocab=100 "
      "--cluster p100x4 --policy rl --checkpoint " + dir;
  RunResult zero = RunPlacer(unseen + " --evaluations 1 --json");
  ASSERT_EQ(zero.exit_code, 0) << zero.out;
  EXPECT_THAT(zero.out, HasSubstr("\"policy\":\"rl\""));
  RunResult tuned = RunPlacer(unseen + " --evaluations 33 -o " +
                              TmpFile("rl.json"));
  ASSERT_EQ(tuned.exit_code, 0) << tuned.out;
  RunResult bad = RunPlacer(unseen + " --evaluations 1 --cluster cpu2");
  EXPECT_NE(bad.exit_code, 0);
  // One readable sentence, once.
  EXPECT_THAT(bad.out, HasSubstr("trained for 4 devices; this cluster has 2"));
  EXPECT_EQ(bad.out.find("trained for"), bad.out.rfind("trained for"));
}

}  // namespace

namespace placer {
namespace {

TEST(CliTest, PlaceAStrategyThenSimulateIt) {
  // A data-parallel strategy on two CPUs: place writes it, simulate reads
  // it back and gets the same step; the row's speedup is over one device
  // running the same two micro-batches.
  const std::string file = TmpFile("strategy.json");
  RunResult place = RunPlacer(
      "place zoo:chain --noweights --cluster cpu2 --parallelism data "
      "--json -o " + file);
  ASSERT_EQ(place.exit_code, 0) << place.out;
  // The report (stdout) and "wrote FILE" (stderr) are on lines of their
  // own.
  google::protobuf::Struct report = JsonLine(place.out);
  EXPECT_EQ(report.fields().at("chosen").string_value(), "data");
  const auto& rows = report.fields().at("results").list_value().values();
  ASSERT_EQ(rows.size(), 2);
  const google::protobuf::Struct& single = rows[0].struct_value();
  const google::protobuf::Struct& data = rows[1].struct_value();
  EXPECT_EQ(single.fields().at("row").string_value(), "single");
  EXPECT_EQ(Number(data, "micro_batches"), 2);
  EXPECT_EQ(data.fields().at("strategy").string_value(),
            "1 stage x 2 replicas, 2 micro-batches, 1f1b, ring");
  EXPECT_NEAR(Number(data, "speedup_per_batch_over_single"),
              Number(single, "step_seconds") / Number(data, "step_seconds"),
              1e-9);

  RunResult sim = RunPlacer("simulate zoo:chain --noweights --cluster cpu2 "
                            "--json --placement " + file);
  ASSERT_EQ(sim.exit_code, 0) << sim.out;
  google::protobuf::Struct s = Json(sim.out);
  EXPECT_EQ(Number(s, "step_seconds"), Number(data, "step_seconds"));
  EXPECT_EQ(Number(s, "micro_batches"), 2);
  EXPECT_GT(Number(s, "allreduce_seconds"), 0);
  // Its Chrome trace: tasks, and the allreduce on both replicas.
  const std::string trace = TmpFile("strategy_trace.json");
  RunResult traced = RunPlacer("simulate zoo:chain --noweights --cluster cpu2 "
                               "--placement " + file + " --trace " + trace);
  ASSERT_EQ(traced.exit_code, 0) << traced.out;
  RunResult read = RunCommand("cat " + trace);
  EXPECT_THAT(read.out, HasSubstr("\"B s0 j1\""));
  EXPECT_THAT(read.out, HasSubstr("\"allreduce\""));

  // A stage naming a device the cluster lacks: the file and the stage.
  RunResult cat = RunCommand("sed 's#\"/cpu:1\"#\"/cpu:7\"#' " + file +
                             " > " + file + ".bad");
  ASSERT_EQ(cat.exit_code, 0);
  RunResult bad = RunPlacer("simulate zoo:chain --noweights --cluster cpu2 "
                            "--placement " + file + ".bad");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.out, HasSubstr(file + ".bad"));
  EXPECT_THAT(bad.out, HasSubstr("/cpu:7"));

  // run executes the strategy (threads) and sets it against the simulator.
  RunResult run = RunPlacer("run zoo:chain --noweights --cluster cpu2 "
                            "--steps 3 --warmup 1 --json --placement " + file);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  google::protobuf::Struct ran = Json(run.out);
  EXPECT_GT(Number(ran, "measured_step_seconds"), 0);
  EXPECT_EQ(Number(ran, "simulated_step_seconds"), Number(data, "step_seconds"));
  EXPECT_EQ(ran.fields().at("losses").list_value().values_size(), 4);
  // And as two processes (tests/placer/distributed_run_test compares
  // their losses with one process's).
  RunResult ranks = RunPlacer("run zoo:chain --noweights --cluster cpu2 "
                              "--steps 3 --warmup 1 --json --nproc 2 "
                              "--placement " + file);
  ASSERT_EQ(ranks.exit_code, 0) << ranks.out;
  // (rank 0 also says which processes it started.)
  EXPECT_EQ(Number(Json(ranks.out.substr(ranks.out.find('{'))), "ranks"), 2);

  RunResult unknown = RunPlacer(
      "place zoo:chain --noweights --cluster cpu2 --parallelism expert");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.out, HasSubstr("known: auto, model, pipeline, data"));
}

TEST(CliTest, RecomputationAndZeroFromPlaceToRun) {
  // Data parallelism on two CPUs with ZeRO-1 and the stage recomputing,
  // fixed by flags: the file carries both, simulate reads them back (the
  // same step), run executes them.
  const std::string file = TmpFile("zero.json");
  RunResult place = RunPlacer(
      "place zoo:chain --noweights --cluster cpu2 --parallelism data "
      "--zero 1 --recompute full --json -o " + file);
  ASSERT_EQ(place.exit_code, 0) << place.out;
  google::protobuf::Struct report = JsonLine(place.out);
  const google::protobuf::Struct& data =
      report.fields().at("results").list_value().values(1).struct_value();
  EXPECT_EQ(data.fields().at("strategy").string_value(),
            "1 stage x 2 replicas, 2 micro-batches, 1f1b, ring, recompute, "
            "zero-1");
  RunResult cat = RunCommand("cat " + file);
  EXPECT_THAT(cat.out, HasSubstr("\"recompute\": \"full\""));
  EXPECT_THAT(cat.out, HasSubstr("\"zero\": 1"));
  RunResult sim = RunPlacer("simulate zoo:chain --noweights --cluster cpu2 "
                            "--json --placement " + file);
  ASSERT_EQ(sim.exit_code, 0) << sim.out;
  EXPECT_EQ(Number(Json(sim.out), "step_seconds"),
            Number(data, "step_seconds"));
  RunResult run = RunPlacer("run zoo:chain --noweights --cluster cpu2 "
                            "--steps 2 --warmup 0 --json --placement " + file);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(Json(run.out).fields().at("losses").list_value().values_size(), 2);
  const google::protobuf::Struct ran = Json(run.out);
  const google::protobuf::ListValue& losses =
      ran.fields().at("losses").list_value();
  // ZeRO-2 and ZeRO-3 run as threads and as two processes: the same
  // losses, each device's allocated peak reported.
  for (int zero : {2, 3}) {
    SCOPED_TRACE(zero);
    const std::string sharded_file = file + "." + std::to_string(zero);
    RunResult edit = RunCommand("sed 's#\"zero\": 1#\"zero\": " +
                                std::to_string(zero) + "#' " + file + " > " +
                                sharded_file);
    ASSERT_EQ(edit.exit_code, 0);
    for (const std::string ranks : {"", " --nproc 2"}) {
      SCOPED_TRACE(ranks);
      RunResult sharded = RunPlacer(
          "run zoo:chain --noweights --cluster cpu2 --steps 2 --warmup 0 "
          "--json --placement " + sharded_file + ranks);
      ASSERT_EQ(sharded.exit_code, 0) << sharded.out;
      google::protobuf::Struct out = JsonLine(sharded.out);
      EXPECT_THAT(out.fields().at("strategy").string_value(),
                  HasSubstr("zero-" + std::to_string(zero)));
      const google::protobuf::ListValue& got =
          out.fields().at("losses").list_value();
      ASSERT_EQ(got.values_size(), losses.values_size());
      for (int i = 0; i < got.values_size(); ++i) {
        EXPECT_NEAR(got.values(i).number_value(),
                    losses.values(i).number_value(),
                    1e-5 * std::abs(losses.values(i).number_value()));
      }
      // Every device's, the other rank's included.
      for (const char* device : {"/cpu:0", "/cpu:1"}) {
        EXPECT_GT(Number(out.fields().at("peak_memory_bytes").struct_value(),
                         device),
                  0)
            << device;
      }
    }
  }
}

TEST(CliTest, TensorParallelismFromPlaceToRun) {
  // The chain's MatMuls split over both CPUs: the file names the group and
  // each op's sharding, simulate reads them back (the same step), run
  // refuses it by name; a group that does not divide the devices is a
  // usage error.
  const std::string file = TmpFile("tensor.json");
  RunResult place = RunPlacer(
      "place zoo:chain --noweights --cluster cpu2 --parallelism tensor "
      "--json -o " +
      file);
  ASSERT_EQ(place.exit_code, 0) << place.out;
  google::protobuf::Struct report = JsonLine(place.out);
  const google::protobuf::Struct& tensor =
      report.fields().at("results").list_value().values(1).struct_value();
  EXPECT_EQ(tensor.fields().at("strategy").string_value(),
            "1 stage x 1 replicas of tensor 2, 2 micro-batches, 1f1b, ring");
  RunResult cat = RunCommand("cat " + file);
  EXPECT_THAT(cat.out, HasSubstr("\"tensor_devices\""));
  EXPECT_THAT(cat.out, HasSubstr("\"contracted\""));
  EXPECT_THAT(cat.out, HasSubstr("\"out:1\""));
  RunResult sim = RunPlacer(
      "simulate zoo:chain --noweights --cluster cpu2 "
      "--json --placement " +
      file);
  ASSERT_EQ(sim.exit_code, 0) << sim.out;
  EXPECT_EQ(Number(Json(sim.out), "step_seconds"),
            Number(tensor, "step_seconds"));
  // The executor runs it: each device its part of every split op.
  RunResult ran = RunPlacer(
      "run zoo:chain --noweights --cluster cpu2 "
      "--steps 2 --placement " +
      file);
  EXPECT_EQ(ran.exit_code, 0) << ran.out;
  EXPECT_THAT(ran.out, HasSubstr("simulated/measured"));
  // With sequence parallelism: said in the description and the file.
  const std::string sp_file = TmpFile("sequence.json");
  RunResult sp = RunPlacer(
      "place zoo:chain --noweights --cluster cpu2 --parallelism tensor "
      "--sequence-parallel --json -o " + sp_file);
  ASSERT_EQ(sp.exit_code, 0) << sp.out;
  EXPECT_EQ(JsonLine(sp.out)
                .fields()
                .at("results")
                .list_value()
                .values(1)
                .struct_value()
                .fields()
                .at("strategy")
                .string_value(),
            "1 stage x 1 replicas of tensor 2 (sequence parallel), 2 "
            "micro-batches, 1f1b, ring");
  EXPECT_THAT(RunCommand("cat " + sp_file).out,
              HasSubstr("\"sequence_parallel\": true"));
  // As two processes: the group's collectives are c10d's all-gathers.
  RunResult sp_ran = RunPlacer(
      "run zoo:chain --noweights --cluster cpu2 --nproc 2 "
      "--steps 2 --placement " +
      sp_file);
  EXPECT_EQ(sp_ran.exit_code, 0) << sp_ran.out;
  EXPECT_THAT(sp_ran.out, HasSubstr("simulated/measured"));
  RunResult three = RunPlacer(
      "place zoo:chain --noweights --cluster cpu2 --parallelism auto "
      "--tensor 3");
  EXPECT_EQ(three.exit_code, 2);
  EXPECT_THAT(three.out, HasSubstr("--tensor: groups of 3"));
}

}  // namespace
}  // namespace placer
