#include "runtime/torch_devices.h"

#include <map>
#include <string>

#include <c10/core/impl/VirtualGuardImpl.h>

#include "absl/strings/str_cat.h"

namespace placer {

absl::StatusOr<std::vector<torch::Device>> TorchDevices(
    const Cluster& cluster, const std::vector<char>& local) {
  std::vector<torch::Device> devices;
  std::map<std::string, int> gpus_of_host;
  for (int i = 0; i < cluster.num_devices(); ++i) {
    const Device& d = cluster.device(i);
    if (d.kind == DeviceKind::kCpu) {
      devices.emplace_back(torch::kCPU);
      continue;
    }
    const int gpus = gpus_of_host[d.host]++;
    if (!local.empty() && !local[i]) {
      devices.emplace_back(torch::kCPU);  // another rank's
      continue;
    }
    if (!torch::cuda::is_available() ||
        gpus >= static_cast<int>(torch::cuda::device_count())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device ", d.name, " is a GPU but this LibTorch sees ",
          torch::cuda::is_available() ? torch::cuda::device_count() : 0,
          " CUDA device(s)"));
    }
    devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(gpus));
  }
  return devices;
}

OwnStreams::OwnStreams(std::initializer_list<torch::Device> devices) {
  std::vector<c10::Stream> streams;
  for (const torch::Device& d : devices) {
    if (d.is_cpu()) continue;
    c10::impl::VirtualGuardImpl impl(d.type());
    streams.push_back(impl.getStreamFromGlobalPool(d));
  }
  if (streams.empty()) return;
  device_.emplace(streams.front().device());
  streams_.emplace(streams);
}

void Synchronize(const torch::Device& device) {
  if (!device.is_cuda()) return;
  c10::impl::VirtualGuardImpl impl(device.type());
  impl.getStream(device).synchronize();
}

}  // namespace placer
