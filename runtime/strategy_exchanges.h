// What the strategy executor's workers (runtime/strategy_executor_impl.h)
// hand each other during a step, and how what crosses ranks is packed.
// Internal to runtime/: included by strategy_executor_impl.h only.
#ifndef PLACER_RUNTIME_STRATEGY_EXCHANGES_H_
#define PLACER_RUNTIME_STRATEGY_EXCHANGES_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/rank_group.h"

namespace placer {

// Between ranks, a stage's values (or partial gradients) for another
// stage's device go packed, one index message and one data message per
// stage pair and micro-batch (GNMT-2's 2-stage pipeline as two processes:
// 0.131 s a step with a message per value, 0.112 s packed), with this id;
// what replicas exchange goes by c10d's collectives (below).
constexpr int64_t kPacked = 0;
// Index words: count, from stage, to stage, micro-batch, backward; then
// per item: its value (or sum), dtype, rank (-1: undefined), 8 dims.
constexpr int kIndexHead = 5;
constexpr int kMaxPackedDims = 8;
constexpr int kItemWords = 3 + kMaxPackedDims;

// A tensor-parallel group's collective in flight: each device's part, how
// many have arrived and how many have taken the result.
struct StrategyGroupExchange {
  std::vector<torch::Tensor> parts;
  int arrived = 0;
  int taken = 0;
};

// A replica exchange in flight: the parts this process's replicas left
// ([replica][replica], an all-gather's in [replica][0]) until issued; the
// collective in flight and where each part it brings goes; once done,
// what each replica here got ([to replica][from replica]).
struct StrategyReplicaExchange {
  struct Part {
    int member = 0;  // the subgroup member it comes from
    int64_t offset = 0, bytes = 0;
    int to = 0, from = 0;  // replicas
  };
  std::vector<std::vector<torch::Tensor>> sent, received;
  std::shared_ptr<PendingCollective> pending;
  std::vector<Part> parts;
  torch::ScalarType dtype = torch::kFloat;
  int arrived = 0;
  int taken = 0;
  bool issued = false, finishing = false, done = false;
};

// Recomputing selectively (Recompute::kSelective: every node without a
// weight rerun), per backward task: what the reruns made that rerun nodes
// still read (value -> tensor and reads left), and the forward nodes rerun
// so far.
struct SelectiveRerunState {
  std::map<int, std::pair<torch::Tensor, int>> rebuilt;
  std::vector<char> done;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_STRATEGY_EXCHANGES_H_
