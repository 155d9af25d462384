// ZeRO-2/3's reduce-scatter on one process, round by round: per parameter
// and shard (a replica's part of it, per tensor rank), the parts of each
// round's gradient that the stage's replicas deliver (a round: the n-th
// micro-batch of every replica), summed in replica order once every
// replica has delivered, and the rounds added into the shard's
// accumulator in round order. The sum is the same whatever order the
// deliveries arrive in.
//
// Thread-safe: one mutex guards the rounds and every accumulator passed
// in, which callers touch through this class only while a step runs.
#ifndef PLACER_RUNTIME_GRADIENT_ROUNDS_H_
#define PLACER_RUNTIME_GRADIENT_ROUNDS_H_

#include <torch/torch.h>

#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace placer {

class GradientRounds {
 public:
  // Forgets every round; parameter p has shards_of_parameter[p] shards (0:
  // not reduce-scattered), each starting at round 0.
  void Reset(const std::vector<int>& shards_of_parameter);

  // Replica `from`'s part (of `replicas`) of round `round` of parameter
  // p's shard `shard`. Adds every round now complete, in order from the
  // next one due, into *accumulator (defined on first use) on `device`.
  // p and shard must be within Reset's sizes.
  void Deliver(int p, int shard, int round, int from, int replicas,
               torch::Tensor part, const torch::Device& device,
               torch::Tensor* accumulator);

  // Adds every round delivered so far, complete or not, in order into
  // *accumulator and returns it (called once every task of the stage has
  // ended, when the parts some replica sent nothing for will not come).
  torch::Tensor Flush(int p, int shard, const torch::Device& device,
                      torch::Tensor* accumulator);

 private:
  void Fold(int p, int shard, bool flush, const torch::Device& device,
            torch::Tensor* accumulator) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // [p][shard]: by round, the parts by replica (undefined: not delivered).
  std::vector<std::vector<std::map<int, std::vector<torch::Tensor>>>> rounds_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int>> next_round_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placer

#endif  // PLACER_RUNTIME_GRADIENT_ROUNDS_H_
