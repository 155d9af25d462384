// place, simulate and bench end to end: placer run as a user would, what it
// prints and writes checked.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
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
using ::placer::test::WriteFile;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

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

}  // namespace
