#include "placer/service/service_requests.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/sha256.h"
#include "base/status_helpers.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "graph/onnx_import.h"
#include "profiles/cluster.pb.h"
#include "profiles/proto_io.h"

namespace placer {
namespace {

absl::Status Invalid(const std::string& field, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

// Map fields serialized in key order, so equal messages hash equally.
std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

std::string DeviceNames(const Cluster& cluster) {
  std::vector<std::string> names;
  for (const Device& d : cluster.devices()) names.push_back(d.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

bool IsFingerprint(absl::string_view s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

absl::StatusOr<ResolvedCluster> ResolveClusterSpec(
    const proto::ClusterSpec& spec) {
  proto::Cluster message;
  std::string source;
  switch (spec.source_case()) {
    case proto::ClusterSpec::kPreset: {
      source = absl::StrCat("cluster.preset '", spec.preset(), "'");
      absl::StatusOr<proto::Cluster> preset = PresetClusterMessage(spec.preset());
      if (!preset.ok()) return Invalid(source, std::string(preset.status().message()));
      message = std::move(*preset);
      break;
    }
    case proto::ClusterSpec::kCluster:
      source = "cluster.cluster";
      message = spec.cluster();
      break;
    default:
      return Invalid("cluster", "set preset (e.g. p100x4) or cluster");
  }
  absl::StatusOr<Cluster> cluster = Cluster::FromProto(message, source);
  if (!cluster.ok()) {
    return absl::InvalidArgumentError(cluster.status().message());
  }
  return ResolvedCluster{std::move(message), std::move(*cluster)};
}

std::string ModelName(const proto::ModelSpec& spec) {
  if (!spec.name().empty()) return spec.name();
  if (spec.source_case() == proto::ModelSpec::kZoo) {
    return absl::StrCat("zoo:", spec.zoo());
  }
  return absl::StrCat("onnx model (", spec.onnx().size(), " bytes)");
}

absl::StatusOr<LoadedModel> LoadModelSpec(const proto::ModelSpec& spec,
                                          const RequestLimits& limits) {
  ImportOptions import;
  import.names.batch_size = "model.batch";
  import.names.input_shapes = "model.input_shapes";
  import.names.dim_values = "";        // the request has no such field
  import.names.weights_optional = "";  // weights are always optional here
  if (spec.batch() < 0) {
    return Invalid("model.batch", absl::StrCat(spec.batch(), " is negative"));
  }
  if (spec.batch() > 0) import.batch_size = spec.batch();
  import.max_ops = limits.max_ops;
  import.weights_optional = true;  // placement needs the dims only
  import.fuse_attention = spec.fuse_attention();
  import.fuse_elementwise = spec.fuse_elementwise();
  std::map<std::string, std::string> shapes(spec.input_shapes().begin(),
                                            spec.input_shapes().end());
  for (const auto& [name, shape] : shapes) {
    absl::StatusOr<std::vector<int64_t>> dims = ParseDims(shape);
    if (!dims.ok()) {
      return Invalid(absl::StrCat("model.input_shapes['", name, "']"),
                     absl::StrCat("'", shape, "': ", dims.status().message()));
    }
    import.input_shapes[name] = *std::move(dims);
  }
  std::string name = ModelName(spec);
  absl::StatusOr<LoadedModel> loaded;
  switch (spec.source_case()) {
    case proto::ModelSpec::kOnnx: {
      if (spec.onnx().empty()) return Invalid("model.onnx", "no bytes");
      absl::StatusOr<Graph> graph = ImportOnnxBytes(spec.onnx(), name, import);
      if (!graph.ok()) {
        loaded = graph.status();
        break;
      }
      loaded = LoadedModel{name, std::move(*graph), 0};
      break;
    }
    case proto::ModelSpec::kZoo: {
      zoo::ZooParams params;
      params.weights = false;
      params.batch_size = spec.batch();
      loaded = LoadModel(absl::StrCat("zoo:", spec.zoo()), import, params);
      break;
    }
    default:
      return Invalid("model", "set onnx (a serialized ModelProto) or zoo");
  }
  if (!loaded.ok()) {
    const absl::Status& s = loaded.status();
    return absl::Status(s.code() == absl::StatusCode::kResourceExhausted
                            ? s.code()
                            : absl::StatusCode::kInvalidArgument,
                        absl::StrCat("model: ", s.message()));
  }
  if (static_cast<int64_t>(loaded->graph.ops().size()) > limits.max_ops) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model: ", name, " has ", loaded->graph.ops().size(),
        " ops; this server places at most ", limits.max_ops));
  }
  return loaded;
}

absl::StatusOr<proto::PlaceOptions> NormalizeOptions(
    proto::PlaceOptions options, const RequestLimits& limits) {
  if (options.policy().empty()) options.set_policy("best");
  if (absl::StatusOr<std::unique_ptr<PlacementPolicy>> p =
          NewPolicy(options.policy());
      !p.ok()) {
    return Invalid("options.policy", std::string(p.status().message()));
  }
  if (options.seed() == 0) options.set_seed(1);
  double budget = options.budget_seconds();
  if (budget == 0) options.set_budget_seconds(budget = 10);
  if (!(budget > 0) || budget > limits.max_budget_seconds) {
    return Invalid("options.budget_seconds",
                   absl::StrCat(budget, " is not in (0, ",
                                limits.max_budget_seconds, "]"));
  }
  if (options.max_evaluations() < 0) {
    return Invalid("options.max_evaluations", "is negative");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> clients,
                   NormalizeProfileClients(options.profile_clients(),
                                           options.use_reported_profiles(),
                                           "options.profile_clients"));
  options.clear_profile_clients();
  for (std::string& c : clients) options.add_profile_clients(std::move(c));
  return options;
}

absl::StatusOr<std::vector<std::string>> NormalizeProfileClients(
    const google::protobuf::RepeatedPtrField<std::string>& clients,
    bool use_reported_profiles, const std::string& field) {
  if (!clients.empty() && !use_reported_profiles) {
    return Invalid(field, "is set only with use_reported_profiles");
  }
  std::vector<std::string> sorted(clients.begin(), clients.end());
  for (const std::string& c : sorted) {
    if (c.empty()) return Invalid(field, "an empty client name");
  }
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  return sorted;
}

absl::StatusOr<TrainingOptions> ToTrainingOptions(proto::TrainingSpec& spec,
                                                  bool use_reported_profiles,
                                                  const std::string& field) {
  if (spec.optimizer().empty()) {
    spec.set_optimizer(std::string(OptimizerName(Optimizer::kMomentum)));
  }
  if (spec.precision().empty()) {
    spec.set_precision(std::string(PrecisionName(Precision::kFp32)));
  }
  absl::StatusOr<Optimizer> optimizer = ParseOptimizer(spec.optimizer());
  if (!optimizer.ok()) {
    return Invalid(field + ".optimizer",
                   std::string(optimizer.status().message()));
  }
  absl::StatusOr<Precision> precision = ParsePrecision(spec.precision());
  if (!precision.ok()) {
    return Invalid(field + ".precision",
                   std::string(precision.status().message()));
  }
  if (*precision != Precision::kFp32 && use_reported_profiles) {
    return Invalid(field + ".precision",
                   absl::StrCat(spec.precision(),
                                " with use_reported_profiles: reported "
                                "profiles hold fp32 measurements"));
  }
  TrainingOptions options = TrainingOptionsFor(*optimizer);
  options.precision = *precision;
  return options;
}

absl::StatusOr<PolicyOptions> ToPolicyOptions(
    const proto::PlaceOptions& options, const Graph& graph,
    const Cluster& cluster) {
  PolicyOptions o;
  o.seed = options.seed();
  o.budget_seconds = options.budget_seconds();
  o.max_evaluations = options.max_evaluations();
  if (!options.memory_limit_bytes().empty()) {
    for (const Device& d : cluster.devices()) {
      o.memory_limit_bytes.push_back(d.memory_bytes);
    }
    for (const auto& [device, bytes] : options.memory_limit_bytes()) {
      std::string field =
          absl::StrCat("options.memory_limit_bytes['", device, "']");
      int d = cluster.FindDevice(device);
      if (d < 0) {
        return Invalid(field, absl::StrCat("no such device in cluster '",
                                           cluster.name(), "' (",
                                           DeviceNames(cluster), ")"));
      }
      if (bytes <= 0) return Invalid(field, "must be positive");
      o.memory_limit_bytes[d] = bytes;
    }
  }
  for (const auto& [node, device] : options.pinned()) {
    std::string field = absl::StrCat("options.pinned['", node, "']");
    int op = graph.FindOp(node);
    if (op < 0) return Invalid(field, "no such node in the model");
    int d = cluster.FindDevice(device);
    if (d < 0) {
      return Invalid(field, absl::StrCat("'", device,
                                         "' is not a device of cluster '",
                                         cluster.name(), "' (",
                                         DeviceNames(cluster), ")"));
    }
    o.pinned[op] = d;
  }
  return o;
}

std::string PlaceFingerprint(const proto::ModelSpec& model,
                             const proto::Cluster& cluster,
                             const proto::PlaceOptions& options,
                             absl::string_view profile_digest) {
  // Bump the version when the placements a request gets would change
  // (policies, zoo builders, cost model), so old cache entries miss.
  std::string key = "placer-fingerprint-v1\n";
  if (model.source_case() == proto::ModelSpec::kOnnx) {
    absl::StrAppend(&key, "onnx ", Sha256Hex(model.onnx()), "\n");
  } else {
    absl::StrAppend(&key, "zoo ", model.zoo(), "\n");
  }
  std::map<std::string, std::string> shapes(model.input_shapes().begin(),
                                            model.input_shapes().end());
  absl::StrAppend(&key, "batch ", model.batch(), "\nshapes ",
                  absl::StrJoin(shapes, ";", absl::PairFormatter("=")), "\n");
  // Only when set, so that the fingerprints of other requests stay.
  if (model.fuse_attention()) absl::StrAppend(&key, "attention fused\n");
  if (model.fuse_elementwise()) absl::StrAppend(&key, "elementwise fused\n");
  absl::StrAppend(&key, "cluster ", Sha256Hex(DeterministicBytes(cluster)),
                  "\noptions ", Sha256Hex(DeterministicBytes(options)),
                  "\nprofile ", profile_digest, "\n");
  return Sha256Hex(key);
}

proto::SimulationReport ToReport(const SimulationResult& result,
                                 const Cluster& cluster) {
  proto::SimulationReport report;
  report.set_step_seconds(result.step_seconds);
  report.set_lower_bound_seconds(result.lower_bound_seconds);
  report.set_bytes_moved(result.bytes_moved);
  report.set_out_of_memory(result.oom);
  report.set_estimated_nodes(result.inaccurate_nodes);
  for (int d = 0; d < cluster.num_devices(); ++d) {
    proto::DeviceReport* dev = report.add_devices();
    dev->set_device(cluster.device(d).name);
    dev->set_peak_memory_bytes(result.peak_memory_bytes[d]);
    dev->set_busy_seconds(result.busy_seconds[d]);
    if (d < static_cast<int>(result.peak_breakdown.size())) {
      const MemoryBreakdown& at = result.peak_breakdown[d];
      proto::PeakBreakdown* out = dev->mutable_peak_breakdown();
      out->set_parameters(at.parameters);
      out->set_activations(at.activations);
      out->set_gradients(at.gradients);
      out->set_workspace(at.workspace);
      out->set_inputs(at.inputs);
    }
  }
  return report;
}

}  // namespace placer
