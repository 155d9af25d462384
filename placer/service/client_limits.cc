#include "placer/service/client_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace placer {

ClientLimits::ClientLimits(ClientLimitOptions options)
    : options_(std::move(options)) {}

absl::Status ClientLimits::AdmitCall(const std::string& client) {
  const double rate = options_.max_calls_per_second_per_client;
  if (rate <= 0) return absl::OkStatus();
  const Clock::time_point now = Clock::now();
  absl::MutexLock lock(&rate_mu_);
  // Buckets of clients idle for a while are full again: drop them, so the
  // map holds only the clients of the last seconds.
  if (buckets_.size() > 4096) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      it = now - it->second.refilled > std::chrono::seconds(10)
               ? buckets_.erase(it)
               : std::next(it);
    }
  }
  auto [it, fresh] = buckets_.try_emplace(client);
  Bucket& b = it->second;
  if (fresh) {
    b.calls = rate;
  } else {
    const double seconds =
        std::chrono::duration<double>(now - b.refilled).count();
    b.calls = std::min(rate, b.calls + std::max(0.0, seconds) * rate);
  }
  b.refilled = now;
  if (b.calls < 1) {
    return absl::ResourceExhaustedError(
        absl::StrCat("client '", client, "' is over its ", rate,
                     " calls per second; retry later"));
  }
  b.calls -= 1;
  return absl::OkStatus();
}

absl::Status ClientLimits::StartPlacing(const std::string& client) {
  absl::MutexLock lock(&mu_);
  Usage& u = usage_[client];
  if (placing_ >= options_.max_placing) {
    Forget(client);
    return absl::ResourceExhaustedError(
        absl::StrCat("server busy: ", placing_,
                     " placements queued or running; retry "
                     "later"));
  }
  if (u.placing >= options_.max_placing_per_client) {
    const int placing = u.placing;
    Forget(client);
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy for client '", client, "': its ", placing,
        " placements queued or running are as many as one client may have; "
        "retry later"));
  }
  ++u.placing;
  ++placing_;
  return absl::OkStatus();
}

void ClientLimits::EndPlacing(const std::string& client) {
  absl::MutexLock lock(&mu_);
  --placing_;
  --usage_[client].placing;
  Forget(client);
}

bool ClientLimits::AcquireSearch(const std::string& client,
                                 Clock::time_point deadline,
                                 const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  auto free = [this, &client]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = usage_.find(client);
    const int mine = it == usage_.end() ? 0 : it->second.searches;
    return searches_ < options_.max_searches &&
           mine < options_.max_searches_per_client;
  };
  // Wakes at least every 50 ms to notice a client that went away.
  while (
      !mu_.AwaitWithTimeout(absl::Condition(&free), absl::Milliseconds(50))) {
    if (cancelled() || Clock::now() >= deadline) return false;
  }
  ++searches_;
  ++usage_[client].searches;
  return true;
}

void ClientLimits::ReleaseSearch(const std::string& client) {
  absl::MutexLock lock(&mu_);
  --searches_;
  --usage_[client].searches;
  Forget(client);
}

void ClientLimits::Forget(const std::string& client) {
  auto it = usage_.find(client);
  if (it != usage_.end() && it->second.searches == 0 &&
      it->second.placing == 0) {
    usage_.erase(it);
  }
}

}  // namespace placer
