// The service against bad and hostile requests over loopback gRPC: zoo
// sizes that would exhaust the server refused before anything is built,
// and malformed requests each answered with a clear status while the
// server keeps serving. The rest of the service: service_test.cc.
#include "tests/placer/service_fixture.h"

namespace placer {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// The denial of service found in issue 21: zoo sizes that would make the
// server allocate until it dies are refused from an estimate before
// anything is built, and the next request is served.
TEST_F(ServiceTest, HugeZooSizesAreRefusedBeforeBuildingAndTheServerGoesOn) {
  StartServer("");
  for (const char* zoo : {"gnmt8:layers=100000", "gnmt8:seq_len=1000000",
                          "transformer_big:layers=10000000"}) {
    SCOPED_TRACE(zoo);
    proto::PlaceRequest request = SmallRequest();
    request.mutable_model()->set_zoo(zoo);
    proto::PlaceResponse response;
    grpc::Status s = Place(request, &response, /*deadline=*/5);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("over the limit of 2000000"));
    proto::PlaceResponse good;
    grpc::Status ok = Place(SmallRequest("expert"), &good);
    EXPECT_TRUE(ok.ok()) << ok.error_message();
  }
}

TEST_F(ServiceTest, MalformedRequestsGetClearErrorsAndTheServerKeepsServing) {
  ServerOptions options;
  options.max_request_bytes = 1 << 20;
  options.service.limits.max_ops = 5000;
  StartServer("", options);
  struct Case {
    std::string what;
    proto::PlaceRequest request;
    grpc::StatusCode code;
    std::string message;
    double deadline = 30;
  };
  std::vector<Case> cases;
  {
    Case c{"garbage bytes", SmallRequest(), grpc::StatusCode::INVALID_ARGUMENT,
           "not an ONNX model"};
    c.request.mutable_model()->set_onnx(std::string(3000, '\x9c'));
    cases.push_back(c);
  }
  {
    zoo::ZooParams p;
    p.weights = false;
    absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel("diamond", p);
    ASSERT_TRUE(m.ok());
    std::string bytes = m->SerializeAsString();
    Case c{"a truncated model", SmallRequest(),
           grpc::StatusCode::INVALID_ARGUMENT, "not an ONNX model"};
    c.request.mutable_model()->set_onnx(bytes.substr(0, bytes.size() / 2));
    cases.push_back(c);
  }
  {
    // A symbolic batch and no model.batch: the fix is said in the
    // request's fields, not the CLI's flags.
    zoo::ZooParams p;
    p.weights = false;
    absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel("diamond", p);
    ASSERT_TRUE(m.ok());
    m->mutable_graph()
        ->mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(0)
        ->set_dim_param("batch");
    Case c{"an unresolved batch", SmallRequest(),
           grpc::StatusCode::INVALID_ARGUMENT,
           "fix it with model.batch N, or model.input_shapes x=D0xD1x..."};
    c.request.mutable_model()->set_onnx(m->SerializeAsString());
    cases.push_back(c);
  }
  {
    Case c{"absurd dimensions", SmallRequest(),
           grpc::StatusCode::INVALID_ARGUMENT, "absurd"};
    c.request.mutable_model()->set_zoo("gnmt2:batch=100000000000000000");
    cases.push_back(c);
  }
  {
    Case c{"an unknown policy", SmallRequest("sorcery"),
           grpc::StatusCode::INVALID_ARGUMENT, "unknown policy 'sorcery'"};
    cases.push_back(c);
  }
  {
    Case c{"an unknown cluster", SmallRequest(),
           grpc::StatusCode::INVALID_ARGUMENT, "p100x9"};
    c.request.mutable_cluster()->set_preset("p100x9");
    cases.push_back(c);
  }
  {
    Case c{"a pin to a missing device", SmallRequest(),
           grpc::StatusCode::INVALID_ARGUMENT, "options.pinned['nope']"};
    (*c.request.mutable_options()->mutable_pinned())["nope"] = "/gpu:0";
    cases.push_back(c);
  }
  {
    Case c{"no model", SmallRequest(), grpc::StatusCode::INVALID_ARGUMENT,
           "model: set onnx"};
    c.request.mutable_model()->clear_zoo();
    cases.push_back(c);
  }
  {
    Case c{"a request over the size limit", SmallRequest(),
           grpc::StatusCode::RESOURCE_EXHAUSTED, ""};
    c.request.mutable_model()->set_onnx(std::string(2 << 20, 'x'));
    cases.push_back(c);
  }
  {
    Case c{"a model over the op limit", SmallRequest(),
           grpc::StatusCode::RESOURCE_EXHAUSTED, "over the limit of 5000"};
    c.request.mutable_model()->set_zoo("gnmt8:seq_len=50,hidden=64,vocab=100");
    cases.push_back(c);
  }
  {
    Case c{"a memory limit no placement meets", SmallRequest("m_etf"),
           grpc::StatusCode::RESOURCE_EXHAUSTED, ""};
    for (const char* d : {"/gpu:0", "/gpu:1", "/gpu:2", "/gpu:3"}) {
      (*c.request.mutable_options()->mutable_memory_limit_bytes())[d] = 1000;
    }
    cases.push_back(c);
  }
  {
    Case c{"a 1 ms deadline", SmallRequest(),
           grpc::StatusCode::DEADLINE_EXCEEDED, ""};
    c.request.mutable_options()->set_seed(99);  // not cached
    c.deadline = 0.001;
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    proto::PlaceResponse response;
    grpc::Status s = Place(c.request, &response, c.deadline);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.message));
    // And the server still serves a good request.
    proto::PlaceResponse good;
    grpc::Status ok = Place(SmallRequest("expert"), &good);
    EXPECT_TRUE(ok.ok()) << ok.error_message();
  }
  proto::PlaceResponse response;
  EXPECT_EQ(Get("abc", &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Get(std::string(64, '0'), &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext context;
  proto::ReportMeasurementRequest bad;
  bad.set_fingerprint(std::string(64, '0'));
  bad.add_step_seconds(-1);
  proto::ReportMeasurementResponse reported;
  grpc::Status s = stub_->ReportMeasurement(&context, bad, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("step_seconds[0]"));
}

}  // namespace
}  // namespace placer
