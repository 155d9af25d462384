// The placement service on a network: TLS with certificates made at test
// time, bearer tokens and roles from an access file, mutual TLS, token
// rotation, plaintext refused off loopback, one client's searches never
// blocking another's, per-client call rates, and reported profiles taken
// only from clients allowed to report.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "placer/service/access_policy.h"
#include "placer/service/credentials.h"
#include "placer/service/server.h"
#include "placer/service/service.grpc.pb.h"
#include "tests/placer/grpc_health_subset.grpc.pb.h"
#include "tests/placer/test_certificates.h"

namespace placer {
namespace {

using test::PemFiles;
using test::TestCertificateAuthority;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

constexpr char kSmallGnmt[] = "gnmt2:batch=8,seq_len=4,hidden=64,vocab=100";

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(base != nullptr ? base : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

proto::PlaceRequest SmallRequest(const std::string& policy = "expert",
                                 int seed = 1) {
  proto::PlaceRequest r;
  r.mutable_model()->set_zoo(kSmallGnmt);
  r.mutable_cluster()->set_preset("p100x4");
  r.mutable_options()->set_policy(policy);
  r.mutable_options()->set_max_evaluations(60);
  r.mutable_options()->set_seed(seed);
  return r;
}

// A search that runs until its deadline.
proto::PlaceRequest LongRequest(int seed) {
  proto::PlaceRequest r = SmallRequest("local_search", seed);
  r.mutable_options()->set_max_evaluations(0);
  r.mutable_options()->set_budget_seconds(600);
  return r;
}

struct Token {
  std::string name;
  std::string secret;
};

class SecureServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ca_ = std::make_unique<TestCertificateAuthority>(dir_, "ca");
    server_files_ = ca_->IssueServer("server");
  }

  // Tokens for clients named `name` with `roles`, as `placer token` makes
  // them, written to the access file.
  Token AddClient(const std::string& name, const std::string& roles) {
    absl::StatusOr<std::string> secret = NewToken();
    EXPECT_TRUE(secret.ok());
    access_lines_ +=
        absl::StrCat(name, " ", roles, " ", TokenCredential(*secret), "\n");
    return Token{name, *secret};
  }
  std::string WriteAccessFile() {
    std::string path = dir_ + "/access";
    std::ofstream(path) << "# client roles credential\n" << access_lines_;
    return path;
  }

  void StartServer(ServerOptions options = {}) {
    options.address = "127.0.0.1:0";
    options.tls.certificate = server_files_.certificate;
    options.tls.private_key = server_files_.private_key;
    absl::StatusOr<std::unique_ptr<PlacementServer>> s =
        PlacementServer::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  // A TLS channel (as `remote --tls-ca` makes it), sending `token` if any
  // and presenting `client` if any.
  std::unique_ptr<proto::PlacementService::Stub> Stub(
      const std::string& token = "", const PemFiles& client = {}) {
    ClientTlsFiles tls;
    tls.ca = ca_->ca_file();
    tls.certificate = client.certificate;
    tls.private_key = client.private_key;
    grpc::ChannelArguments arguments;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        NewChannelCredentials(tls, token, &arguments);
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    return proto::PlacementService::NewStub(
        grpc::CreateCustomChannel(address_, *credentials, arguments));
  }

  static grpc::Status Place(proto::PlacementService::Stub& stub,
                            const proto::PlaceRequest& request,
                            proto::PlaceResponse* response,
                            double deadline = 60) {
    grpc::ClientContext context;
    context.set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(deadline * 1000)));
    return stub.Place(&context, request, response);
  }
  static grpc::Status Get(proto::PlacementService::Stub& stub,
                          const std::string& fingerprint) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    proto::GetPlacementRequest request;
    request.set_fingerprint(fingerprint);
    proto::PlaceResponse response;
    return stub.GetPlacement(&context, request, &response);
  }
  static grpc::Status Report(proto::PlacementService::Stub& stub,
                             const std::string& fingerprint,
                             const proto::Profile& profile = {}) {
    grpc::ClientContext context;
    proto::ReportMeasurementRequest request;
    request.set_fingerprint(fingerprint);
    request.add_step_seconds(0.25);
    *request.mutable_profile() = profile;
    proto::ReportMeasurementResponse response;
    return stub.ReportMeasurement(&context, request, &response);
  }
  static grpc::Status Train(proto::PlacementService::Stub& stub) {
    grpc::ClientContext context;
    proto::TrainRequest request;
    *request.mutable_place() = SmallRequest();
    auto reader = stub.Train(&context, request);
    proto::TrainUpdate update;
    while (reader->Read(&update)) {
    }
    return reader->Finish();
  }

  std::string dir_;
  std::unique_ptr<TestCertificateAuthority> ca_;
  PemFiles server_files_;
  std::string access_lines_;
  std::unique_ptr<PlacementServer> server_;
  std::string address_;
};

TEST_F(SecureServiceTest, TlsCallsSucceedAndPlaintextClientsAreRefused) {
  StartServer();
  EXPECT_TRUE(server_->tls());
  auto stub = Stub();
  proto::PlaceResponse placed;
  grpc::Status s = Place(*stub, SmallRequest(), &placed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(placed.fingerprint().size(), 64u);
  // Health behind the same credentials.
  grpc::ChannelArguments arguments;
  ClientTlsFiles tls{ca_->ca_file(), "", "", ""};
  auto channel = grpc::CreateCustomChannel(
      address_, *NewChannelCredentials(tls, "", &arguments), arguments);
  grpc::ClientContext health_context;
  grpc::health::v1::HealthCheckRequest health_request;
  grpc::health::v1::HealthCheckResponse health_response;
  EXPECT_TRUE(grpc::health::v1::Health::NewStub(channel)
                  ->Check(&health_context, health_request, &health_response)
                  .ok());

  // A plaintext client gets no answer from a TLS port, for any service.
  auto plain =
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto plain_stub = proto::PlacementService::NewStub(plain);
  grpc::Status refused = Get(*plain_stub, placed.fingerprint());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.error_message();
  grpc::ClientContext plain_health;
  plain_health.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::seconds(5));
  EXPECT_FALSE(grpc::health::v1::Health::NewStub(plain)
                   ->Check(&plain_health, health_request, &health_response)
                   .ok());
  // A client trusting another CA does not accept the server.
  TestCertificateAuthority other(dir_, "other");
  ClientTlsFiles wrong_ca{other.ca_file(), "", "", ""};
  auto wrong = proto::PlacementService::NewStub(grpc::CreateCustomChannel(
      address_, *NewChannelCredentials(wrong_ca, "", &arguments), arguments));
  EXPECT_EQ(Get(*wrong, placed.fingerprint()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecureServiceTest, TokensAuthenticateAndRolesAuthorize) {
  Token placer = AddClient("placer", "read,place,report");
  Token reader = AddClient("reader", "read");
  Token trainer = AddClient("trainer", "train");
  ServerOptions options;
  options.access_file = WriteAccessFile();
  StartServer(options);

  auto placer_stub = Stub(placer.secret);
  proto::PlaceResponse placed;
  grpc::Status s = Place(*placer_stub, SmallRequest(), &placed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(Report(*placer_stub, placed.fingerprint()).ok());

  // Missing and wrong tokens.
  auto anonymous = Stub();
  grpc::Status missing = Get(*anonymous, placed.fingerprint());
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("no credentials"));
  const std::string wrong_secret = reader.secret + "x";
  auto wrong = Stub(wrong_secret);
  grpc::Status bad = Get(*wrong, placed.fingerprint());
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(bad.error_message(), Not(HasSubstr(wrong_secret)));
  proto::PlaceResponse unused;
  EXPECT_EQ(Place(*wrong, SmallRequest(), &unused).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // A read-only token reads, and may do nothing else.
  auto reader_stub = Stub(reader.secret);
  EXPECT_TRUE(Get(*reader_stub, placed.fingerprint()).ok());
  grpc::Status place = Place(*reader_stub, SmallRequest(), &unused);
  EXPECT_EQ(place.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(place.error_message(), HasSubstr("needs role 'place'"));
  EXPECT_THAT(place.error_message(), HasSubstr("client 'reader' has read"));
  EXPECT_THAT(place.error_message(), Not(HasSubstr(reader.secret)));
  grpc::Status train = Train(*reader_stub);
  EXPECT_EQ(train.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(train.error_message(), HasSubstr("'train'"));
  grpc::Status report = Report(*reader_stub, placed.fingerprint());
  EXPECT_EQ(report.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(report.error_message(), HasSubstr("'report'"));
  // The trainer trains but cannot read.
  auto trainer_stub = Stub(trainer.secret);
  EXPECT_TRUE(Train(*trainer_stub).ok());
  EXPECT_EQ(Get(*trainer_stub, placed.fingerprint()).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // Calls on one connection each carry their own identity: a token sent
  // on one call does not carry over to the next.
  grpc::ChannelArguments arguments;
  ClientTlsFiles tls{ca_->ca_file(), "", "", ""};
  auto shared = proto::PlacementService::NewStub(grpc::CreateCustomChannel(
      address_, *NewChannelCredentials(tls, "", &arguments), arguments));
  const std::string* secrets[] = {&placer.secret, nullptr, &reader.secret};
  for (const std::string* secret : secrets) {
    grpc::ClientContext context;
    if (secret != nullptr) {
      context.set_credentials(grpc::AccessTokenCredentials(*secret));
    }
    proto::PlaceResponse r;
    grpc::Status status = shared->Place(&context, SmallRequest(), &r);
    if (secret == &placer.secret) {
      EXPECT_TRUE(status.ok()) << status.error_message();
    } else if (secret == nullptr) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    }
  }
}

TEST_F(SecureServiceTest, RotatedTokensTakeEffectOnReload) {
  Token old_token = AddClient("ci", "read");
  ServerOptions options;
  options.access_file = WriteAccessFile();
  StartServer(options);
  const std::string unknown(64, 'a');
  auto old_stub = Stub(old_token.secret);
  EXPECT_EQ(Get(*old_stub, unknown).error_code(), grpc::StatusCode::NOT_FOUND);

  access_lines_.clear();
  Token new_token = AddClient("ci", "read");
  WriteAccessFile();
  ASSERT_TRUE(server_->ReloadAccess().ok());
  EXPECT_EQ(Get(*old_stub, unknown).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto new_stub = Stub(new_token.secret);
  EXPECT_EQ(Get(*new_stub, unknown).error_code(), grpc::StatusCode::NOT_FOUND);

  // A broken file is refused and the one in force stays.
  std::ofstream(options.access_file) << "ci read sha256:not-hex\n";
  absl::Status reload = server_->ReloadAccess();
  EXPECT_FALSE(reload.ok());
  EXPECT_THAT(std::string(reload.message()), HasSubstr(":1: credential"));
  EXPECT_EQ(Get(*new_stub, unknown).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SecureServiceTest, MutualTlsIdentifiesClientsByCertificate) {
  PemFiles launcher = ca_->IssueClient("launcher");
  PemFiles stranger = ca_->IssueClient("stranger");
  access_lines_ = "launcher read,place cert:launcher\n";
  ServerOptions options;
  options.tls.client_ca = ca_->ca_file();
  options.access_file = WriteAccessFile();
  StartServer(options);

  auto with_certificate = Stub("", launcher);
  proto::PlaceResponse placed;
  grpc::Status s = Place(*with_certificate, SmallRequest(), &placed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Report(*with_certificate, placed.fingerprint()).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // No certificate: the handshake fails.
  auto without = Stub();
  EXPECT_EQ(Get(*without, placed.fingerprint()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A certificate of the right CA, for a name the access file lacks.
  auto unnamed = Stub("", stranger);
  grpc::Status who = Get(*unnamed, placed.fingerprint());
  EXPECT_EQ(who.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(who.error_message(), HasSubstr("'stranger'"));
  // A certificate from another CA.
  TestCertificateAuthority other(dir_, "other");
  auto foreign = Stub("", other.IssueClient("launcher"));
  EXPECT_EQ(Get(*foreign, placed.fingerprint()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST(ServerSecurityTest, PlaintextOffLoopbackIsRefusedUnlessAllowed) {
  ServerOptions options;
  options.address = "0.0.0.0:0";
  absl::StatusOr<std::unique_ptr<PlacementServer>> refused =
      PlacementServer::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("TLS"));
  options.allow_insecure_network = true;
  absl::StatusOr<std::unique_ptr<PlacementServer>> allowed =
      PlacementServer::Start(options);
  EXPECT_TRUE(allowed.ok()) << allowed.status();
  // An access file needs TLS, even on loopback.
  ServerOptions tokens;
  tokens.address = "127.0.0.1:0";
  tokens.access_file = "/nonexistent";
  absl::StatusOr<std::unique_ptr<PlacementServer>> no_tls =
      PlacementServer::Start(tokens);
  ASSERT_FALSE(no_tls.ok());
  EXPECT_THAT(std::string(no_tls.status().message()), HasSubstr("needs TLS"));
}

// Client alice holds her one search slot and queues another; bob's search
// starts at once on the other slot. Without the per-client limit alice's
// two searches would take both slots and bob's would wait out its deadline.
TEST_F(SecureServiceTest, OneClientAtItsLimitDoesNotBlockAnother) {
  Token alice = AddClient("alice", "read,place");
  Token bob = AddClient("bob", "read,place");
  ServerOptions options;
  options.access_file = WriteAccessFile();
  options.service.clients.max_searches = 2;
  options.service.clients.max_searches_per_client = 1;
  StartServer(options);
  auto alice_stub = Stub(alice.secret);
  auto bob_stub = Stub(bob.secret);

  grpc::Status first_status, second_status;
  proto::PlaceResponse first, second;
  std::thread first_search(
      [&] { first_status = Place(*alice_stub, LongRequest(1), &first, 6.0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::thread second_search([&] {
    second_status = Place(*alice_stub, LongRequest(2), &second, 3.0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto started = std::chrono::steady_clock::now();
  proto::PlaceResponse bobs;
  grpc::Status bob_status = Place(*bob_stub, SmallRequest("m_etf"), &bobs, 2.5);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  EXPECT_TRUE(bob_status.ok()) << bob_status.error_message();
  EXPECT_FALSE(bobs.cached());
  EXPECT_LT(seconds, 2.4);
  second_search.join();
  first_search.join();
  EXPECT_TRUE(first_status.ok()) << first_status.error_message();
  EXPECT_TRUE(first.stopped_at_deadline());
  // Alice's second search found no slot of hers before its deadline.
  EXPECT_EQ(second_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << second_status.error_message();
  EXPECT_THAT(second_status.error_message(), HasSubstr("client 'alice'"));
}

TEST_F(SecureServiceTest, CallRatesAreLimitedPerClient) {
  Token alice = AddClient("alice", "read");
  Token bob = AddClient("bob", "read");
  ServerOptions options;
  options.access_file = WriteAccessFile();
  options.service.clients.max_calls_per_second_per_client = 5;
  StartServer(options);
  auto alice_stub = Stub(alice.secret);
  const std::string unknown(64, 'a');
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    grpc::Status s = Get(*alice_stub, unknown);
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(s.error_message(), HasSubstr("client 'alice'"));
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    }
  }
  EXPECT_GE(refused, 10);
  EXPECT_LE(refused, 15);
  auto bob_stub = Stub(bob.secret);
  EXPECT_EQ(Get(*bob_stub, unknown).error_code(), grpc::StatusCode::NOT_FOUND);
}

// Profiles and step times are recorded with the client that reported them;
// use_reported_profiles takes only clients that (still) hold the report
// role, narrowed by profile_clients.
TEST_F(SecureServiceTest, ReportedProfilesComeFromClientsAllowedToReport) {
  Token alice = AddClient("alice", "read,place,report");
  Token bob = AddClient("bob", "read,place,report");
  ServerOptions options;
  options.access_file = WriteAccessFile();
  options.state_dir = dir_ + "/state";
  StartServer(options);
  auto alice_stub = Stub(alice.secret);
  auto bob_stub = Stub(bob.secret);
  proto::PlaceResponse placed;
  ASSERT_TRUE(Place(*alice_stub, SmallRequest(), &placed).ok());
  // Alice reports very slow links; bob a profile of a single op.
  proto::Profile slow_links;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      proto::LinkFit* link = slow_links.add_links();
      link->set_src(absl::StrCat("/gpu:", a));
      link->set_dst(absl::StrCat("/gpu:", b));
      link->set_latency_seconds(0.5);
      link->set_bandwidth(1e6);
    }
  }
  proto::Profile one_link;
  proto::LinkFit* link = one_link.add_links();
  link->set_src("/gpu:0");
  link->set_dst("/gpu:1");
  link->set_latency_seconds(1e-5);
  link->set_bandwidth(1e10);
  grpc::Status s = Report(*alice_stub, placed.fingerprint(), slow_links);
  ASSERT_TRUE(s.ok()) << s.error_message();
  s = Report(*bob_stub, placed.fingerprint(), one_link);
  ASSERT_TRUE(s.ok()) << s.error_message();

  auto measured = [&](std::vector<std::string> clients,
                      proto::PlaceResponse* r) {
    proto::PlaceRequest request = SmallRequest();
    request.mutable_options()->set_use_reported_profiles(true);
    for (const std::string& c : clients) {
      request.mutable_options()->add_profile_clients(c);
    }
    return Place(*bob_stub, request, r);
  };
  proto::PlaceResponse both, bob_only, alice_only;
  ASSERT_TRUE(measured({}, &both).ok());
  ASSERT_TRUE(measured({"bob"}, &bob_only).ok());
  ASSERT_TRUE(measured({"alice"}, &alice_only).ok());
  EXPECT_NE(both.fingerprint(), bob_only.fingerprint());
  EXPECT_GT(alice_only.report().step_seconds(), 0.5);
  EXPECT_LT(bob_only.report().step_seconds(), 0.5);
  proto::PlaceResponse nobody;
  grpc::Status none = measured({"carol"}, &nobody);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // Alice loses the report role: her profile no longer counts.
  access_lines_ = absl::StrCat(
      "alice read,place ", TokenCredential(alice.secret),
      "\nbob read,place,report ", TokenCredential(bob.secret), "\n");
  WriteAccessFile();
  ASSERT_TRUE(server_->ReloadAccess().ok());
  proto::PlaceResponse after;
  ASSERT_TRUE(measured({}, &after).ok());
  EXPECT_NE(after.fingerprint(), both.fingerprint());
  EXPECT_FALSE(after.cached());
  EXPECT_DOUBLE_EQ(after.report().step_seconds(),
                   bob_only.report().step_seconds());
  EXPECT_EQ(Report(*alice_stub, placed.fingerprint()).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // The stored placement names who reported each step.
  std::ifstream in(options.state_dir + "/placements/" + placed.fingerprint() +
                       ".placement.binpb",
                   std::ios::binary);
  proto::StoredPlacement stored;
  ASSERT_TRUE(stored.ParseFromIstream(&in));
  EXPECT_THAT(stored.measurement_clients(),
              ::testing::ElementsAre("alice", "bob"));
}

}  // namespace
}  // namespace placer
