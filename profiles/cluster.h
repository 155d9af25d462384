// Cluster: the devices a model is placed on and the links between them.
//
// Contract: a Cluster is always valid once created: at least one device,
// unique names, positive speeds, capacities and link bandwidths, a link
// (latency and bandwidth, full duplex) for every ordered pair of distinct
// devices. Files are protobuf text (.pbtxt) or JSON (.json) with the field
// names of profiles/cluster.proto; errors name the file and the line or
// field. Presets ship as files under profiles/clusters/ and are compiled in,
// so `--cluster p100x4` works anywhere. Bounds on what a file may ask for
// (its link matrix is devices² entries): at most kMaxDevices devices, names
// of at most kMaxNameBytes bytes; beyond them, an error naming the file.
#ifndef PLACER_PROFILES_CLUSTER_H_
#define PLACER_PROFILES_CLUSTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/autocast.h"

namespace placer {

namespace proto {
class Cluster;
}  // namespace proto

inline constexpr int kMaxDevices = 1024;
inline constexpr int kMaxNameBytes = 256;

enum class DeviceKind { kCpu, kGpu };

struct Device {
  std::string name;
  DeviceKind kind = DeviceKind::kCpu;
  double peak_flops = 0;        // FLOP/s
  double memory_bandwidth = 0;  // bytes/s
  int64_t memory_bytes = 0;
  double op_overhead_seconds = 0;
  // The rank that drives it in a distributed run, -1: unsaid (see
  // runtime/rank_group.h RanksOfDevices); the host it is on, "" unsaid.
  int process = -1;
  std::string host;
  // Tensor-core FLOP/s at bf16 and fp16; 0: none (peak_flops applies).
  double bf16_peak_flops = 0;
  double fp16_peak_flops = 0;
  // Fractions of the peaks its kernels reach (proto::Achieved), each in
  // (0, 1]: tensor-core products, fused attention, memory-bound ops.
  double tensor_core_fraction = 1;
  double attention_fraction = 1;
  double memory_fraction = 1;
  // Tensor-core FLOP/s at fp8 (0: none; fp8 products then run at bf16) and
  // the fraction of it products reach.
  double fp8_peak_flops = 0;
  double fp8_fraction = 1;

  // FLOP/s of a node computing at `precision` (graph/autocast.h); fp8
  // without an fp8 rate is bf16's.
  double PeakFlops(Precision precision) const;
  // FLOP/s a node computing at `precision` reaches: PeakFlops times the
  // tensor-core fraction (or, for `attention`, the attention fraction;
  // for fp8 on fp8 tensor cores, the fp8 fraction) where the precision
  // runs on tensor cores; PeakFlops otherwise.
  double AchievedFlops(Precision precision, bool attention) const;
  // Bytes/s memory-bound work reaches: memory_bandwidth x memory_fraction.
  double AchievedBandwidth() const {
    return memory_bandwidth * memory_fraction;
  }
  // Whether the two run every node alike: the same kind, rates, fractions,
  // capacity and overhead (not the name, host or process).
  bool SameRates(const Device& other) const;
};

struct LinkParams {
  double latency_seconds = 0;
  double bandwidth = 0;  // bytes/s
};

class Cluster {
 public:
  // Validates `message`; `source` names it in errors.
  static absl::StatusOr<Cluster> FromProto(const proto::Cluster& message,
                                           const std::string& source);

  const std::string& name() const { return name_; }
  const std::vector<Device>& devices() const { return devices_; }
  int num_devices() const { return static_cast<int>(devices_.size()); }
  const Device& device(int i) const { return devices_[i]; }
  int FindDevice(absl::string_view name) const;  // -1 when absent
  // The link from src to dst (src != dst).
  const LinkParams& link(int src, int dst) const {
    return links_[src * devices_.size() + dst];
  }
  double total_peak_flops() const;
  // These devices (indices here, distinct) alone, in that order, with the
  // links between them: what a search placing ops on part of the cluster
  // hands a policy. Its name says which devices: "p100x4[/gpu:0,/gpu:1]".
  Cluster Subset(const std::vector<int>& devices) const;

 private:
  // The host's devices of `m` (this cluster) copied onto `nodes` hosts
  // (proto::Cluster's nodes and between_nodes); errors name `source`.
  absl::StatusOr<Cluster> Replicated(const proto::Cluster& m, int64_t nodes,
                                     const std::string& source) const;

  std::string name_;
  std::vector<Device> devices_;
  std::vector<LinkParams> links_;  // row-major [src][dst]
};

// Parses protobuf text or JSON (chosen by the extension of `source`).
absl::StatusOr<Cluster> ParseCluster(const std::string& text,
                                     const std::string& source);
absl::StatusOr<Cluster> LoadClusterFile(const std::string& path);
// A preset name (see PresetClusterNames), with ":nodes=N" for N hosts of a
// preset of hosts (dgx_a100, dgx_h100), or a path to a file.
absl::StatusOr<Cluster> LoadCluster(const std::string& spec);
// The message of a preset spec, "NAME" or "NAME:nodes=N" (then named so):
// NotFound for an unknown name, InvalidArgument for another suffix or a
// preset that is not a host.
absl::StatusOr<proto::Cluster> PresetClusterMessage(absl::string_view spec);
std::vector<std::string> PresetClusterNames();

}  // namespace placer

#endif  // PLACER_PROFILES_CLUSTER_H_
