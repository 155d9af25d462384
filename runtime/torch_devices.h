// Which LibTorch device runs each cluster device, and waiting for one.
//
// Contract: CPU devices map to the CPU; GPUs to cuda:0, cuda:1, ... in
// cluster order, counted among the GPUs of the same host (Device::host).
// TorchDevices fails, naming the device, when the cluster has a GPU that
// this LibTorch cannot see (no CUDA, or too few GPUs). With `local` (per
// device, a distributed run's own devices), only those are checked; the
// others map to the CPU as placeholders that nothing runs on.
// OwnStreams: while it lives, the calling thread queues its work on each
// GPU among the devices given on a stream of its own from LibTorch's pool
// (not the default stream), and the first of those GPUs is the current
// device; nothing on CPUs. The executor's workers take one each, so a
// GPU's nodes and each of its links' copies go to different streams:
// copies overlap computation on the GPU, as the simulator's links assume,
// and no worker's wait covers another's work.
// Synchronize returns once the work the calling thread queued on its
// current stream of a CUDA device is done (so that wall-clock timings of
// GPU work are real, and a value is whole before another worker, on
// another stream, reads it); a no-op on the CPU.
#ifndef PLACER_RUNTIME_TORCH_DEVICES_H_
#define PLACER_RUNTIME_TORCH_DEVICES_H_

#include <initializer_list>
#include <optional>
#include <vector>

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <torch/torch.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "profiles/cluster.h"

namespace placer {

absl::StatusOr<std::vector<torch::Device>> TorchDevices(
    const Cluster& cluster, const std::vector<char>& local = {});

class OwnStreams {
 public:
  explicit OwnStreams(std::initializer_list<torch::Device> devices);
  OwnStreams(const OwnStreams&) = delete;
  OwnStreams& operator=(const OwnStreams&) = delete;

 private:
  std::optional<c10::DeviceGuard> device_;
  std::optional<c10::MultiStreamGuard> streams_;
};

void Synchronize(const torch::Device& device);

// The bytes of a tensor's elements; 0 when it is undefined.
inline int64_t TensorBytes(const torch::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.numel() * t.element_size()) : 0;
}

}  // namespace placer

#endif  // PLACER_RUNTIME_TORCH_DEVICES_H_
