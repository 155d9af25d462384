#include "profiles/profiler.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "graph/op_costs.h"
#include "profiles/signature.h"
#include "runtime/host_setup.h"
#include "runtime/torch_ops.h"

namespace placer {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median of `repeats` timings of `run` (which returns the seconds it
// measured) after `warmup` discarded runs.
template <typename F>
absl::StatusOr<double> Median(int warmup, int repeats, F run) {
  std::vector<double> times;
  for (int i = 0; i < warmup + repeats; ++i) {
    absl::StatusOr<double> t = run();
    if (!t.ok()) return t.status();
    if (i >= warmup) times.push_back(*t);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

absl::StatusOr<torch::Tensor> MakeInput(const Tensor& t) {
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

absl::StatusOr<std::vector<torch::Tensor>> MakeInputs(const Graph& g,
                                                      const Op& op) {
  std::vector<torch::Tensor> inputs;
  for (int in : op.inputs) {
    if (in < 0) {
      inputs.emplace_back();
      continue;
    }
    absl::StatusOr<torch::Tensor> t = MakeInput(g.tensor(in));
    if (!t.ok()) return t.status();
    inputs.push_back(*t);
  }
  return inputs;
}

// As the executor runs a forward op: when the op has a backward node, the
// inputs that get a gradient are autograd leaves and the op records its
// graph.
absl::StatusOr<double> TimeForward(const Graph& g, const Op& op,
                                   const std::vector<bool>& needs,
                                   const ProfilerOptions& o) {
  absl::StatusOr<std::vector<torch::Tensor>> inputs = MakeInputs(g, op);
  if (!inputs.ok()) return inputs.status();
  bool any = false;
  for (const torch::Tensor& leaf : MakeGradientLeaves(*inputs, needs)) {
    any |= leaf.defined();
  }
  std::optional<torch::NoGradGuard> no_grad;
  if (!any) no_grad.emplace();
  return Median(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
    Clock::time_point start = Clock::now();
    absl::StatusOr<std::vector<torch::Tensor>> out = RunTorchOp(op, *inputs);
    if (!out.ok()) return out.status();
    return Since(start);
  });
}

absl::StatusOr<double> TimeBackward(const Graph& g, const Op& op,
                                    const std::vector<bool>& needs,
                                    const ProfilerOptions& o) {
  absl::StatusOr<std::vector<torch::Tensor>> inputs = MakeInputs(g, op);
  if (!inputs.ok()) return inputs.status();
  std::vector<torch::Tensor> wrt;
  for (const torch::Tensor& leaf : MakeGradientLeaves(*inputs, needs)) {
    if (leaf.defined()) wrt.push_back(leaf);
  }
  if (wrt.empty()) return 0.0;
  return Median(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
    absl::StatusOr<std::vector<torch::Tensor>> out = RunTorchOp(op, *inputs);
    if (!out.ok()) return out.status();
    std::vector<torch::Tensor> outputs, grads;
    for (const torch::Tensor& t : *out) {
      if (t.defined() && t.requires_grad()) {
        outputs.push_back(t);
        grads.push_back(torch::ones_like(t));
      }
    }
    if (outputs.empty()) return 0.0;
    Clock::time_point start = Clock::now();
    torch::autograd::grad(outputs, wrt, grads, /*retain_graph=*/false,
                          /*create_graph=*/false, /*allow_unused=*/true);
    return Since(start);
  });
}

absl::StatusOr<double> TimeUpdate(const Tensor& parameter, int partials,
                                  const ProfilerOptions& o) {
  torch::NoGradGuard no_grad;
  torch::Tensor w = torch::randn(parameter.shape);
  torch::Tensor v = torch::zeros(parameter.shape);
  std::vector<torch::Tensor> g;
  for (int k = 0; k < std::max(1, partials); ++k) {
    g.push_back(torch::randn(parameter.shape));
  }
  return Median(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
    Clock::time_point start = Clock::now();
    torch::Tensor sum = g[0];
    for (size_t k = 1; k < g.size(); ++k) sum = sum + g[k];
    v.mul_(0.9).add_(sum);
    w.add_(v, -0.01);
    return Since(start);
  });
}

absl::StatusOr<MeasuredLink> MeasureCopies(const ProfilerOptions& o,
                                           const std::function<void(const std::string&)>& progress) {
  MeasuredLink link;
  for (int64_t bytes = 1; bytes <= o.max_link_bytes; bytes *= 4) {
    torch::Tensor src = torch::ones({bytes}, torch::kByte);
    torch::Tensor dst = torch::empty({bytes}, torch::kByte);
    absl::StatusOr<double> t =
        Median(o.warmup, o.repeats, [&]() -> absl::StatusOr<double> {
          Clock::time_point start = Clock::now();
          dst.copy_(src);
          return Since(start);
        });
    if (!t.ok()) return t.status();
    link.samples.push_back({bytes, *t});
    progress(absl::StrFormat("link copy %d bytes: %.3g s", bytes, *t));
  }
  absl::StatusOr<LinkParams> fit = FitLink(link.samples);
  if (!fit.ok()) return fit.status();
  link.fit = *fit;
  return link;
}

}  // namespace

absl::StatusOr<ProfileReport> ProfileCpu(
    const TrainingView* view, const Cluster& cluster,
    const ProfilerOptions& options,
    const std::function<void(const std::string&)>& progress) {
  if (options.repeats < 1 || options.warmup < 0 || options.threads < 1) {
    return absl::InvalidArgumentError(
        "repeats and threads must be >= 1 and warmup >= 0");
  }
  torch::set_num_threads(options.threads);
  SetBlasThreads(options.threads);
  KeepFreedHostMemory();
  Clock::time_point start = Clock::now();
  ProfileReport report;
  report.profile.source = absl::StrCat(
      "placer profile --devices cpu, ", options.threads, " thread(s), ",
      options.warmup, " warm-up, median of ", options.repeats);

  std::vector<int> cpus;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    if (cluster.device(d).kind == DeviceKind::kCpu) cpus.push_back(d);
  }
  if (cpus.size() >= 2) {
    absl::StatusOr<MeasuredLink> link = MeasureCopies(options, progress);
    if (!link.ok()) return link.status();
    for (int a : cpus) {
      for (int b : cpus) {
        if (a != b) {
          report.profile.links[{cluster.device(a).name,
                                cluster.device(b).name}] = *link;
        }
      }
    }
    progress(absl::StrFormat("link fit: latency %.3g s, bandwidth %.3g B/s",
                             link->fit.latency_seconds, link->fit.bandwidth));
  }
  if (view == nullptr) return report;

  const Graph& g = view->forward();
  std::set<std::string> done;
  const int n = static_cast<int>(view->nodes().size());
  for (int i = 0; i < n; ++i) {
    const TrainingNode& node = view->node(i);
    const Op& op = g.op(node.forward_op);
    if (node.kind != NodeKind::kUpdate &&
        !HasTorchKernel(op.domain, op.op_type)) {
      ++report.nodes_without_kernel;
      continue;
    }
    std::string sig = NodeSignature(*view, i);
    if (!done.insert(sig).second) continue;
    if (Since(start) > options.budget_seconds) {
      ++report.signatures_over_budget;
      continue;
    }
    absl::StatusOr<double> seconds;
    switch (node.kind) {
      case NodeKind::kForward:
        seconds = TimeForward(
            g, op,
            view->backward_node(node.forward_op) >= 0
                ? InputsNeedingGradient(*view, view->backward_node(node.forward_op))
                : std::vector<bool>{},
            options);
        break;
      case NodeKind::kBackward:
        seconds = TimeBackward(g, op, InputsNeedingGradient(*view, i), options);
        break;
      case NodeKind::kUpdate:
        seconds = TimeUpdate(g.tensor(node.parameter),
                             static_cast<int>(node.inputs.size()) - 1, options);
        break;
    }
    if (!seconds.ok()) {
      ++report.failed_signatures;
      report.failures.push_back(absl::StrCat(sig, ": ", seconds.status().message()));
      continue;
    }
    report.profile.ops[{sig, DeviceKind::kCpu}] = {*seconds, options.repeats};
    ++report.measured_signatures;
    if (report.measured_signatures % 25 == 0) {
      progress(absl::StrFormat("%d signatures measured (%.1f s)",
                               report.measured_signatures, Since(start)));
    }
  }
  return report;
}

}  // namespace placer
