#include "runtime/torch_devices.h"

#include "absl/strings/str_cat.h"

namespace placer {

absl::StatusOr<std::vector<torch::Device>> TorchDevices(const Cluster& cluster) {
  std::vector<torch::Device> devices;
  int gpus = 0;
  for (const Device& d : cluster.devices()) {
    if (d.kind == DeviceKind::kCpu) {
      devices.emplace_back(torch::kCPU);
      continue;
    }
    if (!torch::cuda::is_available() ||
        gpus >= static_cast<int>(torch::cuda::device_count())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device ", d.name, " is a GPU but this LibTorch sees ",
          torch::cuda::is_available() ? torch::cuda::device_count() : 0,
          " CUDA device(s)"));
    }
    devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(gpus++));
  }
  return devices;
}

void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace placer
