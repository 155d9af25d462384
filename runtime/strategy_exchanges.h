// What the strategy executor's workers (runtime/strategy_executor_impl.h)
// hand each other during a step, and how what crosses ranks is packed.
// Internal to runtime/: included by strategy_executor_impl.h only.
#ifndef PLACER_RUNTIME_STRATEGY_EXCHANGES_H_
#define PLACER_RUNTIME_STRATEGY_EXCHANGES_H_

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
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

// Copies between the slots of a wide replica (strategy_links.cc), each
// made by its link's worker: a value a forward node made, or a slot's
// summed partial gradients of a sum whose sink is on another slot. Per
// link (its ordinal), the copies queued, in the order their sources were
// made; per arrival key, what arrived (left undefined once its first
// reader has taken it: still arrived).
struct StrategySlotCopy {
  int64_t key = 0;  // where it arrives (LinkKey)
  int value = -1;   // what a MeasuredTransfer reports
  torch::Tensor tensor;
};
struct StrategySlotLinks {
  std::vector<std::deque<StrategySlotCopy>> queued;
  std::vector<std::chrono::steady_clock::time_point> given;  // last queued
  absl::flat_hash_map<int64_t, torch::Tensor> arrived;
};

// The links between wide replicas' slots (InitLinks): per node, what it
// sends once made ((value, slot); a backward node: (sum, slot), per
// partial) and the items it reads through links; per (stage, slot), the
// weights it sends at a forward task's start ((value, slot)); per (sum,
// slot), the partials a task makes there of a sum sent; per (stage, slot)
// the parameters' sums it sends its partials of to their update's slot;
// per link
// (ordinal), its (src, dst) devices and copies per step; per (src, dst),
// its ordinal.
struct StrategyLinkTables {
  std::vector<std::vector<std::pair<int, int>>> sends;
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> weights;
  std::vector<std::vector<int>> reads;
  std::map<std::pair<int, int>, int> partials;
  // Per (stage, slot): the gradient sums of parameters updated on another
  // slot that it makes partials of, with that slot ((sum, slot)), whose
  // buffers its update's device takes from the link once the task ends.
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> updates;
  std::vector<std::pair<int, int>> devices;
  std::vector<int> expected;
  std::map<std::pair<int, int>, int> ordinal;
};

// What a device keeps of an op run split over a tensor-parallel group
// besides its saved graph: a vocabulary-parallel lookup's mask, a
// vocabulary-parallel loss's gradient per unit of its own, a softmax's
// output over a split axis (the axis; whether a log-softmax); whether it
// added zeros for a bias that tensor rank 0 adds (its gradient then none
// here).
struct StrategyTensorParallelSaved {
  torch::Tensor mask;
  torch::Tensor gradient;
  torch::Tensor softmax;
  int64_t axis = -1;
  bool log = false;
  bool zero_bias = false;
};

// Recomputing in part (InitRecompute): per stage, each layer's rerun
// nodes in forward order, the parameters a layer's rerun reads (ZeRO-3
// gathers them at once before it) and, per value, how many times its
// rerun nodes read it; per backward node, the layers rerun before it.
struct StrategyRerunTables {
  std::vector<std::map<int, std::vector<int>>> layer_nodes, layer_parameters;
  std::vector<std::map<int, int>> reads;
  std::vector<std::vector<int>> before;
};

// ZeRO-3's gathers (InitSharding, from simulator/parameter_gathers.h), per
// node: the parameters gathered before it in its pass (what it reads
// first and what the next node to read any first does, but those gathered
// already) and those let go after it (it reads them last); per node that
// gathers, the next node of its pass that does (-1: none).
struct StrategyGatherTables {
  std::vector<std::vector<int>> forward, backward;
  std::vector<std::vector<int>> released_after_forward, released_after_backward;
  std::vector<int> next;
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
