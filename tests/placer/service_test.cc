// The placement service end to end over loopback gRPC: placing, the cache
// surviving a restart, measurements, streamed training, deadlines and the
// standard health and reflection services. Bad and hostile requests:
// service_errors_test.cc.
#include "tests/placer/service_fixture.h"

namespace placer {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST_F(ServiceTest, PlacesOverRpcAndReadsItBackFromTheCacheAfterARestart) {
  const std::string dir = TempDir("service_restart");
  StartServer(dir);
  proto::PlaceResponse placed;
  grpc::Status s = Place(SmallRequest(), &placed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(placed.cached());
  EXPECT_EQ(placed.fingerprint().size(), 64u);
  EXPECT_GT(placed.report().step_seconds(), 0);
  EXPECT_GE(placed.report().step_seconds(),
            placed.report().lower_bound_seconds());
  EXPECT_EQ(placed.report().devices_size(), 4);
  EXPECT_EQ(placed.placement().devices_size(), 4);
  EXPECT_EQ(placed.placement().policy(), "best");
  // Every forward op of the model is assigned.
  zoo::ZooParams p;
  p.weights = false;
  p.batch_size = 8;
  p.seq_len = 4;
  p.hidden = 64;
  p.vocab = 100;
  absl::StatusOr<onnx::ModelProto> model = zoo::BuildZooModel("gnmt2", p);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(placed.placement().assignment_size(), model->graph().node_size());

  // Same request again: from the cache, same answer.
  proto::PlaceResponse again;
  ASSERT_TRUE(Place(SmallRequest(), &again).ok());
  EXPECT_TRUE(again.cached());
  EXPECT_EQ(again.fingerprint(), placed.fingerprint());

  // A measurement for it.
  {
    grpc::ClientContext context;
    proto::ReportMeasurementRequest report;
    report.set_fingerprint(placed.fingerprint());
    report.add_step_seconds(0.3);
    report.add_step_seconds(0.1);
    report.add_step_seconds(0.2);
    report.set_source("test");
    proto::ReportMeasurementResponse response;
    grpc::Status r = stub_->ReportMeasurement(&context, report, &response);
    ASSERT_TRUE(r.ok()) << r.error_message();
    EXPECT_EQ(response.measured().count(), 3);
    EXPECT_DOUBLE_EQ(response.measured().median_step_seconds(), 0.2);
  }

  StopServer();
  StartServer(dir);
  EXPECT_EQ(server_->cached_placements(), 1u);
  EXPECT_TRUE(server_->warnings().empty());
  proto::PlaceResponse read;
  s = Get(placed.fingerprint(), &read);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(read.cached());
  EXPECT_EQ(read.placement().assignment().size(),
            placed.placement().assignment().size());
  for (const auto& [key, device] : placed.placement().assignment()) {
    EXPECT_EQ(read.placement().assignment().at(key), device) << key;
  }
  EXPECT_DOUBLE_EQ(read.report().step_seconds(),
                   placed.report().step_seconds());
  EXPECT_EQ(read.measured().count(), 3);
  EXPECT_DOUBLE_EQ(read.measured().median_step_seconds(), 0.2);
}

// The step a page shows, as plan_report.cc prints it.
std::string PageStep(const std::string& html) {
  const std::string open = "<td id=\"step_seconds\">";
  size_t at = html.find(open);
  if (at == std::string::npos) return "";
  at += open.size();
  return html.substr(at, html.find('<', at) - at);
}

// GetReport draws a stored placement as it was placed (the page's step is
// the Place answer's), after a restart too; an ONNX placement needs its
// model sent again, and only that model is taken.
TEST_F(ServiceTest, TheReportOfAStoredPlacementIsItsSimulation) {
  const std::string dir = TempDir("service_report");
  StartServer(dir);
  proto::PlaceResponse placed;
  ASSERT_TRUE(Place(SmallRequest("heft"), &placed).ok());
  StopServer();
  StartServer(dir);
  proto::GetReportResponse page;
  grpc::Status s = Report(placed.fingerprint(), nullptr, &page);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(PageStep(page.html()),
            absl::StrFormat("%.6f s", placed.report().step_seconds()));
  EXPECT_THAT(page.html(), HasSubstr("on p100x4 (heft)"));
  EXPECT_THAT(page.html(), HasSubstr("/gpu:3"));
  // The zoo spec may be sent too; a different batch is another model.
  proto::ModelSpec other = SmallRequest().model();
  ASSERT_TRUE(Report(placed.fingerprint(), &other, &page).ok());
  other.set_batch(16);
  s = Report(placed.fingerprint(), &other, &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("not the model fingerprint"));

  // An ONNX model: the server kept the placement, not the bytes.
  zoo::ZooParams p;
  p.hidden = 512;
  absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel("diamond", p);
  ASSERT_TRUE(m.ok());
  proto::PlaceRequest request = SmallRequest("m_etf");
  request.mutable_model()->set_onnx(m->SerializeAsString());
  request.mutable_model()->set_name("diamond.onnx");
  request.mutable_options()->mutable_training()->set_optimizer("adam");
  proto::PlaceResponse onnx_placed;
  ASSERT_TRUE(Place(request, &onnx_placed).ok());
  s = Report(onnx_placed.fingerprint(), nullptr, &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("send it again"));
  s = Report(onnx_placed.fingerprint(), &request.model(), &page);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(PageStep(page.html()),
            absl::StrFormat("%.6f s", onnx_placed.report().step_seconds()));
  EXPECT_THAT(page.html(), HasSubstr("diamond.onnx on p100x4 (m_etf)"));
  p.hidden = 256;
  absl::StatusOr<onnx::ModelProto> smaller = zoo::BuildZooModel("diamond", p);
  ASSERT_TRUE(smaller.ok());
  proto::ModelSpec wrong = request.model();
  wrong.set_onnx(smaller->SerializeAsString());
  s = Report(onnx_placed.fingerprint(), &wrong, &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  s = Report(std::string(64, 'a'), nullptr, &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  s = Report("not-a-fingerprint", nullptr, &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, FingerprintsFollowWhatChangesThePlacement) {
  StartServer("");
  proto::PlaceResponse a, b, c, d;
  ASSERT_TRUE(Place(SmallRequest("m_etf"), &a).ok());
  proto::PlaceRequest seed = SmallRequest("m_etf");
  seed.mutable_options()->set_seed(2);
  ASSERT_TRUE(Place(seed, &b).ok());
  EXPECT_NE(a.fingerprint(), b.fingerprint());
  // The preset and the same cluster spelled out are one cluster.
  proto::PlaceRequest named = SmallRequest("m_etf");
  named.mutable_model()->set_name("my gnmt");
  ASSERT_TRUE(Place(named, &c).ok());
  EXPECT_EQ(c.fingerprint(), a.fingerprint());
  EXPECT_TRUE(c.cached());
  proto::PlaceRequest tight = SmallRequest("m_etf");
  (*tight.mutable_options()->mutable_memory_limit_bytes())["/gpu:0"] = 1 << 30;
  ASSERT_TRUE(Place(tight, &d).ok());
  EXPECT_NE(d.fingerprint(), a.fingerprint());
}

// model.fuse_attention: the graph placed has one FlashAttention op per
// layer (its key in the placement), and the fingerprint says so.
TEST_F(ServiceTest, FusedAttentionIsPartOfTheModel) {
  StartServer("");
  proto::PlaceRequest plain = SmallRequest("m_etf");
  plain.mutable_model()->set_zoo("gpt:layers=2,hidden=48,seq_len=16,vocab=50");
  proto::PlaceRequest fused = plain;
  fused.mutable_model()->set_fuse_attention(true);
  proto::PlaceResponse a, b;
  grpc::Status s = Place(plain, &a);
  ASSERT_TRUE(s.ok()) << s.error_message();
  s = Place(fused, &b);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(a.fingerprint(), b.fingerprint());
  int fused_ops = 0, softmax = 0;
  for (const auto& [key, device] : b.placement().assignment()) {
    fused_ops += absl::EndsWith(key, "/FusedAttention");
  }
  for (const auto& [key, device] : a.placement().assignment()) {
    softmax += absl::StrContains(key, "Softmax");
  }
  EXPECT_EQ(fused_ops, 2);
  EXPECT_EQ(softmax, 2);
}

TEST_F(ServiceTest, TrainStreamsProgressThenTheResult) {
  StartServer("");
  grpc::ClientContext context;
  proto::TrainRequest request;
  *request.mutable_place() = SmallRequest("local_search");
  request.mutable_place()->mutable_options()->set_max_evaluations(200);
  request.set_progress_interval_seconds(1e-9);  // every evaluation
  std::unique_ptr<grpc::ClientReader<proto::TrainUpdate>> reader =
      stub_->Train(&context, request);
  proto::TrainUpdate update;
  int progress = 0;
  double last_best = 0;
  std::optional<proto::PlaceResponse> result;
  while (reader->Read(&update)) {
    if (update.has_result()) {
      result = update.result();
      continue;
    }
    ++progress;
    ASSERT_FALSE(result) << "progress after the result";
    if (last_best > 0) {
      EXPECT_LE(update.progress().best_step_seconds(), last_best);
    }
    last_best = update.progress().best_step_seconds();
  }
  grpc::Status s = reader->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(result.has_value());
  EXPECT_GT(progress, 10);
  EXPECT_NEAR(result->report().step_seconds(), last_best, 1e-12);

  // Again: the cached answer, as the only message.
  grpc::ClientContext again_context;
  auto again = stub_->Train(&again_context, request);
  std::vector<proto::TrainUpdate> updates;
  while (again->Read(&update)) updates.push_back(update);
  ASSERT_TRUE(again->Finish().ok());
  ASSERT_EQ(updates.size(), 1u);
  ASSERT_TRUE(updates[0].has_result());
  EXPECT_TRUE(updates[0].result().cached());
  EXPECT_EQ(updates[0].result().fingerprint(), result->fingerprint());
  EXPECT_EQ(updates[0].result().report().step_seconds(),
            result->report().step_seconds());
}

// A search with a long budget and a short deadline answers in time with the
// best placement so far, which is not cached.
TEST_F(ServiceTest, DeadlineStopsTheSearchWithTheBestSoFar) {
  StartServer("");
  proto::PlaceRequest request = SmallRequest("local_search");
  request.mutable_options()->set_max_evaluations(0);
  request.mutable_options()->set_budget_seconds(600);
  proto::PlaceResponse response;
  grpc::Status s = Place(request, &response, /*deadline=*/1.0);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(response.stopped_at_deadline());
  EXPECT_GT(response.report().step_seconds(), 0);
  EXPECT_EQ(response.placement().assignment_size() > 0, true);
  // Not stored, so no fingerprint that get would answer NOT_FOUND for.
  EXPECT_TRUE(response.fingerprint().empty());
}

TEST_F(ServiceTest, ASecondServerOnTheSamePortIsRefused) {
  StartServer("");
  ServerOptions options;
  options.address = absl::StrCat("127.0.0.1:", server_->port());
  absl::StatusOr<std::unique_ptr<PlacementServer>> second =
      PlacementServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("cannot listen"));
  proto::PlaceResponse response;  // the first still serves
  EXPECT_TRUE(Place(SmallRequest("expert"), &response).ok());
}

// A file stripped of its weights (dims, no bytes), as the client sends
// models by default, is placed.
TEST_F(ServiceTest, PlacesAWeightStrippedModel) {
  StartServer("");
  zoo::ZooParams p;
  p.hidden = 512;
  absl::StatusOr<onnx::ModelProto> m = zoo::BuildZooModel("diamond", p);
  ASSERT_TRUE(m.ok());
  for (onnx::TensorProto& t : *m->mutable_graph()->mutable_initializer()) {
    t.clear_raw_data();
    t.clear_float_data();
  }
  proto::PlaceRequest request = SmallRequest("expert");
  request.mutable_model()->set_onnx(m->SerializeAsString());
  proto::PlaceResponse response;
  grpc::Status s = Place(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(response.report().step_seconds(), 0);
}

// With one search slot busy, a second uncached request waits for it no
// longer than its deadline; beyond max_placing the server says it is busy;
// cached answers are served meanwhile.
TEST_F(ServiceTest, BoundedSearchesQueueThenRefuse) {
  ServerOptions options;
  options.service.clients.max_searches = 1;
  options.service.clients.max_placing = 2;
  StartServer("", options);
  proto::PlaceResponse cached;
  ASSERT_TRUE(Place(SmallRequest("expert"), &cached).ok());
  auto long_request = [](int seed) {
    proto::PlaceRequest r = SmallRequest("local_search");
    r.mutable_options()->set_max_evaluations(0);
    r.mutable_options()->set_budget_seconds(600);
    r.mutable_options()->set_seed(seed);
    return r;
  };
  grpc::Status first_status;
  std::thread first([&] {
    proto::PlaceResponse r;
    first_status = Place(long_request(1), &r, /*deadline=*/4.0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  grpc::Status waiting_status;
  std::thread waiting([&] {
    proto::PlaceResponse r;
    waiting_status = Place(long_request(2), &r, /*deadline=*/1.0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  proto::PlaceResponse r;
  grpc::Status busy = Place(long_request(3), &r, /*deadline=*/1.0);
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << busy.error_message();
  EXPECT_THAT(busy.error_message(), HasSubstr("server busy"));
  proto::PlaceResponse again;
  grpc::Status hit = Place(SmallRequest("expert"), &again, /*deadline=*/1.0);
  EXPECT_TRUE(hit.ok() && again.cached()) << hit.error_message();
  waiting.join();
  first.join();
  EXPECT_EQ(waiting_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << waiting_status.error_message();
  EXPECT_TRUE(first_status.ok()) << first_status.error_message();
}

TEST_F(ServiceTest, HealthAndReflectionServices) {
  StartServer("");
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const std::string service : {"", "placer.proto.PlacementService"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = health->Check(&context, request, &response);
    ASSERT_TRUE(s.ok()) << service << ": " << s.error_message();
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING);
  }
  // What a generated stub of grpc.reflection.v1alpha.ServerReflection does.
  grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING, channel_);
  grpc::ClientContext context;
  using Request = placer::test::reflection::ServerReflectionRequest;
  using Response = placer::test::reflection::ServerReflectionResponse;
  std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> stream(
      grpc::internal::ClientReaderWriterFactory<Request, Response>::Create(
          channel_.get(), method, &context));
  Request request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  Response response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> names;
  for (const auto& s : response.list_services_response().service()) {
    names.push_back(s.name());
  }
  EXPECT_THAT(names, ::testing::Contains("placer.proto.PlacementService"));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServiceTest, ReportedProfilesChangeTheCostModelOnRequest) {
  StartServer("");
  proto::PlaceRequest request = SmallRequest("expert");
  proto::PlaceResponse placed;
  ASSERT_TRUE(Place(request, &placed).ok());
  request.mutable_options()->set_use_reported_profiles(true);
  proto::PlaceResponse refused;
  EXPECT_EQ(Place(request, &refused).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // A profile where every link between GPUs is very slow.
  grpc::ClientContext context;
  proto::ReportMeasurementRequest report;
  report.set_fingerprint(placed.fingerprint());
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      proto::LinkFit* link = report.mutable_profile()->add_links();
      link->set_src(absl::StrCat("/gpu:", a));
      link->set_dst(absl::StrCat("/gpu:", b));
      link->set_latency_seconds(0.5);
      link->set_bandwidth(1e6);
    }
  }
  proto::ReportMeasurementResponse response;
  grpc::Status s = stub_->ReportMeasurement(&context, report, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  proto::PlaceResponse measured;
  s = Place(request, &measured);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(measured.fingerprint(), placed.fingerprint());
  // expert's placement copies between GPUs, now half a second a copy.
  ASSERT_GT(placed.report().bytes_moved(), 0);
  EXPECT_GT(measured.report().step_seconds(),
            placed.report().step_seconds() + 0.5);
}

// options.training and SimulateRequest.training: AdamW's state in the
// peak, bf16 at the tensor-core rate; empty fields are momentum and fp32
// (one fingerprint either way); unknown names name the field.
TEST_F(ServiceTest, TheStepsTrainingOptionsChangeThePlan) {
  StartServer("");
  proto::PlaceRequest request = SmallRequest("single");
  request.mutable_cluster()->set_preset("h100x8");
  proto::PlaceResponse plain, spelled, adam, bf16;
  ASSERT_TRUE(Place(request, &plain).ok());
  proto::PlaceRequest r = request;
  r.mutable_options()->mutable_training()->set_optimizer("momentum");
  r.mutable_options()->mutable_training()->set_precision("fp32");
  ASSERT_TRUE(Place(r, &spelled).ok());
  EXPECT_EQ(spelled.fingerprint(), plain.fingerprint());
  r.mutable_options()->mutable_training()->set_optimizer("adam");
  ASSERT_TRUE(Place(r, &adam).ok());
  EXPECT_NE(adam.fingerprint(), plain.fingerprint());
  EXPECT_GT(adam.report().devices(0).peak_memory_bytes(),
            plain.report().devices(0).peak_memory_bytes());
  r = request;
  r.mutable_options()->mutable_training()->set_precision("bf16");
  ASSERT_TRUE(Place(r, &bf16).ok());
  EXPECT_LT(bf16.report().step_seconds(), plain.report().step_seconds());
  // Simulate the same placement both ways.
  proto::SimulateRequest simulate;
  *simulate.mutable_model() = request.model();
  *simulate.mutable_cluster() = request.cluster();
  *simulate.mutable_placement() = plain.placement();
  proto::SimulateResponse fp32_step, bf16_step;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Simulate(&context, simulate, &fp32_step).ok());
  }
  simulate.mutable_training()->set_precision("bf16");
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Simulate(&context, simulate, &bf16_step).ok());
  }
  EXPECT_DOUBLE_EQ(bf16_step.report().step_seconds(),
                   bf16.report().step_seconds());
  EXPECT_LT(bf16_step.report().step_seconds(),
            fp32_step.report().step_seconds());
  r = request;
  r.mutable_options()->mutable_training()->set_optimizer("lion");
  proto::PlaceResponse refused;
  grpc::Status s = Place(r, &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("options.training.optimizer"),
            std::string::npos)
      << s.error_message();
  simulate.mutable_training()->set_precision("fp4");
  grpc::ClientContext context;
  s = stub_->Simulate(&context, simulate, &bf16_step);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("training.precision"), std::string::npos)
      << s.error_message();
}

}  // namespace
}  // namespace placer
