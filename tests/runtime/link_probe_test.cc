// Links between ranks measured over their transport (runtime/link_probe.h),
// and the transport's messages themselves (runtime/rank_group.h): ranks
// are threads of this test, each with its own c10d store connection and
// Gloo group, over loopback TCP as separate processes would.
#include <chrono>
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
#include "tests/runtime/rank_threads.h"

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
  ProfilerOptions options;
  options.warmup = 1;
  options.repeats = 5;
  // Up to 16 MiB: enough growth with size to fit a bandwidth even under
  // a sanitizer (with 1 MiB, ASan's per-message cost hid it).
  options.max_link_bytes = 16 << 20;
  RunRankThreads(world, 2, [&](int rank,
                               absl::StatusOr<std::shared_ptr<RankGroup>> group) {
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
  });
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
    EXPECT_EQ(link.samples.size(), 13u);  // 1 B .. 16 MiB in x4 steps
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
  std::vector<std::pair<int64_t, torch::Tensor>> received;
  std::vector<std::chrono::steady_clock::time_point> sent_at, received_at;
  absl::Status failure;
  std::mutex mu;
  const auto before = std::chrono::steady_clock::now();
  RunRankThreads(2, 10, [&](int rank,
                            absl::StatusOr<std::shared_ptr<RankGroup>> group) {
    if (!group.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      failure = group.status();
      return;
    }
    for (size_t k = 0; k < sent.size(); ++k) {
      if (rank == 0) {
        absl::Status s = (*group)->SendTensor(sent[k], 100 + k, 1, 3);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failure = s;
          return;
        }
      } else {
        std::chrono::steady_clock::time_point at;
        absl::StatusOr<std::pair<int64_t, torch::Tensor>> r =
            (*group)->RecvTensor(0, 3, &at);
        sent_at.push_back(at);
        received_at.push_back(std::chrono::steady_clock::now());
        if (!r.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failure = r.status();
          return;
        }
        received.push_back(*r);
      }
    }
  });
  ASSERT_TRUE(failure.ok()) << failure;
  ASSERT_EQ(received.size(), sent.size());
  for (size_t k = 0; k < sent.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(received[k].first, static_cast<int64_t>(100 + k));
    EXPECT_EQ(received[k].second.scalar_type(), sent[k].scalar_type());
    EXPECT_EQ(received[k].second.sizes(), sent[k].sizes());
    EXPECT_TRUE(torch::equal(received[k].second, sent[k]));
    // The sender's clock at the start of its send (one process: one
    // clock), in order, before the receipt.
    EXPECT_GE(sent_at[k], k == 0 ? before : sent_at[k - 1]);
    EXPECT_LE(sent_at[k], received_at[k]);
  }
}

}  // namespace
}  // namespace placer
