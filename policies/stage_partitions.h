// Internal to policies/: the strategy search's stage partitions — the
// forward ops cut into chunks at legal cuts, the dynamic program that
// partitions them into stages with replicas, the uniform partition of equal
// work, and a partition as a Strategy.
//
// Contract:
//  - MakeChunks: the forward ops in the view's topological order, cut only
//    where no weight has readers on both sides, coarsened to at most
//    kMaxChunks chunks of about equal work (forward + backward seconds on
//    `reference_device`), each with its parameter bytes and the activation
//    bytes crossing its start.
//  - Partitions: for `micro_batches`, the best partition (least slowest
//    stage per micro-batch) of every stage count on every device count the
//    mode allows (pipeline: one device per stage; data: one stage on every
//    device; auto: any, two devices or more).
//  - EvenPartition: `stages` contiguous stages of about equal work, each
//    with `replicas` replicas.
//  - ToStrategy: stage s takes the next replicas[s] devices of `pool`, one
//    each, its ops those of its chunks; 1F1B.
#ifndef PLACER_POLICIES_STAGE_PARTITIONS_H_
#define PLACER_POLICIES_STAGE_PARTITIONS_H_

#include <cstdint>
#include <vector>

#include "policies/policy.h"
#include "policies/strategy_search.h"
#include "simulator/strategy.h"

namespace placer {

inline constexpr int kMaxChunks = 32;

// The forward ops in topological order, cut into chunks at legal cuts.
struct Chunks {
  std::vector<int> op_order;
  std::vector<int> start;          // K + 1 positions in op_order
  std::vector<double> work;        // per chunk: forward + backward seconds
  std::vector<int64_t> parameter_bytes;  // per chunk
  std::vector<int64_t> cut_bytes;  // per chunk: activations crossing its
                                   // start (0 for chunk 0)
  int size() const { return static_cast<int>(work.size()); }
};

Chunks MakeChunks(const SimulationContext& context, int reference_device);

// One dynamic-programming answer: chunks [first_chunk[s], first_chunk[s+1])
// on replicas[s] devices.
struct Partition {
  std::vector<int> first_chunk;  // stages + 1 entries
  std::vector<int> replicas;
};

std::vector<Partition> Partitions(const PolicyInput& input, const Chunks& c,
                                  const std::vector<int>& pool,
                                  int micro_batches, Parallelism mode);

Partition EvenPartition(const Chunks& c, int stages, int replicas);

Strategy ToStrategy(const TrainingView& view, const Chunks& c,
                    const std::vector<int>& pool, const Partition& p,
                    int micro_batches);

}  // namespace placer

#endif  // PLACER_POLICIES_STAGE_PARTITIONS_H_
