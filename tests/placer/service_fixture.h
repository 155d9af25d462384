// What the service's tests share: a server started on a loopback port
// (ServiceTest's StartServer) with a client stub, and requests for a small
// GNMT-2 on four P100s.
#ifndef PLACER_TESTS_PLACER_SERVICE_FIXTURE_H_
#define PLACER_TESTS_PLACER_SERVICE_FIXTURE_H_

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/impl/codegen/client_context.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "grpcpp/impl/codegen/sync_stream.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "placer/service/server.h"
#include "placer/service/service.grpc.pb.h"
#include "tests/placer/grpc_health_subset.grpc.pb.h"
#include "tests/placer/grpc_reflection_subset.pb.h"
#include "zoo/zoo.h"

namespace placer {

namespace fs = std::filesystem;

inline constexpr char kSmallGnmt[] =
    "gnmt2:batch=8,seq_len=4,hidden=64,vocab=100";

inline std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(base != nullptr ? base : "/tmp") / name;
  fs::remove_all(dir);
  return dir.string();
}

class ServiceTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& state_dir, ServerOptions options = {}) {
    options.address = "127.0.0.1:0";
    options.state_dir = state_dir;
    absl::StatusOr<std::unique_ptr<PlacementServer>> s =
        PlacementServer::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = proto::PlacementService::NewStub(channel_);
  }
  void StopServer() {
    stub_.reset();
    channel_.reset();
    server_.reset();
  }

  static proto::PlaceRequest SmallRequest(const std::string& policy = "best") {
    proto::PlaceRequest r;
    r.mutable_model()->set_zoo(kSmallGnmt);
    r.mutable_cluster()->set_preset("p100x4");
    r.mutable_options()->set_policy(policy);
    r.mutable_options()->set_max_evaluations(60);
    r.mutable_options()->set_budget_seconds(60);
    return r;
  }

  grpc::Status Place(const proto::PlaceRequest& request,
                     proto::PlaceResponse* response, double deadline = 60) {
    grpc::ClientContext context;
    context.set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::microseconds(static_cast<int64_t>(deadline * 1e6)));
    return stub_->Place(&context, request, response);
  }

  grpc::Status Report(const std::string& fingerprint,
                      const proto::ModelSpec* model,
                      proto::GetReportResponse* response) {
    grpc::ClientContext context;
    proto::GetReportRequest request;
    request.set_fingerprint(fingerprint);
    if (model != nullptr) *request.mutable_model() = *model;
    return stub_->GetReport(&context, request, response);
  }

  grpc::Status Get(const std::string& fingerprint,
                   proto::PlaceResponse* response) {
    grpc::ClientContext context;
    proto::GetPlacementRequest request;
    request.set_fingerprint(fingerprint);
    return stub_->GetPlacement(&context, request, response);
  }

  std::unique_ptr<PlacementServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::PlacementService::Stub> stub_;
};

}  // namespace placer

#endif  // PLACER_TESTS_PLACER_SERVICE_FIXTURE_H_
