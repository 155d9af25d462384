#include "placer/service/placement_store.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "placer/service/service_requests.h"
#include "profiles/profile.pb.h"
#include "profiles/proto_io.h"
#include "base/statistics.h"

namespace placer {
namespace {

namespace fs = std::filesystem;

constexpr char kPlacementSuffix[] = ".placement.binpb";
constexpr char kProfileSuffix[] = ".profile.binpb";

std::string Serialized(const google::protobuf::Message& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PlacementStore>> PlacementStore::Open(
    const std::string& dir) {
  std::unique_ptr<PlacementStore> store(new PlacementStore(dir));
  if (dir.empty()) return store;
  std::error_code error;
  for (const char* sub : {"placements", "profiles"}) {
    fs::create_directories(fs::path(dir) / sub, error);
    if (error) {
      return absl::UnavailableError(absl::StrCat(
          dir, "/", sub, ": cannot create the directory: ", error.message()));
    }
  }
  if (absl::Status s = store->Load(); !s.ok()) return s;
  return store;
}

std::string PlacementStore::PlacementPath(const std::string& fp) const {
  return absl::StrCat(dir_, "/placements/", fp, kPlacementSuffix);
}

std::string PlacementStore::ProfilePath(const std::string& cluster) const {
  // Cluster names are the clients' strings: the file is named by a hash.
  return absl::StrCat(dir_, "/profiles/", Sha256Hex(cluster), kProfileSuffix);
}

absl::Status PlacementStore::Load() {
  absl::MutexLock lock(&mu_);
  std::error_code error;
  for (const char* sub : {"placements", "profiles"}) {
    fs::path folder = fs::path(dir_) / sub;
    for (const fs::directory_entry& e : fs::directory_iterator(folder, error)) {
      std::string name = e.path().filename().string();
      std::string path = e.path().string();
      if (absl::StrContains(name, ".tmp.")) {  // a write cut short
        fs::remove(e.path(), error);
        continue;
      }
      absl::StatusOr<std::string> bytes = ReadFileToString(path);
      if (!bytes.ok()) {
        warnings_.push_back(std::string(bytes.status().message()));
        continue;
      }
      if (absl::EndsWith(name, kPlacementSuffix)) {
        std::string fp = name.substr(0, name.size() - strlen(kPlacementSuffix));
        proto::StoredPlacement entry;
        if (!IsFingerprint(fp) || !entry.ParseFromString(*bytes) ||
            entry.response().fingerprint() != fp) {
          warnings_.push_back(absl::StrCat(
              path, ": not a stored placement (skipped, left in place)"));
          continue;
        }
        placements_[fp] = MakeItem(std::move(entry));
      } else if (absl::EndsWith(name, kProfileSuffix)) {
        proto::StoredProfile stored;
        absl::StatusOr<MeasuredProfile> profile =
            stored.ParseFromString(*bytes)
                ? ProfileFromProto(stored.profile(), path)
                : absl::InvalidArgumentError(
                      absl::StrCat(path, ": not a stored profile"));
        if (!profile.ok()) {
          warnings_.push_back(absl::StrCat(profile.status().message(),
                                           " (skipped, left in place)"));
          continue;
        }
        profiles_[stored.cluster_name()] = {std::move(*profile),
                                            Sha256Hex(*bytes)};
      } else {
        warnings_.push_back(absl::StrCat(path, ": unexpected file, ignored"));
      }
    }
    if (error) {
      return absl::UnavailableError(absl::StrCat(
          folder.string(), ": cannot list: ", error.message()));
    }
  }
  return absl::OkStatus();
}

PlacementStore::Item PlacementStore::MakeItem(proto::StoredPlacement entry) {
  proto::PlaceResponse answer = entry.response();
  answer.set_cached(true);
  *answer.mutable_measured() = Summarize(entry);
  return {std::make_shared<const proto::StoredPlacement>(std::move(entry)),
          std::make_shared<const std::string>(Serialized(answer))};
}

std::shared_ptr<const proto::StoredPlacement> PlacementStore::Get(
    const std::string& fingerprint) const {
  absl::MutexLock lock(&mu_);
  auto it = placements_.find(fingerprint);
  return it == placements_.end() ? nullptr : it->second.entry;
}

std::shared_ptr<const std::string> PlacementStore::Answer(
    const std::string& fingerprint) const {
  absl::MutexLock lock(&mu_);
  auto it = placements_.find(fingerprint);
  return it == placements_.end() ? nullptr : it->second.answer;
}

absl::Status PlacementStore::Put(const std::string& fingerprint,
                                 const proto::StoredPlacement& entry) {
  absl::MutexLock lock(&mu_);
  if (!dir_.empty()) {
    if (absl::Status s =
            WriteFileAtomically(PlacementPath(fingerprint), Serialized(entry));
        !s.ok()) {
      return s;
    }
  }
  placements_[fingerprint] = MakeItem(entry);
  return absl::OkStatus();
}

absl::StatusOr<proto::StoredPlacement> PlacementStore::AddMeasurement(
    const std::string& fingerprint, const std::vector<double>& step_seconds,
    const std::string& source) {
  absl::MutexLock lock(&mu_);
  auto it = placements_.find(fingerprint);
  if (it == placements_.end()) {
    return absl::NotFoundError(
        absl::StrCat("fingerprint ", fingerprint, ": no such placement"));
  }
  proto::StoredPlacement next = *it->second.entry;
  for (double s : step_seconds) {
    next.add_measured_step_seconds(s);
    next.add_measurement_sources(source);
  }
  if (!dir_.empty()) {
    if (absl::Status s =
            WriteFileAtomically(PlacementPath(fingerprint), Serialized(next));
        !s.ok()) {
      return s;
    }
  }
  it->second = MakeItem(next);
  return next;
}

absl::Status PlacementStore::AddProfile(const std::string& cluster_name,
                                        const MeasuredProfile& profile) {
  absl::MutexLock lock(&mu_);
  MeasuredProfile merged = profile;
  if (auto it = profiles_.find(cluster_name); it != profiles_.end()) {
    merged = MergeProfiles(it->second.first, profile);
  }
  proto::StoredProfile stored;
  stored.set_cluster_name(cluster_name);
  *stored.mutable_profile() = ProfileToProto(merged);
  std::string bytes = Serialized(stored);
  if (!dir_.empty()) {
    if (absl::Status s = WriteFileAtomically(ProfilePath(cluster_name), bytes);
        !s.ok()) {
      return s;
    }
  }
  profiles_[cluster_name] = {std::move(merged), Sha256Hex(bytes)};
  return absl::OkStatus();
}

std::optional<std::pair<MeasuredProfile, std::string>> PlacementStore::Profile(
    const std::string& cluster_name) const {
  absl::MutexLock lock(&mu_);
  auto it = profiles_.find(cluster_name);
  if (it == profiles_.end()) return std::nullopt;
  return it->second;
}

size_t PlacementStore::size() const {
  absl::MutexLock lock(&mu_);
  return placements_.size();
}

proto::MeasurementSummary Summarize(const proto::StoredPlacement& entry) {
  proto::MeasurementSummary summary;
  summary.set_count(entry.measured_step_seconds_size());
  summary.set_median_step_seconds(
      Median({entry.measured_step_seconds().begin(),
              entry.measured_step_seconds().end()}));
  return summary;
}

}  // namespace placer
