// Whether the ranks a host starts leave it cores for their communication.
// The simulator's links between ranks are the probe's latency and
// bandwidth, measured with the cores free; when the ranks' device workers
// keep every core of the host busy, each thread wake-up on a transfer's
// path (the link's sender, Gloo's loop threads, the receiver) waits for a
// core, and steps take longer than simulated (docs/distributed.md, "Processes
// and hosts": 2-4x on two cores).
//
// Contract: the busy threads are, over the devices of ranks 0 ..
// local_ranks - 1, threads_per_cpu_device per CPU device and one per GPU
// (its worker launches and waits). With two or more local ranks and at
// least as many busy threads as `cores`, returns a one-line warning
// naming the counts; otherwise "".
//
// UnpinnedNote: where CPU devices are to be pinned (--pin_cores) but the
// process may not use a core per CPU device thread (runtime/cpu_cores.h),
// a one-line note that they run unpinned, and why; otherwise "".
#ifndef PLACER_PLACER_CLI_HOST_CORES_H_
#define PLACER_PLACER_CLI_HOST_CORES_H_

#include <string>
#include <vector>

#include "profiles/cluster.h"

namespace placer {

std::string BusyCoresWarning(const Cluster& cluster,
                             const std::vector<int>& rank_of_device,
                             int local_ranks, int threads_per_cpu_device,
                             int cores);

std::string UnpinnedNote(const Cluster& cluster, int threads_per_cpu_device,
                         const std::vector<int>& allowed_cores);

}  // namespace placer

#endif  // PLACER_PLACER_CLI_HOST_CORES_H_
