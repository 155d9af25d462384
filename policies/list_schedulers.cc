// List schedulers over colocation groups, memory-aware as in Baechi
// (Jeon et al. 2020): heft, m_etf, m_sct, m_topo. They schedule the forward DAG of
// groups, each group costing its whole training work (forward, backward,
// update) on a device and each cut edge its transfer time, and only
// consider devices where the group's estimated memory still fits; see
// Schedule for what else a choice weighs.
#include <algorithm>
#include <map>
#include <queue>
#include <tuple>
#include <utility>

#include "coin/ClpSimplex.hpp"

#include "absl/strings/str_cat.h"
#include "policies/device_loads.h"
#include "policies/group_graph.h"
#include "policies/policies.h"

namespace placer {
namespace {

// Shared state of a list schedule: where units went and when they end.
//
// Units that share parameters (ParameterFamilies: the time steps of an
// unrolled layer) are placed as one family: the first member scheduled
// chooses among the devices where the whole family's memory fits, and the
// rest follow it, so no weight-sized partial gradient crosses devices. A
// family that fits on no device is placed unit by unit.
//
// A choice is judged by when the unit would finish on the device, plus two
// costs the greedy timeline cannot see (for a family's first member, of
// the whole family):
//  - contention: every unit's training work laid out on its earliest
//    start without contention (ASAP at min seconds) and binned over time;
//    a family bound to a device reserves its unscheduled work's bins
//    there, and a choice costs the work by which it would overfill them.
//    Layers that run at the same time (an encoder's pipeline) go to
//    different devices; layers that run at different times (encoder and
//    decoder) may share one.
//  - crossings: the bytes that would cross between the unit (family) and
//    units whose device is known, both ways and in the backward pass
//    (activation gradients, partial weight gradients), less the forward
//    inputs the start time already waits for. A neighbour whose device is
//    not known yet and that is not bound to a family is assumed to go
//    where it would cut least. With `hint` (an earlier pass's devices),
//    every unit's device is known: hinted where not yet placed.
class Schedule {
 public:
  // `family`: PlacementFamilies(in, o, groups). `hint`: empty, or a
  // device per unit.
  Schedule(const PolicyInput& in, const PolicyOptions& o,
           const GroupGraph& groups, std::vector<int> family,
           std::vector<int> hint = {})
      : in_(in),
        o_(o),
        groups_(groups),
        devices_(in.cluster.num_devices()),
        loads_(groups, in.cluster, o),
        device_(groups.num_units(), -1),
        finish_(groups.num_units(), 0),
        free_(devices_, 0),
        family_(std::move(family)),
        hint_(std::move(hint)),
        reserved_(devices_, 0),
        reserved_work_(static_cast<size_t>(devices_) * kBins, 0) {
    int families = 0;
    for (int f : family_) families = std::max(families, f + 1);
    family_bytes_.assign(families, 0);
    family_device_.assign(families, -1);
    split_.assign(families, false);
    members_.assign(families, {});
    family_work_.assign(families, {});
    for (int g = 0; g < groups.num_units(); ++g) {
      int f = family_[g];
      family_bytes_[f] += groups.memory_bytes(g);
      members_[f].push_back(g);
    }
    LayOutWork();
  }

  // When g's inputs would all be on device d.
  double DataReady(int g, int d) const {
    double ready = 0;
    for (const GroupEdge& e : groups_.predecessors(g)) {
      double t = finish_[e.to];
      if (device_[e.to] != d) {
        t += in_.costs.TransferSeconds(e.bytes, in_.cluster, device_[e.to], d);
      }
      ready = std::max(ready, t);
    }
    return ready;
  }

  // Whether g's placement is its own choice: not pinned and not in a
  // family placed whole (a family's first member chooses for all).
  bool Decides(int g) const {
    return UnitPinnedDevice(groups_, o_, g) < 0 && !Whole(family_[g]);
  }

  // Whether g fits on d next to what is assigned and reserved there: for
  // a family placed whole, whether d is its device or, before it has one,
  // whether all of it fits.
  bool Fits(int g, int d) const {
    int f = family_[g];
    if (!Whole(f)) return FitsAlone(g, d);
    if (family_device_[f] >= 0) return family_device_[f] == d;
    return loads_.FitsBytes(reserved_[d] + family_bytes_[f], d);
  }

  // The device of least Cost for g among those that fit (or its pinned or
  // family device); -1 when none fits.
  int BestDevice(int g, double* start_out) const {
    int fixed = UnitPinnedDevice(groups_, o_, g);
    int f = family_[g];
    if (fixed < 0 && Whole(f)) fixed = family_device_[f];
    if (fixed >= 0) {
      if (start_out != nullptr) *start_out = StartOn(g, fixed);
      return fixed;
    }
    int best = -1;
    double best_cost = 0;
    // Pass 1: where g fits (for a family's first member: all of it);
    // pass 2, when no device fits the family: where g alone fits.
    for (int pass = 0; pass < 2 && best < 0; ++pass) {
      if (pass == 1 && !Whole(f)) break;
      for (int d = 0; d < devices_; ++d) {
        if (!(pass == 0 ? Fits(g, d) : FitsAlone(g, d))) continue;
        double cost = Cost(g, d);
        if (best < 0 || cost < best_cost) {
          best = d;
          best_cost = cost;
        }
      }
    }
    if (start_out != nullptr && best >= 0) *start_out = StartOn(g, best);
    return best;
  }

  // What BestDevice minimizes: g's finish on d plus contention and
  // crossings (see the class comment).
  double Cost(int g, int d) const {
    return StartOn(g, d) + groups_.seconds(g, d) + ContentionSeconds(g, d) +
           CrossingSeconds(g, d);
  }

  double StartOn(int g, int d) const {
    return std::max(free_[d], DataReady(g, d));
  }
  int device(int g) const { return device_[g]; }
  const std::vector<int>& devices() const { return device_; }

  void Assign(int g, int d, double start) {
    device_[g] = d;
    finish_[g] = start + groups_.seconds(g, d);
    free_[d] = finish_[g];
    loads_.Assign(g, d);
    int f = family_[g];
    family_bytes_[f] -= groups_.memory_bytes(g);
    if (ChoosesForFamily(g)) {
      // The rest of the family is bound to d, if it fits there.
      if (loads_.FitsBytes(reserved_[d] + family_bytes_[f], d)) {
        family_device_[f] = d;
        reserved_[d] += family_bytes_[f];
        for (int u : members_[f]) {
          if (device_[u] < 0) AddWork(u, 1, &reserved_work_[d * kBins]);
        }
      } else {
        split_[f] = true;
      }
    } else if (Whole(f)) {
      reserved_[d] -= groups_.memory_bytes(g);
      AddWork(g, -1, &reserved_work_[d * kBins]);
    }
  }

  absl::Status NoDevice(const std::string& policy, int g) const {
    return absl::ResourceExhaustedError(absl::StrCat(
        policy, ": '", in_.view.forward().op(groups_.members(g)[0]).key,
        "' fits on no device (it needs ", groups_.memory_bytes(g),
        " more bytes; every device is full)"));
  }

  Placement placement() const { return groups_.Expand(device_); }

 private:
  static constexpr int kBins = 256;

  // Whether family f is placed on one device: more than one member and
  // not split for lack of memory.
  bool Whole(int f) const { return members_[f].size() > 1 && !split_[f]; }
  bool FitsAlone(int g, int d) const {
    return loads_.FitsBytes(
        reserved_[d] + groups_.memory_bytes(g) + loads_.ReadBytes(g, d), d);
  }
  // Whether g chooses for its whole family (its first member to go).
  bool ChoosesForFamily(int g) const {
    int f = family_[g];
    return Whole(f) && family_device_[f] < 0;
  }

  // Each unit's ASAP start at min seconds, and the bin width.
  void LayOutWork() {
    asap_.assign(groups_.num_units(), 0);
    double end = 0;
    for (int g : groups_.order()) {
      for (const GroupEdge& e : groups_.predecessors(g)) {
        asap_[g] = std::max(asap_[g], asap_[e.to] + groups_.min_seconds(e.to));
      }
      end = std::max(end, asap_[g] + groups_.min_seconds(g));
    }
    bin_seconds_ = end > 0 ? end / kBins : 1;
  }
  // Calls add(bin, seconds) for each bin u's work overlaps at its ASAP
  // interval.
  template <typename Add>
  void ForEachBin(int u, Add add) const {
    double a = asap_[u], p = groups_.min_seconds(u);
    if (p <= 0) return;
    int first = std::min(kBins - 1, static_cast<int>(a / bin_seconds_));
    int last = std::min(kBins - 1, static_cast<int>((a + p) / bin_seconds_));
    for (int b = first; b <= last; ++b) {
      double lo = std::max(a, b * bin_seconds_);
      double hi = b == last ? a + p : (b + 1) * bin_seconds_;
      if (hi > lo) add(b, hi - lo);
    }
  }
  // Adds sign * u's work to `bins`.
  void AddWork(int u, double sign, double* bins) const {
    ForEachBin(u, [&](int b, double seconds) { bins[b] += sign * seconds; });
  }
  // The work by which g (its unscheduled family, when g chooses for it)
  // would overfill the bins reserved on d, beyond what it overfills alone.
  double ContentionSeconds(int g, int d) const {
    const double* reserved = &reserved_work_[d * kBins];
    const double w = bin_seconds_;
    auto overfill = [&](double own, double res) {
      if (own <= 0 || res <= 0) return 0.0;
      return std::max(0.0, own + res - w) - std::max(0.0, res - w) -
             std::max(0.0, own - w);
    };
    double total = 0;
    if (!ChoosesForFamily(g)) {
      ForEachBin(g, [&](int b, double seconds) {
        total += overfill(seconds, reserved[b]);
      });
      return total;
    }
    const std::vector<double>& own = FamilyWork(family_[g]);
    for (int b = 0; b < kBins; ++b) total += overfill(own[b], reserved[b]);
    return total;
  }
  // The work per bin of family f before any member is placed (computed
  // once: a family has no member placed while one chooses for it).
  const std::vector<double>& FamilyWork(int f) const {
    std::vector<double>& work = family_work_[f];
    if (work.empty()) {
      work.assign(kBins, 0);
      for (int u : members_[f]) AddWork(u, 1, work.data());
    }
    return work;
  }
  // Where u is or will be: placed, bound with its family, or hinted; -1:
  // not known yet.
  int KnownDevice(int u) const {
    if (device_[u] >= 0) return device_[u];
    int f = family_[u];
    if (Whole(f) && family_device_[f] >= 0) return family_device_[f];
    return hint_.empty() ? -1 : hint_[u];
  }
  // Seconds of the crossings between g (its family, when g chooses for
  // it) on d and units whose device is known (see the class comment).
  double CrossingSeconds(int g, int d) const {
    const int f = family_[g];
    const bool family = ChoosesForFamily(g);
    auto where = [&](int u) {  // u's device, with g's family on d
      return (u == g || (family && family_[u] == f)) ? d : KnownDevice(u);
    };
    double total = 0;
    std::vector<double>& cut = cut_scratch_;
    cut.resize(devices_);
    auto add = [&](int u) {
      // A parameter already copied to d (another unit there reads it) sends
      // neither its copy nor its summed gradient again for u.
      std::map<int, int64_t> paid;  // home unit -> bytes
      for (const GroupEdge& e : groups_.parameter_reads(u)) {
        if (loads_.Copied(e.value, d)) paid[e.to] += 2 * e.bytes;
      }
      for (const GroupEdge& edge : groups_.neighbours(u)) {
        if (family && family_[edge.to] == f) continue;
        GroupEdge e = edge;
        if (auto it = paid.find(e.to); it != paid.end()) {
          e.bytes = std::max<int64_t>(0, e.bytes - it->second);
        }
        int other = KnownDevice(e.to);
        if (other < 0 && !Whole(family_[e.to])) {
          // Not known yet: it goes where it cuts least of its bytes to
          // units whose device is known; half of that is this choice's.
          std::fill(cut.begin(), cut.end(), 0.0);
          for (const GroupEdge& n : groups_.neighbours(e.to)) {
            int nd = where(n.to);
            if (nd < 0) continue;
            for (int x = 0; x < devices_; ++x) {
              if (x != nd) {
                cut[x] += in_.costs.TransferSeconds(n.bytes, in_.cluster, x, nd);
              }
            }
          }
          total += *std::min_element(cut.begin(), cut.end()) / 2;
        } else if (other >= 0 && other != d) {
          total += in_.costs.TransferSeconds(e.bytes, in_.cluster, d, other);
        }
      }
    };
    if (family) {
      for (int u : members_[f]) {
        if (device_[u] < 0) add(u);
      }
    } else {
      add(g);
    }
    // The forward values from g's placed predecessors: in StartOn already.
    for (const GroupEdge& e : groups_.predecessors(g)) {
      int other = device_[e.to];
      if (other >= 0 && other != d) {
        total -= in_.costs.TransferSeconds(e.bytes, in_.cluster, other, d);
      }
    }
    return total;
  }

  const PolicyInput& in_;
  const PolicyOptions& o_;
  const GroupGraph& groups_;
  const int devices_;
  DeviceLoads loads_;
  std::vector<int> device_;
  std::vector<double> finish_;
  std::vector<double> free_;
  // Per unit: its parameter family and the hinted device. Per family:
  // members, unscheduled bytes, the device it is bound to (-1: not
  // yet) and whether it was split for lack of memory.
  std::vector<int> family_;
  std::vector<int> hint_;
  std::vector<std::vector<int>> members_;
  std::vector<int64_t> family_bytes_;
  std::vector<int> family_device_;
  std::vector<bool> split_;
  // Per device: bound families' unscheduled bytes, and their work per bin.
  std::vector<int64_t> reserved_;
  std::vector<double> reserved_work_;
  // Per unit: ASAP start; the bins' width; per family, FamilyWork.
  std::vector<double> asap_;
  double bin_seconds_ = 1;
  mutable std::vector<std::vector<double>> family_work_;
  mutable std::vector<double> cut_scratch_;
};

// HEFT (Topcuoglu et al. 2002): groups by decreasing upward rank, each on
// the device where it finishes first.
class HeftPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    const int n = groups.num_units();
    std::vector<int> position(n);
    for (int k = 0; k < n; ++k) position[groups.order()[k]] = k;
    std::vector<int> order = groups.order();
    const std::vector<double>& rank = groups.upward_rank();
    // Decreasing rank keeps predecessors first; equal ranks (zero-time
    // groups) keep topological order.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return rank[a] > rank[b];
    });
    // Repair any predecessor that a tie placed later.
    std::vector<int> pending(n, 0);
    for (int g = 0; g < n; ++g) {
      pending[g] = static_cast<int>(groups.predecessors(g).size());
    }
    auto later = [&](int a, int b) {  // a after b in the rank order
      if (rank[a] != rank[b]) return rank[a] < rank[b];
      return position[a] > position[b];
    };
    std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
    for (int g = 0; g < n; ++g) {
      if (pending[g] == 0) ready.push(g);
    }
    Schedule s(in, o, groups, PlacementFamilies(in, o, groups));
    while (!ready.empty()) {
      int g = ready.top();
      ready.pop();
      double start;
      int d = s.BestDevice(g, &start);
      if (d < 0) return s.NoDevice("heft", g);
      s.Assign(g, d, start);
      for (const GroupEdge& e : groups.successors(g)) {
        if (--pending[e.to] == 0) ready.push(e.to);
      }
    }
    return Checked(in, o, s.placement(), "heft");
  }
};

// One ETF list schedule: repeatedly schedules the ready unit that can
// start earliest, on the device of least Schedule::Cost, ties by node key.
// With `favorite_parent` (m-SCT), a unit whose favorite parent is placed
// goes to that parent's device when it fits there. Returns a device per
// unit.
absl::StatusOr<std::vector<int>> EtfPass(const PolicyInput& in,
                                         const PolicyOptions& o,
                                         const GroupGraph& groups,
                                         const std::vector<int>& family,
                                         std::vector<int> hint,
                                         const std::vector<int>* favorite_parent,
                                         const std::string& policy) {
  const int n = groups.num_units();
  Schedule s(in, o, groups, family, std::move(hint));
  std::vector<int> pending(n, 0);
  for (int g = 0; g < n; ++g) {
    pending[g] = static_cast<int>(groups.predecessors(g).size());
  }
  auto choose = [&](int g, double* start) {
    if (favorite_parent != nullptr && (*favorite_parent)[g] >= 0 &&
        s.Decides(g)) {
      // Only when the parent's device is free by the time g's data is
      // there (as in Hanen and Munier: the favorite never waits in line)
      // and costs no more than ETF's own choice.
      int d = s.device((*favorite_parent)[g]);
      double best_start;
      int best = s.BestDevice(g, &best_start);
      if (d >= 0 && best >= 0 && d != best && s.Fits(g, d) &&
          s.StartOn(g, d) <= s.DataReady(g, d) &&
          s.Cost(g, d) <= s.Cost(g, best)) {
        *start = s.StartOn(g, d);
        return d;
      }
    }
    return s.BestDevice(g, start);
  };
  // Ready units keyed by their earliest start when they became ready; the
  // key is refreshed (lazily) when popped, since devices fill up.
  using Entry = std::tuple<double, int, int>;  // start, key rank, unit
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  auto push = [&](int g) {
    double start;
    choose(g, &start);
    ready.push({start, groups.key_rank(g), g});
  };
  for (int g = 0; g < n; ++g) {
    if (pending[g] == 0) push(g);
  }
  while (!ready.empty()) {
    auto [key_start, key, g] = ready.top();
    ready.pop();
    double start;
    int d = choose(g, &start);
    if (d < 0) return s.NoDevice(policy, g);
    if (start > key_start && !ready.empty() &&
        std::get<0>(ready.top()) < start) {
      ready.push({start, key, g});  // stale: another can start earlier
      continue;
    }
    s.Assign(g, d, start);
    for (const GroupEdge& e : groups.successors(g)) {
      if (--pending[e.to] == 0) push(e.to);
    }
  }
  return s.devices();
}

// ETF in kEtfPasses passes: the first knows only what it has placed; each
// later one knows where the previous pass put every unit (a family chosen
// early, as the decoder's first steps are, sees where the encoder's last
// layer went). Returns the pass whose placement simulates fastest (ties:
// the earliest), or the first pass's error.
constexpr int kEtfPasses = 3;

absl::StatusOr<Placement> EtfSchedule(const PolicyInput& in,
                                      const PolicyOptions& o,
                                      const GroupGraph& groups,
                                      const std::vector<int>& family,
                                      const std::vector<int>* favorite_parent,
                                      const std::string& policy) {
  std::vector<int> hint;
  absl::StatusOr<Placement> best = absl::InternalError("no pass ran");
  double best_seconds = 0;
  for (int pass = 0; pass < kEtfPasses; ++pass) {
    absl::StatusOr<std::vector<int>> devices =
        EtfPass(in, o, groups, family, hint, favorite_parent, policy);
    if (!devices.ok()) {
      if (pass == 0) return devices.status();
      break;
    }
    hint = *devices;
    Placement placement = groups.Expand(*devices);
    absl::StatusOr<SimulationResult> sim = CheckPlacement(in, o, placement);
    if (!sim.ok()) {
      if (pass == 0) best = Checked(in, o, std::move(placement), policy);
      continue;
    }
    if (!best.ok() || sim->step_seconds < best_seconds) {
      best = std::move(placement);
      best_seconds = sim->step_seconds;
    }
  }
  return best;
}

class MEtfPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    return EtfSchedule(in, o, groups, PlacementFamilies(in, o, groups),
                       nullptr, "m_etf");
  }
};

// m-SCT (Baechi, after Hanen and Munier's small-communication-time
// scheduling): the LP relaxation of "each unit keeps at most one child and
// one parent on its own device" with makespan w and x_e in [0, 1] (0: the
// edge stays on one device):
//   minimize w
//   w >= sum over P's units of p_i + sum over P's edges of c_e x_e
//                                 for each path P of the unit DAG
//   sum of x over i's out-edges >= out-degree - 1
//   sum of x over j's in-edges  >= in-degree - 1
// with p the units' fastest times and c the edges' transfer times on the
// slowest link; an edge inside a parameter family has x = 0 (families are
// placed whole) and is left out of the degree rows. This is the usual
// formulation with start times s_j >= s_i + p_i + c_e x_e with the s
// eliminated; it is solved with COIN-OR CLP by row generation: start with
// no path row, and while the longest path under the LP's x is longer than
// its w, add the longest path through each of the 500 most violated edges
// (one row per distinct path) and re-solve (dual simplex, warm). The restricted LP's w
// is a lower bound and its x then meets every path row, so it is optimal.
// On the 111k-node view two rounds suffice where the start-time LP took
// ~3 s in CLP. An edge with x < 1/2 makes j the favorite child of i. Then
// ETF, keeping favorite children with parents.
class MSctPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    std::vector<int> family = PlacementFamilies(in, o, groups);
    absl::StatusOr<std::vector<int>> favorite =
        FavoriteParents(in, groups, family);
    if (!favorite.ok()) return favorite.status();
    return EtfSchedule(in, o, groups, family, &*favorite,
                       "m_sct");
  }

 private:
  static absl::StatusOr<std::vector<int>> FavoriteParents(
      const PolicyInput& in, const GroupGraph& groups,
      const std::vector<int>& family) {
    const int n = groups.num_units();
    std::vector<int> favorite(n, -1);
    if (in.cluster.num_devices() < 2) return favorite;
    double latency = 0, bandwidth = 0;
    for (int a = 0; a < in.cluster.num_devices(); ++a) {
      for (int b = 0; b < in.cluster.num_devices(); ++b) {
        if (a == b) continue;
        latency = std::max(latency, in.cluster.link(a, b).latency_seconds);
        double bw = in.cluster.link(a, b).bandwidth;
        bandwidth = bandwidth == 0 ? bw : std::min(bandwidth, bw);
      }
    }
    // Seconds are scaled to milliseconds to keep the LP well conditioned.
    const double scale = 1e3;
    // Separating i and j also sends weight gradients home when both read
    // the same parameters (unrolled steps of one layer): count those bytes.
    std::vector<std::map<int, int64_t>> reads(n);  // home unit -> bytes
    for (int u = 0; u < n; ++u) {
      for (const GroupEdge& e : groups.parameter_reads(u)) reads[u][e.to] += e.bytes;
    }
    std::vector<std::pair<int, int>> edges;  // (i, j)
    std::vector<double> comm;
    for (int i = 0; i < n; ++i) {
      for (const GroupEdge& e : groups.successors(i)) {
        int64_t bytes = e.bytes;
        for (const auto& [home, b] : reads[e.to]) {
          if (home == i || reads[i].count(home)) bytes += b;
        }
        edges.push_back({i, e.to});
        comm.push_back(scale * (latency + static_cast<double>(bytes) / bandwidth));
      }
    }
    absl::StatusOr<std::vector<double>> x =
        SolveRelaxation(groups, family, edges, comm, scale);
    if (!x.ok()) return x.status();
    std::vector<double> best(n, 0.5);
    for (size_t e = 0; e < edges.size(); ++e) {
      auto [i, j] = edges[e];
      if (family[i] != family[j] && (*x)[e] < best[j]) {
        best[j] = (*x)[e];
        favorite[j] = i;
      }
    }
    return favorite;
  }

  // The relaxation above by row generation; returns x per edge (0 inside
  // families). `comm` and the units' seconds times `scale` (milliseconds,
  // to keep the LP well conditioned).
  static absl::StatusOr<std::vector<double>> SolveRelaxation(
      const GroupGraph& groups, const std::vector<int>& family,
      const std::vector<std::pair<int, int>>& edges,
      const std::vector<double>& comm, double scale) {
    const int n = groups.num_units();
    const int m = static_cast<int>(edges.size());
    std::vector<int> column(m, -1);  // x's column, for edges that may cross
    int columns = 0;
    std::vector<std::vector<int>> out_edges(n), in_edges(n);
    for (int e = 0; e < m; ++e) {
      auto [i, j] = edges[e];
      out_edges[i].push_back(e);
      in_edges[j].push_back(e);
      if (family[i] != family[j]) column[e] = columns++;
    }
    const int w = columns++;
    auto p = [&](int i) { return scale * groups.min_seconds(i); };
    std::vector<double> x(columns, 0.0);
    auto length = [&](int e) {
      return column[e] >= 0 ? comm[e] * x[column[e]] : 0.0;
    };
    // Longest paths under x: into each unit (head, ending at its start)
    // and out of it (tail, from its start), with the edges taken.
    std::vector<double> head(n), tail(n);
    std::vector<int> head_edge(n), tail_edge(n);
    auto longest = [&]() {
      for (int i : groups.order()) {
        head[i] = 0;
        head_edge[i] = -1;
        for (int e : in_edges[i]) {
          int a = edges[e].first;
          double t = head[a] + p(a) + length(e);
          if (t > head[i]) {
            head[i] = t;
            head_edge[i] = e;
          }
        }
      }
      double longest_path = 0;
      for (auto it = groups.order().rbegin(); it != groups.order().rend();
           ++it) {
        int i = *it;
        tail[i] = p(i);
        tail_edge[i] = -1;
        for (int e : out_edges[i]) {
          double t = p(i) + length(e) + tail[edges[e].second];
          if (t > tail[i]) {
            tail[i] = t;
            tail_edge[i] = e;
          }
        }
        longest_path = std::max(longest_path, head[i] + tail[i]);
      }
      return longest_path;
    };
    ClpSimplex lp;
    lp.setLogLevel(0);
    lp.resize(0, columns);
    for (int c = 0; c < w; ++c) lp.setColumnUpper(c, 1);
    lp.setColumnUpper(w, COIN_DBL_MAX);
    lp.setColumnLower(w, longest());  // x = 0: a bound on w for any x
    lp.setObjectiveCoefficient(w, 1);
    // Rows are collected in arrays and added at once.
    std::vector<CoinBigIndex> row_start;
    std::vector<int> row_index;
    std::vector<double> row_value, row_lb, row_ub;
    auto start_rows = [&]() {
      row_start = {0};
      row_index.clear();
      row_value.clear();
      row_lb.clear();
      row_ub.clear();
    };
    auto add_rows = [&]() {
      if (row_lb.empty()) return;
      lp.addRows(static_cast<int>(row_lb.size()), row_lb.data(),
                 row_ub.data(), row_start.data(), row_index.data(),
                 row_value.data());
    };
    auto end_row = [&](double lb) {
      row_start.push_back(static_cast<CoinBigIndex>(row_index.size()));
      row_lb.push_back(lb);
      row_ub.push_back(COIN_DBL_MAX);
    };
    start_rows();
    for (int i = 0; i < n; ++i) {
      for (const auto* list : {&out_edges[i], &in_edges[i]}) {
        int count = 0;
        for (int e : *list) {
          if (column[e] < 0) continue;
          row_index.push_back(column[e]);
          row_value.push_back(1);
          ++count;
        }
        if (count >= 2) {
          end_row(count - 1.0);
        } else {
          row_index.resize(row_start.back());
          row_value.resize(row_start.back());
        }
      }
    }
    add_rows();
    constexpr int kMaxRounds = 10000;
    constexpr int kPathsPerRound = 500;
    for (int round = 0;; ++round) {
      if (lp.numberRows() == 0) {
        // Nothing constrains x (CLP does not take an LP without rows):
        // every column at its lower bound, w at the longest path's.
        std::copy(lp.getColLower(), lp.getColLower() + columns, x.begin());
      } else {
        lp.dual();
        if (!lp.isProvenOptimal()) {
          return absl::InternalError(absl::StrCat(
              "m_sct: the LP relaxation was not solved (CLP status ",
              lp.status(), ")"));
        }
        std::copy(lp.getColSolution(), lp.getColSolution() + columns,
                  x.begin());
      }
      const double tolerance = 1e-7 * std::max(1.0, x[w]);
      if (longest() <= x[w] + tolerance) break;
      if (round == kMaxRounds) {
        return absl::InternalError(
            "m_sct: the LP relaxation's row generation did not converge");
      }
      std::vector<std::pair<double, int>> violated;  // (-length, edge)
      for (int e = 0; e < m; ++e) {
        auto [i, j] = edges[e];
        double t = head[i] + p(i) + length(e) + tail[j];
        if (t > x[w] + tolerance) violated.push_back({-t, e});
      }
      std::sort(violated.begin(), violated.end());
      std::vector<bool> on_a_row(m, false);
      std::map<int, double> coefficient;
      start_rows();
      const size_t paths = std::min(violated.size(),
                                    static_cast<size_t>(kPathsPerRound));
      for (size_t k = 0; k < paths; ++k) {
        int through = violated[k].second;
        if (on_a_row[through]) continue;
        // The longest path through `through`: back along head edges, on
        // along tail edges.
        std::vector<int> path = {through};
        for (int i = edges[through].first; head_edge[i] >= 0;
             i = edges[head_edge[i]].first) {
          path.push_back(head_edge[i]);
        }
        int last = edges[through].second;
        for (; tail_edge[last] >= 0; last = edges[tail_edge[last]].second) {
          path.push_back(tail_edge[last]);
        }
        double constant = p(last);
        coefficient.clear();
        for (int e : path) {
          on_a_row[e] = true;
          constant += p(edges[e].first);
          if (column[e] >= 0) coefficient[column[e]] -= comm[e];
        }
        row_index.push_back(w);
        row_value.push_back(1);
        for (const auto& [c, v] : coefficient) {
          row_index.push_back(c);
          row_value.push_back(v);
        }
        end_row(constant);
      }
      // At least one row: w is at least any unit's p, so a path longer
      // than w has an edge, and that edge is violated.
      add_rows();
    }
    std::vector<double> result(m, 0.0);
    for (int e = 0; e < m; ++e) {
      if (column[e] >= 0) result[e] = x[column[e]];
    }
    return result;
  }
};

// m-TOPO: topological order, filling each device up to its share of the
// work (by peak FLOP/s) before moving to the next, skipping devices whose
// memory is full.
class MTopoPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    GroupGraph groups = PlacementUnits(in, o);
    const int devices = in.cluster.num_devices();
    double total = 0;
    for (int g = 0; g < groups.num_units(); ++g) total += groups.min_seconds(g);
    DeviceLoads loads(groups, in.cluster, o);
    Placement p{std::vector<int>(groups.num_units(), -1)};
    int current = 0;
    for (int g : groups.order()) {
      int d = UnitPinnedDevice(groups, o, g);
      if (d < 0) {
        double share =
            total * in.cluster.device(current).peak_flops /
            in.cluster.total_peak_flops();
        while (current < devices - 1 &&
               (loads.seconds(current) + groups.seconds(g, current) > share ||
                !loads.Fits(g, current))) {
          ++current;
          share = total * in.cluster.device(current).peak_flops /
                  in.cluster.total_peak_flops();
        }
        d = current;
        if (!loads.Fits(g, d)) {
          for (d = 0; d < devices && !loads.Fits(g, d); ++d) {
          }
          if (d == devices) {
            return absl::ResourceExhaustedError(absl::StrCat(
                "m_topo: '", in.view.forward().op(groups.members(g)[0]).key,
                "' fits on no device"));
          }
        }
      }
      p.device_of_op[g] = d;
      loads.Assign(g, d);
    }
    return Checked(in, o, groups.Expand(p.device_of_op), "m_topo");
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewHeftPolicy() {
  return std::make_unique<HeftPolicy>();
}
std::unique_ptr<PlacementPolicy> NewMEtfPolicy() {
  return std::make_unique<MEtfPolicy>();
}
std::unique_ptr<PlacementPolicy> NewMSctPolicy() {
  return std::make_unique<MSctPolicy>();
}
std::unique_ptr<PlacementPolicy> NewMTopoPolicy() {
  return std::make_unique<MTopoPolicy>();
}

}  // namespace placer
