#include "profiles/measured_cost_model.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "profiles/profile.pb.h"
#include "profiles/proto_io.h"
#include "profiles/signature.h"

namespace placer {
namespace {

proto::DeviceKind ToProto(DeviceKind k) {
  return k == DeviceKind::kGpu ? proto::GPU : proto::CPU;
}

class MeasuredCostModel : public CostModel {
 public:
  MeasuredCostModel(MeasuredProfile profile, std::unique_ptr<CostModel> fallback)
      : profile_(std::move(profile)), fallback_(std::move(fallback)) {}

  double NodeSeconds(const TrainingView& view, int node,
                     const Device& device) const override {
    auto it = profile_.ops.find({NodeSignature(view, node), device.kind});
    if (it != profile_.ops.end()) return it->second.first;
    return fallback_->NodeSeconds(view, node, device);
  }

  double AloneNodeSeconds(const TrainingView& view, int node,
                          const Device& device) const override {
    auto it = profile_.alone_ops.find({NodeSignature(view, node), device.kind});
    if (it != profile_.alone_ops.end()) return it->second;
    return NodeSeconds(view, node, device);
  }

  double TransferSeconds(int64_t bytes, const Cluster& cluster, int src,
                         int dst) const override {
    const double handoffs = 2 * profile_.handoff_seconds;
    auto it = profile_.links.find(
        {cluster.device(src).name, cluster.device(dst).name});
    if (it == profile_.links.end()) {
      return handoffs + fallback_->TransferSeconds(bytes, cluster, src, dst);
    }
    const LinkParams& fit = it->second.fit;
    return handoffs + fit.latency_seconds +
           static_cast<double>(bytes) / fit.bandwidth;
  }

  bool IsGuess(const TrainingView& view, int node) const override {
    std::string sig = NodeSignature(view, node);
    for (DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kGpu}) {
      if (profile_.ops.count({sig, kind})) return false;
    }
    return fallback_->IsGuess(view, node);
  }

  double AccumulateSeconds(const TrainingView& view, int update_node,
                           const Device& device) const override {
    auto it = profile_.ops.find(
        {AccumulateSignature(view, update_node), device.kind});
    if (it != profile_.ops.end()) return it->second.first;
    return fallback_->AccumulateSeconds(view, update_node, device);
  }

  double PartialAddSeconds(const TrainingView& view, int sum,
                           const Device& device) const override {
    auto it =
        profile_.ops.find({PartialAddSignature(view, sum), device.kind});
    if (it != profile_.ops.end()) return it->second.first;
    return fallback_->PartialAddSeconds(view, sum, device);
  }

 private:
  MeasuredProfile profile_;
  std::unique_ptr<CostModel> fallback_;
};

}  // namespace

absl::StatusOr<LinkParams> FitLink(const std::vector<LinkSample>& samples) {
  // Weighted by 1 / seconds^2: every size counts by its relative error, so
  // the latency that small copies show is not drowned by large ones.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::set<int64_t> sizes;
  for (const LinkSample& s : samples) {
    if (!(s.seconds > 0)) continue;
    double w = 1.0 / (s.seconds * s.seconds);
    double x = static_cast<double>(s.bytes);
    sizes.insert(s.bytes);
    sw += w;
    sx += w * x;
    sy += w * s.seconds;
    sxx += w * x * x;
    sxy += w * x * s.seconds;
  }
  double denominator = sw * sxx - sx * sx;
  if (sizes.size() < 2 || denominator <= 0) {
    return absl::InvalidArgumentError(
        "a link fit needs positive timings at two or more sizes");
  }
  double slope = (sw * sxy - sx * sy) / denominator;
  double intercept = (sy - slope * sx) / sw;
  if (slope <= 0) {
    return absl::InvalidArgumentError(
        "link samples do not grow with size; cannot fit a bandwidth");
  }
  return LinkParams{std::max(0.0, intercept), 1.0 / slope};
}

absl::StatusOr<MeasuredProfile> ProfileFromProto(const proto::Profile& message,
                                                 const std::string& source) {
  MeasuredProfile p;
  p.source = message.source();
  if (!(message.handoff_seconds() >= 0) ||
      !std::isfinite(message.handoff_seconds())) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": handoff_seconds must be finite and >= 0"));
  }
  p.handoff_seconds = message.handoff_seconds();
  for (int i = 0; i < message.ops_size(); ++i) {
    const proto::OpTiming& t = message.ops(i);
    if (!(t.seconds() >= 0) || t.signature().empty() ||
        t.device_kind() == proto::DEVICE_KIND_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": ops[", i, "] needs a signature, a device_kind and "
          "seconds >= 0"));
    }
    DeviceKind kind =
        t.device_kind() == proto::GPU ? DeviceKind::kGpu : DeviceKind::kCpu;
    p.ops[{t.signature(), kind}] = {t.seconds(), t.repeats()};
    if (!(t.alone_seconds() >= 0) || !std::isfinite(t.alone_seconds())) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": ops[", i, "] (", t.signature(),
          "): alone_seconds must be finite and >= 0"));
    }
    if (t.alone_seconds() > 0) p.alone_ops[{t.signature(), kind}] = t.alone_seconds();
  }
  for (int i = 0; i < message.links_size(); ++i) {
    const proto::LinkFit& l = message.links(i);
    if (!(l.bandwidth() > 0) || !(l.latency_seconds() >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": links[", i,
          "] needs a positive bandwidth and latency >= 0"));
    }
    MeasuredLink link{{l.latency_seconds(), l.bandwidth()}, {}};
    for (const proto::LinkSample& s : l.samples()) {
      link.samples.push_back({s.bytes(), s.seconds()});
    }
    p.links[{l.src(), l.dst()}] = std::move(link);
  }
  return p;
}

proto::Profile ProfileToProto(const MeasuredProfile& p) {
  proto::Profile message;
  message.set_source(p.source);
  message.set_handoff_seconds(p.handoff_seconds);
  for (const auto& [key, value] : p.ops) {
    proto::OpTiming* t = message.add_ops();
    t->set_signature(key.first);
    t->set_device_kind(ToProto(key.second));
    t->set_seconds(value.first);
    t->set_repeats(value.second);
    auto alone = p.alone_ops.find(key);
    if (alone != p.alone_ops.end()) t->set_alone_seconds(alone->second);
  }
  for (const auto& [key, link] : p.links) {
    proto::LinkFit* l = message.add_links();
    l->set_src(key.first);
    l->set_dst(key.second);
    l->set_latency_seconds(link.fit.latency_seconds);
    l->set_bandwidth(link.fit.bandwidth);
    for (const LinkSample& s : link.samples) {
      proto::LinkSample* out = l->add_samples();
      out->set_bytes(s.bytes);
      out->set_seconds(s.seconds);
    }
  }
  return message;
}

absl::StatusOr<MeasuredProfile> LoadProfile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  proto::Profile message;
  RETURN_IF_ERROR(ParseTextOrJson(text, path, &message));
  return ProfileFromProto(message, path);
}

absl::Status SaveProfile(const MeasuredProfile& p, const std::string& path) {
  return WriteFileAtomically(path, FormatTextOrJson(ProfileToProto(p), path));
}

MeasuredProfile MergeProfiles(MeasuredProfile base,
                              const MeasuredProfile& overlay) {
  for (const auto& [key, timing] : overlay.ops) base.ops[key] = timing;
  for (const auto& [key, seconds] : overlay.alone_ops) {
    base.alone_ops[key] = seconds;
    base.ops.try_emplace(key, seconds, 1);
  }
  for (const auto& [key, link] : overlay.links) base.links[key] = link;
  if (overlay.handoff_seconds > 0) base.handoff_seconds = overlay.handoff_seconds;
  base.source = base.source.empty()
                    ? overlay.source
                    : base.source + "; overlaid with " + overlay.source;
  return base;
}

std::unique_ptr<CostModel> NewMeasuredCostModel(
    MeasuredProfile profile, std::unique_ptr<CostModel> fallback) {
  return std::make_unique<MeasuredCostModel>(std::move(profile),
                                             std::move(fallback));
}

}  // namespace placer
