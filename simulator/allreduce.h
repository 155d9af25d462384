// Allreduce times: what a data-parallel group's gradient exchange costs on
// a cluster's links.
#ifndef PLACER_SIMULATOR_ALLREDUCE_H_
#define PLACER_SIMULATOR_ALLREDUCE_H_

#include <cstdint>
#include <vector>

#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/strategy.h"

namespace placer {

// Allreduce of `bytes` over `devices` (in ring / heap order) with the cost
// model's transfer times: ring, 2(p-1) steps each as long as the slowest
// link of the ring carrying ceil(bytes / p); tree, per level of the heap
// the slowest child->parent transfer of all `bytes`, up then down. One
// device: 0.
double AllreduceSeconds(const CostModel& costs, const Cluster& cluster,
                        const std::vector<int>& devices, int64_t bytes,
                        AllreduceAlgorithm algorithm);

}  // namespace placer

#endif  // PLACER_SIMULATOR_ALLREDUCE_H_
