#include "placer/service/placement_store.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/statistics.h"
#include "base/status_helpers.h"
#include "placer/service/service_requests.h"
#include "profiles/profile.pb.h"
#include "profiles/proto_io.h"

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
    const std::string& dir, StoreOptions options) {
  if (options.max_bytes < 0) {
    return absl::InvalidArgumentError("store: max_bytes must be >= 0");
  }
  std::unique_ptr<PlacementStore> store(new PlacementStore(dir, options));
  if (dir.empty()) return store;
  std::error_code error;
  for (const char* sub : {"placements", "profiles"}) {
    fs::create_directories(fs::path(dir) / sub, error);
    if (error) {
      return absl::UnavailableError(absl::StrCat(
          dir, "/", sub, ": cannot create the directory: ", error.message()));
    }
  }
  RETURN_IF_ERROR(store->Load());
  return store;
}

std::string PlacementStore::PlacementPath(const std::string& fp) const {
  return absl::StrCat(dir_, "/placements/", fp, kPlacementSuffix);
}

std::string PlacementStore::ProfilePath(const std::string& cluster,
                                        const std::string& client) const {
  // Names are the clients' strings: the file is named by a hash. Reports
  // stored before clients were recorded (client "") keep their names.
  return absl::StrCat(
      dir_, "/profiles/",
      Sha256Hex(client.empty() ? cluster : absl::StrCat(cluster, "\n", client)),
      kProfileSuffix);
}

absl::Status PlacementStore::Load() {
  absl::MutexLock lock(&mu_);
  std::error_code error;
  // Placements in the order they were last written: the oldest are the
  // first evicted.
  std::vector<std::tuple<fs::file_time_type, std::string, Item>> loaded;
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
      const int64_t size = static_cast<int64_t>(bytes->size());
      if (absl::EndsWith(name, kPlacementSuffix)) {
        std::string fp = name.substr(0, name.size() - strlen(kPlacementSuffix));
        proto::StoredPlacement entry;
        if (!IsFingerprint(fp) || !entry.ParseFromString(*bytes) ||
            entry.response().fingerprint() != fp) {
          warnings_.push_back(absl::StrCat(
              path, ": not a stored placement (skipped, left in place)"));
          continue;
        }
        std::error_code time_error;
        fs::file_time_type written = fs::last_write_time(e.path(), time_error);
        loaded.emplace_back(written, fp, MakeItem(std::move(entry), size));
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
        profile_sequence_ = std::max(profile_sequence_, stored.sequence());
        profiles_[{stored.cluster_name(), stored.client()}] = {
            std::move(*profile), Sha256Hex(*bytes), stored.sequence(), size};
        bytes_ += size;
      } else {
        warnings_.push_back(absl::StrCat(path, ": unexpected file, ignored"));
      }
    }
    if (error) {
      return absl::UnavailableError(absl::StrCat(
          folder.string(), ": cannot list: ", error.message()));
    }
  }
  std::sort(loaded.begin(), loaded.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) <
           std::tie(std::get<0>(b), std::get<1>(b));
  });
  for (auto& [written, fp, item] : loaded) {
    item.last_used = Touch();
    bytes_ += item.bytes;
    placements_[fp] = std::move(item);
  }
  const int64_t before = evicted_;
  if (absl::Status s = MakeRoom(0, ""); !s.ok()) {
    warnings_.push_back(absl::StrCat(s.message(), " (kept as they are)"));
  }
  if (evicted_ > before) {
    warnings_.push_back(absl::StrCat(
        "evicted the ", evicted_ - before,
        " least recently written placements: the state held more than its "
        "limit of ",
        options_.max_bytes, " bytes"));
  }
  return absl::OkStatus();
}

PlacementStore::Item PlacementStore::MakeItem(proto::StoredPlacement entry,
                                              int64_t bytes) {
  proto::PlaceResponse answer = entry.response();
  answer.set_cached(true);
  *answer.mutable_measured() = Summarize(entry);
  Item item;
  item.entry = std::make_shared<const proto::StoredPlacement>(std::move(entry));
  item.answer = std::make_shared<const std::string>(Serialized(answer));
  item.bytes = bytes;
  return item;
}

absl::Status PlacementStore::MakeRoom(int64_t more, const std::string& keep) {
  if (options_.max_bytes == 0) return absl::OkStatus();
  if (more > options_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the entry's ", more, " bytes are over the store's limit of ",
        options_.max_bytes, " bytes"));
  }
  while (bytes_ + more > options_.max_bytes) {
    auto oldest = placements_.end();
    for (auto it = placements_.begin(); it != placements_.end(); ++it) {
      if (it->first == keep) continue;
      if (oldest == placements_.end() ||
          it->second.last_used < oldest->second.last_used) {
        oldest = it;
      }
    }
    if (oldest == placements_.end()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the store's limit of ", options_.max_bytes, " bytes is taken by ",
          bytes_,
          " bytes that cannot be evicted (profiles) or by the entry "
          "itself; raise the limit"));
    }
    if (!dir_.empty()) {
      std::error_code error;
      fs::remove(PlacementPath(oldest->first), error);
      if (error) {
        return absl::UnavailableError(absl::StrCat(
            PlacementPath(oldest->first),
            ": cannot evict (remove) it to make room: ", error.message()));
      }
    }
    bytes_ -= oldest->second.bytes;
    ++evicted_;
    placements_.erase(oldest);
  }
  return absl::OkStatus();
}

std::shared_ptr<const proto::StoredPlacement> PlacementStore::Get(
    const std::string& fingerprint) const {
  absl::MutexLock lock(&mu_);
  auto it = placements_.find(fingerprint);
  if (it == placements_.end()) return nullptr;
  it->second.last_used = Touch();
  return it->second.entry;
}

std::shared_ptr<const std::string> PlacementStore::Answer(
    const std::string& fingerprint) const {
  absl::MutexLock lock(&mu_);
  auto it = placements_.find(fingerprint);
  if (it == placements_.end()) return nullptr;
  it->second.last_used = Touch();
  return it->second.answer;
}

absl::Status PlacementStore::Put(const std::string& fingerprint,
                                 const proto::StoredPlacement& entry) {
  std::string bytes = Serialized(entry);
  const int64_t size = static_cast<int64_t>(bytes.size());
  absl::MutexLock lock(&mu_);
  auto old = placements_.find(fingerprint);
  const int64_t replaced = old == placements_.end() ? 0 : old->second.bytes;
  RETURN_IF_ERROR(MakeRoom(size - replaced, fingerprint));
  if (!dir_.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(PlacementPath(fingerprint), bytes));
  }
  Item item = MakeItem(entry, size);
  item.last_used = Touch();
  bytes_ += size - replaced;
  placements_[fingerprint] = std::move(item);
  return absl::OkStatus();
}

absl::StatusOr<proto::StoredPlacement> PlacementStore::AddMeasurement(
    const std::string& fingerprint, const std::vector<double>& step_seconds,
    const std::string& source, const std::string& client) {
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
    next.add_measurement_clients(client);
  }
  std::string bytes = Serialized(next);
  const int64_t size = static_cast<int64_t>(bytes.size());
  RETURN_IF_ERROR(MakeRoom(size - it->second.bytes, fingerprint));
  if (!dir_.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(PlacementPath(fingerprint), bytes));
  }
  bytes_ += size - it->second.bytes;
  it->second = MakeItem(next, size);
  it->second.last_used = Touch();
  return next;
}

absl::Status PlacementStore::AddProfile(const std::string& cluster_name,
                                        const MeasuredProfile& profile,
                                        const std::string& client) {
  absl::MutexLock lock(&mu_);
  const ProfileKey key{cluster_name, client};
  MeasuredProfile merged = profile;
  int64_t replaced = 0;
  if (auto it = profiles_.find(key); it != profiles_.end()) {
    merged = MergeProfiles(it->second.profile, profile);
    replaced = it->second.bytes;
  }
  const int64_t sequence = profile_sequence_ + 1;
  proto::StoredProfile stored;
  stored.set_cluster_name(cluster_name);
  stored.set_client(client);
  stored.set_sequence(sequence);
  *stored.mutable_profile() = ProfileToProto(merged);
  std::string bytes = Serialized(stored);
  const int64_t size = static_cast<int64_t>(bytes.size());
  RETURN_IF_ERROR(MakeRoom(size - replaced, ""));
  if (!dir_.empty()) {
    RETURN_IF_ERROR(
        WriteFileAtomically(ProfilePath(cluster_name, client), bytes));
  }
  profile_sequence_ = sequence;
  bytes_ += size - replaced;
  profiles_[key] = {std::move(merged), Sha256Hex(bytes), sequence, size};
  return absl::OkStatus();
}

std::optional<std::pair<MeasuredProfile, std::string>> PlacementStore::Profile(
    const std::string& cluster_name,
    const std::function<bool(const std::string& client)>& accept) const {
  absl::MutexLock lock(&mu_);
  std::vector<const std::pair<const ProfileKey, ProfileItem>*> taken;
  for (auto it = profiles_.lower_bound({cluster_name, ""});
       it != profiles_.end() && it->first.first == cluster_name; ++it) {
    if (accept == nullptr || accept(it->first.second)) taken.push_back(&*it);
  }
  if (taken.empty()) return std::nullopt;
  std::sort(taken.begin(), taken.end(), [](const auto* a, const auto* b) {
    return a->second.sequence < b->second.sequence;
  });
  MeasuredProfile merged = taken[0]->second.profile;
  std::string digests;
  for (size_t i = 0; i < taken.size(); ++i) {
    if (i > 0)
      merged = MergeProfiles(std::move(merged), taken[i]->second.profile);
    absl::StrAppend(&digests, taken[i]->first.second, " ",
                    taken[i]->second.digest, "\n");
  }
  return std::make_pair(std::move(merged), taken.size() == 1
                                               ? taken[0]->second.digest
                                               : Sha256Hex(digests));
}

std::vector<std::string> PlacementStore::ProfileClients(
    const std::string& cluster_name) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> clients;
  for (auto it = profiles_.lower_bound({cluster_name, ""});
       it != profiles_.end() && it->first.first == cluster_name; ++it) {
    clients.push_back(it->first.second);
  }
  return clients;
}

size_t PlacementStore::size() const {
  absl::MutexLock lock(&mu_);
  return placements_.size();
}

int64_t PlacementStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

int64_t PlacementStore::evicted() const {
  absl::MutexLock lock(&mu_);
  return evicted_;
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
