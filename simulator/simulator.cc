#include "simulator/simulator.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"
#include "simulator/gradient_partials.h"

namespace placer {
namespace {

// Longest path to the end (inclusive) with each node at `seconds`.
std::vector<double> UpwardRanks(const TrainingView& view,
                                const std::vector<double>& seconds,
                                const std::vector<std::vector<int>>& control) {
  const auto& topo = view.topological_order();
  std::vector<double> rank(view.nodes().size(), 0);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    int n = *it;
    double tail = 0;
    for (int out : view.node(n).outputs) {
      for (int c : view.value(out).consumers) tail = std::max(tail, rank[c]);
    }
    for (int c : control[n]) tail = std::max(tail, rank[c]);
    rank[n] = seconds[n] + tail;
  }
  return rank;
}

class TopologicalReadyOrder : public ReadyOrder {
 public:
  std::vector<double> Priorities(const SimulationContext& c) const override {
    std::vector<double> p(c.num_nodes());
    const auto& topo = c.view().topological_order();
    for (size_t k = 0; k < topo.size(); ++k) p[topo[k]] = static_cast<double>(k);
    return p;
  }
};

class CriticalPathReadyOrder : public ReadyOrder {
 public:
  std::vector<double> Priorities(const SimulationContext& c) const override {
    std::vector<double> seconds(c.num_nodes());
    std::vector<std::vector<int>> control(c.num_nodes());
    for (int n = 0; n < c.num_nodes(); ++n) {
      seconds[n] = c.min_node_seconds(n);
      control[n] = c.control_dependents(n);
    }
    std::vector<double> rank = UpwardRanks(c.view(), seconds, control);
    for (double& r : rank) r = -r;
    return rank;
  }
};

}  // namespace

std::unique_ptr<ReadyOrder> NewTopologicalReadyOrder() {
  return std::make_unique<TopologicalReadyOrder>();
}

std::unique_ptr<ReadyOrder> NewCriticalPathReadyOrder() {
  return std::make_unique<CriticalPathReadyOrder>();
}

absl::StatusOr<std::unique_ptr<ReadyOrder>> NewReadyOrder(
    const std::string& name) {
  static const auto* orders =
      new std::vector<std::pair<std::string, std::unique_ptr<ReadyOrder> (*)()>>{
          {"critical_path", NewCriticalPathReadyOrder},
          {"topological", NewTopologicalReadyOrder}};
  std::vector<std::string> names;
  for (const auto& [known, make] : *orders) {
    if (known == name) return make();
    names.push_back(known);
  }
  return absl::NotFoundError(absl::StrCat("unknown ready order '", name,
                                          "'; known: ",
                                          absl::StrJoin(names, ", ")));
}

SimulationContext SimulationContext::Create(const TrainingView& view,
                                            const Cluster& cluster,
                                            const CostModel& costs,
                                            const ReadyOrder& order) {
  SimulationContext c;
  c.view_ = &view;
  c.cluster_ = &cluster;
  c.costs_ = &costs;
  const int n = c.num_nodes(), d = c.num_devices();
  c.node_seconds_.resize(static_cast<size_t>(n) * d);
  c.alone_seconds_.resize(static_cast<size_t>(n) * d);
  c.min_seconds_.resize(n);
  c.control_dependents_.assign(n, {});
  std::vector<std::string> hosts;
  for (const Device& device : cluster.devices()) {
    auto it = std::find(hosts.begin(), hosts.end(), device.host);
    c.host_of_.push_back(static_cast<int>(it - hosts.begin()));
    if (it == hosts.end()) hosts.push_back(device.host);
  }
  double flops_at[3] = {0, 0, 0}, min_sum = 0;  // flops per Precision
  bool any_alone = false;
  for (int i = 0; i < n; ++i) {
    double best = 0;
    for (int k = 0; k < d; ++k) {
      double s = costs.NodeSeconds(view, i, cluster.device(k));
      double alone = costs.AloneNodeSeconds(view, i, cluster.device(k));
      c.node_seconds_[static_cast<size_t>(i) * d + k] = s;
      c.alone_seconds_[static_cast<size_t>(i) * d + k] = alone;
      any_alone |= alone != s;
      best = k == 0 ? std::min(s, alone) : std::min({best, s, alone});
    }
    c.min_seconds_[i] = best;
    min_sum += best;
    flops_at[static_cast<int>(view.node(i).compute_precision)] +=
        view.node(i).cost.flops;
    c.inaccurate_nodes_ += costs.IsGuess(view, i);
    for (int p : view.node(i).control_inputs) {
      c.control_dependents_[p].push_back(i);
    }
  }
  if (!any_alone) c.alone_seconds_.clear();
  const int sums = static_cast<int>(view.gradient_sums().size());
  c.add_seconds_.assign(static_cast<size_t>(sums) * d, 0);
  bool any_add = false;
  for (int s = 0; s < sums; ++s) {
    if (view.gradient_sums()[s].partials.size() < 2) continue;
    for (int k = 0; k < d; ++k) {
      double add = costs.PartialAddSeconds(view, s, cluster.device(k));
      c.add_seconds_[static_cast<size_t>(s) * d + k] = add;
      any_add |= add != 0;
    }
  }
  if (!any_add) c.add_seconds_.clear();
  c.key_rank_ = NodeKeyRanks(view);

  c.home_group_.assign(view.values().size(), -1);
  for (int g = 0; g < view.num_groups(); ++g) {
    for (int v : view.group_parameters(g)) c.home_group_[v] = g;
  }

  std::vector<double> ranks =
      UpwardRanks(view, c.min_seconds_, c.control_dependents_);
  double path = 0;
  for (double r : ranks) path = std::max(path, r);
  // The cluster's whole compute at each precision's rate.
  double flops_seconds = 0;
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    const double at = flops_at[static_cast<int>(p)];
    if (at == 0) continue;
    double rate = 0;
    for (const Device& device : cluster.devices()) {
      rate += device.PeakFlops(p);
    }
    flops_seconds += at / rate;
  }
  c.lower_bound_seconds_ = std::max({flops_seconds, min_sum / d, path});
  c.priority_ = order.Priorities(c);
  return c;
}

namespace {

constexpr double kNever = -1;

enum class EventKind { kNodeFinish, kTransferArrive };

struct Event {
  double time;
  int64_t seq;
  EventKind kind;
  int id;  // node, or transfer index
  bool operator>(const Event& o) const {
    return time != o.time ? time > o.time : seq > o.seq;
  }
};

// What a node or transfer waited for last (for the critical path).
struct Cause {
  bool is_transfer = false;
  int index = -1;  // -1: nothing (started at time 0)
};

class Simulation {
 public:
  Simulation(const SimulationContext& c, const Placement& p,
             const SimulationOptions& o)
      : c_(c),
        view_(c.view()),
        options_(o),
        D_(c.num_devices()),
        dev_(DevicesOfNodes(view_, p)),
        group_device_(p.device_of_op) {}

  SimulationResult Run();

 private:
  size_t Slot(int value, int device) const {
    return static_cast<size_t>(value) * D_ + device;
  }
  bool IsTransient(int v) const {
    ValueKind k = view_.value(v).kind;
    return k == ValueKind::kActivation || k == ValueKind::kGradient;
  }
  void Allocate(int device, int64_t bytes) {
    memory_[device] += bytes;
    peak_[device] = std::max(peak_[device], memory_[device]);
    if (options_.record_schedule) Sample(device);
  }
  void Free(int device, int64_t bytes) {
    memory_[device] -= bytes;
    if (options_.record_schedule) Sample(device);
  }
  void Sample(int device) {
    memory_samples_.push_back({now_, device, memory_[device]});
  }
  void Release(int v, int device) {
    if (--users_[Slot(v, device)] == 0 &&
        (IsTransient(v) || device != source_device_[v])) {
      Free(device, view_.value(v).bytes);
    }
  }
  void Push(double time, EventKind kind, int id) {
    events_.push({time, seq_++, kind, id});
  }
  void InputArrived(int node, double time, Cause cause) {
    cause_[node] = cause;
    if (--pending_[node] == 0) {
      ready_time_[node] = time;
      ready_[dev_[node]].push(node);
    }
  }
  void RequestTransfer(int v, int src, int dst, double time, Cause cause);
  // Queues `bytes` on the link src->dst; returns the transfer's index.
  int QueueTransfer(int value, int sum, int src, int dst, int64_t bytes,
                    double time, Cause cause);
  size_t SumSlot(int sum, int device) const {
    return static_cast<size_t>(sum) * D_ + device;
  }
  // A partial gradient (or an arriving buffer) of `sum` is on `device`.
  void Accumulate(int sum, int device) {
    if (has_buffer_[SumSlot(sum, device)]) {
      Free(device, view_.gradient_sums()[sum].bytes);  // added, freed
    } else {
      has_buffer_[SumSlot(sum, device)] = 1;
    }
  }
  void PartialDone(int value, int device, double time, Cause cause);
  void TryStart(int device, double time);
  void Finish(int node, double time);
  void Arrive(int transfer, double time);
  void TraceCriticalPath(SimulationResult& result) const;

  const SimulationContext& c_;
  const TrainingView& view_;
  const SimulationOptions& options_;
  const int D_;
  std::vector<int> dev_;           // per view node
  const std::vector<int>& group_device_;  // per group (= forward op)
  std::vector<int> pending_;
  std::vector<double> ready_time_, start_, end_;
  std::vector<Cause> cause_;
  std::vector<int> source_device_;  // parameters: home; activations: producer
  std::vector<int> users_;          // per (value, device)
  std::vector<char> present_;       // per (value, device): sent or resident
  std::vector<int64_t> memory_, peak_;
  double now_ = 0;  // the time of the event being handled
  std::vector<MemorySample> memory_samples_;  // with record_schedule
  std::vector<double> busy_;
  std::vector<bool> running_;
  std::vector<char> alone_;  // per device: the only one of its host in use
  std::vector<int> last_on_device_;
  std::vector<double> link_free_;
  std::vector<int> last_on_link_;
  std::vector<ScheduledTransfer> transfers_;
  std::vector<Cause> transfer_cause_;
  int64_t bytes_moved_ = 0;
  // Per (gradient sum, device): the partials made there, how many are
  // done, whether the device holds the sum's buffer.
  PartialsByDevice partials_;
  std::vector<int> partials_done_;
  std::vector<char> has_buffer_;

  struct ReadyCompare {
    const SimulationContext* c;
    bool operator()(int a, int b) const {  // true: b runs first
      double pa = c->priority(a), pb = c->priority(b);
      if (pa != pb) return pa > pb;
      return c->key_rank(a) > c->key_rank(b);
    }
  };
  std::vector<std::priority_queue<int, std::vector<int>, ReadyCompare>> ready_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t seq_ = 0;
};

void Simulation::RequestTransfer(int v, int src, int dst, double time,
                                 Cause cause) {
  present_[Slot(v, dst)] = 1;
  ++users_[Slot(v, src)];  // the sender holds the buffer until the end
  QueueTransfer(v, -1, src, dst, view_.value(v).bytes, time, cause);
}

int Simulation::QueueTransfer(int value, int sum, int src, int dst,
                              int64_t bytes, double time, Cause cause) {
  int link = src * D_ + dst;
  double start = std::max(time, link_free_[link]);
  if (link_free_[link] > time && last_on_link_[link] >= 0) {
    cause = {true, last_on_link_[link]};  // waited for the link
  }
  double end =
      start + c_.costs().TransferSeconds(bytes, c_.cluster(), src, dst);
  link_free_[link] = end;
  int index = static_cast<int>(transfers_.size());
  last_on_link_[link] = index;
  transfers_.push_back({value, sum, src, dst, bytes, start, end});
  transfer_cause_.push_back(cause);
  Allocate(dst, bytes);
  bytes_moved_ += bytes;
  Push(end, EventKind::kTransferArrive, index);
  return index;
}

void Simulation::PartialDone(int value, int device, double time, Cause cause) {
  int s = view_.sum_of(value);
  const GradientSum& sum = view_.gradient_sums()[s];
  Accumulate(s, device);
  size_t slot = SumSlot(s, device);
  if (++partials_done_[slot] < partials_.count[slot]) return;
  int sink_device = dev_[sum.sink];
  if (device == sink_device) {
    InputArrived(sum.sink, time, cause);
  } else {
    QueueTransfer(partials_.first[slot], s, device, sink_device, sum.bytes,
                  time, cause);
  }
}

void Simulation::TryStart(int device, double time) {
  if (running_[device] || ready_[device].empty()) return;
  int n = ready_[device].top();
  ready_[device].pop();
  running_[device] = true;
  if (ready_time_[n] < time && last_on_device_[device] >= 0) {
    cause_[n] = {false, last_on_device_[device]};  // waited for the device
  }
  start_[n] = time;
  end_[n] = time + (alone_[device] ? c_.alone_node_seconds(n, device)
                                   : c_.node_seconds(n, device));
  // Partials added into a buffer the device already holds: the device
  // adds them right after the node (none to look for when all cost 0).
  if (c_.has_partial_adds()) {
    for (int out : view_.node(n).outputs) {
      const int s = view_.sum_of(out);
      if (s >= 0 && has_buffer_[SumSlot(s, device)]) {
        end_[n] += c_.partial_add_seconds(s, device);
      }
    }
  }
  for (int out : view_.node(n).outputs) {
    Allocate(device, view_.value(out).bytes);
  }
  // What the op keeps for its backward besides values (a fused recurrent
  // layer's steps), until its backward node ends.
  if (view_.node(n).saved_workspace_bytes > 0) {
    Allocate(device, view_.node(n).saved_workspace_bytes);
  }
  if (view_.node(n).scratch_bytes > 0) {
    Allocate(device, view_.node(n).scratch_bytes);  // until it ends
  }
  Push(end_[n], EventKind::kNodeFinish, n);
}

void Simulation::Finish(int n, double time) {
  int d = dev_[n];
  running_[d] = false;
  busy_[d] += end_[n] - start_[n];
  last_on_device_[d] = n;
  for (int in : view_.node(n).inputs) {
    if (view_.sum_of(in) < 0) Release(in, d);
  }
  for (int s : view_.sums_read_by(n)) {
    Free(d, view_.gradient_sums()[s].bytes);  // the summed buffer
  }
  Free(d, view_.node(n).scratch_bytes);
  if (view_.node(n).kind == NodeKind::kBackward) {
    Free(d, view_.node(view_.node(n).forward_op).saved_workspace_bytes);
  }
  for (int out : view_.node(n).outputs) {
    const TrainingValue& v = view_.value(out);
    if (view_.sum_of(out) >= 0) {
      PartialDone(out, d, time, {false, n});
      continue;
    }
    if (v.consumers.empty()) {
      Free(d, v.bytes);  // nobody reads it
      continue;
    }
    for (int consumer : v.consumers) {
      int cd = dev_[consumer];
      if (cd == d) {
        InputArrived(consumer, time, {false, n});
      } else if (!present_[Slot(out, cd)]) {
        RequestTransfer(out, d, cd, time, {false, n});
      }
    }
  }
  for (int dep : c_.control_dependents(n)) InputArrived(dep, time, {false, n});
}

void Simulation::Arrive(int t, double time) {
  const ScheduledTransfer& tr = transfers_[t];
  if (tr.gradient_sum >= 0) {
    Free(tr.src, tr.bytes);  // the sender's buffer, sent
    Accumulate(tr.gradient_sum, tr.dst);
    InputArrived(view_.gradient_sums()[tr.gradient_sum].sink, time, {true, t});
    return;
  }
  Release(tr.value, tr.src);
  for (int consumer : view_.value(tr.value).consumers) {
    if (dev_[consumer] == tr.dst) InputArrived(consumer, time, {true, t});
  }
}

SimulationResult Simulation::Run() {
  const int n = c_.num_nodes();
  const int num_values = static_cast<int>(view_.values().size());
  pending_.assign(n, 0);
  ready_time_.assign(n, 0);
  start_.assign(n, kNever);
  end_.assign(n, kNever);
  cause_.assign(n, {});
  source_device_.assign(num_values, -1);
  users_.assign(static_cast<size_t>(num_values) * D_, 0);
  present_.assign(static_cast<size_t>(num_values) * D_, 0);
  memory_.assign(D_, 0);
  peak_.assign(D_, 0);
  busy_.assign(D_, 0);
  running_.assign(D_, false);
  // A device is alone when no other device of its host runs a node of the
  // placement.
  alone_.assign(D_, 0);
  if (c_.has_alone_times()) {
    std::vector<int> used_on_host(D_, 0);
    std::vector<char> used(D_, 0);
    for (int i = 0; i < n; ++i) used[dev_[i]] = 1;
    for (int d = 0; d < D_; ++d) used_on_host[c_.host_of(d)] += used[d];
    for (int d = 0; d < D_; ++d) alone_[d] = used_on_host[c_.host_of(d)] == 1;
  }
  last_on_device_.assign(D_, -1);
  link_free_.assign(D_ * D_, 0);
  last_on_link_.assign(D_ * D_, -1);
  ready_.assign(D_, std::priority_queue<int, std::vector<int>, ReadyCompare>(
                        ReadyCompare{&c_}));

  // Where values start, who uses them where, and resident memory.
  const double state = view_.options().optimizer_state_per_parameter_byte();
  const int num_sums = static_cast<int>(view_.gradient_sums().size());
  partials_ = CountPartials(view_, dev_, D_);
  partials_done_.assign(static_cast<size_t>(num_sums) * D_, 0);
  has_buffer_.assign(static_cast<size_t>(num_sums) * D_, 0);
  for (int s = 0; s < num_sums; ++s) {
    pending_[view_.gradient_sums()[s].sink] += partials_.sources(s);
  }
  for (int v = 0; v < num_values; ++v) {
    const TrainingValue& value = view_.value(v);
    if (view_.sum_of(v) >= 0) continue;  // accumulated, not read as such
    for (int consumer : value.consumers) ++users_[Slot(v, dev_[consumer])];
    switch (value.kind) {
      case ValueKind::kParameter: {
        int g = c_.home_group(v);
        if (g < 0) break;
        int home = group_device_[g];
        source_device_[v] = home;
        present_[Slot(v, home)] = 1;
        Allocate(home, value.bytes + static_cast<int64_t>(state * value.bytes));
        break;
      }
      case ValueKind::kGraphInput:
      case ValueKind::kConstant:
        for (int consumer : value.consumers) {
          int d = dev_[consumer];
          if (!present_[Slot(v, d)]) {
            present_[Slot(v, d)] = 1;
            Allocate(d, value.bytes);
          }
        }
        break;
      default:
        source_device_[v] = value.producer >= 0 ? dev_[value.producer] : -1;
        break;
    }
  }
  for (int i = 0; i < n; ++i) {
    const TrainingNode& node = view_.node(i);
    for (int in : node.inputs) {
      if (view_.sum_of(in) < 0) pending_[i] += !present_[Slot(in, dev_[i])];
    }
    pending_[i] += static_cast<int>(node.control_inputs.size());
  }
  // Parameters read on other devices are sent at time 0.
  for (int v = 0; v < num_values; ++v) {
    if (view_.value(v).kind != ValueKind::kParameter || source_device_[v] < 0) {
      continue;
    }
    for (int consumer : view_.value(v).consumers) {
      int d = dev_[consumer];
      if (!present_[Slot(v, d)]) {
        RequestTransfer(v, source_device_[v], d, 0, {});
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    if (pending_[i] == 0) ready_[dev_[i]].push(i);
  }
  for (int d = 0; d < D_; ++d) TryStart(d, 0);
  while (!events_.empty()) {
    Event e = events_.top();
    events_.pop();
    now_ = e.time;
    if (e.kind == EventKind::kNodeFinish) {
      Finish(e.id, e.time);
    } else {
      Arrive(e.id, e.time);
    }
    for (int d = 0; d < D_; ++d) TryStart(d, e.time);
  }

  SimulationResult r;
  for (int i = 0; i < n; ++i) r.step_seconds = std::max(r.step_seconds, end_[i]);
  r.lower_bound_seconds = c_.lower_bound_seconds();
  r.busy_seconds = busy_;
  r.peak_memory_bytes = peak_;
  for (int d = 0; d < D_; ++d) {
    r.oom |= peak_[d] > c_.cluster().device(d).memory_bytes;
  }
  r.bytes_moved = bytes_moved_;
  r.transfers_count = static_cast<int>(transfers_.size());
  r.inaccurate_nodes = c_.inaccurate_nodes();
  TraceCriticalPath(r);
  r.transfers = std::move(transfers_);
  if (options_.record_schedule) {
    r.memory = std::move(memory_samples_);
    r.schedule.resize(n);
    for (int i = 0; i < n; ++i) r.schedule[i] = {i, dev_[i], start_[i], end_[i]};
  }
  return r;
}

void Simulation::TraceCriticalPath(SimulationResult& r) const {
  int last = -1;
  for (int i = 0; i < c_.num_nodes(); ++i) {
    if (last < 0 || end_[i] > end_[last]) last = i;
  }
  Cause step{false, last};
  while (step.index >= 0) {
    if (step.is_transfer) {
      const ScheduledTransfer& t = transfers_[step.index];
      r.critical_path.push_back({true, step.index, t.start_seconds,
                                 t.end_seconds});
      step = transfer_cause_[step.index];
    } else {
      r.critical_path.push_back(
          {false, step.index, start_[step.index], end_[step.index]});
      step = cause_[step.index];
    }
  }
  std::reverse(r.critical_path.begin(), r.critical_path.end());
}

}  // namespace

std::vector<int> NodeKeyRanks(const TrainingView& view) {
  const int n = static_cast<int>(view.nodes().size());
  std::vector<int> by_key(n);
  std::iota(by_key.begin(), by_key.end(), 0);
  std::sort(by_key.begin(), by_key.end(), [&](int a, int b) {
    return view.node(a).key < view.node(b).key;
  });
  std::vector<int> rank(n);
  for (int k = 0; k < n; ++k) rank[by_key[k]] = k;
  return rank;
}

std::string TransferName(const TrainingView& view,
                         const ScheduledTransfer& transfer) {
  if (transfer.gradient_sum < 0) return view.value(transfer.value).name;
  const GradientSum& sum = view.gradient_sums()[transfer.gradient_sum];
  return absl::StrCat("grad:", view.forward().tensor(sum.tensor).name,
                      " (summed)");
}

absl::StatusOr<SimulationResult> Simulate(const SimulationContext& context,
                                          const Placement& placement,
                                          const SimulationOptions& options) {
  RETURN_IF_ERROR(
      CheckPlacementShape(context.view(), placement, context.num_devices()));
  return Simulation(context, placement, options).Run();
}

}  // namespace placer
