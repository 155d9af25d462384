// NewPolicy's checking decorator: policy.h's contract (every placement
// within the memory limits and pins) holds even for a policy whose own
// code forgets to check.
#include <memory>

#include "gtest/gtest.h"
#include "policies/policy.h"
#include "tests/policies/scenario.h"

namespace placer {
namespace {

// Everything on device 0, unchecked.
class CarelessPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions&) override {
    return Placement{std::vector<int>(in.view.forward().ops().size(), 0)};
  }
};

const PolicyRegistrar kCareless({
    "careless_for_test",
    "everything on device 0, unchecked",
    [] { return std::unique_ptr<PlacementPolicy>(new CarelessPolicy); },
    PolicyKind::kSearch,
});

TEST(RegistryTest, EveryPolicyMadeByNameIsChecked) {
  Scenario s("gnmt2", "p100x4");
  absl::StatusOr<std::unique_ptr<PlacementPolicy>> policy =
      NewPolicy("careless_for_test");
  ASSERT_TRUE(policy.ok()) << policy.status();
  PolicyOptions o;
  // Room for it all: the placement comes back.
  absl::StatusOr<Placement> fits = (*policy)->Place(s.input(), o);
  ASSERT_TRUE(fits.ok()) << fits.status();
  // Device 0 limited to 1 MB: the decorator's check refuses it, naming the
  // policy and the device.
  o.memory_limit_bytes = {1 << 20, int64_t{1} << 40, int64_t{1} << 40,
                          int64_t{1} << 40};
  absl::StatusOr<Placement> over = (*policy)->Place(s.input(), o);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted)
      << over.status();
  EXPECT_NE(over.status().message().find("careless_for_test: "),
            std::string::npos)
      << over.status();
  // Pinned ops too: op 0 pinned to device 1.
  o.memory_limit_bytes.clear();
  o.pinned[0] = 1;
  absl::StatusOr<Placement> unpinned = (*policy)->Place(s.input(), o);
  EXPECT_FALSE(unpinned.ok());
}

}  // namespace
}  // namespace placer
