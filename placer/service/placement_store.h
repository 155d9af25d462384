// PlacementStore: the placement service's memory — placements by
// fingerprint with the step times measured for them (and who reported
// them), and the profiles each client reported per cluster.
//
// Contract: opened on a directory, everything put is on disk before the
// call returns, one file per entry, each written atomically (a crash leaves
// the old or the new file, never a torn one), and Open reads it all back;
// files that do not parse are reported in `warnings()` and left alone,
// never fatal, and stale temporary files from a crash are removed. Opened
// on "" it keeps everything in memory only. With `max_bytes`, the entries'
// bytes (on disk, or in memory) never exceed it: a write that would
// evicts the least recently used placements first (Get and Answer count as
// uses; on opening, the files' modification times give the order) and is
// refused with RESOURCE_EXHAUSTED when evicting every other placement would
// not make room (profiles are never evicted). Thread-safe.
#ifndef PLACER_PLACER_SERVICE_PLACEMENT_STORE_H_
#define PLACER_PLACER_SERVICE_PLACEMENT_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "placer/service/service.pb.h"
#include "profiles/measured_cost_model.h"

namespace placer {

struct StoreOptions {
  int64_t max_bytes = 0;  // of every entry together; 0: no limit
};

class PlacementStore {
 public:
  static absl::StatusOr<std::unique_ptr<PlacementStore>> Open(
      const std::string& dir, StoreOptions options = {});

  // Null when absent. Entries are immutable; updates replace them.
  std::shared_ptr<const proto::StoredPlacement> Get(
      const std::string& fingerprint) const;
  // The entry's answer as GetPlacement sends it — a PlaceResponse marked
  // cached, with the measurement summary — serialized once per change so
  // that cache hits cost no copying or serializing. Null when absent.
  std::shared_ptr<const std::string> Answer(const std::string& fingerprint) const;
  absl::Status Put(const std::string& fingerprint,
                   const proto::StoredPlacement& entry);
  // Appends measured step times, reported by `client` (its own words in
  // `source`), to a stored placement; NOT_FOUND when the fingerprint is
  // unknown.
  absl::StatusOr<proto::StoredPlacement> AddMeasurement(
      const std::string& fingerprint, const std::vector<double>& step_seconds,
      const std::string& source, const std::string& client = "");

  // Overlays `profile` on what `client` reported for the cluster so far.
  absl::Status AddProfile(const std::string& cluster_name,
                          const MeasuredProfile& profile,
                          const std::string& client = "");
  // The profiles reported for a cluster by the clients `accept` takes (all
  // when null), merged in the order they were reported (the latest report
  // of an op or a link wins), and a digest of what was merged (which
  // changes whenever a report changes it). Nullopt when none is accepted.
  std::optional<std::pair<MeasuredProfile, std::string>> Profile(
      const std::string& cluster_name,
      const std::function<bool(const std::string& client)>& accept =
          nullptr) const;
  // The clients that reported profiles for the cluster ("" for reports
  // stored before clients were recorded), sorted.
  std::vector<std::string> ProfileClients(
      const std::string& cluster_name) const;

  size_t size() const;
  // Bytes of every entry together, and placements evicted to stay under
  // max_bytes since opening.
  int64_t bytes() const;
  int64_t evicted() const;
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  PlacementStore(std::string dir, StoreOptions options)
      : dir_(std::move(dir)), options_(options) {}
  absl::Status Load();
  std::string PlacementPath(const std::string& fingerprint) const;
  std::string ProfilePath(const std::string& cluster_name,
                          const std::string& client) const;

  struct Item {
    std::shared_ptr<const proto::StoredPlacement> entry;
    std::shared_ptr<const std::string> answer;
    int64_t bytes = 0;       // of the stored entry
    uint64_t last_used = 0;  // a tick of use_clock_
  };
  struct ProfileItem {
    MeasuredProfile profile;
    std::string digest;    // SHA-256 of the stored bytes
    int64_t sequence = 0;  // of the client's latest report
    int64_t bytes = 0;
  };
  using ProfileKey = std::pair<std::string, std::string>;  // cluster, client
  static Item MakeItem(proto::StoredPlacement entry, int64_t bytes);
  // Evicts least recently used placements other than `keep` until `more`
  // bytes fit under max_bytes; RESOURCE_EXHAUSTED when they cannot.
  absl::Status MakeRoom(int64_t more, const std::string& keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t Touch() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ++use_clock_;
  }

  const std::string dir_;
  const StoreOptions options_;
  std::vector<std::string> warnings_;  // written by Open only
  mutable absl::Mutex mu_;
  mutable std::map<std::string, Item> placements_ ABSL_GUARDED_BY(mu_);
  std::map<ProfileKey, ProfileItem> profiles_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t profile_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  mutable uint64_t use_clock_ ABSL_GUARDED_BY(mu_) = 0;
};

// The median of the measured step times stored with a placement.
proto::MeasurementSummary Summarize(const proto::StoredPlacement& entry);

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_PLACEMENT_STORE_H_
