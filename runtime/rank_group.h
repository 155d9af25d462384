// RankGroup: this process's place among the ranks of one distributed run,
// on LibTorch's c10d: a TCPStore (hosted by rank 0) for the rendezvous,
// small blobs and the failure flag, and a ProcessGroupGloo for tensors.
//
// Contract:
//  - Create joins rank `rank` of `world_size`: rank 0 hosts the store on
//    master_host:master_port (port 0: a free one, then port()), the others
//    connect to it. Every rank must call it; it returns once all have
//    joined, or fails within timeout_seconds with an error naming the
//    master, the rank missing or the mismatch (a different world size, a
//    rank joined twice).
//  - SendTensor/RecvTensor move one tensor between two ranks on a channel
//    (a tag): a fixed header (id, dtype, shape) and then the data, so the
//    receiver needs to know neither the order nor the shapes in advance,
//    and the header carries the sender's clock at the start of the send;
//    data of at most 4 KiB rides in the header's message (one write).
//    Per channel and pair of ranks, messages arrive in the order sent.
//    Tensors travel through host memory (Gloo's send/recv are CPU only);
//    RecvTensor returns a CPU tensor. A peer that is gone, or silent for
//    timeout_seconds, is an Unavailable/DeadlineExceeded error naming it.
//  - Failures are published in the store (first one kept) and polled by
//    the other ranks; AbortPending wakes every send and receive in flight
//    (they then fail with Aborted). After a failure the channels are out
//    of step: the caller stops using them.
//  - SumAcrossRanks/MaxAcrossRanks are collectives: every rank calls them
//    in the same order.
//  - AddSubgroup makes a c10d ProcessGroupGloo of some of the ranks (every
//    member calls it with the same ranks and name, members in the same
//    order). AllToAll is its all-to-all (c10d's alltoall_base: Gloo's
//    alltoallv); AllGather its all-gather (each member's tensor, in the
//    subgroup's rank order), made of the all-to-all (Gloo's own all-gather
//    holds every part twice). Members call them in the same order, one
//    thread per subgroup at a time; they are aborted as sends are. Their
//    errors name the other member (of several: the other members' ranks;
//    Gloo does not say which one failed to answer).
//  - Thread safety: SendTensor/RecvTensor from any threads (one thread per
//    channel and direction); the rest from one thread at a time.
#ifndef PLACER_RUNTIME_RANK_GROUP_H_
#define PLACER_RUNTIME_RANK_GROUP_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace placer {

struct RankGroupOptions {
  std::string master_host = "127.0.0.1";
  int master_port = 0;  // rank 0: 0 picks a free port
  int rank = 0;
  int world_size = 1;
  // The address this rank's Gloo transport binds and tells its peers.
  std::string bind_host = "127.0.0.1";
  double timeout_seconds = 30;
  // Rank 0: keys written to the store before on_listening (what every rank
  // may read at once, e.g. the run's arguments).
  std::map<std::string, std::string> initial_values;
  // Rank 0: called with the store's port once it listens, before waiting
  // for the other ranks (e.g. to start them).
  std::function<void(int port)> on_listening;
};

// "HOST:PORT" (PORT 0..65535); errors name the flag value.
absl::StatusOr<std::pair<std::string, int>> ParseHostPort(
    const std::string& text);

// A collective issued on a subgroup and not yet waited for (opaque).
class PendingCollective;

class RankGroup {
 public:
  static absl::StatusOr<std::shared_ptr<RankGroup>> Create(
      const RankGroupOptions& options);
  // Without joining: `key` from the store of the master at host:port (what
  // a worker reads before it becomes a rank).
  static absl::StatusOr<std::string> ReadFromMaster(const std::string& host,
                                                    int port,
                                                    const std::string& key,
                                                    double timeout_seconds);
  ~RankGroup();

  // The run's end: every rank calls it; rank 0 (which hosts the store)
  // returns once every rank has, so nobody loses the store mid-read.
  absl::Status Finish();

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  // The store's port (rank 0 with master_port 0: the one it got).
  int port() const { return port_; }
  double timeout_seconds() const { return options_.timeout_seconds; }

  // Small values in the store: Put from one rank, Get waits for the key.
  absl::Status Put(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> Get(const std::string& key);
  // Without waiting: whether `key` is there; removing it.
  absl::StatusOr<bool> Has(const std::string& key);
  absl::Status Delete(const std::string& key);

  absl::Status SendTensor(const torch::Tensor& tensor, int64_t id,
                          int dst_rank, int channel);
  // The id and tensor of the next message from src_rank on `channel`;
  // with `sent_at`, when the sender began sending it (its steady clock:
  // comparable with this process's only on the same host).
  absl::StatusOr<std::pair<int64_t, torch::Tensor>> RecvTensor(
      int src_rank, int channel,
      std::chrono::steady_clock::time_point* sent_at = nullptr);

  absl::Status SumAcrossRanks(std::vector<double>* values);

  // A subgroup of `ranks` (ascending, this rank among them) named `name`
  // (unique in the run); its handle. Errors name the ranks missing.
  absl::StatusOr<int> AddSubgroup(const std::vector<int>& ranks,
                                  const std::string& name);
  // Every member's `tensor` (the same shape and dtype on each; any dtype,
  // moved as bytes), in the subgroup's rank order, on the CPU.
  absl::StatusOr<std::vector<torch::Tensor>> AllGather(
      int subgroup, const torch::Tensor& tensor);
  // `to[m]` for the subgroup's member m (its m-th rank; any dtype and
  // size, moved as bytes; an undefined tensor sends nothing), and what
  // each member sent this one: from[m], `from_bytes[m]` bytes (the caller
  // knows them: a count other than what the member sent breaks the
  // exchange), as a 1-D kByte tensor on the CPU. Errors name the
  // subgroup.
  absl::StatusOr<std::vector<torch::Tensor>> AllToAll(
      int subgroup, const std::vector<torch::Tensor>& to,
      const std::vector<int64_t>& from_bytes);
  // AllToAll in two halves: StartAllToAll issues it (in the subgroup's
  // order of collectives) and returns at once; FinishAllToAll waits for it
  // and returns what AllToAll would (once per start, from any one thread).
  // Between the two, the caller computes: the transfer overlaps it, and
  // AbortPending aborts it.
  absl::StatusOr<std::shared_ptr<PendingCollective>> StartAllToAll(
      int subgroup, const std::vector<torch::Tensor>& to,
      const std::vector<int64_t>& from_bytes);
  absl::StatusOr<std::vector<torch::Tensor>> FinishAllToAll(
      PendingCollective& pending);
  absl::Status MaxAcrossRanks(std::vector<double>* values);

  // Records `failure` (code and message, the message prefixed with this
  // rank) as the run's failure unless one is recorded already.
  void PublishFailure(const absl::Status& failure);
  // The recorded failure, if any; a store that cannot be reached (the
  // master gone) is reported as one.
  std::optional<absl::Status> PublishedFailure();
  void AbortPending();

 private:
  struct Impl;  // c10d's store, process group and the work in flight
  explicit RankGroup(const RankGroupOptions& options);

  RankGroupOptions options_;
  int port_ = 0;
  std::unique_ptr<Impl> impl_;
};

// The rank that drives each device: the device's `process` where the
// cluster file gives one, else devices in order split into world_size
// consecutive blocks. Errors: a process out of range, a rank with no
// device.
absl::StatusOr<std::vector<int>> RanksOfDevices(
    const std::vector<int>& process_of_device, int world_size);

}  // namespace placer

#endif  // PLACER_RUNTIME_RANK_GROUP_H_
