// Strategies end to end: place writes them, simulate reads them back, run
// trains them (data parallelism, recomputation, ZeRO, tensor parallelism).
#include <cmath>
#include <string>

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
using ::testing::HasSubstr;

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
