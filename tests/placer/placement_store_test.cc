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

TEST(PlacementStoreTest, InMemoryWhenOpenedOnNothing) {
  auto store = PlacementStore::Open("");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put(kA, Entry(kA, 0.5)).ok());
  EXPECT_NE((*store)->Get(kA), nullptr);
}

}  // namespace
}  // namespace placer
