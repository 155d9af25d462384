// ClientLimits: the placement service's shared capacity — search slots,
// uncached Place calls in flight, and calls per second — divided so that no
// one client can hold all of it while another waits.
//
// Contract: a client is a name (the authenticated client, or the peer's
// address when the server authenticates nobody). A search slot is taken
// only while fewer than `max_searches` run in all and fewer than
// `max_searches_per_client` run for that client, so a client at its limit
// never takes the slot another client is waiting for; each successful
// Acquire/Start is paired with one Release/End. Thread-safe.
#ifndef PLACER_PLACER_SERVICE_CLIENT_LIMITS_H_
#define PLACER_PLACER_SERVICE_CLIENT_LIMITS_H_

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace placer {

struct ClientLimitOptions {
  int max_searches = 2;             // searches (Place, Train) running at once
  int max_searches_per_client = 1;  // of those, for one client
  int max_placing = 128;            // uncached Place calls waiting or running
  int max_placing_per_client = 32;  // of those, for one client
  // Calls of one client in a second, as a token bucket holding one second's
  // calls; 0: unlimited.
  double max_calls_per_second_per_client = 0;
};

class ClientLimits {
 public:
  using Clock = std::chrono::system_clock;
  explicit ClientLimits(ClientLimitOptions options);

  // OK, or RESOURCE_EXHAUSTED naming the client and its rate.
  absl::Status AdmitCall(const std::string& client);
  // Counts an uncached Place call; RESOURCE_EXHAUSTED ("server busy")
  // when the server or the client has as many as allowed.
  absl::Status StartPlacing(const std::string& client);
  void EndPlacing(const std::string& client);
  // Waits for a search slot until `deadline`, checking `cancelled` at least
  // every 50 ms; false when none came.
  bool AcquireSearch(const std::string& client, Clock::time_point deadline,
                     const std::function<bool()>& cancelled);
  void ReleaseSearch(const std::string& client);

  const ClientLimitOptions& options() const { return options_; }

 private:
  struct Usage {
    int searches = 0;
    int placing = 0;
  };
  struct Bucket {
    double calls = 0;  // calls it can still make now
    Clock::time_point refilled;
  };
  // Drops a client's entry once it uses nothing.
  void Forget(const std::string& client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientLimitOptions options_;
  absl::Mutex mu_;
  int searches_ ABSL_GUARDED_BY(mu_) = 0;
  int placing_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Usage> usage_ ABSL_GUARDED_BY(mu_);
  absl::Mutex rate_mu_;
  std::map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(rate_mu_);
};

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_CLIENT_LIMITS_H_
