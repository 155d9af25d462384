#include "runtime/gradient_rounds.h"

#include <utility>

namespace placer {

void GradientRounds::Reset(const std::vector<int>& shards_of_parameter) {
  absl::MutexLock lock(&mu_);
  rounds_.assign(shards_of_parameter.size(), {});
  next_round_.assign(shards_of_parameter.size(), {});
  for (size_t p = 0; p < shards_of_parameter.size(); ++p) {
    rounds_[p].assign(shards_of_parameter[p], {});
    next_round_[p].assign(shards_of_parameter[p], 0);
  }
}

void GradientRounds::Deliver(int p, int shard, int round, int from,
                             int replicas, torch::Tensor part,
                             const torch::Device& device,
                             torch::Tensor* accumulator) {
  absl::MutexLock lock(&mu_);
  std::vector<torch::Tensor>& parts = rounds_[p][shard][round];
  if (parts.empty()) parts.resize(replicas);
  parts[from] = std::move(part);
  Fold(p, shard, /*flush=*/false, device, accumulator);
}

torch::Tensor GradientRounds::Flush(int p, int shard,
                                    const torch::Device& device,
                                    torch::Tensor* accumulator) {
  absl::MutexLock lock(&mu_);
  Fold(p, shard, /*flush=*/true, device, accumulator);
  return *accumulator;
}

void GradientRounds::Fold(int p, int shard, bool flush,
                          const torch::Device& device,
                          torch::Tensor* accumulator) {
  std::map<int, std::vector<torch::Tensor>>& rounds = rounds_[p][shard];
  torch::NoGradGuard no_grad;
  while (!rounds.empty()) {
    const auto& [index, parts] = *rounds.begin();
    int delivered = 0;
    for (const torch::Tensor& part : parts) delivered += part.defined();
    if (!flush && (index != next_round_[p][shard] ||
                   delivered < static_cast<int>(parts.size()))) {
      return;
    }
    torch::Tensor total;
    for (const torch::Tensor& part : parts) {
      if (!part.defined()) continue;
      torch::Tensor here = part.to(device);
      total = total.defined() ? total + here : here.clone();
    }
    if (!accumulator->defined()) {
      *accumulator = total;
    } else if (total.defined()) {
      accumulator->add_(total);
    }
    next_round_[p][shard] = index + 1;
    rounds.erase(rounds.begin());
  }
}

}  // namespace placer
