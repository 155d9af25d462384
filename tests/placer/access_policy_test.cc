// The service's access file, roles, loopback addresses and per-client
// limits, without a server.
#include "placer/service/access_policy.h"

#include <chrono>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placer/service/authorization.h"
#include "placer/service/client_limits.h"
#include "placer/service/credentials.h"

namespace placer {
namespace {

using ::testing::HasSubstr;

TEST(AccessPolicyTest, ParsesClientsRolesAndCredentials) {
  absl::StatusOr<std::string> token = NewToken();
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->size(), 43u);
  absl::StatusOr<std::string> other = NewToken();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*token, *other);
  std::string text = "# client roles credential\n\n";
  text += "ci read " + TokenCredential(*token) + "   # the CI job\n";
  text += "ci report " + TokenCredential(*other) + "\n";
  text += "launcher\tread,place,train  cert:launcher.example.com\n";
  absl::StatusOr<AccessPolicy> policy = AccessPolicy::Parse(text, "access");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->clients(), 2);
  std::optional<Client> ci = policy->ByToken(*token);
  ASSERT_TRUE(ci.has_value());
  EXPECT_EQ(ci->name, "ci");
  // Both lines' roles, whichever token.
  EXPECT_EQ(ci->roles.ToString(), "read,report");
  EXPECT_EQ(policy->ByToken(*other)->name, "ci");
  EXPECT_FALSE(policy->ByToken(*token + "x").has_value());
  EXPECT_FALSE(policy->ByToken("").has_value());
  // The hash itself is not a token.
  EXPECT_FALSE(policy->ByToken(TokenCredential(*token).substr(7)).has_value());
  std::optional<Client> launcher =
      policy->ByCertificate({"other", "launcher.example.com"});
  ASSERT_TRUE(launcher.has_value());
  EXPECT_EQ(launcher->name, "launcher");
  EXPECT_TRUE(launcher->roles.Has(Role::kTrain));
  EXPECT_FALSE(launcher->roles.Has(Role::kReport));
  EXPECT_FALSE(policy->ByCertificate({"ci"}).has_value());
  EXPECT_EQ(policy->RolesOf("nobody").ToString(), "none");
  EXPECT_EQ(Roles::All().ToString(), "read,place,train,report");
}

TEST(AccessPolicyTest, ErrorsNameTheLineAndFieldAndNeverEchoATokens) {
  const std::string hash(64, 'a');
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {"ci read\n", "access:1: expected 3 fields"},
      {"\nci admin sha256:" + hash + "\n", "access:2: unknown role 'admin'"},
      {"c!i read sha256:" + hash, "access:1: client 'c!i'"},
      {"ci read sha256:ABC", "access:1: credential: sha256: must be followed"},
      {"ci read my-secret-token", "access:1: credential: expected"},
      {"ci read cert:", "access:1: credential: cert: needs a name"},
      {"# nothing\n", "access: no clients"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<AccessPolicy> p = AccessPolicy::Parse(c.text, "access");
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(c.error));
    EXPECT_THAT(std::string(p.status().message()),
                ::testing::Not(HasSubstr("my-secret-token")));
  }
  EXPECT_THAT(
      std::string(AccessPolicy::Load("/nonexistent/access").status().message()),
      HasSubstr("/nonexistent/access: cannot read"));
}

TEST(AccessPolicyTest, LoopbackAddresses) {
  for (const char* local :
       {"127.0.0.1:50051", "127.1.2.3:0", "localhost:50051", "[::1]:50051",
        "ipv4:127.0.0.1:1", "unix:/tmp/placer.sock"}) {
    EXPECT_TRUE(IsLoopbackAddress(local)) << local;
  }
  for (const char* open :
       {"0.0.0.0:50051", "[::]:50051", "10.0.0.5:50051", "example.com:50051",
        "127.0.0:1", "127.0.0.1.5:1", "128.0.0.1:1", "127.a.0.1:1", ":50051"}) {
    EXPECT_FALSE(IsLoopbackAddress(open)) << open;
  }
  EXPECT_EQ(PeerHost("ipv4:127.0.0.1:54321"), "ipv4:127.0.0.1");
  EXPECT_EQ(PeerHost("ipv6:[::1]:54321"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("unix:/tmp/s"), "unix:/tmp/s");
}

TEST(ClientLimitsTest, SlotsAreSharedAndPlacingIsBoundedPerClient) {
  ClientLimitOptions options;
  options.max_searches = 2;
  options.max_searches_per_client = 1;
  options.max_placing = 3;
  options.max_placing_per_client = 2;
  ClientLimits limits(options);
  auto never = [] { return false; };
  auto soon = [] {
    return std::chrono::system_clock::now() + std::chrono::milliseconds(120);
  };
  ASSERT_TRUE(limits.AcquireSearch("a", soon(), never));
  EXPECT_FALSE(limits.AcquireSearch("a", soon(), never));  // a's share
  ASSERT_TRUE(limits.AcquireSearch("b", soon(), never));
  EXPECT_FALSE(limits.AcquireSearch("c", soon(), never));  // all taken
  // A slot freed while c waits goes to c, not to a second search of a.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    limits.ReleaseSearch("b");
  });
  EXPECT_TRUE(limits.AcquireSearch(
      "c", std::chrono::system_clock::now() + std::chrono::seconds(5), never));
  release.join();
  limits.ReleaseSearch("a");
  limits.ReleaseSearch("c");

  EXPECT_TRUE(limits.StartPlacing("a").ok());
  EXPECT_TRUE(limits.StartPlacing("a").ok());
  absl::Status third = limits.StartPlacing("a");
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.message()), HasSubstr("client 'a'"));
  EXPECT_TRUE(limits.StartPlacing("b").ok());
  absl::Status full = limits.StartPlacing("c");
  EXPECT_THAT(std::string(full.message()), HasSubstr("server busy: 3"));
  limits.EndPlacing("a");
  EXPECT_TRUE(limits.StartPlacing("c").ok());
}

TEST(ClientLimitsTest, CallRateIsABucketPerClient) {
  ClientLimitOptions options;
  options.max_calls_per_second_per_client = 4;
  ClientLimits limits(options);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(limits.AdmitCall("a").ok()) << i;
  EXPECT_EQ(limits.AdmitCall("a").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(limits.AdmitCall("b").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(limits.AdmitCall("a").ok());  // refilled at 4 per second
  ClientLimits unlimited{ClientLimitOptions{}};
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(unlimited.AdmitCall("a").ok());
}

}  // namespace
}  // namespace placer
