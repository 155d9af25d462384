// What the placement service does with a request's messages before any
// work: the model, cluster and options they describe, the fingerprint that
// keys the cache, and the simulated report sent back.
//
// Contract: every function returns INVALID_ARGUMENT naming the field
// (`model.onnx`, `cluster.preset`, `options.pinned['enc/0']`, ...) for input
// that is wrong, and RESOURCE_EXHAUSTED for a model over `limits`. The
// fingerprint needs no import: it hashes the model's bytes (or its zoo spec)
// with the cluster as parsed and every option that changes the placement,
// so equal requests share it and any change that matters gives a new one.
#ifndef PLACER_PLACER_SERVICE_SERVICE_REQUESTS_H_
#define PLACER_PLACER_SERVICE_SERVICE_REQUESTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/sha256.h"
#include "placer/model_source.h"
#include "placer/service/service.pb.h"
#include "policies/policy.h"
#include "profiles/cluster.h"
#include "simulator/simulator.h"

namespace placer {

struct RequestLimits {
  int64_t max_ops = 2'000'000;      // forward ops of an imported model
  double max_budget_seconds = 3600;  // options.budget_seconds
};

// Whether `s` has the form of a fingerprint (64 lower-case hex digits).
bool IsFingerprint(absl::string_view s);

// The cluster a spec names, and its message (presets parsed from their
// text) that the fingerprint hashes, so that a preset and the same cluster
// spelled out are one cluster.
struct ResolvedCluster {
  proto::Cluster message;
  Cluster cluster;
};
absl::StatusOr<ResolvedCluster> ResolveClusterSpec(
    const proto::ClusterSpec& spec);

// Imports the model (zoo models without weights: placement needs none).
absl::StatusOr<LoadedModel> LoadModelSpec(const proto::ModelSpec& spec,
                                          const RequestLimits& limits);

// The name a model goes by in messages and placement files.
std::string ModelName(const proto::ModelSpec& spec);

// Options with the defaults filled in (policy "best", seed 1, budget 10 s),
// checked against the limits; the policy must be registered.
absl::StatusOr<proto::PlaceOptions> NormalizeOptions(
    proto::PlaceOptions options, const RequestLimits& limits);

// A request's profile_clients, sorted and without repeats; INVALID_ARGUMENT
// naming `field` for an empty name or a list without use_reported_profiles.
absl::StatusOr<std::vector<std::string>> NormalizeProfileClients(
    const google::protobuf::RepeatedPtrField<std::string>& clients,
    bool use_reported_profiles, const std::string& field);

// The step's TrainingOptions from a request's TrainingSpec (empty fields:
// momentum, fp32), with the spec written back in full so that equal
// requests fingerprint equally. INVALID_ARGUMENT naming `field` for a name
// it does not know, or for a precision below fp32 with reported profiles
// (they hold fp32 measurements).
absl::StatusOr<TrainingOptions> ToTrainingOptions(proto::TrainingSpec& spec,
                                                  bool use_reported_profiles,
                                                  const std::string& field);

// PolicyOptions for a loaded model: device and node names resolved.
absl::StatusOr<PolicyOptions> ToPolicyOptions(const proto::PlaceOptions& options,
                                              const Graph& graph,
                                              const Cluster& cluster);

// The cache key of a Place request whose options are normalized and whose
// cluster is resolved; `profile_digest` names the reported profile used
// (empty when none).
std::string PlaceFingerprint(const proto::ModelSpec& model,
                             const proto::Cluster& cluster,
                             const proto::PlaceOptions& options,
                             absl::string_view profile_digest);

proto::SimulationReport ToReport(const SimulationResult& result,
                                 const Cluster& cluster);

}  // namespace placer

#endif  // PLACER_PLACER_SERVICE_SERVICE_REQUESTS_H_
