#include "runtime/link_probe.h"

#include <torch/torch.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/host_setup.h"
#include "base/statistics.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "runtime/torch_devices.h"

namespace placer {
namespace {

std::string Key(const Cluster& cluster, int a, int b) {
  return absl::StrCat("placer/link_probe/", cluster.device(a).name, "->",
                      cluster.device(b).name);
}

// "bytes:seconds,bytes:seconds,..."
std::string Encode(const std::vector<LinkSample>& samples) {
  std::vector<std::string> parts;
  for (const LinkSample& s : samples) {
    parts.push_back(absl::StrFormat("%d:%.9g", s.bytes, s.seconds));
  }
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<std::vector<LinkSample>> Decode(const std::string& text,
                                               const std::string& key) {
  std::vector<LinkSample> samples;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(part, ':');
    LinkSample s;
    if (f.size() != 2 || !absl::SimpleAtoi(f[0], &s.bytes) ||
        !absl::SimpleAtod(f[1], &s.seconds)) {
      return absl::DataLossError(absl::StrCat(key, ": bad sample '", part, "'"));
    }
    samples.push_back(s);
  }
  return samples;
}

}  // namespace

absl::StatusOr<std::map<std::pair<std::string, std::string>, MeasuredLink>>
MeasureLinksAcrossRanks(
    RankGroup& ranks, const Cluster& cluster,
    const std::vector<int>& rank_of_device, const ProfilerOptions& options,
    const std::function<void(const std::string&)>& progress) {
  std::map<std::pair<std::string, std::string>, MeasuredLink> links;
  ASSIGN_OR_RETURN(std::vector<torch::Device> devices, TorchDevices(cluster));
  const int D = cluster.num_devices();
  const int me = ranks.rank();
  // As in the executors' runs: received buffers reuse freed memory.
  KeepFreedHostMemory();
  for (int a = 0; a < D; ++a) {
    for (int b = 0; b < D; ++b) {
      const int ra = rank_of_device[a], rb = rank_of_device[b];
      if (ra == rb || (me != ra && me != rb)) continue;
      const int channel = 1 + a * D + b;
      std::vector<LinkSample> samples;
      absl::Status status = CatchExceptions("", [&]() -> absl::Status {
        for (int64_t bytes = 1; bytes <= options.max_link_bytes; bytes *= 4) {
          std::vector<double> round_trips;
          for (int i = 0; i < options.warmup + options.repeats; ++i) {
            if (me == ra) {
              torch::Tensor x = torch::ones(
                  {bytes}, torch::dtype(torch::kByte).device(devices[a]));
              const SteadyClock::time_point start = SteadyClock::now();
              RETURN_IF_ERROR(ranks.SendTensor(x, i, rb, channel));
              absl::StatusOr<std::pair<int64_t, torch::Tensor>> back =
                  ranks.RecvTensor(rb, channel);
              if (!back.ok()) return back.status();
              torch::Tensor here = back->second.to(devices[a]);
              Synchronize(devices[a]);
              if (i >= options.warmup) round_trips.push_back(SecondsSince(start));
            } else {
              absl::StatusOr<std::pair<int64_t, torch::Tensor>> got =
                  ranks.RecvTensor(ra, channel);
              if (!got.ok()) return got.status();
              torch::Tensor there = got->second.to(devices[b]);
              Synchronize(devices[b]);
              RETURN_IF_ERROR(ranks.SendTensor(there, got->first, ra, channel));
            }
          }
          if (me == ra) samples.push_back({bytes, Median(round_trips) / 2});
        }
        return absl::OkStatus();
      });
      if (!status.ok()) {
        return WithContext(
            status, absl::StrCat("measuring the link ", cluster.device(a).name,
                                 " -> ", cluster.device(b).name, ": "));
      }
      if (me != ra) continue;
      RETURN_IF_ERROR(ranks.Put(Key(cluster, a, b), Encode(samples)));
    }
  }
  if (me != 0) return links;
  for (int a = 0; a < D; ++a) {
    for (int b = 0; b < D; ++b) {
      if (rank_of_device[a] == rank_of_device[b]) continue;
      const std::string key = Key(cluster, a, b);
      ASSIGN_OR_RETURN(std::string text, ranks.Get(key));
      absl::StatusOr<std::vector<LinkSample>> samples = Decode(text, key);
      if (!samples.ok()) return samples.status();
      MeasuredLink link;
      link.samples = *std::move(samples);
      absl::StatusOr<LinkParams> fit = FitLink(link.samples);
      if (!fit.ok()) {
        return WithContext(
            fit.status(),
            absl::StrCat("the link ", cluster.device(a).name, " -> ",
                         cluster.device(b).name, " (ranks ", rank_of_device[a],
                         " -> ", rank_of_device[b], "): "));
      }
      link.fit = *fit;
      progress(absl::StrFormat(
          "link %s -> %s (ranks %d -> %d): latency %.3g s, bandwidth %.3g B/s",
          cluster.device(a).name, cluster.device(b).name, rank_of_device[a],
          rank_of_device[b], fit->latency_seconds, fit->bandwidth));
      links[{cluster.device(a).name, cluster.device(b).name}] = std::move(link);
    }
  }
  return links;
}

}  // namespace placer
