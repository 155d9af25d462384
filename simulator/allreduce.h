// Collective times: what a data-parallel group's gradient exchange
// (allreduce, or ZeRO's reduce-scatter and all-gather) costs on a
// cluster's links.
#ifndef PLACER_SIMULATOR_ALLREDUCE_H_
#define PLACER_SIMULATOR_ALLREDUCE_H_

#include <cstdint>
#include <vector>

#include "base/collective.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"
#include "simulator/strategy.h"

namespace placer {

// Allreduce of `bytes` over `devices` (in ring / heap order) with the cost
// model's transfer times: ring, 2(p-1) steps each as long as the slowest
// link of the ring carrying ceil(bytes / p); tree, per level of the heap
// the slowest child->parent transfer of all `bytes`, up then down;
// hierarchical (devices grouped by Device::host, in order of appearance,
// l on each of h hosts): a ring reduce-scatter inside every host (the
// slowest host's), a ring allreduce of ceil(bytes / l) across hosts per
// local rank (the slowest of the l rings), a ring all-gather inside every
// host; a ring when the devices are not l >= 2 on each of h >= 2 hosts.
// One device: 0.
double AllreduceSeconds(const CostModel& costs, const Cluster& cluster,
                        const std::vector<int>& devices, int64_t bytes,
                        AllreduceAlgorithm algorithm);

// Ring reduce-scatter (each device ends with the sum of its 1/p of
// `bytes`) and all-gather (each ends with everyone's 1/p): p - 1 steps,
// each as long as the slowest link of the ring carrying ceil(bytes / p).
// One device: 0.
double ReduceScatterSeconds(const CostModel& costs, const Cluster& cluster,
                            const std::vector<int>& devices, int64_t bytes);
double AllGatherSeconds(const CostModel& costs, const Cluster& cluster,
                        const std::vector<int>& devices, int64_t bytes);
// The same with the data-parallel group's algorithm: kHierarchical over
// devices l >= 2 on each of h >= 2 hosts is a ring reduce-scatter inside
// every host (the slowest host's) then one of ceil(bytes / l) across hosts
// per local rank (the slowest of the l rings), the l rings' links in
// parallel (an all-gather: the reverse, as long); otherwise (ring, tree,
// or devices not spread so) the ring above. NCCL's rings over several
// GPUs of a host leave it through as many NICs: this is their bandwidth.
double ReduceScatterSeconds(const CostModel& costs, const Cluster& cluster,
                            const std::vector<int>& devices, int64_t bytes,
                            AllreduceAlgorithm algorithm);
double AllGatherSeconds(const CostModel& costs, const Cluster& cluster,
                        const std::vector<int>& devices, int64_t bytes,
                        AllreduceAlgorithm algorithm);
// All-to-all of a tensor of `bytes` split over `devices`: p - 1 steps (the
// ring's order), each as long as the slowest link carrying
// ceil(bytes / p^2). One device: 0.
double AllToAllSeconds(const CostModel& costs, const Cluster& cluster,
                       const std::vector<int>& devices, int64_t bytes);
// What a ring collective of `bytes` over p devices puts on the wire, and
// how many messages: allreduce 2(p-1) x bytes in 2(p-1)p messages;
// reduce-scatter and all-gather (p-1) x bytes in (p-1)p; all-to-all
// (p-1)/p x bytes in (p-1)p.
int64_t CollectiveWireBytes(Collective kind, int p, int64_t bytes);
int CollectiveMessages(Collective kind, int p);
// Whether `devices` are l >= 2 on each of h >= 2 hosts (hierarchical
// allreduce applies).
bool SpansHostsEvenly(const Cluster& cluster, const std::vector<int>& devices);
// The collective `kind` over `devices` (allreduce: ring).
double CollectiveSeconds(const CostModel& costs, const Cluster& cluster,
                         const std::vector<int>& devices, int64_t bytes,
                         Collective kind);

}  // namespace placer

#endif  // PLACER_SIMULATOR_ALLREDUCE_H_
