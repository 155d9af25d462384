#include "runtime/profiler.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/host_setup.h"
#include "base/statistics.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"
#include "base/torch_status.h"
#include "graph/op_costs.h"
#include "profiles/signature.h"
#include "runtime/cpu_cores.h"
#include "runtime/executor.h"
#include "runtime/torch_devices.h"
#include "runtime/torch_ops.h"

namespace placer {
namespace {

using Clock = SteadyClock;

// The median (base/statistics.h: the one statistic every measurement
// uses) of `repeats` timings of `run` (which returns the seconds it
// measured) after `warmup` discarded runs.
template <typename F>
absl::StatusOr<double> MedianOfRuns(int warmup, int repeats, F run) {
  std::vector<double> times;
  for (int i = 0; i < warmup + repeats; ++i) {
    ASSIGN_OR_RETURN(double t, run());
    if (i >= warmup) times.push_back(t);
  }
  return Median(std::move(times));
}

absl::StatusOr<torch::Tensor> MakeHostInput(const Tensor& t) {
  if (t.data != nullptr && !t.data->raw.empty()) return TensorFromData(*t.data);
  if (!t.shape_known) {
    return absl::FailedPreconditionError("input '" + t.name +
                                         "' has no known shape");
  }
  if (IsFloatingPoint(t.dtype)) {
    return torch::randn(t.shape, ToTorchType(t.dtype)) * 0.1;
  }
  // Indices and labels: 0 is valid for every gather and loss.
  return torch::zeros(t.shape, ToTorchType(t.dtype));
}

absl::StatusOr<torch::Tensor> MakeInput(const Tensor& t,
                                        const torch::Device& device) {
  absl::StatusOr<torch::Tensor> host = MakeHostInput(t);
  if (!host.ok() || device.is_cpu()) return host;
  return host->to(device);
}

absl::StatusOr<std::vector<torch::Tensor>> MakeInputs(
    const Graph& g, const Op& op, const torch::Device& device) {
  std::vector<torch::Tensor> inputs;
  for (int in : op.inputs) {
    if (in < 0) {
      inputs.emplace_back();
      continue;
    }
    ASSIGN_OR_RETURN(torch::Tensor t, MakeInput(g.tensor(in), device));
    inputs.push_back(t);
  }
  return inputs;
}

// A stopwatch for work queued on `device`: waits for what is queued before
// starting and for what was queued in between before stopping.
class DeviceTimer {
 public:
  explicit DeviceTimer(const torch::Device& device) : device_(device) {
    Synchronize(device_);
    start_ = Clock::now();
  }
  double Seconds() const {
    Synchronize(device_);
    return SecondsSince(start_);
  }

 private:
  torch::Device device_;
  Clock::time_point start_;
};

// As the executor runs a forward op: when the op has a backward node, the
// inputs that get a gradient are autograd leaves and the op records its
// graph.
absl::StatusOr<double> TimeForward(const Graph& g, const Op& op,
                                   const std::vector<bool>& needs,
                                   const torch::Device& device,
                                   const ProfilerOptions& o) {
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> inputs,
                   MakeInputs(g, op, device));
  bool any = false;
  for (const torch::Tensor& leaf : MakeGradientLeaves(inputs, needs)) {
    any |= leaf.defined();
  }
  std::optional<torch::NoGradGuard> no_grad;
  if (!any) no_grad.emplace();
  return MedianOfRuns(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
    DeviceTimer timer(device);
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> out, RunTorchOp(op, inputs));
    return timer.Seconds();
  });
}

absl::StatusOr<double> TimeBackward(const Graph& g, const Op& op,
                                    const std::vector<bool>& needs,
                                    const torch::Device& device,
                                    const ProfilerOptions& o) {
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> inputs,
                   MakeInputs(g, op, device));
  std::vector<torch::Tensor> wrt;
  for (const torch::Tensor& leaf : MakeGradientLeaves(inputs, needs)) {
    if (leaf.defined()) wrt.push_back(leaf);
  }
  if (wrt.empty()) return 0.0;
  return MedianOfRuns(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
    ASSIGN_OR_RETURN(std::vector<torch::Tensor> out, RunTorchOp(op, inputs));
    std::vector<torch::Tensor> outputs, grads;
    for (const torch::Tensor& t : out) {
      if (t.defined() && t.requires_grad()) {
        outputs.push_back(t);
        grads.push_back(torch::ones_like(t));
      }
    }
    if (outputs.empty()) return 0.0;
    DeviceTimer timer(device);
    // As the executor keeps them (op_autograd.h): each owning its bytes.
    for (const torch::Tensor& g : torch::autograd::grad(
             outputs, wrt, grads, /*retain_graph=*/false,
             /*create_graph=*/false, /*allow_unused=*/true)) {
      OwnBytes(g);
    }
    return timer.Seconds();
  });
}

absl::StatusOr<double> TimeUpdate(const Tensor& parameter, int partials,
                                  Optimizer optimizer,
                                  const torch::Device& device,
                                  const ProfilerOptions& o) {
  torch::NoGradGuard no_grad;
  auto on = torch::TensorOptions().device(device);
  torch::Tensor w = torch::randn(parameter.shape, on);
  // The executor's update (ExecutorOptions' defaults).
  ParameterUpdate update(optimizer, ExecutorOptions().update, w);
  std::vector<torch::Tensor> g;
  for (int k = 0; k < std::max(1, partials); ++k) {
    g.push_back(torch::randn(parameter.shape, on));
  }
  return MedianOfRuns(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
    DeviceTimer timer(device);
    torch::Tensor sum = g[0];
    for (size_t k = 1; k < g.size(); ++k) sum = sum + g[k];
    update.Apply(sum);
    return timer.Seconds();
  });
}

// Adding a micro-batch's gradient into a parameter's buffer, as the
// strategy executor does it (in place). Inside a step the buffer was last
// touched a micro-batch ago, so caches are flushed (64 MiB written) before
// each run (timed warm, it looked 3x cheaper, 10x for small tensors).
// `flush`: 16 Mi floats on `device`, written before each run; undefined:
// timed warm, as a partial gradient is added right after the node that
// made it into a buffer the same worker touched one partial before.
absl::StatusOr<double> TimeAccumulate(const Tensor& parameter,
                                      const torch::Device& device,
                                      torch::Tensor& flush,
                                      const ProfilerOptions& o) {
  torch::NoGradGuard no_grad;
  auto on = torch::TensorOptions().device(device);
  torch::Tensor buffer = torch::randn(parameter.shape, on);
  torch::Tensor g = torch::randn(parameter.shape, on);
  return MedianOfRuns(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
    if (flush.defined()) flush.add_(1);
    Synchronize(device);
    DeviceTimer timer(device);
    buffer.add_(g);
    return timer.Seconds();
  });
}

// Copies from `src` to `dst` as the executor's link workers make them
// (a clone between CPU devices, Tensor::to otherwise), 1 B to
// max_link_bytes, and the latency/bandwidth fit.
absl::StatusOr<MeasuredLink> MeasureCopies(
    const torch::Device& src, const torch::Device& dst,
    const ProfilerOptions& o,
    const std::function<void(const std::string&)>& progress) {
  OwnStreams streams({dst, src});  // as a link worker's
  MeasuredLink link;
  for (int64_t bytes = 1; bytes <= o.max_link_bytes; bytes *= 4) {
    torch::Tensor from = torch::ones({bytes}, torch::dtype(torch::kByte).device(src));
    ASSIGN_OR_RETURN(
        double t,
        MedianOfRuns(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
          DeviceTimer timer(src);
          torch::Tensor copy =
              src.is_cpu() && dst.is_cpu()
                  ? from.clone()
                  : from.to(dst, /*non_blocking=*/false, /*copy=*/true);
          Synchronize(dst);
          Synchronize(src);
          return timer.Seconds();
        }));
    link.samples.push_back({bytes, t});
  }
  absl::StatusOr<LinkParams> fit = FitLink(link.samples);
  if (!fit.ok()) return fit.status();
  link.fit = *fit;
  progress(absl::StrFormat("link %s -> %s: latency %.3g s, bandwidth %.3g B/s",
                           src.str(), dst.str(), fit->latency_seconds,
                           fit->bandwidth));
  return link;
}

const char* KindName(DeviceKind kind) {
  return kind == DeviceKind::kGpu ? "gpu" : "cpu";
}

}  // namespace

namespace {

absl::StatusOr<ProfileReport> ProfileDevicesOrThrow(
    const TrainingView* view, const Cluster& cluster,
    const ProfilerOptions& options,
    const std::function<void(const std::string&)>& progress);

}  // namespace

// LibTorch throws (allocating a copy's buffer, a device that fails); no
// exception leaves the profiler.
absl::StatusOr<ProfileReport> ProfileDevices(
    const TrainingView* view, const Cluster& cluster,
    const ProfilerOptions& options,
    const std::function<void(const std::string&)>& progress) {
  return CatchExceptions("profile: ", [&] {
    return ProfileDevicesOrThrow(view, cluster, options, progress);
  });
}

namespace {

absl::StatusOr<ProfileReport> ProfileDevicesOrThrow(
    const TrainingView* view, const Cluster& cluster,
    const ProfilerOptions& options,
    const std::function<void(const std::string&)>& progress) {
  if (options.repeats < 1 || options.warmup < 0 || options.threads < 1) {
    return absl::InvalidArgumentError(
        "repeats and threads must be >= 1 and warmup >= 0");
  }
  std::vector<DeviceKind> kinds = options.kinds;
  if (kinds.empty()) {
    for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kGpu}) {
      for (const Device& d : cluster.devices()) {
        if (d.kind == k) {
          kinds.push_back(k);
          break;
        }
      }
    }
  }
  // The torch device of each cluster device whose kind is measured; the
  // first of each kind times that kind's ops.
  std::vector<std::optional<torch::Device>> torch_devices(cluster.num_devices());
  std::map<DeviceKind, torch::Device> op_device;
  std::map<DeviceKind, int> first_of_kind;  // cluster device
  const bool gpus = std::count(kinds.begin(), kinds.end(), DeviceKind::kGpu) > 0;
  std::vector<torch::Device> mapped;
  if (gpus) {
    ASSIGN_OR_RETURN(std::vector<torch::Device> all, TorchDevices(cluster));
    mapped = std::move(all);
  }
  for (int d = 0; d < cluster.num_devices(); ++d) {
    const DeviceKind k = cluster.device(d).kind;
    if (std::count(kinds.begin(), kinds.end(), k) == 0) continue;
    torch_devices[d] = gpus ? mapped[d] : torch::Device(torch::kCPU);
    op_device.emplace(k, *torch_devices[d]);
    first_of_kind.emplace(k, d);
  }
  std::string names;
  for (DeviceKind k : kinds) {
    if (op_device.count(k) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "profile: cluster '", cluster.name(), "' has no ", KindName(k),
          " device to measure"));
    }
    absl::StrAppend(&names, names.empty() ? "" : ",", KindName(k));
  }

  torch::set_num_threads(options.threads);
  SetBlasThreads(options.threads);
  KeepFreedHostMemory();
  Clock::time_point start = Clock::now();
  ProfileReport report;
  report.profile.source = absl::StrCat(
      "placer profile --devices ", names, ", ", options.threads,
      " thread(s) per CPU, ", options.warmup, " warm-up, median of ",
      options.repeats);
  const auto resume_ops =
      options.resume ? options.resume->ops : decltype(report.profile.ops){};
  // Its source is this run's, then nothing or "; ..." (overlays, a stop).
  if (options.resume && options.resume->source != report.profile.source &&
      !absl::StartsWith(options.resume->source,
                        absl::StrCat(report.profile.source, ";"))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "profile: the profile to resume was measured as '",
        options.resume->source, "', this run measures as '",
        report.profile.source,
        "': resume with the same --devices, --threads, --warmup and "
        "--repeats, or start a new profile"));
  }

  // Links: one fit per pair of torch devices (every pair of CPU devices
  // shares the CPU-to-CPU fit), recorded for every ordered pair of
  // measured cluster devices.
  std::map<std::pair<std::string, std::string>, MeasuredLink> fits;
  auto stopping = [&] {
    report.stopped = report.stopped || (options.stop && options.stop());
    return report.stopped;
  };
  for (int a = 0; a < cluster.num_devices(); ++a) {
    for (int b = 0; b < cluster.num_devices(); ++b) {
      if (a == b || !torch_devices[a] || !torch_devices[b]) continue;
      std::pair<std::string, std::string> key{torch_devices[a]->str(),
                                              torch_devices[b]->str()};
      auto it = fits.find(key);
      if (it == fits.end()) {
        if (stopping()) continue;
        ASSIGN_OR_RETURN(MeasuredLink link,
                         MeasureCopies(*torch_devices[a], *torch_devices[b],
                                       options, progress));
        it = fits.emplace(key, std::move(link)).first;
      }
      report.profile.links[{cluster.device(a).name, cluster.device(b).name}] =
          it->second;
    }
  }
  if (view == nullptr) {
    if (report.stopped) absl::StrAppend(&report.profile.source, "; stopped");
    return report;
  }

  const Graph& g = view->forward();
  const int n = static_cast<int>(view->nodes().size());
  std::vector<bool> has_kernel(n);
  for (int i = 0; i < n; ++i) {
    const TrainingNode& node = view->node(i);
    const Op& op = g.op(node.forward_op);
    has_kernel[i] = node.kind == NodeKind::kUpdate ||
                    HasTorchKernel(op.domain, op.op_type);
    report.nodes_without_kernel += !has_kernel[i];
  }
  std::vector<std::vector<int>> cores;
  if (options.pin_cores) {
    absl::StatusOr<std::vector<std::vector<int>>> c =
        CpuDeviceCores(cluster, options.threads, AllowedCores());
    if (c.ok()) cores = std::move(*c);
  }
  for (const auto& [kind, device] : op_device) {
    ScopedPin pin(cores.empty() ? std::vector<int>{}
                                : cores[first_of_kind.at(kind)]);
    std::set<std::string> done;
    torch::Tensor flush;  // for TimeAccumulate, made on first use
    torch::Tensor warm;   // undefined: TimeAccumulate without a flush
    // Times adding a gradient of `tensor`'s shape into a buffer, after a
    // cache flush or warm, and records it as `signature`, or the failure.
    // True when `signature`'s timing is kept from `resume` (copied).
    auto kept = [&](const std::string& signature) {
      auto it = resume_ops.find({signature, kind});
      if (it == resume_ops.end()) return false;
      report.profile.ops[it->first] = it->second;
      return true;
    };
    auto time_addition = [&](const std::string& signature, const Tensor& tensor,
                             bool flushed) {
      if (kept(signature) || stopping()) return;
      absl::StatusOr<double> added;
      try {
        if (flushed && !flush.defined()) {
          flush =
              torch::zeros({16 << 20}, torch::TensorOptions().device(device));
        }
        added = TimeAccumulate(tensor, device, flushed ? flush : warm, options);
      } catch (const std::exception& e) {
        added = TorchErrorStatus(e, "");
      }
      if (added.ok()) {
        report.profile.ops[{signature, kind}] = {*added, options.repeats};
      } else {
        ++report.failed_signatures;
        report.failures.push_back(absl::StrCat(KindName(kind), " ", signature,
                                               ": ", added.status().message()));
      }
    };
    for (int i = 0; i < n; ++i) {
      if (!has_kernel[i]) continue;
      const TrainingNode& node = view->node(i);
      const Op& op = g.op(node.forward_op);
      std::string sig = NodeSignature(*view, i);
      if (!done.insert(sig).second) continue;
      if (kept(sig)) {
        ++report.resumed_signatures;
        // An update's accumulation is a signature of its own: kept too, or
        // timed if the stopped run did not reach it.
        if (node.kind == NodeKind::kUpdate) {
          std::string accumulate = AccumulateSignature(*view, i);
          if (done.insert(accumulate).second) {
            time_addition(accumulate, g.tensor(node.parameter),
                          /*flushed=*/true);
          }
        }
        continue;
      }
      if (stopping()) {
        ++report.signatures_stopped;
        continue;
      }
      if (SecondsSince(start) > options.budget_seconds) {
        ++report.signatures_over_budget;
        continue;
      }
      absl::StatusOr<double> seconds;
      try {
        switch (node.kind) {
          case NodeKind::kForward:
            seconds = TimeForward(
                g, op,
                view->backward_node(node.forward_op) >= 0
                    ? InputsNeedingGradient(*view,
                                            view->backward_node(node.forward_op))
                    : std::vector<bool>{},
                device, options);
            break;
          case NodeKind::kBackward:
            seconds = TimeBackward(g, op, InputsNeedingGradient(*view, i),
                                   device, options);
            break;
          case NodeKind::kUpdate:
            seconds = TimeUpdate(g.tensor(node.parameter),
                                 static_cast<int>(node.inputs.size()) - 1,
                                 view->options().optimizer, device, options);
            break;
        }
      } catch (const std::exception& e) {  // e.g. CUDA out of memory
        seconds = TorchErrorStatus(e, "");
      }
      if (!seconds.ok()) {
        ++report.failed_signatures;
        report.failures.push_back(absl::StrCat(KindName(kind), " ", sig, ": ",
                                               seconds.status().message()));
        continue;
      }
      report.profile.ops[{sig, kind}] = {*seconds, options.repeats};
      ++report.measured_signatures;
      if (node.kind == NodeKind::kUpdate) {
        // What gradient accumulation adds per micro-batch (strategies).
        std::string accumulate = AccumulateSignature(*view, i);
        if (done.insert(accumulate).second) {
          time_addition(accumulate, g.tensor(node.parameter), /*flushed=*/true);
        }
      }
      if (report.measured_signatures % 25 == 0) {
        progress(absl::StrFormat("%d signatures measured (%.1f s)",
                                 report.measured_signatures, SecondsSince(start)));
      }
    }
    // What the executor's worker spends adding a partial gradient into the
    // buffer its device already holds for it (a weight read at every step
    // of an unrolled layer: one addition per step after the first), once
    // per shape, warm (the accumulation above flushes the caches first: a
    // micro-batch ago; here the buffer was touched one partial ago and the
    // partial was just made; flushed, the small GNMT-2's additions were
    // charged about 3x what its executor's worker spent on them).
    for (int s = 0; s < static_cast<int>(view->gradient_sums().size()); ++s) {
      const GradientSum& sum = view->gradient_sums()[s];
      if (sum.partials.size() < 2) continue;
      std::string add = PartialAddSignature(*view, s);
      if (done.insert(add).second) {
        time_addition(add, g.tensor(sum.tensor), /*flushed=*/false);
      }
    }
  }
  if (report.stopped) {
    absl::StrAppend(&report.profile.source, "; stopped with ",
                    report.signatures_stopped, " node signatures not measured");
  }
  return report;
}

}  // namespace

}  // namespace placer
