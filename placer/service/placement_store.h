// PlacementStore: the placement service's memory — placements by
// fingerprint with the step times measured for them, and the per-cluster
// profiles executors reported.
//
// Contract: opened on a directory, everything put is on disk before the
// call returns, one file per entry, each written atomically (a crash leaves
// the old or the new file, never a torn one), and Open reads it all back;
// files that do not parse are reported in `warnings()` and left alone,
// never fatal, and stale temporary files from a crash are removed. Opened
// on "" it keeps everything in memory only. Thread-safe.
#ifndef PLACER_PLACER_SERVICE_PLACEMENT_STORE_H_
#define PLACER_PLACER_SERVICE_PLACEMENT_STORE_H_

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

class PlacementStore {
 public:
  static absl::StatusOr<std::unique_ptr<PlacementStore>> Open(
      const std::string& dir);

  // Null when absent. Entries are immutable; updates replace them.
  std::shared_ptr<const proto::StoredPlacement> Get(
      const std::string& fingerprint) const;
  // The entry's answer as GetPlacement sends it — a PlaceResponse marked
  // cached, with the measurement summary — serialized once per change so
  // that cache hits cost no copying or serializing. Null when absent.
  std::shared_ptr<const std::string> Answer(const std::string& fingerprint) const;
  absl::Status Put(const std::string& fingerprint,
                   const proto::StoredPlacement& entry);
  // Appends measured step times to a stored placement; NOT_FOUND when the
  // fingerprint is unknown.
  absl::StatusOr<proto::StoredPlacement> AddMeasurement(
      const std::string& fingerprint, const std::vector<double>& step_seconds,
      const std::string& source);

  // Overlays `profile` on what was reported for the cluster so far.
  absl::Status AddProfile(const std::string& cluster_name,
                          const MeasuredProfile& profile);
  // The merged profile of a cluster and a digest of its content (which
  // changes whenever a report changes it).
  std::optional<std::pair<MeasuredProfile, std::string>> Profile(
      const std::string& cluster_name) const;

  size_t size() const;
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  explicit PlacementStore(std::string dir) : dir_(std::move(dir)) {}
  absl::Status Load();
  std::string PlacementPath(const std::string& fingerprint) const;
  std::string ProfilePath(const std::string& cluster_name) const;

  const std::string dir_;
  std::vector<std::string> warnings_;  // written by Open only
  mutable absl::Mutex mu_;
  struct Item {
    std::shared_ptr<const proto::StoredPlacement> entry;
    std::shared_ptr<const std::string> answer;
  };
  static Item MakeItem(proto::StoredPlacement entry);
  std::map<std::string, Item> placements_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::pair<MeasuredProfile, std::string>> profiles_
      ABSL_GUARDED_BY(mu_);
};

// The median of the measured step times stored with a placement.
proto::MeasurementSummary Summarize(const proto::StoredPlacement& entry);

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_PLACEMENT_STORE_H_
