// Measures the links between devices that live in different ranks of a
// distributed run, over the transport the executors use there (the rank
// group's send/recv: runtime/rank_group.h), so that the simulator's link
// model fits what runs across processes and hosts.
//
// Contract: every rank calls MeasureLinksAcrossRanks with the same cluster,
// rank_of_device and options. For each ordered pair of devices (a, b) on
// different ranks, in (a, b) order, the rank of a sends a's tensors of 1 B
// to options.max_link_bytes (x4 steps) to the rank of b, which moves each
// onto b and sends it back; a round trip over two is one sample (the
// median of options.repeats after options.warmup; freed host memory kept
// for reuse, as in the executors' runs). Each pair's samples are
// fitted (FitLink) and published in the group's store; rank 0 returns
// every pair's fit, the other ranks an empty map. Errors: the group's
// (a rank gone or silent names it), or a fit that fails (naming the pair).
#ifndef PLACER_RUNTIME_LINK_PROBE_H_
#define PLACER_RUNTIME_LINK_PROBE_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "profiles/cluster.h"
#include "profiles/measured_cost_model.h"
#include "runtime/profiler.h"
#include "runtime/rank_group.h"

namespace placer {

absl::StatusOr<std::map<std::pair<std::string, std::string>, MeasuredLink>>
MeasureLinksAcrossRanks(
    RankGroup& ranks, const Cluster& cluster,
    const std::vector<int>& rank_of_device, const ProfilerOptions& options,
    const std::function<void(const std::string&)>& progress);

}  // namespace placer

#endif  // PLACER_RUNTIME_LINK_PROBE_H_
