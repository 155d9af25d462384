// The ranks of a distributed `placer run` (docs/distributed.md): rank 0 starts
// the local ranks (--nproc) as processes of this binary, serves the
// rendezvous and publishes the run's arguments, so that `placer worker`
// on another host needs only the master's address; every rank then joins
// the c10d group (runtime/rank_group.h).
//
// Contract: JoinRanks with one rank in all returns a setup without a
// group (the threaded executor). With more, the process ignores SIGPIPE: a
// write to a dead peer is an error the rank reports, not a silent death. Rank 0 watches the processes it started:
// one that dies is published as the run's failure, naming its rank, pid
// and signal, so the other ranks stop at once. Every path that ends the
// run calls FinishRanks, which waits for the local ranks and reports the
// first that failed.
#ifndef PLACER_PLACER_CLI_RANKS_H_
#define PLACER_PLACER_CLI_RANKS_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiles/cluster.h"
#include "runtime/rank_group.h"

namespace placer {

struct RankSetup {
  std::shared_ptr<RankGroup> group;  // null: one process
  std::vector<int> rank_of_device;
  int rank = 0;
  std::vector<std::pair<int, pid_t>> children;  // rank 0: (rank, pid)
  std::unique_ptr<std::atomic<bool>> stop_watching;
  std::thread watcher;
  ~RankSetup();
};

// From --nproc, --world-size, --rank, --master, --bind, --rank-timeout.
// `arguments`: the command and its arguments, as every rank runs them.
absl::StatusOr<std::unique_ptr<RankSetup>> JoinRanks(
    const Cluster& cluster, const std::vector<std::string>& arguments);

// Ends the run: the store's last exchange, then (rank 0) the local ranks'
// exits. `status`: this rank's outcome, returned unless it is OK and a
// local rank failed.
absl::Status FinishRanks(RankSetup& setup, absl::Status status);

// The command line this process would be started with to rerun the
// command: `command`, `positional`, then every placer flag not at its
// default, except the ranks' own.
// Rank 0's note on stderr where --pin_cores cannot give each CPU device of
// `cluster` cores of its own (host_cores.h UnpinnedNote).
void NoteUnpinnedCpuDevices(const Cluster& cluster);

std::vector<std::string> RerunArguments(const std::string& command,
                                        const std::vector<std::string>& positional);

}  // namespace placer

#endif  // PLACER_PLACER_CLI_RANKS_H_
