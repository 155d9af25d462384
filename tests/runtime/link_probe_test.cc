// Links between ranks measured over their transport (runtime/link_probe.h),
// and the transport's messages themselves (runtime/rank_group.h): ranks
// are threads of this test, each with its own c10d store connection and
// Gloo group, over loopback TCP as separate processes would.
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "profiles/cluster.h"
#include "runtime/link_probe.h"
#include "runtime/rank_group.h"
#include "tests/runtime/cpu_cluster.h"

namespace placer {
namespace {

using Links = std::map<std::pair<std::string, std::string>, MeasuredLink>;

// Runs MeasureLinksAcrossRanks on `world` ranks; devices in consecutive
// blocks. `absent`: that rank joins the group but never measures.
std::vector<absl::StatusOr<Links>> Probe(const Cluster& cluster, int world,
                                         int absent = -1) {
  std::vector<int> process(cluster.num_devices(), -1);
  std::vector<int> ranks = *RanksOfDevices(process, world);
  std::vector<absl::StatusOr<Links>> out(world, Links{});
  std::mutex mu;
  std::condition_variable cv;
  int port = -1;
  ProfilerOptions options;
  options.warmup = 1;
  options.repeats = 3;
  options.max_link_bytes = 1 << 20;
  auto rank_main = [&](int rank) {
    RankGroupOptions o;
    o.rank = rank;
    o.world_size = world;
    o.timeout_seconds = 2;
    if (rank != 0) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return port >= 0; });
      o.master_port = port;
    }
    auto publish = [&](int p) {
      std::lock_guard<std::mutex> lock(mu);
      port = p;
      cv.notify_all();
    };
    if (rank == 0) o.on_listening = publish;
    absl::StatusOr<std::shared_ptr<RankGroup>> group = RankGroup::Create(o);
    if (rank == 0 && !group.ok()) publish(0);
    if (!group.ok()) {
      out[rank] = group.status();
      return;
    }
    if (rank == absent) {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      return;
    }
    out[rank] = MeasureLinksAcrossRanks(**group, cluster, ranks, options,
                                        [](const std::string&) {});
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(rank_main, r);
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(LinkProbeTest, RankZeroGetsAFitForEveryPairOfRanksDevices) {
  // Three devices on two ranks: /cpu:0 and /cpu:1 on rank 0, /cpu:2 on 1.
  const Cluster cluster = Cpus(3);
  std::vector<absl::StatusOr<Links>> got = Probe(cluster, 2);
  ASSERT_TRUE(got[0].ok()) << got[0].status();
  ASSERT_TRUE(got[1].ok()) << got[1].status();
  EXPECT_TRUE(got[1]->empty());
  // Across ranks only: 0<->2 and 1<->2, both ways.
  ASSERT_EQ(got[0]->size(), 4u);
  for (const auto& [pair, link] : *got[0]) {
    SCOPED_TRACE(pair.first + " -> " + pair.second);
    EXPECT_TRUE(pair.first == "/cpu:2" || pair.second == "/cpu:2");
    EXPECT_EQ(link.samples.size(), 11u);  // 1 B .. 1 MiB in x4 steps
    EXPECT_GT(link.fit.bandwidth, 0);
    EXPECT_GE(link.fit.latency_seconds, 0);
    for (const LinkSample& s : link.samples) EXPECT_GT(s.seconds, 0);
  }
}

TEST(LinkProbeTest, ARankThatNeverAnswersIsNamed) {
  std::vector<absl::StatusOr<Links>> got = Probe(Cpus(2), 2, /*absent=*/1);
  ASSERT_FALSE(got[0].ok());
  EXPECT_NE(got[0].status().message().find("rank 1"), std::string::npos)
      << got[0].status();
  EXPECT_NE(got[0].status().message().find("/cpu:0 -> /cpu:1"),
            std::string::npos)
      << got[0].status();
}

// Tensors of every size class (empty, inline in the header's message up
// to 4 KiB, in a second message past it), dtypes and ranks arrive whole,
// with their ids, in the order sent.
TEST(RankGroupTest, TensorsArriveWholeAroundTheInlineLimit) {
  std::vector<torch::Tensor> sent = {
      torch::empty({0}),
      torch::arange(7, torch::kLong),
      torch::randn({1024}),          // 4096 bytes: inline
      torch::randn({1025}),          // 4100 bytes: a second message
      torch::randn({3, 5, 7}).to(torch::kDouble),
      torch::randint(0, 255, {70000}, torch::kByte),
  };
  std::mutex mu;
  std::condition_variable cv;
  int port = -1;
  std::vector<std::pair<int64_t, torch::Tensor>> received;
  absl::Status failure;
  auto rank_main = [&](int rank) {
    RankGroupOptions o;
    o.rank = rank;
    o.world_size = 2;
    o.timeout_seconds = 10;
    if (rank == 1) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return port >= 0; });
      o.master_port = port;
    } else {
      o.on_listening = [&](int p) {
        std::lock_guard<std::mutex> lock(mu);
        port = p;
        cv.notify_all();
      };
    }
    absl::StatusOr<std::shared_ptr<RankGroup>> group = RankGroup::Create(o);
    if (!group.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      failure = group.status();
      if (port < 0) port = 0;
      cv.notify_all();
      return;
    }
    for (size_t k = 0; k < sent.size(); ++k) {
      if (rank == 0) {
        absl::Status s = (*group)->SendTensor(sent[k], 100 + k, 1, 3);
        if (!s.ok()) failure = s;
      } else {
        absl::StatusOr<std::pair<int64_t, torch::Tensor>> r =
            (*group)->RecvTensor(0, 3);
        if (!r.ok()) {
          failure = r.status();
          return;
        }
        received.push_back(*r);
      }
    }
  };
  std::thread a(rank_main, 0), b(rank_main, 1);
  a.join();
  b.join();
  ASSERT_TRUE(failure.ok()) << failure;
  ASSERT_EQ(received.size(), sent.size());
  for (size_t k = 0; k < sent.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(received[k].first, static_cast<int64_t>(100 + k));
    EXPECT_EQ(received[k].second.scalar_type(), sent[k].scalar_type());
    EXPECT_EQ(received[k].second.sizes(), sent[k].sizes());
    EXPECT_TRUE(torch::equal(received[k].second, sent[k]));
  }
}

}  // namespace
}  // namespace placer
