// Which LibTorch device runs each cluster device, and waiting for one.
//
// Contract: CPU devices map to the CPU; GPUs to cuda:0, cuda:1, ... in
// cluster order, counted among the GPUs of the same host (Device::host).
// TorchDevices fails, naming the device, when the cluster has a GPU that
// this LibTorch cannot see (no CUDA, or too few GPUs). With `local` (per
// device, a distributed run's own devices), only those are checked; the
// others map to the CPU as placeholders that nothing runs on.
// Synchronize returns once the work queued on a CUDA device is done (so
// that wall-clock timings of GPU work are real); a no-op on the CPU.
#ifndef PLACER_RUNTIME_TORCH_DEVICES_H_
#define PLACER_RUNTIME_TORCH_DEVICES_H_

#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "profiles/cluster.h"

namespace placer {

absl::StatusOr<std::vector<torch::Device>> TorchDevices(
    const Cluster& cluster, const std::vector<char>& local = {});

void Synchronize(const torch::Device& device);

}  // namespace placer

#endif  // PLACER_RUNTIME_TORCH_DEVICES_H_
