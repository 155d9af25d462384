// train end to end (the RL placer, placer_torch): killed, resumed, then placing
// a model it has not seen.
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/placer/run_placer.h"

namespace {

using ::placer::test::RunCommand;
using ::placer::test::RunPlacer;
using ::placer::test::RunResult;
using ::placer::test::TmpFile;
using ::testing::HasSubstr;

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
