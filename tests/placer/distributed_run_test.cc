// `placer run --nproc N` and `placer worker` as a user runs them: real
// processes on this machine, c10d over loopback. The losses do not depend
// on the process layout; a rank killed mid-step makes the others exit with
// an error naming it, well within 30 s.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

extern char** environ;

namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

std::string TmpFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A shell command run in the background, its stdout and stderr in files.
struct Background {
  pid_t pid = -1;
  std::string out, err;
};

Background Start(const std::string& args, const std::string& name) {
  Background b;
  b.out = TmpFile(name + ".out");
  b.err = TmpFile(name + ".err");
  std::string command =
      "exec placer/placer " + args + " > " + b.out + " 2> " + b.err;
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  EXPECT_EQ(posix_spawn(&b.pid, "/bin/sh", nullptr, nullptr,
                        const_cast<char**>(argv), environ),
            0);
  return b;
}

// Its exit code, or -1 past `seconds` (or when killed by a signal).
int WaitFor(const Background& b, double seconds) {
  const Clock::time_point start = Clock::now();
  while (true) {
    int status = 0;
    if (waitpid(b.pid, &status, WNOHANG) == b.pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (std::chrono::duration<double>(Clock::now() - start).count() > seconds) {
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Waits until `path` matches `pattern`; the first group of the match.
std::string WaitForText(const std::string& path, const std::string& pattern,
                        double seconds = 60) {
  const Clock::time_point start = Clock::now();
  std::regex re(pattern);
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    std::smatch m;
    std::string text = ReadFile(path);
    if (std::regex_search(text, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "no '" << pattern << "' in " << path << ":\n" << ReadFile(path);
  return "";
}

// Gone, or a zombie nobody reaps (its parent was killed).
bool Exited(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() &&
         stat[close + 2] == 'Z';
}

std::string CpuCluster(int devices) {
  std::string path = TmpFile("cpu" + std::to_string(devices) + ".pbtxt");
  std::ofstream f(path);
  f << "name: \"cpus\"\n";
  for (int d = 0; d < devices; ++d) {
    f << "devices { name: \"/cpu:" << d
      << "\" kind: CPU peak_flops: 8e10 memory_bandwidth: 1e10 "
         "memory_bytes: 8000000000 }\n";
  }
  f << "default_link { latency_seconds: 2e-6 bandwidth: 5e9 }\n";
  return path;
}

std::vector<double> Losses(const std::string& json) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  std::vector<double> losses;
  auto it = s.fields().find("losses");
  if (it == s.fields().end()) return losses;
  for (const auto& v : it->second.list_value().values()) {
    losses.push_back(v.number_value());
  }
  return losses;
}

const char kGnmt[] = "zoo:gnmt2:batch=4,hidden=32,seq_len=3,vocab=50";

TEST(DistributedRunTest, OneTwoAndFourRanksGiveTheSameLosses) {
  const std::string cluster = CpuCluster(4);
  struct Model {
    std::string name, args;
  };
  const std::vector<Model> models = {
      {"gnmt2", kGnmt},
      {"transformer",
       "tests/fixtures/transformer.onnx --batch 2 --dim src_len=6,tgt_len=5"},
      {"resnet50", "tests/fixtures/resnet50.onnx"},
  };
  for (const Model& m : models) {
    SCOPED_TRACE(m.name);
    std::vector<std::vector<double>> runs;
    for (int nproc : {1, 2, 4}) {
      Background b = Start("run " + m.args + " --cluster " + cluster +
                               " --policy hash --steps 5 --warmup 0 --json"
                               " --nproc " + std::to_string(nproc),
                           m.name + std::to_string(nproc));
      ASSERT_EQ(WaitFor(b, 240), 0) << ReadFile(b.err);
      runs.push_back(Losses(ReadFile(b.out)));
      ASSERT_EQ(runs.back().size(), 5u) << ReadFile(b.out);
    }
    for (size_t r = 1; r < runs.size(); ++r) {
      for (int s = 0; s < 5; ++s) {
        EXPECT_NEAR(runs[r][s], runs[0][s], 1e-5 * std::abs(runs[0][s]))
            << "run " << r << " step " << s + 1;
      }
    }
  }
}

// A strategy file (data parallel over 4 devices, 4 micro-batches) runs
// as ranks too, with one process's losses.
TEST(DistributedRunTest, AStrategyRunsAsRanksWithOneProcesssLosses) {
  const std::string cluster = CpuCluster(4);
  const std::string strategy = TmpFile("data.json");
  Background place = Start(std::string("place ") + kGnmt + " --cluster " +
                               cluster + " --parallelism data -o " + strategy,
                           "place_data");
  ASSERT_EQ(WaitFor(place, 120), 0) << ReadFile(place.err);
  std::vector<std::vector<double>> runs;
  for (int nproc : {1, 2, 4}) {
    Background b = Start(std::string("run ") + kGnmt + " --cluster " + cluster +
                             " --placement " + strategy +
                             " --steps 3 --warmup 0 --json --nproc " +
                             std::to_string(nproc),
                         "strategy" + std::to_string(nproc));
    ASSERT_EQ(WaitFor(b, 240), 0) << ReadFile(b.err);
    EXPECT_THAT(ReadFile(b.out), HasSubstr("4 replicas"));
    runs.push_back(Losses(ReadFile(b.out)));
    ASSERT_EQ(runs.back().size(), 3u) << ReadFile(b.out);
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    for (int s = 0; s < 3; ++s) {
      EXPECT_NEAR(runs[r][s], runs[0][s], 1e-5 * std::abs(runs[0][s]))
          << "run " << r << " step " << s + 1;
    }
  }
}

// profile as 2 ranks: the links between the ranks' devices are measured
// over the transport and written (rank 0), the other rank exits cleanly.
TEST(DistributedRunTest, ProfileMeasuresTheLinksBetweenRanks) {
  const std::string profile = TmpFile("ranks_profile.pbtxt");
  Background b = Start("profile --cluster " + CpuCluster(2) +
                           " --nproc 2 --repeats 2 --warmup 1 -o " + profile,
                       "profile_ranks");
  ASSERT_EQ(WaitFor(b, 240), 0) << ReadFile(b.err);
  EXPECT_THAT(ReadFile(b.err), HasSubstr("2 links between the 2 ranks"));
  EXPECT_THAT(ReadFile(b.err), HasSubstr("/cpu:0 -> /cpu:1 (ranks 0 -> 1)"));
  EXPECT_THAT(ReadFile(b.err), HasSubstr("/cpu:1 -> /cpu:0 (ranks 1 -> 0)"));
  const std::string text = ReadFile(profile);
  EXPECT_THAT(text, HasSubstr("src: \"/cpu:0\""));
  EXPECT_THAT(text, HasSubstr("src: \"/cpu:1\""));
}

TEST(DistributedRunTest, KillingARankStopsRankZeroNamingIt) {
  Background b = Start(std::string("run ") + kGnmt +
                           " --cluster cpu2 --policy hash --steps 100000"
                           " --warmup 0 --nproc 2",
                       "kill1");
  const pid_t child = std::stoi(WaitForText(b.err, "rank 1: pid ([0-9]+)"));
  WaitForText(b.out, "step +3 ");
  ASSERT_EQ(kill(child, SIGKILL), 0);
  const Clock::time_point killed = Clock::now();
  const int code = WaitFor(b, 30);
  const double seconds =
      std::chrono::duration<double>(Clock::now() - killed).count();
  if (code == -1) kill(b.pid, SIGKILL), waitpid(b.pid, nullptr, 0);
  EXPECT_EQ(code, 1) << "after " << seconds << " s";
  EXPECT_LT(seconds, 30);
  std::string err = ReadFile(b.err);
  EXPECT_THAT(err, HasSubstr("rank 1"));
  EXPECT_THAT(err, HasSubstr("placer: error:"));
}

TEST(DistributedRunTest, KillingRankZeroStopsTheOthersNamingIt) {
  Background b = Start(std::string("run ") + kGnmt + " --cluster " +
                           CpuCluster(3) +
                           " --policy hash --steps 100000 --warmup 0 --nproc 3",
                       "kill0");
  const pid_t one = std::stoi(WaitForText(b.err, "rank 1: pid ([0-9]+)"));
  const pid_t two = std::stoi(WaitForText(b.err, "rank 2: pid ([0-9]+)"));
  WaitForText(b.out, "step +3 ");
  ASSERT_EQ(kill(b.pid, SIGKILL), 0);
  waitpid(b.pid, nullptr, 0);
  const Clock::time_point killed = Clock::now();
  while (!(Exited(one) && Exited(two)) &&
         std::chrono::duration<double>(Clock::now() - killed).count() < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(Exited(one));
  EXPECT_TRUE(Exited(two));
  if (!Exited(one)) kill(one, SIGKILL);
  if (!Exited(two)) kill(two, SIGKILL);
  // Both said why (the orphans' exit codes are their new parent's to see;
  // this line is printed only on the failing path).
  std::string err = ReadFile(b.err);
  EXPECT_THAT(err, HasSubstr("placer: error: rank 1: "));
  EXPECT_THAT(err, HasSubstr("placer: error: rank 2: "));
  EXPECT_THAT(err, HasSubstr("rank 0"));
}

TEST(DistributedRunTest, AWorkerJoinsWithTheMastersAddress) {
  const std::string cluster = CpuCluster(4);
  Background alone = Start(std::string("run ") + kGnmt + " --cluster " +
                               cluster + " --policy hash --steps 3"
                               " --warmup 0 --json",
                           "alone");
  ASSERT_EQ(WaitFor(alone, 120), 0) << ReadFile(alone.err);
  Background master = Start(std::string("run ") + kGnmt + " --cluster " +
                                cluster + " --policy hash --steps 3"
                                " --warmup 0 --json --world-size 2",
                            "master");
  const std::string address = WaitForText(
      master.err, "placer worker --rank R --world-size 2 --master ([0-9.:]+)");
  // A worker started with the wrong world size is refused, clearly.
  Background wrong =
      Start("worker --rank 1 --world-size 3 --master " + address, "wrong");
  EXPECT_EQ(WaitFor(wrong, 60), 1);
  EXPECT_THAT(ReadFile(wrong.err), HasSubstr("world size 3"));
  Background worker =
      Start("worker --rank 1 --world-size 2 --master " + address, "worker");
  EXPECT_EQ(WaitFor(worker, 120), 0) << ReadFile(worker.err);
  ASSERT_EQ(WaitFor(master, 120), 0) << ReadFile(master.err);
  std::vector<double> expected = Losses(ReadFile(alone.out));
  std::vector<double> got = Losses(ReadFile(master.out));
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(expected.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_NEAR(got[s], expected[s], 1e-5 * std::abs(expected[s]));
  }
}

TEST(DistributedRunTest, AnUnreachableMasterIsAClearError) {
  Background w = Start("worker --rank 1 --world-size 2 --master 127.0.0.1:1"
                       " --rank-timeout 2s",
                       "unreachable");
  EXPECT_EQ(WaitFor(w, 60), 1);
  EXPECT_THAT(ReadFile(w.err), HasSubstr("127.0.0.1:1"));
}

}  // namespace
