// placer remote place|simulate|train|get|report ... --server HOST:PORT
#include <fstream>
#include <iostream>
#include <optional>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_helpers.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "graph/constant_folding.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "onnx/onnx_pb.h"
#include "placer/cli/cli_common.h"
#include "placer/json_report.h"
#include "placer/service/credentials.h"
#include "placer/service/service.grpc.pb.h"
#include "profiles/cluster.h"
#include "profiles/cluster.pb.h"
#include "profiles/proto_io.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "remote: the placer serve address.");
ABSL_FLAG(double, deadline, 0,
          "remote: seconds the server has to answer (0: no deadline); a "
          "search that reaches it answers with the best placement so far.");
ABSL_FLAG(std::vector<std::string>, step_seconds, {},
          "remote report: measured step times, comma-separated.");
ABSL_FLAG(bool, send_weights, false,
          "remote: send an ONNX file's weight bytes too (default: shapes "
          "only, which is all placement needs).");
ABSL_FLAG(bool, use_reported_profiles, false,
          "remote: simulate with the profiles reported to the server for "
          "the cluster (by clients the server lets report).");
ABSL_FLAG(std::vector<std::string>, profile_clients, {},
          "remote: with --use-reported-profiles, only the profiles these "
          "clients reported (comma-separated).");
ABSL_FLAG(std::string, tls_server_name, "",
          "remote: the name the server's certificate carries, when it is "
          "not the host in --server.");
ABSL_FLAG(std::string, token_file, "",
          "remote: a file holding the bearer token to send (needs --tls-ca); "
          "default: the PLACER_TOKEN environment variable, if set.");

ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);

namespace placer {
namespace {

// The command's flags, read once. Paths are the user's (UserPath) where
// they are opened; the model-import flags are read where they can fail.
struct RemoteFlags {
  std::string server, cluster, policy, placement, profile, report;
  std::string output_path;  // -o
  double deadline_seconds = 0;
  std::vector<std::string> step_seconds, profile_clients, input_shapes;
  bool send_weights = false, use_reported_profiles = false, json = false;
  ClientTlsFiles tls;
  std::string token_file;
  int64_t batch = 0;
  uint64_t seed = 1;
  double budget_seconds = 0;
  int64_t evaluations = 0;
  absl::StatusOr<bool> fuse_attention = false, fuse_elementwise = false;
};

RemoteFlags ReadRemoteFlags() {
  RemoteFlags f;
  f.server = absl::GetFlag(FLAGS_server);
  f.cluster = absl::GetFlag(FLAGS_cluster);
  f.policy = absl::GetFlag(FLAGS_policy);
  f.placement = absl::GetFlag(FLAGS_placement);
  f.profile = absl::GetFlag(FLAGS_profile);
  f.report = absl::GetFlag(FLAGS_report);
  f.output_path = absl::GetFlag(FLAGS_o);
  f.deadline_seconds = absl::GetFlag(FLAGS_deadline);
  f.step_seconds = absl::GetFlag(FLAGS_step_seconds);
  f.profile_clients = absl::GetFlag(FLAGS_profile_clients);
  f.input_shapes = absl::GetFlag(FLAGS_input_shape);
  f.send_weights = absl::GetFlag(FLAGS_send_weights);
  f.use_reported_profiles = absl::GetFlag(FLAGS_use_reported_profiles);
  f.json = absl::GetFlag(FLAGS_json);
  f.tls.ca = UserPath(absl::GetFlag(FLAGS_tls_ca));
  f.tls.certificate = UserPath(absl::GetFlag(FLAGS_tls_cert));
  f.tls.private_key = UserPath(absl::GetFlag(FLAGS_tls_key));
  f.tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  f.token_file = UserPath(absl::GetFlag(FLAGS_token_file));
  f.batch = absl::GetFlag(FLAGS_batch);
  f.seed = absl::GetFlag(FLAGS_seed);
  f.budget_seconds = absl::GetFlag(FLAGS_budget).seconds;
  f.evaluations = absl::GetFlag(FLAGS_evaluations);
  f.fuse_attention = FuseAttentionFromFlag();
  f.fuse_elementwise = FuseElementwiseFromFlag();
  return f;
}

// The channel to --server, over TLS with a token or client certificate as
// the flags say.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelFromFlags(
    const RemoteFlags& flags) {
  const ClientTlsFiles& tls = flags.tls;
  std::string token;
  if (const std::string& path = flags.token_file; !path.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    token = std::string(absl::StripAsciiWhitespace(text));
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": --token-file is empty"));
    }
  } else if (const char* env = std::getenv("PLACER_TOKEN");
             env != nullptr && *env != '\0') {
    token = std::string(absl::StripAsciiWhitespace(env));
  }
  grpc::ChannelArguments arguments;
  // Answers are bounded (a report draws at most kTimelinePixels boxes a
  // device) but can pass gRPC's 4 MiB default on wide clusters.
  arguments.SetMaxReceiveMessageSize(256 << 20);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      NewChannelCredentials(tls, token, &arguments);
  if (!credentials.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        credentials.status().message(),
        tls.enabled() ? ""
                      : " (--tls-ca; the token may come from PLACER_TOKEN)"));
  }
  return grpc::CreateCustomChannel(flags.server, *credentials, arguments);
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  auto code = static_cast<absl::StatusCode>(s.error_code());
  std::string hint;
  if (s.error_message().find("larger than max") != std::string::npos) {
    hint = " (the server's limit is placer serve --max-request-mb; remote "
           "sends shapes only unless --send-weights)";
  }
  return absl::Status(code, absl::StrCat("server: ", absl::StatusCodeToString(code),
                                         ": ", s.error_message(), hint));
}

// The model as placement needs it: every initializer larger than the
// importer folds keeps its type and dims and loses its bytes (the server
// imports such files as weight-stripped), so a 400 MB export travels as a
// few hundred KB.
absl::StatusOr<std::string> ShapesOnly(const std::string& bytes,
                                       const std::string& path) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not an ONNX model (", bytes.size(), " bytes do not parse)"));
  }
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    const int64_t elements =
        ElementCount(absl::MakeConstSpan(t.dims().data(), t.dims().size()));
    if (elements <= kMaxFoldedElements) continue;
    t.clear_raw_data();
    t.clear_float_data();
    t.clear_double_data();
    t.clear_int32_data();
    t.clear_int64_data();
    t.clear_uint64_data();
  }
  return model.SerializeAsString();
}

absl::StatusOr<proto::ModelSpec> ModelSpecFromArg(const std::string& arg,
                                                  const RemoteFlags& flags) {
  proto::ModelSpec spec;
  spec.set_name(arg);
  if (arg.rfind("zoo:", 0) == 0) {
    spec.set_zoo(arg.substr(4));
  } else {
    ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(UserPath(arg)));
    if (flags.send_weights) {
      spec.set_onnx(std::move(bytes));
    } else {
      ASSIGN_OR_RETURN(std::string shapes, ShapesOnly(bytes, arg));
      spec.set_onnx(std::move(shapes));
    }
  }
  if (flags.batch != 0) spec.set_batch(flags.batch);
  ASSIGN_OR_RETURN(bool fuse, flags.fuse_attention);
  spec.set_fuse_attention(fuse);
  ASSIGN_OR_RETURN(bool fuse_elementwise, flags.fuse_elementwise);
  spec.set_fuse_elementwise(fuse_elementwise);
  for (const std::string& s : flags.input_shapes) {
    std::vector<std::string> kv = absl::StrSplit(s, absl::MaxSplits('=', 1));
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input-shape '", s, "': expected NAME=D0xD1x..."));
    }
    (*spec.mutable_input_shapes())[kv[0]] = kv[1];
  }
  return spec;
}

absl::StatusOr<proto::ClusterSpec> ClusterSpecFromFlag(
    const RemoteFlags& flags) {
  const std::string& c = flags.cluster;
  if (c.empty()) return absl::InvalidArgumentError("--cluster is needed");
  proto::ClusterSpec spec;
  if (c.find('.') == std::string::npos && c.find('/') == std::string::npos) {
    spec.set_preset(c);  // the server knows its presets
    return spec;
  }
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(UserPath(c)));
  RETURN_IF_ERROR(ParseTextOrJson(text, c, spec.mutable_cluster()));
  return spec;
}

absl::StatusOr<proto::PlaceRequest> PlaceRequestFromFlags(
    const std::string& model, const RemoteFlags& flags) {
  proto::PlaceRequest request;
  ASSIGN_OR_RETURN(proto::ModelSpec m, ModelSpecFromArg(model, flags));
  *request.mutable_model() = std::move(m);
  ASSIGN_OR_RETURN(proto::ClusterSpec c, ClusterSpecFromFlag(flags));
  *request.mutable_cluster() = std::move(c);
  proto::PlaceOptions* o = request.mutable_options();
  o->set_policy(flags.policy);
  o->set_seed(flags.seed);
  o->set_budget_seconds(flags.budget_seconds);
  o->set_max_evaluations(flags.evaluations);
  o->set_use_reported_profiles(flags.use_reported_profiles);
  for (const std::string& c : flags.profile_clients) {
    o->add_profile_clients(c);
  }
  return request;
}

void SetDeadline(const RemoteFlags& flags, grpc::ClientContext* context) {
  if (double d = flags.deadline_seconds; d > 0) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::microseconds(
                              static_cast<int64_t>(d * 1e6)));
  }
}

std::string ReportText(const proto::SimulationReport& r) {
  std::string out = absl::StrFormat(
      "simulated step %.6f s (lower bound %.6f s), %s moved%s\n",
      r.step_seconds(), r.lower_bound_seconds(), HumanBytes(r.bytes_moved()),
      r.out_of_memory() ? ", OUT OF MEMORY" : "");
  for (const proto::DeviceReport& d : r.devices()) {
    absl::StrAppendFormat(&out, "  %-10s peak %10s  busy %.6f s\n",
                          d.device(), HumanBytes(d.peak_memory_bytes()),
                          d.busy_seconds());
  }
  return out;
}

// The service's report in the command line's one shape (json_report.h).
SimulationSummary Summarize(const proto::SimulationReport& r) {
  SimulationSummary s;
  s.step_seconds = r.step_seconds();
  s.lower_bound_seconds = r.lower_bound_seconds();
  s.bytes_moved = r.bytes_moved();
  s.out_of_memory = r.out_of_memory();
  s.estimated_nodes = r.estimated_nodes();
  bool broken_down = false;
  for (const proto::DeviceReport& d : r.devices()) {
    s.devices.push_back(d.device());
    s.peak_memory_bytes.push_back(d.peak_memory_bytes());
    s.busy_seconds.push_back(d.busy_seconds());
    const proto::PeakBreakdown& at = d.peak_breakdown();
    s.peak_breakdown.push_back({at.parameters(), at.activations(),
                                at.gradients(), at.workspace(), at.inputs()});
    broken_down |= d.has_peak_breakdown();
  }
  if (!broken_down) s.peak_breakdown.clear();
  return s;
}

// As `placer place --json`: {"lower_bound_seconds", "results": [row]}, the
// row with the service's fields too (fingerprint, cached, ...).
std::string PlacedJson(const proto::PlaceResponse& r) {
  google::protobuf::Struct row;
  AddSimulationFields(Summarize(r.report()), &row);
  auto& e = *row.mutable_fields();
  e["policy"].set_string_value(r.placement().policy());
  e["ok"].set_bool_value(true);
  e["placement_seconds"].set_number_value(r.placement_seconds());
  e["ratio_to_lower_bound"].set_number_value(
      r.report().lower_bound_seconds() > 0
          ? r.report().step_seconds() / r.report().lower_bound_seconds()
          : 0);
  e["fingerprint"].set_string_value(r.fingerprint());
  e["cached"].set_bool_value(r.cached());
  e["stopped_at_deadline"].set_bool_value(r.stopped_at_deadline());
  if (r.measured().count() > 0) {
    auto& m = *e["measured"].mutable_struct_value()->mutable_fields();
    m["count"].set_number_value(r.measured().count());
    m["median_step_seconds"].set_number_value(r.measured().median_step_seconds());
  }
  google::protobuf::Struct s;
  auto& f = *s.mutable_fields();
  f["lower_bound_seconds"].set_number_value(r.report().lower_bound_seconds());
  *f["results"].mutable_list_value()->add_values()->mutable_struct_value() = row;
  return ReportJson(s);
}

// Asks the server for a stored placement's HTML report (GetReport) and
// writes it to --report; `model` is what Place was sent (null: a zoo
// placement's spec, which the server kept).
absl::Status WriteRemoteReport(proto::PlacementService::Stub& stub,
                               const std::string& fingerprint,
                               const proto::ModelSpec* model,
                               const RemoteFlags& flags) {
  const std::string& path = flags.report;
  if (fingerprint.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--report ", path,
        ": the search stopped at the deadline, so the placement was not "
        "stored and has no report (give it more --deadline, or write it "
        "with -o and run simulate --report)"));
  }
  proto::GetReportRequest request;
  request.set_fingerprint(fingerprint);
  if (model != nullptr) *request.mutable_model() = *model;
  grpc::ClientContext context;
  SetDeadline(flags, &context);
  proto::GetReportResponse response;
  RETURN_IF_ERROR(FromGrpc(stub.GetReport(&context, request, &response)));
  RETURN_IF_ERROR(WriteFileAtomically(UserPath(path), response.html()));
  ReportWrote(path, "HTML report");
  return absl::OkStatus();
}

int PrintPlaced(const proto::PlaceResponse& r, const RemoteFlags& flags) {
  if (flags.json) {
    std::cout << PlacedJson(r);  // the placement goes to -o
  } else {
    if (r.fingerprint().empty()) {
      std::cout << "not stored (no fingerprint): the search stopped at the "
                   "deadline; this is its best placement so far\n";
    } else {
      std::cout << "fingerprint " << r.fingerprint() << "\n";
    }
    std::cout << absl::StrFormat(
        "policy %s, %s %.3f s%s\n", r.placement().policy(),
        r.cached() ? "cached (placed earlier in" : "placed in",
        r.placement_seconds(), r.cached() ? ")" : "");
    std::cout << ReportText(r.report());
    if (r.measured().count() > 0) {
      std::cout << absl::StrFormat("measured median %.6f s over %d steps\n",
                                   r.measured().median_step_seconds(),
                                   r.measured().count());
    }
  }
  if (const std::string& out = flags.output_path; !out.empty()) {
    absl::Status s = WriteFileAtomically(UserPath(out), FormatJson(r.placement()));
    if (!s.ok()) return Fail(s);
    ReportWrote(out);
  }
  return 0;
}

}  // namespace

int RemoteCommand(const std::vector<std::string>& args) {
  const char* usage =
      "remote place|simulate|train MODEL --cluster C ..., remote get "
      "FINGERPRINT [MODEL] [--report R.html], remote report FINGERPRINT "
      "--step-seconds a,b";
  if (args.empty()) return UsageError(usage);
  const RemoteFlags flags = ReadRemoteFlags();
  const std::string& verb = args[0];
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      ChannelFromFlags(flags);
  if (!channel.ok()) return Fail(channel.status());
  std::unique_ptr<proto::PlacementService::Stub> stub =
      proto::PlacementService::NewStub(*channel);
  grpc::ClientContext context;
  SetDeadline(flags, &context);

  if ((verb == "place" || verb == "train" || verb == "simulate") &&
      args.size() != 2) {
    return UsageError(absl::StrCat("remote ", verb, " takes one MODEL"));
  }
  if (verb == "report" && args.size() != 2) {
    return UsageError("remote report takes one FINGERPRINT");
  }
  if (verb == "get" && args.size() != 2 && args.size() != 3) {
    return UsageError(
        "remote get takes one FINGERPRINT, and the MODEL it was placed for "
        "when --report needs it (an ONNX file; a zoo model is known)");
  }
  if (verb == "get" && args.size() == 3 && flags.report.empty()) {
    return UsageError("remote get: a MODEL is read only with --report");
  }
  const bool wants_report = !flags.report.empty();
  if (wants_report && verb != "get" && verb != "place" && verb != "train") {
    return UsageError(absl::StrCat(
        "remote ", verb,
        ": --report is for place, train and get (a stored placement)"));
  }
  if (verb == "place") {
    absl::StatusOr<proto::PlaceRequest> request =
        PlaceRequestFromFlags(args[1], flags);
    if (!request.ok()) return Fail(request.status());
    proto::PlaceResponse response;
    if (absl::Status s = FromGrpc(stub->Place(&context, *request, &response));
        !s.ok()) {
      return Fail(s);
    }
    if (int rc = PrintPlaced(response, flags); rc != 0 || !wants_report) {
      return rc;
    }
    absl::Status s = WriteRemoteReport(*stub, response.fingerprint(),
                                       &request->model(), flags);
    return s.ok() ? 0 : Fail(s);
  }
  if (verb == "train") {
    proto::TrainRequest request;
    absl::StatusOr<proto::PlaceRequest> place =
        PlaceRequestFromFlags(args[1], flags);
    if (!place.ok()) return Fail(place.status());
    *request.mutable_place() = std::move(*place);
    request.set_progress_interval_seconds(1);
    std::unique_ptr<grpc::ClientReader<proto::TrainUpdate>> reader =
        stub->Train(&context, request);
    proto::TrainUpdate update;
    std::optional<proto::PlaceResponse> result;
    while (reader->Read(&update)) {
      if (update.has_result()) {
        result = update.result();
        continue;
      }
      const proto::TrainProgress& p = update.progress();
      std::cerr << absl::StrFormat("[%7.1f s] %-14s %8d evaluations  best %.6f s\n",
                                   p.elapsed_seconds(), p.stage(),
                                   p.evaluations(), p.best_step_seconds());
    }
    if (absl::Status s = FromGrpc(reader->Finish()); !s.ok()) return Fail(s);
    if (!result) {
      return Fail(absl::InternalError("the stream ended without a result"));
    }
    if (int rc = PrintPlaced(*result, flags); rc != 0 || !wants_report) {
      return rc;
    }
    absl::Status s = WriteRemoteReport(*stub, result->fingerprint(),
                                       &request.place().model(), flags);
    return s.ok() ? 0 : Fail(s);
  }
  if (verb == "simulate") {
    proto::SimulateRequest request;
    absl::StatusOr<proto::ModelSpec> m = ModelSpecFromArg(args[1], flags);
    if (!m.ok()) return Fail(m.status());
    *request.mutable_model() = std::move(*m);
    absl::StatusOr<proto::ClusterSpec> c = ClusterSpecFromFlag(flags);
    if (!c.ok()) return Fail(c.status());
    *request.mutable_cluster() = std::move(*c);
    const std::string& path = flags.placement;
    if (path.empty()) return UsageError("remote simulate needs --placement");
    absl::StatusOr<std::string> json = ReadFileToString(UserPath(path));
    if (!json.ok()) return Fail(json.status());
    if (auto s = google::protobuf::util::JsonStringToMessage(
            *json, request.mutable_placement());
        !s.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          path, ": not a placement file: ", s.message().as_string())));
    }
    request.set_use_reported_profiles(flags.use_reported_profiles);
    for (const std::string& c : flags.profile_clients) {
      request.add_profile_clients(c);
    }
    proto::SimulateResponse response;
    if (absl::Status s =
            FromGrpc(stub->Simulate(&context, request, &response));
        !s.ok()) {
      return Fail(s);
    }
    const proto::SimulationReport& report = response.report();
    if (flags.json) {
      google::protobuf::Struct json;
      AddSimulationFields(Summarize(report), &json);
      if (!report.strategy().empty()) {  // simulate's strategy fields
        auto& f = *json.mutable_fields();
        f["strategy"].set_string_value(report.strategy());
        f["micro_batches"].set_number_value(report.micro_batches());
        f["seconds_per_batch"].set_number_value(report.seconds_per_batch());
        f["allreduce_seconds"].set_number_value(report.allreduce_seconds());
      }
      std::cout << ReportJson(json);
    } else {
      if (!report.strategy().empty()) {
        std::cout << absl::StrFormat(
            "strategy %s: %.6f s per micro-batch\n", report.strategy(),
            report.seconds_per_batch());
      }
      std::cout << ReportText(report);
    }
    return 0;
  }
  if (verb == "get") {
    proto::GetPlacementRequest request;
    request.set_fingerprint(args[1]);
    proto::PlaceResponse response;
    if (absl::Status s =
            FromGrpc(stub->GetPlacement(&context, request, &response));
        !s.ok()) {
      return Fail(s);
    }
    if (int rc = PrintPlaced(response, flags); rc != 0 || !wants_report) {
      return rc;
    }
    std::optional<proto::ModelSpec> model;
    if (args.size() == 3) {
      absl::StatusOr<proto::ModelSpec> m = ModelSpecFromArg(args[2], flags);
      if (!m.ok()) return Fail(m.status());
      model = std::move(*m);
    }
    absl::Status s = WriteRemoteReport(*stub, args[1],
                                       model ? &*model : nullptr, flags);
    return s.ok() ? 0 : Fail(s);
  }
  if (verb == "report") {
    proto::ReportMeasurementRequest request;
    request.set_fingerprint(args[1]);
    for (const std::string& v : flags.step_seconds) {
      double seconds = 0;
      if (!absl::SimpleAtod(v, &seconds)) {
        return UsageError(absl::StrCat("--step-seconds: '", v,
                                       "' is not a number"));
      }
      request.add_step_seconds(seconds);
    }
    if (const std::string& p = flags.profile; !p.empty()) {
      absl::StatusOr<std::string> text = ReadFileToString(UserPath(p));
      if (!text.ok()) return Fail(text.status());
      if (absl::Status s = ParseTextOrJson(*text, p, request.mutable_profile());
          !s.ok()) {
        return Fail(s);
      }
    }
    request.set_source("placer remote report");
    proto::ReportMeasurementResponse response;
    if (absl::Status s =
            FromGrpc(stub->ReportMeasurement(&context, request, &response));
        !s.ok()) {
      return Fail(s);
    }
    std::cout << absl::StrFormat("measured median %.6f s over %d steps\n",
                                 response.measured().median_step_seconds(),
                                 response.measured().count());
    return 0;
  }
  return UsageError(absl::StrCat("remote: unknown verb '", verb, "'; ", usage));
}

}  // namespace placer
