#include "policies/stage_partitions.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace placer {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

Chunks MakeChunks(const SimulationContext& context, int reference_device) {
  const TrainingView& view = context.view();
  Chunks c;
  for (int n : view.topological_order()) {
    if (view.node(n).kind == NodeKind::kForward) {
      c.op_order.push_back(view.node(n).forward_op);
    }
  }
  const int n = static_cast<int>(c.op_order.size());
  std::vector<int> position(view.num_groups(), 0);
  for (int p = 0; p < n; ++p) position[c.op_order[p]] = p;

  std::vector<double> op_work(n, 0);
  std::vector<int64_t> op_params(n, 0);
  for (int p = 0; p < n; ++p) {
    const int g = c.op_order[p];
    for (int node : view.group_nodes(g)) {
      if (view.node(node).kind != NodeKind::kUpdate) {
        op_work[p] += context.node_seconds(node, reference_device);
      }
    }
    for (int v : view.group_parameters(g)) op_params[p] += view.value(v).bytes;
  }
  // Cut i (between positions i - 1 and i) is illegal inside a weight's
  // readers; activations cross it when made before and read at or after.
  std::vector<int> illegal(n + 1, 0);
  std::vector<int64_t> crossing(n + 1, 0);
  for (const TrainingValue& value : view.values()) {
    const bool weight = value.kind == ValueKind::kParameter;
    const bool activation = value.kind == ValueKind::kActivation &&
                            value.producer >= 0 &&
                            view.node(value.producer).kind ==
                                NodeKind::kForward;
    if (!weight && !activation) continue;
    int lo = n, hi = -1;
    for (int r : value.consumers) {
      const int p = position[view.node(r).forward_op];
      lo = std::min(lo, p);
      hi = std::max(hi, p);
    }
    if (activation) lo = position[view.node(value.producer).forward_op];
    if (hi <= lo) continue;
    if (weight) {
      ++illegal[lo + 1];
      --illegal[hi + 1];
    } else {
      crossing[lo + 1] += value.bytes;
      crossing[hi + 1] -= value.bytes;
    }
  }
  for (int i = 1; i <= n; ++i) {
    illegal[i] += illegal[i - 1];
    crossing[i] += crossing[i - 1];
  }
  double total = 0;
  for (double w : op_work) total += w;
  if (total <= 0) {
    std::fill(op_work.begin(), op_work.end(), 1.0);
    total = n;
  }
  c.start.push_back(0);
  double prefix = 0;
  int next_target = 1;
  for (int i = 1; i < n; ++i) {
    prefix += op_work[i - 1];
    if (illegal[i] > 0) continue;
    if (prefix >= total * next_target / kMaxChunks) {
      c.start.push_back(i);
      while (next_target < kMaxChunks &&
             prefix >= total * next_target / kMaxChunks) {
        ++next_target;
      }
    }
  }
  c.start.push_back(n);
  for (size_t k = 0; k + 1 < c.start.size(); ++k) {
    double w = 0;
    int64_t b = 0;
    for (int p = c.start[k]; p < c.start[k + 1]; ++p) {
      w += op_work[p];
      b += op_params[p];
    }
    c.work.push_back(w);
    c.parameter_bytes.push_back(b);
    c.cut_bytes.push_back(k == 0 ? 0 : crossing[c.start[k]]);
  }
  return c;
}

// For `micro_batches`, the best partition of every stage count on every
// device count the mode allows (pipeline: one device per stage; data: one
// stage on every device; auto: any, two devices or more).
std::vector<Partition> Partitions(const PolicyInput& input, const Chunks& c,
                                  const std::vector<int>& pool,
                                  int micro_batches, Parallelism mode) {
  const int K = c.size();
  const int P = static_cast<int>(pool.size());
  const int max_stages =
      mode == Parallelism::kData ? 1 : std::min(K, P);
  const int max_replicas = mode == Parallelism::kPipeline ? 1 : P;
  // Stage cost of chunks [j, i) on c replicas.
  std::vector<double> stage(static_cast<size_t>(K + 1) * (K + 1) * (P + 1),
                            kInfinity);
  auto at = [&](int j, int i, int r) -> double& {
    return stage[(static_cast<size_t>(j) * (K + 1) + i) * (P + 1) + r];
  };
  for (int j = 0; j < K; ++j) {
    double work = 0;
    int64_t bytes = 0;
    for (int i = j + 1; i <= K; ++i) {
      work += c.work[i - 1];
      bytes += c.parameter_bytes[i - 1];
      for (int r = 1; r <= max_replicas; ++r) {
        if (r > micro_batches) break;
        std::vector<int> ring(pool.begin(), pool.begin() + r);
        const double reduce =
            AllreduceSeconds(input.costs, input.cluster, ring, bytes,
                             AllreduceAlgorithm::kRing);
        at(j, i, r) = work / r + reduce / micro_batches;
      }
    }
  }
  std::vector<double> cut(K, 0);
  for (int j = 1; j < K; ++j) {
    cut[j] = input.costs.TransferSeconds(c.cut_bytes[j], input.cluster,
                                         pool[0], pool[1]);
  }
  // best[(s * (K + 1) + i) * (P + 1) + k]: s stages over chunks [0, i)
  // on k devices.
  const size_t cells = static_cast<size_t>(max_stages + 1) * (K + 1) * (P + 1);
  std::vector<double> best(cells, kInfinity);
  std::vector<std::pair<int, int>> from(cells, {-1, -1});
  auto cell = [&](int s, int i, int k) {
    return (static_cast<size_t>(s) * (K + 1) + i) * (P + 1) + k;
  };
  best[cell(0, 0, 0)] = 0;
  for (int s = 1; s <= max_stages; ++s) {
    for (int i = s; i <= K; ++i) {
      for (int k = s; k <= P; ++k) {
        double& b = best[cell(s, i, k)];
        for (int j = s - 1; j < i; ++j) {
          for (int r = 1; r <= std::min(max_replicas, k - (s - 1)); ++r) {
            const double prev = best[cell(s - 1, j, k - r)];
            if (prev == kInfinity || at(j, i, r) == kInfinity) continue;
            const double v = std::max({prev, at(j, i, r), cut[j]});
            if (v < b) {
              b = v;
              from[cell(s, i, k)] = {j, r};
            }
          }
        }
      }
    }
  }
  // Every stage count on every device count the mode allows.
  std::vector<Partition> out;
  for (int s = 1; s <= max_stages; ++s) {
    if (mode == Parallelism::kPipeline && s < 2) continue;
    for (int k = s; k <= P; ++k) {
      if (mode == Parallelism::kPipeline && k != s) continue;
      if (mode == Parallelism::kData && k != P) continue;
      if (mode == Parallelism::kAuto && k < 2) continue;
      if (best[cell(s, K, k)] == kInfinity) continue;
      Partition p;
      int i = K, devices = k;
      for (int t = s; t > 0; --t) {
        auto [j, r] = from[cell(t, i, devices)];
        p.first_chunk.push_back(i);
        p.replicas.push_back(r);
        i = j;
        devices -= r;
      }
      p.first_chunk.push_back(0);
      std::reverse(p.first_chunk.begin(), p.first_chunk.end());
      std::reverse(p.replicas.begin(), p.replicas.end());
      out.push_back(std::move(p));
    }
  }
  return out;
}

Strategy ToStrategy(const TrainingView& view, const Chunks& c,
                    const std::vector<int>& pool, const Partition& p,
                    int micro_batches) {
  Strategy s;
  s.stage_of_op.assign(view.num_groups(), 0);
  s.micro_batches = micro_batches;
  s.schedule = PipelineSchedule::k1F1B;
  int next_device = 0;
  for (size_t t = 0; t + 1 < p.first_chunk.size(); ++t) {
    PipelineStage stage;
    for (int r = 0; r < p.replicas[t]; ++r) {
      stage.replicas.push_back({{pool[next_device++]}});
    }
    s.stages.push_back(stage);
    for (int pos = c.start[p.first_chunk[t]];
         pos < c.start[p.first_chunk[t + 1]]; ++pos) {
      s.stage_of_op[c.op_order[pos]] = static_cast<int>(t);
    }
  }
  return s;
}

// Chunks cut into `stages` contiguous stages of about equal work, each
// with `replicas` replicas.
Partition EvenPartition(const Chunks& c, int stages, int replicas) {
  const int K = c.size();
  std::vector<double> cumulative(K + 1, 0);
  for (int i = 0; i < K; ++i) cumulative[i + 1] = cumulative[i] + c.work[i];
  Partition p;
  p.first_chunk = {0};
  for (int k = 1; k < stages; ++k) {
    const double target = cumulative[K] * k / stages;
    int i = p.first_chunk.back() + 1;
    while (i < K - (stages - k) && cumulative[i] < target) ++i;
    p.first_chunk.push_back(i);
  }
  p.first_chunk.push_back(K);
  p.replicas.assign(stages, replicas);
  return p;
}

}  // namespace placer
