#include "profiles/cluster.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_helpers.h"
#include "profiles/cluster.pb.h"
#include "profiles/cluster_presets.h"
#include "profiles/proto_io.h"

namespace placer {
namespace {

// An Achieved fraction as the cost model uses it: 0 (unsaid) is 1.
double OrOne(double fraction) { return fraction > 0 ? fraction : 1; }

absl::Status Invalid(const std::string& source, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", message));
}

}  // namespace

absl::StatusOr<Cluster> Cluster::FromProto(const proto::Cluster& m,
                                           const std::string& source) {
  Cluster c;
  c.name_ = m.name();
  if (m.devices_size() == 0) return Invalid(source, "no devices");
  if (m.nodes() < 0) {
    return Invalid(source, absl::StrCat("nodes: ", m.nodes(), " is negative"));
  }
  const int64_t nodes = std::max(1, m.nodes());
  if (m.devices_size() * nodes > kMaxDevices) {
    return Invalid(source,
                   absl::StrCat(m.devices_size() * nodes, " devices",
                                nodes > 1 ? absl::StrCat(" (", nodes, " nodes of ",
                                                         m.devices_size(), ")")
                                          : "",
                                "; placer takes at most ", kMaxDevices));
  }
  if (m.links_size() > kMaxDevices * (kMaxDevices - 1)) {
    return Invalid(source, absl::StrCat(m.links_size(), " links; at most ",
                                        kMaxDevices * (kMaxDevices - 1)));
  }
  std::set<std::string> names;
  for (int i = 0; i < m.devices_size(); ++i) {
    const proto::Device& d = m.devices(i);
    std::string where = absl::StrCat("devices[", i, "] ('", d.name(), "')");
    if (d.name().empty()) return Invalid(source, where + ": name is empty");
    if (d.name().size() > kMaxNameBytes) {
      return Invalid(source, absl::StrCat("devices[", i, "]: a name of ",
                                          d.name().size(), " bytes; at most ",
                                          kMaxNameBytes));
    }
    if (!names.insert(d.name()).second) {
      return Invalid(source, where + ": duplicate device name");
    }
    if (d.kind() != proto::CPU && d.kind() != proto::GPU) {
      return Invalid(source, where + ": kind must be CPU or GPU");
    }
    if (!(d.peak_flops() > 0)) {
      return Invalid(source, where + ": peak_flops must be positive");
    }
    if (!(d.memory_bandwidth() > 0)) {
      return Invalid(source, where + ": memory_bandwidth must be positive");
    }
    if (d.memory_bytes() <= 0) {
      return Invalid(source, where + ": memory_bytes must be positive");
    }
    if (!(d.bf16_peak_flops() >= 0) || !(d.fp16_peak_flops() >= 0) ||
        !(d.fp8_peak_flops() >= 0)) {
      return Invalid(source,
                     where +
                         ": bf16_peak_flops, fp16_peak_flops and "
                         "fp8_peak_flops must be >= 0 (0: no tensor cores "
                         "for that type)");
    }
    const proto::Achieved& achieved = d.achieved();
    for (const auto& [field, value] :
         {std::pair<const char*, double>{"tensor_core_fraction",
                                         achieved.tensor_core_fraction()},
          {"attention_fraction", achieved.attention_fraction()},
          {"memory_fraction", achieved.memory_fraction()},
          {"fp8_fraction", achieved.fp8_fraction()}}) {
      if (!(value >= 0 && value <= 1)) {
        return Invalid(source, absl::StrCat(where, ": achieved.", field,
                                            " must be in (0, 1] (0 or "
                                            "unsaid: 1, the peak); got ",
                                            value));
      }
    }
    if (!(d.op_overhead_seconds() >= 0)) {
      return Invalid(source, where + ": op_overhead_seconds must be >= 0");
    }
    if (d.has_process() && (d.process() < 0 || d.process() >= kMaxDevices)) {
      return Invalid(source, absl::StrCat(where, ": process must be in [0, ",
                                          kMaxDevices, ")"));
    }
    if (d.host().size() > kMaxNameBytes) {
      return Invalid(source, absl::StrCat(where, ": a host of ", d.host().size(),
                                          " bytes; at most ", kMaxNameBytes));
    }
    c.devices_.push_back(
        {d.name(), d.kind() == proto::GPU ? DeviceKind::kGpu : DeviceKind::kCpu,
         d.peak_flops(), d.memory_bandwidth(), d.memory_bytes(),
         d.op_overhead_seconds(), d.has_process() ? d.process() : -1, d.host(),
         d.bf16_peak_flops(), d.fp16_peak_flops(),
         OrOne(achieved.tensor_core_fraction()),
         OrOne(achieved.attention_fraction()),
         OrOne(achieved.memory_fraction()), d.fp8_peak_flops(),
         OrOne(achieved.fp8_fraction())});
  }
  const int n = c.num_devices();
  if (n > 1) {
    if (!m.has_default_link() || !(m.default_link().bandwidth() > 0) ||
        !(m.default_link().latency_seconds() >= 0)) {
      return Invalid(source,
                     "default_link needs a positive bandwidth and a latency "
                     ">= 0");
    }
  }
  c.links_.assign(n * n, {m.default_link().latency_seconds(),
                          m.default_link().bandwidth()});
  for (int i = 0; i < m.links_size(); ++i) {
    const proto::Link& l = m.links(i);
    std::string where = absl::StrCat("links[", i, "]");
    int src = c.FindDevice(l.src()), dst = c.FindDevice(l.dst());
    if (src < 0) return Invalid(source, where + ": unknown src '" + l.src() + "'");
    if (dst < 0) return Invalid(source, where + ": unknown dst '" + l.dst() + "'");
    if (src == dst) return Invalid(source, where + ": src and dst are the same");
    if (!(l.bandwidth() > 0) || !(l.latency_seconds() >= 0)) {
      return Invalid(source, where +
                                 ": needs a positive bandwidth and a latency "
                                 ">= 0");
    }
    c.links_[src * n + dst] = {l.latency_seconds(), l.bandwidth()};
  }
  if (nodes == 1) return c;
  return c.Replicated(m, nodes, source);
}

absl::StatusOr<Cluster> Cluster::Replicated(const proto::Cluster& m,
                                            int64_t nodes,
                                            const std::string& source) const {
  if (!m.has_between_nodes() || !(m.between_nodes().bandwidth() > 0) ||
      !(m.between_nodes().latency_seconds() >= 0)) {
    return Invalid(source,
                   "between_nodes needs a positive bandwidth and a latency "
                   ">= 0 (nodes is more than 1)");
  }
  for (int i = 0; i < m.devices_size(); ++i) {
    if (!m.devices(i).host().empty() || m.devices(i).has_process()) {
      return Invalid(source,
                     absl::StrCat("devices[", i, "] ('", m.devices(i).name(),
                                  "'): names a host or process, which a "
                                  "cluster of nodes gives each copy"));
    }
  }
  Cluster c;
  c.name_ = name_;
  const int per_node = num_devices();
  for (int64_t k = 0; k < nodes; ++k) {
    for (const Device& d : devices_) {
      Device copy = d;
      copy.name = absl::StrCat("/node:", k, d.name);
      copy.host = absl::StrCat("node", k);
      c.devices_.push_back(std::move(copy));
    }
  }
  const LinkParams between{m.between_nodes().latency_seconds(),
                           m.between_nodes().bandwidth()};
  const size_t n = c.devices_.size();
  c.links_.assign(n * n, between);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (a / per_node == b / per_node) {
        c.links_[a * n + b] = link(a % per_node, b % per_node);
      }
    }
  }
  return c;
}

int Cluster::FindDevice(absl::string_view name) const {
  for (int i = 0; i < num_devices(); ++i) {
    if (devices_[i].name == name) return i;
  }
  return -1;
}

Cluster Cluster::Subset(const std::vector<int>& devices) const {
  Cluster c;
  std::vector<std::string> names;
  for (int d : devices) {
    c.devices_.push_back(devices_[d]);
    names.push_back(devices_[d].name);
  }
  c.name_ = absl::StrCat(name_, "[", absl::StrJoin(names, ","), "]");
  const size_t n = devices.size();
  c.links_.resize(n * n);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      c.links_[a * n + b] = links_[devices[a] * devices_.size() + devices[b]];
    }
  }
  return c;
}

namespace {

// The tensor-core peak of `d` at `precision` (fp8 without an fp8 rate:
// bf16's); 0: none.
double TensorCorePeak(const Device& d, Precision precision) {
  switch (precision) {
    case Precision::kFp8:
      return d.fp8_peak_flops > 0 ? d.fp8_peak_flops : d.bf16_peak_flops;
    case Precision::kBf16:
      return d.bf16_peak_flops;
    case Precision::kFp16:
      return d.fp16_peak_flops;
    case Precision::kFp32:
      return 0;
  }
  return 0;
}

}  // namespace

double Device::PeakFlops(Precision precision) const {
  const double tensor_cores = TensorCorePeak(*this, precision);
  return tensor_cores > 0 ? tensor_cores : peak_flops;
}

double Device::AchievedFlops(Precision precision, bool attention) const {
  const double tensor_cores = TensorCorePeak(*this, precision);
  if (!(tensor_cores > 0)) return peak_flops;
  if (precision == Precision::kFp8 && fp8_peak_flops > 0) {
    return tensor_cores * fp8_fraction;
  }
  return tensor_cores * (attention ? attention_fraction : tensor_core_fraction);
}

bool Device::SameRates(const Device& other) const {
  auto rates = [](const Device& d) {
    return std::make_tuple(static_cast<int>(d.kind), d.peak_flops,
                           d.memory_bandwidth, d.memory_bytes,
                           d.op_overhead_seconds, d.bf16_peak_flops,
                           d.fp16_peak_flops, d.tensor_core_fraction,
                           d.attention_fraction, d.memory_fraction,
                           d.fp8_peak_flops, d.fp8_fraction);
  };
  return rates(*this) == rates(other);
}

double Cluster::total_peak_flops() const {
  double total = 0;
  for (const Device& d : devices_) total += d.peak_flops;
  return total;
}

absl::StatusOr<Cluster> ParseCluster(const std::string& text,
                                     const std::string& source) {
  proto::Cluster message;
  RETURN_IF_ERROR(ParseTextOrJson(text, source, &message));
  return Cluster::FromProto(message, source);
}

absl::StatusOr<Cluster> LoadClusterFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseCluster(text, path);
}

absl::StatusOr<proto::Cluster> PresetClusterMessage(absl::string_view spec) {
  std::vector<std::string> parts =
      absl::StrSplit(spec, absl::MaxSplits(':', 1));
  const ClusterPreset* preset = nullptr;
  for (const ClusterPreset& p : ClusterPresets()) {
    if (parts[0] == p.name) preset = &p;
  }
  if (preset == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown preset '", parts[0], "' (presets: ",
                     absl::StrJoin(PresetClusterNames(), ", "), ")"));
  }
  proto::Cluster message;
  RETURN_IF_ERROR(
      ParseTextOrJson(preset->text, absl::StrCat("preset ", preset->name),
                      &message));
  if (parts.size() == 1) return message;
  int nodes = 0;
  absl::string_view setting = parts[1];
  if (!absl::ConsumePrefix(&setting, "nodes=") ||
      !absl::SimpleAtoi(setting, &nodes) || nodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster '", spec, "': after the preset's name, ':nodes=N' (N >= 1) "
        "is the one setting"));
  }
  if (!message.has_between_nodes()) {
    std::vector<std::string> hosts;
    for (const ClusterPreset& p : ClusterPresets()) {
      proto::Cluster other;
      if (ParseTextOrJson(p.text, p.name, &other).ok() &&
          other.has_between_nodes()) {
        hosts.push_back(p.name);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster '", spec, "': preset ", preset->name,
        " is not a cluster of hosts (it has no between_nodes link); these "
        "are: ", absl::StrJoin(hosts, ", ")));
  }
  message.set_nodes(nodes);
  message.set_name(std::string(spec));
  return message;
}

absl::StatusOr<Cluster> LoadCluster(const std::string& spec) {
  if (absl::StrContains(spec, '.') || absl::StrContains(spec, '/')) {
    return LoadClusterFile(spec);
  }
  absl::StatusOr<proto::Cluster> message = PresetClusterMessage(spec);
  if (absl::IsNotFound(message.status())) {
    return absl::NotFoundError(absl::StrCat(
        "unknown cluster '", spec, "': not a preset (",
        absl::StrJoin(PresetClusterNames(), ", "),
        ") and not a file path (.pbtxt or .json)"));
  }
  RETURN_IF_ERROR(message.status());
  return Cluster::FromProto(*message, absl::StrCat("preset ", spec));
}

std::vector<std::string> PresetClusterNames() {
  std::vector<std::string> names;
  for (const ClusterPreset& p : ClusterPresets()) names.push_back(p.name);
  return names;
}

}  // namespace placer
