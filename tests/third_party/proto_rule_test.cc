#include <string>

#include "gtest/gtest.h"
#include "tests/third_party/echo.grpc.pb.h"
#include "tests/third_party/echo.pb.h"

namespace {

TEST(ProtoRuleTest, MessageRoundTrips) {
  placer::testing::EchoRequest request;
  request.set_text("hello");
  std::string wire;
  ASSERT_TRUE(request.SerializeToString(&wire));
  placer::testing::EchoRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.text(), "hello");
}

TEST(ProtoRuleTest, ServiceStubIsGenerated) {
  EXPECT_STREQ(placer::testing::Echo::service_full_name(),
               "placer.testing.Echo");
}

}  // namespace
