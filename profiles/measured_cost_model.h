// A cost model from measurements: per-signature node times per device kind
// and per-link fits, falling back to another model (the roofline) where a
// node or link was not measured. A node may also have a time measured
// alone (no other device of its host in use): AloneNodeSeconds answers it,
// and NodeSeconds (neighbours in use) where it was not measured.
//
// A transfer costs the link's fit (or the fallback's) plus two thread
// hand-offs of the profile (the copying worker's wake, then the reader's):
// what the executor pays per transfer beyond the copy, which for small
// values is most of it.
//
// Contract: a measured value always wins over the fallback; IsGuess is
// false for measured nodes and the fallback's answer otherwise. Profiles
// are files in protobuf text (.pbtxt) or JSON (.json) of
// profiles/profile.proto; errors name the file and the line or field.
#ifndef PLACER_PROFILES_MEASURED_COST_MODEL_H_
#define PLACER_PROFILES_MEASURED_COST_MODEL_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "profiles/cost_model.h"

namespace placer {

namespace proto {
class Profile;
}  // namespace proto

struct LinkSample {
  int64_t bytes = 0;
  double seconds = 0;
};

struct MeasuredLink {
  LinkParams fit;
  std::vector<LinkSample> samples;
};

struct MeasuredProfile {
  std::string source;
  // (signature, device kind) -> median seconds, repeats
  std::map<std::pair<std::string, DeviceKind>, std::pair<double, int>> ops;
  // (signature, device kind) -> median seconds inside steps in which no
  // other device of the host was in use; every key is also in `ops`.
  std::map<std::pair<std::string, DeviceKind>, double> alone_ops;
  // (src name, dst name) -> fit
  std::map<std::pair<std::string, std::string>, MeasuredLink> links;
  // The executor's thread hand-off measured in steps (profile.proto); 0
  // when not measured.
  double handoff_seconds = 0;
};

// Fits seconds = latency + bytes / bandwidth by least squares weighted by
// 1 / seconds^2 (relative error); latency is clamped at 0. Needs positive
// timings at two or more distinct sizes.
absl::StatusOr<LinkParams> FitLink(const std::vector<LinkSample>& samples);

// `base` with every op timing (alone or not) and link of `overlay`
// replacing or adding to its own, and overlay's hand-off where it measured
// one (e.g. times measured inside training steps over times measured one op
// at a time). An alone time whose signature has no other time gives it
// that one too.
MeasuredProfile MergeProfiles(MeasuredProfile base,
                              const MeasuredProfile& overlay);

// The wire and file form (profiles/profile.proto); `source` names the
// message in errors.
absl::StatusOr<MeasuredProfile> ProfileFromProto(const proto::Profile& message,
                                                 const std::string& source);
proto::Profile ProfileToProto(const MeasuredProfile& profile);

absl::StatusOr<MeasuredProfile> LoadProfile(const std::string& path);
absl::Status SaveProfile(const MeasuredProfile& profile,
                         const std::string& path);

// `fallback` answers what `profile` does not.
std::unique_ptr<CostModel> NewMeasuredCostModel(
    MeasuredProfile profile, std::unique_ptr<CostModel> fallback);

}  // namespace placer

#endif  // PLACER_PROFILES_MEASURED_COST_MODEL_H_
