#include "placer/service/placement_service.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <new>
#include <optional>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_helpers.h"
#include "graph/training_view.h"
#include "placer/plan_report.h"
#include "placer/policy_run.h"
#include "profiles/cost_model.h"
#include "profiles/measured_cost_model.h"
#include "profiles/profile.pb.h"
#include "simulator/placement_file.h"
#include "simulator/simulator.h"
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"

namespace placer {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl's codes are gRPC's canonical codes, value for value.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

bool ParseByteBuffer(const grpc::ByteBuffer& buffer,
                     google::protobuf::Message* message) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return message->ParseFromString(bytes);
}

// A buffer over `bytes` that keeps them alive until gRPC has sent them.
grpc::ByteBuffer SharedBytes(std::shared_ptr<const std::string> bytes) {
  auto* keep = new std::shared_ptr<const std::string>(std::move(bytes));
  grpc::Slice slice(
      const_cast<char*>((*keep)->data()), (*keep)->size(),
      [](void* p) { delete static_cast<std::shared_ptr<const std::string>*>(p); },
      keep);
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status CheckFingerprint(const std::string& fp) {
  if (IsFingerprint(fp)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "fingerprint: '", fp.substr(0, 80),
      "' is not 64 lower-case hex digits (a Place answer's fingerprint)"));
}

// A request that runs out of memory fails alone: the allocation failure
// becomes its status and the server goes on serving.
absl::Status OutOfMemory() {
  return absl::ResourceExhaustedError(
      "the server ran out of memory for this request; it was dropped and "
      "the server goes on (ask for a smaller model or fewer ops)");
}

template <typename F>
auto OutOfMemoryAsStatus(F compute) -> decltype(compute()) {
  try {
    return compute();
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

// A placement file's message simulated on its model: what Simulate answers
// and GetReport draws. Owns everything the simulation context reads, so it
// lives behind a pointer and never moves.
struct SimulatedPlacement {
  LoadedModel model;
  std::unique_ptr<CostModel> costs;
  std::optional<TrainingView> view;
  std::unique_ptr<ReadyOrder> order;
  std::optional<SimulationContext> context;
  PlacementOrStrategy placement;
  std::optional<StrategySimulation> strategy_step;  // strategies
  std::optional<SimulationResult> result;           // op placements
};

absl::StatusOr<std::unique_ptr<SimulatedPlacement>> SimulatePlacementMessage(
    const proto::ModelSpec& model, const RequestLimits& limits,
    const Cluster& cluster, const proto::Placement& placement,
    const TrainingOptions& training, std::unique_ptr<CostModel> costs,
    bool record_schedule) {
  auto s = std::make_unique<SimulatedPlacement>();
  ASSIGN_OR_RETURN(s->model, LoadModelSpec(model, limits));
  ASSIGN_OR_RETURN(s->placement,
                   PlacementOrStrategyFromProto(placement, "placement",
                                                s->model.graph, cluster));
  s->costs = std::move(costs);
  s->view.emplace(BuildTrainingView(s->model.graph, training));
  s->order = NewCriticalPathReadyOrder();
  s->context.emplace(
      SimulationContext::Create(*s->view, cluster, *s->costs, *s->order));
  SimulationOptions options;
  options.record_schedule = record_schedule;
  if (s->placement.strategy) {
    absl::StatusOr<StrategySimulation> step =
        SimulateStrategy(*s->context, *s->placement.strategy, options);
    if (!step.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement: ", step.status().message()));
    }
    s->strategy_step = std::move(*step);
  } else {
    ASSIGN_OR_RETURN(s->result, placer::Simulate(*s->context,
                                                 s->placement.placement,
                                                 options));
  }
  return s;
}

}  // namespace

PlacementServiceImpl::PlacementServiceImpl(PlacementStore* store,
                                           const AccessControl* access,
                                           ServiceOptions options)
    : store_(store),
      access_(access),
      options_(std::move(options)),
      limits_(options_.clients) {}

absl::StatusOr<Client> PlacementServiceImpl::Admit(
    const grpc::ServerContextBase& context, Role role, const char* method) {
  ASSIGN_OR_RETURN(Client client, access_->Authorize(context, role, method));
  RETURN_IF_ERROR(limits_.AdmitCall(client.name));
  return client;
}

absl::StatusOr<std::unique_ptr<CostModel>> PlacementServiceImpl::CostsFor(
    const std::string& cluster_name, bool use_reported_profiles,
    const google::protobuf::RepeatedPtrField<std::string>& profile_clients,
    std::string* digest) const {
  if (!use_reported_profiles) return NewRooflineCostModel();
  // Profiles count only from clients the access file (as it is now) lets
  // report; without one, every client may.
  std::shared_ptr<const AccessPolicy> policy = access_->policy();
  auto accept = [&](const std::string& client) {
    if (policy != nullptr && !policy->RolesOf(client).Has(Role::kReport)) {
      return false;
    }
    return profile_clients.empty() ||
           std::find(profile_clients.begin(), profile_clients.end(), client) !=
               profile_clients.end();
  };
  auto profile = store_->Profile(cluster_name, accept);
  if (!profile) {
    const size_t reported = store_->ProfileClients(cluster_name).size();
    return absl::FailedPreconditionError(absl::StrCat(
        "use_reported_profiles: no profile was reported for cluster '",
        cluster_name, "'",
        profile_clients.empty() ? " by a client with the report role"
                                : " by the profile_clients named (with the "
                                  "report role)",
        reported > 0
            ? absl::StrCat(" (", reported, " reporting clients were not taken)")
            : " (ReportMeasurement with a profile first)"));
  }
  if (digest != nullptr) *digest = profile->second;
  return NewMeasuredCostModel(std::move(profile->first),
                              NewRooflineCostModel());
}

absl::StatusOr<PlacementServiceImpl::Prepared> PlacementServiceImpl::Prepare(
    const proto::PlaceRequest& request) const {
  Prepared p;
  absl::StatusOr<proto::PlaceOptions> options =
      NormalizeOptions(request.options(), options_.limits);
  if (!options.ok()) return options.status();
  p.options = std::move(*options);
  absl::StatusOr<TrainingOptions> training =
      ToTrainingOptions(*p.options.mutable_training(),
                        p.options.use_reported_profiles(), "options.training");
  if (!training.ok()) return training.status();
  p.training = *training;
  absl::StatusOr<ResolvedCluster> cluster = ResolveClusterSpec(request.cluster());
  if (!cluster.ok()) return cluster.status();
  p.cluster = std::move(cluster->cluster);
  p.cluster_message = std::move(cluster->message);
  if (request.model().source_case() == proto::ModelSpec::SOURCE_NOT_SET) {
    return absl::InvalidArgumentError(
        "model: set onnx (a serialized ModelProto) or zoo");
  }
  std::string digest;
  absl::StatusOr<std::unique_ptr<CostModel>> costs =
      CostsFor(p.cluster.name(), p.options.use_reported_profiles(),
               p.options.profile_clients(), &digest);
  if (!costs.ok()) return costs.status();
  p.costs = std::move(*costs);
  p.fingerprint =
      PlaceFingerprint(request.model(), p.cluster_message, p.options, digest);
  p.profile_digest = std::move(digest);
  return p;
}

absl::StatusOr<proto::PlaceResponse> PlacementServiceImpl::Compute(
    grpc::ServerContextBase* context, const std::string& client,
    const proto::PlaceRequest& request, const Prepared& prepared,
    double progress_interval_seconds,
    const std::function<void(const SearchProgress&)>& progress) {
  const Clock::time_point arrived = Clock::now();
  const Clock::time_point deadline = context->deadline();
  if (deadline <= arrived) {
    return absl::DeadlineExceededError("the deadline passed before placing");
  }
  const proto::PlaceOptions& options = prepared.options;
  const Cluster& cluster = prepared.cluster;
  const std::string& fingerprint = prepared.fingerprint;
  // Stop searching with a tenth of the time left (at least 20 ms) to spare
  // for simulating, storing and answering.
  const auto left = deadline - arrived;
  const Clock::time_point stop_at =
      deadline == Clock::time_point::max()
          ? deadline
          : deadline - std::max<Clock::duration>(
                           std::chrono::milliseconds(20), left / 10);
  if (!limits_.AcquireSearch(client, stop_at,
                             [context] { return context->IsCancelled(); })) {
    if (context->IsCancelled()) return absl::CancelledError("client went away");
    return absl::DeadlineExceededError(
        absl::StrCat("no search slot came free before the deadline (at most ",
                     options_.clients.max_searches, " searches at once, ",
                     options_.clients.max_searches_per_client, " for client '",
                     client, "')"));
  }
  absl::Cleanup release = [this, &client] { limits_.ReleaseSearch(client); };

  ASSIGN_OR_RETURN(LoadedModel model,
                   LoadModelSpec(request.model(), options_.limits));
  if (Clock::now() >= stop_at) {
    return absl::DeadlineExceededError(
        "the deadline left no time to place after importing the model");
  }
  ASSIGN_OR_RETURN(PolicyOptions policy_options,
                   ToPolicyOptions(options, model.graph, cluster));
  std::atomic<bool> stopped{false};
  policy_options.should_stop = [&] {
    if (Clock::now() >= stop_at || context->IsCancelled()) {
      stopped = true;
      return true;
    }
    return false;
  };
  policy_options.on_progress = progress;
  if (progress_interval_seconds > 0) {
    policy_options.progress_interval_seconds = progress_interval_seconds;
  }

  TrainingView view = BuildTrainingView(model.graph, prepared.training);
  std::unique_ptr<ReadyOrder> order = NewCriticalPathReadyOrder();
  SimulationContext simulation =
      SimulationContext::Create(view, cluster, *prepared.costs, *order);
  PolicyInput input{view, cluster, *prepared.costs, simulation};
  PolicyRun run = RunPolicy(options.policy(), input, policy_options);
  if (!run.status.ok()) {
    if (context->IsCancelled()) return absl::CancelledError("client went away");
    return run.status;
  }

  proto::PlaceResponse response;
  // Only a stored placement has a fingerprint that get/report can use.
  if (!stopped) response.set_fingerprint(fingerprint);
  PlacementInfo info{ModelName(request.model()), options.policy(),
                     run.result.step_seconds};
  *response.mutable_placement() =
      PlacementToProto(run.placement, model.graph, cluster, info);
  *response.mutable_report() = ToReport(run.result, cluster);
  response.set_placement_seconds(run.placement_seconds);
  response.set_stopped_at_deadline(stopped);
  if (!stopped) {
    proto::StoredPlacement entry;
    *entry.mutable_response() = response;
    entry.set_cluster_name(cluster.name());
    // What GetReport needs to simulate it again (service.proto).
    proto::PlaceRequest& placed = *entry.mutable_request();
    *placed.mutable_model() = request.model();
    placed.mutable_model()->clear_onnx();
    if (request.model().source_case() == proto::ModelSpec::kOnnx) {
      placed.mutable_model()->set_name(ModelName(request.model()));
    }
    *placed.mutable_cluster()->mutable_cluster() = prepared.cluster_message;
    *placed.mutable_options() = options;
    entry.set_profile_digest(prepared.profile_digest);
    if (absl::Status s = store_->Put(fingerprint, entry); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("placed, but could not store it: ", s.message()));
    }
  }
  return response;
}

grpc::ServerUnaryReactor* PlacementServiceImpl::Place(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Client> client = Admit(*context, Role::kPlace, "Place");
  if (!client.ok()) {
    reactor->Finish(ToGrpc(client.status()));
    return reactor;
  }
  auto parsed = std::make_shared<proto::PlaceRequest>();
  if (!ParseByteBuffer(*request, parsed.get())) {
    reactor->Finish(ToGrpc(
        absl::InvalidArgumentError("not a PlaceRequest message")));
    return reactor;
  }
  if (context->deadline() <= Clock::now()) {
    reactor->Finish(
        ToGrpc(absl::DeadlineExceededError("the deadline passed on arrival")));
    return reactor;
  }
  absl::StatusOr<Prepared> prepared = Prepare(*parsed);
  if (!prepared.ok()) {
    reactor->Finish(ToGrpc(prepared.status()));
    return reactor;
  }
  if (std::shared_ptr<const std::string> answer =
          store_->Answer(prepared->fingerprint)) {
    *response = SharedBytes(std::move(answer));
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  // Not cached: the work runs on a thread of its own, so that gRPC's
  // callback threads keep answering; at most max_placing at once.
  if (absl::Status s = limits_.StartPlacing(client->name); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  auto shared = std::make_shared<Prepared>(std::move(*prepared));
  std::thread([this, context, reactor, response, parsed, shared,
               name = client->name] {
    absl::StatusOr<proto::PlaceResponse> r = OutOfMemoryAsStatus(
        [&] { return Compute(context, name, *parsed, *shared, 0, {}); });
    grpc::Status status = ToGrpc(r.status());
    if (r.ok()) {
      *response = SharedBytes(
          std::make_shared<const std::string>(r->SerializeAsString()));
    }
    limits_.EndPlacing(name);
    // Last: after Finish the call, and with it this service, may go away.
    reactor->Finish(status);
  }).detach();
  return reactor;
}

grpc::Status PlacementServiceImpl::Train(
    grpc::ServerContext* context, const proto::TrainRequest* request,
    grpc::ServerWriter<proto::TrainUpdate>* writer) {
  absl::StatusOr<Client> client = Admit(*context, Role::kTrain, "Train");
  if (!client.ok()) return ToGrpc(client.status());
  if (!(request->progress_interval_seconds() >= 0)) {
    return ToGrpc(absl::InvalidArgumentError(
        "progress_interval_seconds: must be >= 0"));
  }
  auto progress = [&](const SearchProgress& p) {
    proto::TrainUpdate update;
    proto::TrainProgress* out = update.mutable_progress();
    out->set_stage(p.stage);
    out->set_evaluations(p.evaluations);
    out->set_best_step_seconds(p.best_step_seconds);
    out->set_elapsed_seconds(p.elapsed_seconds);
    writer->Write(update);  // false when the client left: should_stop sees it
  };
  if (context->deadline() <= Clock::now()) {
    return ToGrpc(absl::DeadlineExceededError("the deadline passed on arrival"));
  }
  absl::StatusOr<Prepared> prepared = Prepare(request->place());
  if (!prepared.ok()) return ToGrpc(prepared.status());
  absl::StatusOr<proto::PlaceResponse> r;
  if (std::shared_ptr<const std::string> answer =
          store_->Answer(prepared->fingerprint)) {
    r.emplace();
    r->ParseFromString(*answer);
  } else {
    r = OutOfMemoryAsStatus([&] {
      return Compute(context, client->name, request->place(), *prepared,
                     request->progress_interval_seconds(), progress);
    });
  }
  if (!r.ok()) return ToGrpc(r.status());
  proto::TrainUpdate last;
  *last.mutable_result() = std::move(*r);
  writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status PlacementServiceImpl::Simulate(
    grpc::ServerContext* context, const proto::SimulateRequest* request,
    proto::SimulateResponse* response) {
  absl::StatusOr<Client> client = Admit(*context, Role::kRead, "Simulate");
  if (!client.ok()) return ToGrpc(client.status());
  try {
    return SimulateOrThrow(context, request, response);
  } catch (const std::bad_alloc&) {
    return ToGrpc(OutOfMemory());
  }
}

grpc::Status PlacementServiceImpl::SimulateOrThrow(
    grpc::ServerContext* context, const proto::SimulateRequest* request,
    proto::SimulateResponse* response) {
  (void)context;
  absl::StatusOr<ResolvedCluster> resolved =
      ResolveClusterSpec(request->cluster());
  if (!resolved.ok()) return ToGrpc(resolved.status());
  const Cluster* cluster = &resolved->cluster;
  if (absl::Status s = NormalizeProfileClients(request->profile_clients(),
                                               request->use_reported_profiles(),
                                               "profile_clients")
                           .status();
      !s.ok()) {
    return ToGrpc(s);
  }
  proto::TrainingSpec spec = request->training();
  absl::StatusOr<TrainingOptions> training = ToTrainingOptions(
      spec, request->use_reported_profiles(), "training");
  if (!training.ok()) return ToGrpc(training.status());
  absl::StatusOr<std::unique_ptr<CostModel>> costs =
      CostsFor(cluster->name(), request->use_reported_profiles(),
               request->profile_clients(), nullptr);
  if (!costs.ok()) return ToGrpc(costs.status());
  absl::StatusOr<std::unique_ptr<SimulatedPlacement>> simulated =
      SimulatePlacementMessage(request->model(), options_.limits, *cluster,
                               request->placement(), *training,
                               std::move(*costs), false);
  if (!simulated.ok()) return ToGrpc(simulated.status());
  const SimulatedPlacement& sim = **simulated;
  if (sim.strategy_step) {
    proto::SimulationReport& report = *response->mutable_report();
    report = ToReport(sim.strategy_step->step, *cluster);
    report.set_strategy(DescribeStrategy(*sim.placement.strategy));
    report.set_micro_batches(sim.strategy_step->micro_batches);
    report.set_seconds_per_batch(sim.strategy_step->seconds_per_batch);
    report.set_allreduce_seconds(sim.strategy_step->allreduce_seconds);
    return grpc::Status::OK;
  }
  *response->mutable_report() = ToReport(*sim.result, *cluster);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* PlacementServiceImpl::GetPlacement(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Client> client = Admit(*context, Role::kRead, "GetPlacement");
  if (!client.ok()) {
    reactor->Finish(ToGrpc(client.status()));
    return reactor;
  }
  proto::GetPlacementRequest parsed;
  if (!ParseByteBuffer(*request, &parsed)) {
    reactor->Finish(ToGrpc(absl::InvalidArgumentError(
        "not a GetPlacementRequest message")));
    return reactor;
  }
  if (absl::Status s = CheckFingerprint(parsed.fingerprint()); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  std::shared_ptr<const std::string> answer =
      store_->Answer(parsed.fingerprint());
  if (answer == nullptr) {
    reactor->Finish(ToGrpc(absl::NotFoundError(absl::StrCat(
        "fingerprint ", parsed.fingerprint(), ": no such placement"))));
    return reactor;
  }
  *response = SharedBytes(std::move(answer));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::Status PlacementServiceImpl::ReportMeasurement(
    grpc::ServerContext* context,
    const proto::ReportMeasurementRequest* request,
    proto::ReportMeasurementResponse* response) {
  absl::StatusOr<Client> client =
      Admit(*context, Role::kReport, "ReportMeasurement");
  if (!client.ok()) return ToGrpc(client.status());
  if (absl::Status s = CheckFingerprint(request->fingerprint()); !s.ok()) {
    return ToGrpc(s);
  }
  const bool has_profile =
      request->profile().ops_size() > 0 || request->profile().links_size() > 0;
  if (request->step_seconds().empty() && !has_profile) {
    return ToGrpc(absl::InvalidArgumentError(
        "step_seconds: empty, and no profile either: nothing to report"));
  }
  std::vector<double> steps;
  for (int i = 0; i < request->step_seconds_size(); ++i) {
    double s = request->step_seconds(i);
    if (!std::isfinite(s) || s <= 0 || s > 1e6) {
      return ToGrpc(absl::InvalidArgumentError(absl::StrCat(
          "step_seconds[", i, "]: ", s, " is not a step time in (0, 1e6] s")));
    }
    steps.push_back(s);
  }
  std::shared_ptr<const proto::StoredPlacement> entry =
      store_->Get(request->fingerprint());
  if (!entry) {
    return ToGrpc(absl::NotFoundError(absl::StrCat(
        "fingerprint ", request->fingerprint(), ": no such placement")));
  }
  std::optional<MeasuredProfile> profile;
  if (has_profile) {
    absl::StatusOr<MeasuredProfile> p =
        ProfileFromProto(request->profile(), "profile");
    if (!p.ok()) return ToGrpc(p.status());
    if (p->source.empty()) p->source = request->source();
    profile = std::move(*p);
  }
  absl::StatusOr<proto::StoredPlacement> updated = store_->AddMeasurement(
      request->fingerprint(), steps, request->source(), client->name);
  if (!updated.ok()) return ToGrpc(updated.status());
  if (profile) {
    if (absl::Status s =
            store_->AddProfile(entry->cluster_name(), *profile, client->name);
        !s.ok()) {
      return ToGrpc(s);
    }
  }
  *response->mutable_measured() = Summarize(*updated);
  return grpc::Status::OK;
}

grpc::Status PlacementServiceImpl::GetReport(
    grpc::ServerContext* context, const proto::GetReportRequest* request,
    proto::GetReportResponse* response) {
  absl::StatusOr<Client> client = Admit(*context, Role::kRead, "GetReport");
  if (!client.ok()) return ToGrpc(client.status());
  absl::StatusOr<std::string> html =
      OutOfMemoryAsStatus([&] { return ReportHtml(*request); });
  if (!html.ok()) return ToGrpc(html.status());
  response->set_html(std::move(*html));
  return grpc::Status::OK;
}

absl::StatusOr<std::string> PlacementServiceImpl::ReportHtml(
    const proto::GetReportRequest& request) const {
  const std::string& fingerprint = request.fingerprint();
  RETURN_IF_ERROR(CheckFingerprint(fingerprint));
  std::shared_ptr<const proto::StoredPlacement> entry = store_->Get(fingerprint);
  if (entry == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("fingerprint ", fingerprint, ": no such placement"));
  }
  if (!entry->has_request()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fingerprint ", fingerprint,
        ": stored before the server kept what a report needs; place it "
        "again under a new fingerprint, or simulate its placement file "
        "locally with --report"));
  }
  const proto::PlaceRequest& placed = entry->request();
  proto::ModelSpec model = request.model();
  if (model.source_case() == proto::ModelSpec::SOURCE_NOT_SET) {
    if (placed.model().source_case() != proto::ModelSpec::kZoo) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model: fingerprint ", fingerprint,
          " was placed for an ONNX model; send it again as it was sent to "
          "Place (the server keeps placements, not models)"));
    }
    model = placed.model();
  }
  // The model is the one placed exactly when it gives the same fingerprint.
  if (PlaceFingerprint(model, placed.cluster().cluster(), placed.options(),
                       entry->profile_digest()) != fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: not the model fingerprint ", fingerprint,
        " was placed for (send the same bytes, batch and input_shapes as "
        "to Place)"));
  }
  ASSIGN_OR_RETURN(ResolvedCluster resolved,
                   ResolveClusterSpec(placed.cluster()));
  const Cluster& cluster = resolved.cluster;
  const proto::PlaceOptions& options = placed.options();
  std::string digest;
  ASSIGN_OR_RETURN(std::unique_ptr<CostModel> costs,
                   CostsFor(cluster.name(), options.use_reported_profiles(),
                            options.profile_clients(), &digest));
  if (digest != entry->profile_digest()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fingerprint ", fingerprint, ": the profiles reported for cluster '",
        cluster.name(),
        "' changed since it was placed, so a report now would not show the "
        "placement's simulation; place again for a new fingerprint"));
  }
  proto::TrainingSpec spec = options.training();
  ASSIGN_OR_RETURN(TrainingOptions training,
                   ToTrainingOptions(spec, options.use_reported_profiles(),
                                     "options.training"));
  ASSIGN_OR_RETURN(std::unique_ptr<SimulatedPlacement> sim,
                   SimulatePlacementMessage(model, options_.limits, cluster,
                                            entry->response().placement(),
                                            training, std::move(costs), true));
  PlanReport report;
  report.title =
      absl::StrCat(ModelName(placed.model()), " on ", cluster.name(), " (",
                   entry->response().placement().policy(), ")");
  report.context = &*sim->context;
  if (sim->strategy_step) {
    report.result = &sim->strategy_step->step;
    report.strategy = &*sim->placement.strategy;
    report.strategy_result = &*sim->strategy_step;
  } else {
    report.result = &*sim->result;
  }
  return PlanReportHtml(report);
}

}  // namespace placer
