// PlacementStore on disk: what is put comes back after reopening; what a
// crash leaves (a temporary file cut short) is removed; files that do not
// parse are reported, skipped and left in place; a failed write keeps the
// old state.
#include "placer/service/placement_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(base != nullptr ? base : "/tmp") / name;
  fs::remove_all(dir);
  return dir.string();
}

proto::StoredPlacement Entry(const std::string& fp, double step) {
  proto::StoredPlacement e;
  e.mutable_response()->set_fingerprint(fp);
  e.mutable_response()->mutable_report()->set_step_seconds(step);
  (*e.mutable_response()->mutable_placement()->mutable_assignment())["a"] =
      "/gpu:0";
  e.set_cluster_name("p100x4");
  return e;
}

const std::string kA(64, 'a');
const std::string kB(64, 'b');

TEST(PlacementStoreTest, SurvivesReopeningWithMeasurementsAndProfiles) {
  std::string dir = TempDir("store_reopen");
  {
    auto store = PlacementStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put(kA, Entry(kA, 0.5)).ok());
    ASSERT_TRUE((*store)->AddMeasurement(kA, {0.7, 0.6}, "run 1").ok());
    EXPECT_EQ((*store)->AddMeasurement(kB, {0.1}, "x").status().code(),
              absl::StatusCode::kNotFound);
    MeasuredProfile p;
    p.source = "test";
    p.links[{"/gpu:0", "/gpu:1"}] = {{0.001, 1e9}, {}};
    ASSERT_TRUE((*store)->AddProfile("p100x4", p).ok());
  }
  auto store = PlacementStore::Open(dir);
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->warnings().empty());
  std::shared_ptr<const proto::StoredPlacement> e = (*store)->Get(kA);
  ASSERT_NE(e, nullptr);
  proto::PlaceResponse answer;
  ASSERT_TRUE(answer.ParseFromString(*(*store)->Answer(kA)));
  EXPECT_TRUE(answer.cached());
  EXPECT_EQ(answer.measured().count(), 2);
  EXPECT_EQ(answer.placement().assignment().at("a"), "/gpu:0");
  EXPECT_DOUBLE_EQ(e->response().report().step_seconds(), 0.5);
  EXPECT_EQ(e->measured_step_seconds_size(), 2);
  EXPECT_DOUBLE_EQ(Summarize(*e).median_step_seconds(), 0.65);
  auto profile = (*store)->Profile("p100x4");
  ASSERT_TRUE(profile.has_value());
  EXPECT_DOUBLE_EQ(profile->first.links.at({"/gpu:0", "/gpu:1"}).fit.bandwidth,
                   1e9);
  EXPECT_EQ(profile->second.size(), 64u);
  EXPECT_FALSE((*store)->Profile("cpu2").has_value());
}

TEST(PlacementStoreTest, CrashLeftoversAndCorruptFilesNeverBreakOpening) {
  std::string dir = TempDir("store_crash");
  {
    auto store = PlacementStore::Open(dir);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Put(kA, Entry(kA, 0.5)).ok());
  }
  // A write cut short by a crash: its temporary file, half written.
  std::string tmp = dir + "/placements/" + kB + ".placement.binpb.tmp.1234.0";
  std::ofstream(tmp) << "\x0a\x40half";
  // A file that is not a stored placement (a disk error, a stray copy).
  std::string corrupt = dir + "/placements/" + kB + ".placement.binpb";
  std::ofstream(corrupt) << "\xff\xff\xff not protobuf";
  auto store = PlacementStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(fs::exists(corrupt));
  ASSERT_EQ((*store)->warnings().size(), 1u);
  EXPECT_THAT((*store)->warnings()[0], HasSubstr(corrupt));
  EXPECT_NE((*store)->Get(kA), nullptr);
  EXPECT_EQ((*store)->Get(kB), nullptr);
  EXPECT_EQ((*store)->size(), 1u);
}

TEST(PlacementStoreTest, AFailedWriteKeepsTheOldState) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  std::string dir = TempDir("store_readonly");
  auto store = PlacementStore::Open(dir);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put(kA, Entry(kA, 0.5)).ok());
  chmod((dir + "/placements").c_str(), 0500);
  absl::Status s = (*store)->Put(kA, Entry(kA, 0.9));
  absl::StatusOr<proto::StoredPlacement> m =
      (*store)->AddMeasurement(kA, {1.0}, "x");
  chmod((dir + "/placements").c_str(), 0700);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(m.ok());
  // Neither in memory nor on disk did anything change.
  EXPECT_DOUBLE_EQ((*store)->Get(kA)->response().report().step_seconds(), 0.5);
  EXPECT_EQ((*store)->Get(kA)->measured_step_seconds_size(), 0);
  auto reopened = PlacementStore::Open(dir);
  ASSERT_TRUE(reopened.ok());
  EXPECT_DOUBLE_EQ((*reopened)->Get(kA)->response().report().step_seconds(),
                   0.5);
}

int64_t DirectoryBytes(const std::string& dir) {
  int64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
  }
  return bytes;
}

std::string Fingerprint(int i) {
  std::string fp(64, '0');
  std::string digits = std::to_string(i);
  fp.replace(64 - digits.size(), digits.size(), digits);
  return fp;
}

// A loop of distinct placements under a size limit: the directory never
// holds more than the limit, the least recently used go first, and what
// stays reads back whole after reopening.
TEST(PlacementStoreTest, StaysUnderItsSizeLimitEvictingLeastRecentlyUsed) {
  std::string dir = TempDir("store_capped");
  const int64_t entry_bytes =
      static_cast<int64_t>(Entry(Fingerprint(0), 0.5).ByteSizeLong());
  StoreOptions options;
  options.max_bytes = 10 * entry_bytes + entry_bytes / 2;
  auto store = PlacementStore::Open(dir, options);
  ASSERT_TRUE(store.ok());
  MeasuredProfile p;
  p.links[{"/gpu:0", "/gpu:1"}] = {{0.001, 1e9}, {}};
  ASSERT_TRUE((*store)->AddProfile("p100x4", p, "alice").ok());
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE((*store)->Put(Fingerprint(i), Entry(Fingerprint(i), i)).ok())
        << i;
    // Entry 0 is read before every write: the most recently used.
    ASSERT_NE((*store)->Answer(Fingerprint(0)), nullptr) << i;
    ASSERT_LE(DirectoryBytes(dir), options.max_bytes) << i;
    ASSERT_EQ((*store)->bytes(), DirectoryBytes(dir)) << i;
  }
  const size_t kept = (*store)->size();
  EXPECT_GE(kept, 8u);
  EXPECT_EQ((*store)->evicted(), 200 - static_cast<int64_t>(kept));
  EXPECT_NE((*store)->Get(Fingerprint(199)), nullptr);
  EXPECT_EQ((*store)->Get(Fingerprint(150)), nullptr);
  // Measurements grow an entry; the limit holds for them too.
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(
        (*store)->AddMeasurement(Fingerprint(0), {0.1}, "run", "bob").ok());
    ASSERT_LE(DirectoryBytes(dir), options.max_bytes) << i;
  }
  // An entry over the limit by itself is refused, nothing else changing.
  proto::StoredPlacement huge = Entry(Fingerprint(999), 1);
  (*huge.mutable_response()->mutable_placement()->mutable_assignment())["big"] =
      std::string(options.max_bytes, 'x');
  const size_t before = (*store)->size();
  absl::Status refused = (*store)->Put(Fingerprint(999), huge);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*store)->size(), before);

  auto reopened = PlacementStore::Open(dir, options);
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->warnings().empty());
  EXPECT_EQ((*reopened)->size(), before);
  EXPECT_EQ((*reopened)->bytes(), (*store)->bytes());
  std::shared_ptr<const proto::StoredPlacement> zero =
      (*reopened)->Get(Fingerprint(0));
  ASSERT_NE(zero, nullptr);
  EXPECT_EQ(zero->measured_step_seconds_size(), 50);
  EXPECT_EQ(zero->measurement_clients(0), "bob");
  EXPECT_EQ((*reopened)->ProfileClients("p100x4"),
            std::vector<std::string>{"alice"});
  // Reopened with a smaller limit, the oldest files go, with a warning.
  StoreOptions smaller;
  smaller.max_bytes = options.max_bytes / 2;
  auto shrunk = PlacementStore::Open(dir, smaller);
  ASSERT_TRUE(shrunk.ok());
  EXPECT_LE(DirectoryBytes(dir), smaller.max_bytes);
  ASSERT_EQ((*shrunk)->warnings().size(), 1u);
  EXPECT_THAT((*shrunk)->warnings()[0], HasSubstr("evicted"));
}

TEST(PlacementStoreTest, ProfilesArePerClientAndMergedInReportOrder) {
  std::string dir = TempDir("store_profile_clients");
  MeasuredProfile slow, fast;
  slow.links[{"/gpu:0", "/gpu:1"}] = {{0.5, 1e6}, {}};
  fast.links[{"/gpu:0", "/gpu:1"}] = {{1e-5, 1e10}, {}};
  {
    auto store = PlacementStore::Open(dir);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->AddProfile("p100x4", slow, "alice").ok());
    ASSERT_TRUE((*store)->AddProfile("p100x4", fast, "bob").ok());
  }
  auto store = PlacementStore::Open(dir);
  ASSERT_TRUE(store.ok());
  auto bandwidth = [](const auto& profile) {
    return profile->first.links.at({"/gpu:0", "/gpu:1"}).fit.bandwidth;
  };
  auto both = (*store)->Profile("p100x4");
  ASSERT_TRUE(both.has_value());
  EXPECT_DOUBLE_EQ(bandwidth(both), 1e10);  // bob reported last
  auto alice = (*store)->Profile(
      "p100x4", [](const std::string& c) { return c == "alice"; });
  ASSERT_TRUE(alice.has_value());
  EXPECT_DOUBLE_EQ(bandwidth(alice), 1e6);
  EXPECT_NE(alice->second, both->second);
  EXPECT_FALSE((*store)
                   ->Profile("p100x4", [](const std::string&) { return false; })
                   .has_value());
  // Alice reports again: now hers is the latest.
  ASSERT_TRUE((*store)->AddProfile("p100x4", slow, "alice").ok());
  EXPECT_DOUBLE_EQ(bandwidth((*store)->Profile("p100x4")), 1e6);
}

TEST(PlacementStoreTest, InMemoryWhenOpenedOnNothing) {
  auto store = PlacementStore::Open("");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put(kA, Entry(kA, 0.5)).ok());
  EXPECT_NE((*store)->Get(kA), nullptr);
}

}  // namespace
}  // namespace placer
