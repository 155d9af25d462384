// Test helper: ranks of a distributed run as threads of one test process,
// each with its own c10d store connection and Gloo group over loopback
// TCP, as separate processes would have (rank 0 hosts the store on a free
// port and the others join it once it listens).
#ifndef PLACER_TESTS_RUNTIME_RANK_THREADS_H_
#define PLACER_TESTS_RUNTIME_RANK_THREADS_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/rank_group.h"

namespace placer {

// Runs body(rank, group) on `world` threads and waits for them all; a rank
// whose group could not be made gets the error as `group`.
inline void RunRankThreads(
    int world, double timeout_seconds,
    const std::function<void(int rank,
                             absl::StatusOr<std::shared_ptr<RankGroup>> group)>&
        body) {
  std::mutex mu;
  std::condition_variable cv;
  int port = -1;
  auto publish = [&](int p) {
    std::lock_guard<std::mutex> lock(mu);
    if (port < 0) port = p;
    cv.notify_all();
  };
  auto rank_main = [&](int rank) {
    RankGroupOptions o;
    o.rank = rank;
    o.world_size = world;
    o.timeout_seconds = timeout_seconds;
    if (rank != 0) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return port >= 0; });
      o.master_port = port;
    } else {
      o.on_listening = publish;
    }
    absl::StatusOr<std::shared_ptr<RankGroup>> group = RankGroup::Create(o);
    if (rank == 0 && !group.ok()) publish(0);  // the others fail to join
    body(rank, std::move(group));
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(rank_main, r);
  for (std::thread& t : threads) t.join();
}

}  // namespace placer

#endif  // PLACER_TESTS_RUNTIME_RANK_THREADS_H_
