// memory_first: a placement that fits before one that is fast, for models
// that the time-first heuristics cannot fit.
//
// Contract: parameter families (an unrolled layer with its weights) merged
// into at most kGroups structural groups are dealt to the devices in
// topological order, each device filled up to its share of the estimated
// memory (its limit over the sum of the limits), so consecutive layers
// share a device and few values cross. When that deal is over a limit,
// fills by simulation: the units in family order (each family's units in
// topological order: an unrolled layer's steps one after another, so a
// layer too large for one device is cut between two), each device in turn
// taking the longest run of the rest whose simulated peak there (the rest
// on the next device) is within a cap times its limit, found by bisection;
// the cap 1, then up to kBalanceFills lower caps toward the peaks' mean
// (memory spread evenly, so the work is too). Then the deal is repaired,
// with half the budget left when a fill is there to fall back on (a
// repaired deal is often faster: it moves work by step time, and a search
// from it does better). The answer: the repaired deal when it fits, unless
// a fill that fits as it is is faster; else that fill; else the fill at
// cap 1, repaired with the rest of the budget. Repair, by simulation: while
// some device is over its limit, every move of a group off the
// fullest device (peak over limit; or, when none helps, of a contiguous
// half, quarter or eighth of a group's units there, in topological order:
// an unrolled layer's run of steps, which share one copy of its weights;
// then of one of its kUnitMoves largest units), to each other device, is
// simulated. Of the moves that make the fullest device less full
// (others may fill up to below it: layers shift along the devices step by
// step), or keep it and lower the total overshoot, the one with the
// shortest step (ties: the least overshoot, then the first found) is made.
// It stops when all fit, when no move makes progress, or at the budget.
// Pinned units never move. All of this runs over the placement units
// (small groups coarsened into their producers); when that fails with
// budget left, it runs again over the colocation groups, each a unit of
// its own (a coarsened unit can be over every limit where its groups
// apart are not). Fails with the smallest overshoot the first run reached:
// the device, its peak, by how much it is over, after how many moves; or,
// before any search, when what a node needs while it runs (its inputs and
// outputs, its op's workspace, its group's parameters with their optimizer
// state) or a parameter's home (it, its optimizer state and its gradient)
// is over every device's limit, naming it: no placement of whole nodes
// fits then (a parameter whose home makes one of its several partial
// gradients: it, its state, the buffer and a second contribution being
// added).
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "policies/device_loads.h"
#include "policies/group_graph.h"
#include "policies/policies.h"
#include "policies/search_clock.h"

namespace placer {
namespace {

constexpr int kGroups = 64;
constexpr int kUnitMoves = 32;
constexpr int kBalanceFills = 3;

struct Judged {
  bool ok = false;
  double step_seconds = 0;
  int64_t overshoot_bytes = 0;      // summed over devices
  double worst_ratio = 0;           // max over devices of peak / limit
  int worst = -1;                   // the device of worst_ratio
  std::vector<int64_t> over_bytes;  // per device, >= 0
  std::vector<int64_t> peak_bytes;  // per device
};

// What no placement of whole nodes can go below, whatever the device: a
// node's inputs (a gradient sum as one buffer) and outputs are alive while
// it runs, with its op's workspace and every parameter of its group (homed
// on its device) with its optimizer state; a parameter's home holds it,
// its optimizer state and its summed gradient at the update, and a second
// partial being added into that sum when the home makes one of several.
// Fails when one of them is over every device's limit, naming it.
absl::Status CheckFloor(const PolicyInput& in, const PolicyOptions& o) {
  const TrainingView& view = in.view;
  int64_t largest_limit = 0;
  int largest = -1;
  for (int d = 0; d < in.cluster.num_devices(); ++d) {
    if (MemoryLimit(in.cluster, o, d) > largest_limit) {
      largest_limit = MemoryLimit(in.cluster, o, d);
      largest = d;
    }
  }
  if (largest < 0) return absl::OkStatus();
  int64_t need = 0;
  std::string what;
  const double state = view.options().optimizer_state_per_parameter_byte();
  // Per group: its parameters with their optimizer state, resident where
  // its nodes run.
  std::vector<int64_t> resident(view.num_groups(), 0);
  for (int g = 0; g < view.num_groups(); ++g) {
    for (int p : view.group_parameters(g)) {
      resident[g] += static_cast<int64_t>(
          static_cast<double>(view.value(p).bytes) * (1 + state));
    }
  }
  for (int i = 0; i < static_cast<int>(view.nodes().size()); ++i) {
    const TrainingNode& node = view.node(i);
    int64_t bytes = resident[node.forward_op];
    for (int v : node.inputs) {
      const bool homed_here = view.value(v).kind == ValueKind::kParameter &&
                              in.simulation.home_group(v) == node.forward_op;
      if (view.sum_of(v) < 0 && !homed_here) bytes += view.value(v).bytes;
    }
    for (int sum : view.sums_read_by(i)) {
      bytes += view.gradient_sums()[sum].bytes;
    }
    for (int v : node.outputs) bytes += view.value(v).bytes;
    // An op's saved workspace is held from its forward node's start to its
    // backward node's end.
    const int64_t workspace =
        node.kind == NodeKind::kUpdate
            ? 0
            : view.node(node.forward_op).saved_workspace_bytes;
    bytes += workspace + node.scratch_bytes;
    if (bytes > need) {
      need = bytes;
      what = absl::StrCat(
          "node '", node.key, "' needs ", bytes,
          " bytes while it runs (its inputs and outputs",
          workspace + node.scratch_bytes > 0 ? ", its op's workspace" : "",
          resident[node.forward_op] > 0
              ? ", its group's parameters with optimizer state"
              : "",
          ")");
    }
  }
  // A parameter's home holds it and its optimizer state all step, and its
  // summed gradient at the update. When the home's own group makes one of
  // the gradient's partials and there are others (an unrolled layer's
  // steps, a projection applied at every step), the home's buffer has a
  // second contribution added into it, its own next partial or another
  // device's buffer, and the two are alive at once.
  const std::vector<GradientSum>& sums = view.gradient_sums();
  std::vector<int> sum_of_tensor(view.values().size(), -1);
  for (int s = 0; s < static_cast<int>(sums.size()); ++s) {
    if (sums[s].tensor >= 0) sum_of_tensor[sums[s].tensor] = s;
  }
  for (int g = 0; g < view.num_groups(); ++g) {
    for (int p : view.group_parameters(g)) {
      const TrainingValue& v = view.value(p);
      const int s = sum_of_tensor[p];
      bool home_adds = false;
      if (s >= 0 && sums[s].partials.size() >= 2) {
        for (int node : view.group_nodes(g)) {
          for (int out : view.node(node).outputs) {
            home_adds |= view.sum_of(out) == s;
          }
        }
      }
      const int64_t bytes = static_cast<int64_t>(
          static_cast<double>(v.bytes) * (home_adds ? 3 + state : 2 + state));
      // At a tie with a node, the parameter is the plainer reason.
      if (bytes >= need) {
        need = bytes;
        what = home_adds
                   ? absl::StrCat(
                         "parameter '", v.name, "' needs ", bytes,
                         " bytes at its home (with its optimizer state, its "
                         "summed gradient and a second of its ",
                         sums[s].partials.size(),
                         " partial gradients being added: its home makes one)")
                   : absl::StrCat("parameter '", v.name, "' needs ", bytes,
                                  " bytes at its home (with its optimizer "
                                  "state and gradient)");
      }
    }
  }
  if (need <= largest_limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("memory_first: no placement fits: ", what,
                   ", over the largest device limit, ", largest_limit,
                   " bytes on ", in.cluster.device(largest).name));
}

class MemoryFirstPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    const SearchClock clock(o, "memory_first");
    RETURN_IF_ERROR(CheckFloor(in, o));
    int64_t evaluations = 0;
    absl::StatusOr<Placement> coarse =
        Search(in, o, PlacementUnits(in, o), clock, evaluations);
    if (coarse.ok() ||
        coarse.status().code() != absl::StatusCode::kResourceExhausted ||
        clock.Expired() ||
        (o.max_evaluations > 0 && evaluations >= o.max_evaluations)) {
      return coarse;
    }
    // The units coarsen small groups into their producers; one of them can
    // be over every limit where its groups apart would not be (Inception's
    // stem on 8 V100s at a quarter of its peak: one unit needed 797 MB of
    // 758). Again with every colocation group a unit of its own.
    std::vector<int> alone(in.view.num_groups());
    std::iota(alone.begin(), alone.end(), 0);
    absl::StatusOr<Placement> fine =
        Search(in, o, GroupGraph(in.simulation, alone), clock, evaluations);
    return fine.ok() ? fine : coarse;
  }

 private:
  // Deal, fill and repair over `units`; `evaluations` counts simulations
  // across calls (the cap is for the whole policy).
  absl::StatusOr<Placement> Search(const PolicyInput& in,
                                   const PolicyOptions& o,
                                   const GroupGraph& units,
                                   const SearchClock& clock,
                                   int64_t& evaluations) {
    const int devices = in.cluster.num_devices();
    const int n = units.num_units();
    const std::vector<int> family = PlacementFamilies(in, o, units);
    std::vector<int> group = MergeFamilies(units, family, kGroups);
    const int groups =
        n == 0 ? 0 : *std::max_element(group.begin(), group.end()) + 1;
    std::vector<std::vector<int>> members(groups);
    for (int u : units.order()) members[group[u]].push_back(u);
    std::vector<int> pinned(n);
    for (int u = 0; u < n; ++u) pinned[u] = UnitPinnedDevice(units, o, u);

    // Deal the groups out in topological order of their first unit.
    std::vector<int> group_order(groups);
    std::vector<int> first(groups, n);
    for (int k = 0; k < n; ++k) {
      int u = units.order()[k];
      first[group[u]] = std::min(first[group[u]], k);
    }
    for (int g = 0; g < groups; ++g) group_order[g] = g;
    std::sort(group_order.begin(), group_order.end(),
              [&](int a, int b) { return first[a] < first[b]; });
    double total_bytes = 0, total_limit = 0;
    for (int u = 0; u < n; ++u) total_bytes += units.memory_bytes(u);
    for (int d = 0; d < devices; ++d) {
      total_limit += static_cast<double>(MemoryLimit(in.cluster, o, d));
    }
    std::vector<int> device_of(n, 0);
    int d = 0;
    double filled = 0, share_end = 0;
    if (devices > 0 && total_limit > 0) {
      share_end = total_bytes *
                  static_cast<double>(MemoryLimit(in.cluster, o, 0)) /
                  total_limit;
    }
    for (int g : group_order) {
      double bytes = 0;
      for (int u : members[g]) bytes += units.memory_bytes(u);
      // Past the device's share by more than half the group: next device.
      while (d + 1 < devices && filled + bytes / 2 > share_end) {
        ++d;
        share_end += total_bytes *
                     static_cast<double>(MemoryLimit(in.cluster, o, d)) /
                     total_limit;
      }
      for (int u : members[g]) device_of[u] = pinned[u] >= 0 ? pinned[u] : d;
      filled += bytes;
    }

    auto judge = [&](const std::vector<int>& where) {
      ++evaluations;
      Judged j;
      absl::StatusOr<SimulationResult> r =
          Simulate(in.simulation, units.Expand(where));
      if (!r.ok()) return j;
      j.ok = true;
      j.step_seconds = r->step_seconds;
      j.peak_bytes = r->peak_memory_bytes;
      j.over_bytes.assign(devices, 0);
      for (int e = 0; e < devices; ++e) {
        j.over_bytes[e] = std::max<int64_t>(
            0, r->peak_memory_bytes[e] - MemoryLimit(in.cluster, o, e));
        j.overshoot_bytes += j.over_bytes[e];
        double ratio = static_cast<double>(r->peak_memory_bytes[e]) /
                       static_cast<double>(
                           std::max<int64_t>(1, MemoryLimit(in.cluster, o, e)));
        if (j.worst < 0 || ratio > j.worst_ratio) {
          j.worst_ratio = ratio;
          j.worst = e;
        }
      }
      return j;
    };
    // The repair of the deal may be held to part of the budget.
    double until_seconds = o.budget_seconds;
    int64_t until_evaluations = o.max_evaluations;
    auto more = [&] {
      return clock.elapsed_seconds() < until_seconds &&
             (until_evaluations <= 0 || evaluations < until_evaluations) &&
             !clock.StopRequested();
    };

    // The groups' movable units on `device` under `where`, then contiguous
    // runs of a half, a quarter and an eighth of each (in topological
    // order: an unrolled layer's consecutive steps, which share one copy of
    // its weights). `*groups_end` is where the runs start.
    auto sets_on = [&](int device, const std::vector<int>& where,
                       size_t* groups_end) {
      std::vector<std::vector<int>> sets, runs;
      for (int g = 0; g < groups; ++g) {
        std::vector<int> on;
        for (int u : members[g]) {
          if (where[u] == device && pinned[u] < 0) on.push_back(u);
        }
        for (size_t parts = 2; parts <= 8 && parts <= on.size(); parts *= 2) {
          for (size_t k = 0; k < parts; ++k) {
            runs.emplace_back(on.begin() + k * on.size() / parts,
                              on.begin() + (k + 1) * on.size() / parts);
          }
        }
        if (!on.empty()) sets.push_back(std::move(on));
      }
      *groups_end = sets.size();
      for (std::vector<int>& r : runs) sets.push_back(std::move(r));
      return sets;
    };
    Judged current = judge(device_of);
    if (!current.ok) return absl::InternalError("memory_first: bad placement");
    std::vector<int> fastest;  // the fastest fill that fits
    Judged fastest_judged;
    std::vector<std::pair<std::vector<int>, Judged>> starts = {
        {device_of, current}};
    if (current.overshoot_bytes > 0 && devices > 1) {
      // The movable units in family order, topological within a family.
      std::vector<int> sequence;
      for (int u : units.order()) {
        if (pinned[u] < 0) sequence.push_back(u);
      }
      std::stable_sort(sequence.begin(), sequence.end(),
                       [&](int a, int b) { return family[a] < family[b]; });
      // Device d takes sequence[begin, end) with the rest on d + 1, for the
      // longest end whose peak on d is within cap times its limit.
      auto fill = [&](double cap) {
        std::vector<int> where(n, devices - 1);
        for (int u = 0; u < n; ++u) {
          if (pinned[u] >= 0) where[u] = pinned[u];
        }
        size_t begin = 0;
        for (int d = 0; d + 1 < devices && begin < sequence.size(); ++d) {
          const double allowed =
              cap * static_cast<double>(MemoryLimit(in.cluster, o, d));
          auto take = [&](size_t end) {
            for (size_t k = begin; k < sequence.size(); ++k) {
              where[sequence[k]] = k < end ? d : d + 1;
            }
          };
          size_t lo = begin, hi = sequence.size();
          while (lo < hi && more()) {
            const size_t mid = lo + (hi - lo + 1) / 2;
            take(mid);
            Judged j = judge(where);
            if (j.ok && static_cast<double>(j.peak_bytes[d]) <= allowed) {
              lo = mid;
            } else {
              hi = mid - 1;
            }
          }
          take(lo);
          begin = lo;
        }
        return where;
      };
      std::vector<int> packed = fill(1.0);
      Judged packed_judged = judge(packed);
      auto keep_if_fastest = [&](std::vector<int> where, Judged j) {
        if (!j.ok || j.overshoot_bytes > 0) return false;
        if (fastest.empty() || j.step_seconds < fastest_judged.step_seconds) {
          fastest = std::move(where);
          fastest_judged = std::move(j);
        }
        return true;
      };
      if (keep_if_fastest(packed, packed_judged)) {
        // Lower caps, from the peaks' sum over the limits' sum (with a 5%
        // margin) halfway toward 1 each time: the first that fits spreads
        // the memory.
        double peaks = 0, limits = 0;
        for (int e = 0; e < devices; ++e) {
          peaks += static_cast<double>(packed_judged.peak_bytes[e]);
          limits += static_cast<double>(MemoryLimit(in.cluster, o, e));
        }
        double cap = std::min(1.0, 1.05 * peaks / std::max(1.0, limits));
        for (int k = 0; k < kBalanceFills && cap < 0.99 && more(); ++k) {
          std::vector<int> where = fill(cap);
          Judged j = judge(where);
          if (keep_if_fastest(std::move(where), std::move(j))) break;
          cap = (cap + 1) / 2;
        }
      }
      if (fastest.empty() && packed_judged.ok) {
        starts.emplace_back(std::move(packed), std::move(packed_judged));
      }
    }
    // Progress: the fullest device gets less full (others may fill up to
    // below it), or it stays and the overshoot falls.
    auto progress = [&](const Judged& j) {
      return j.ok && (j.worst_ratio < current.worst_ratio ||
                      (j.worst_ratio == current.worst_ratio &&
                       j.overshoot_bytes < current.overshoot_bytes));
    };
    // Of the moves that make progress, the one with the shortest step.
    Judged best;
    std::vector<int> best_where;
    auto consider = [&](Judged j, std::vector<int> where) {
      if (!progress(j)) return;
      if (best_where.empty() || j.step_seconds < best.step_seconds ||
          (j.step_seconds == best.step_seconds &&
           j.overshoot_bytes < best.overshoot_bytes)) {
        best = std::move(j);
        best_where = std::move(where);
      }
    };
    int moves = 0, closest_moves = 0;
    bool have_closest = false;  // of all repairs, the least over
    Judged closest_judged;
    for (size_t k = 0; k < starts.size(); ++k) {
      device_of = std::move(starts[k].first);
      current = std::move(starts[k].second);
      moves = 0;
      // The deal, when a fill is there to fall back on, gets half of what
      // is left.
      until_seconds = o.budget_seconds;
      until_evaluations = o.max_evaluations;
      if (k == 0 && (starts.size() > 1 || !fastest.empty())) {
        until_seconds = (clock.elapsed_seconds() + o.budget_seconds) / 2;
        if (o.max_evaluations > 0) {
          until_evaluations = (evaluations + o.max_evaluations) / 2;
        }
      }
      while (current.overshoot_bytes > 0 && more()) {
        const int worst = current.worst;
        // Phases: whole groups off `worst`; runs of them; its kUnitMoves
        // largest movable units one by one.
        size_t groups_end = 0;
        std::vector<std::vector<int>> sets =
            sets_on(worst, device_of, &groups_end);
        std::vector<size_t> phase_end = {groups_end, sets.size()};
        std::vector<int> largest;
        for (int u = 0; u < n; ++u) {
          if (device_of[u] == worst && pinned[u] < 0) largest.push_back(u);
        }
        std::sort(largest.begin(), largest.end(), [&](int a, int b) {
          if (units.memory_bytes(a) != units.memory_bytes(b)) {
            return units.memory_bytes(a) > units.memory_bytes(b);
          }
          return a < b;
        });
        if (static_cast<int>(largest.size()) > kUnitMoves) {
          largest.resize(kUnitMoves);
        }
        for (int u : largest) sets.push_back({u});
        phase_end.push_back(sets.size());

        best_where.clear();
        for (size_t phase = 0;
             phase < phase_end.size() && best_where.empty() && more();
             ++phase) {
          size_t begin = phase == 0 ? 0 : phase_end[phase - 1];
          for (size_t s = begin; s < phase_end[phase] && more(); ++s) {
            for (int to = 0; to < devices && more(); ++to) {
              if (to == worst) continue;
              std::vector<int> where = device_of;
              for (int u : sets[s]) where[u] = to;
              Judged j = judge(where);
              consider(std::move(j), std::move(where));
            }
          }
        }
        if (best_where.empty()) break;
        device_of = std::move(best_where);
        current = std::move(best);
        best_where.clear();
        ++moves;
      }
      if (current.overshoot_bytes == 0) {
        if (!fastest.empty() &&
            fastest_judged.step_seconds < current.step_seconds) {
          break;
        }
        return Checked(in, o, units.Expand(device_of), "memory_first");
      }
      if (!have_closest ||
          current.overshoot_bytes < closest_judged.overshoot_bytes) {
        have_closest = true;
        closest_judged = current;
        closest_moves = moves;
      }
      if (!fastest.empty()) break;  // the fill that fits, not a repair
    }
    if (!fastest.empty()) {
      return Checked(in, o, units.Expand(fastest), "memory_first");
    }
    const int worst = closest_judged.worst;
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory_first: the smallest overshoot reached leaves ",
        in.cluster.device(worst).name, " needing ",
        closest_judged.peak_bytes[worst], " bytes, ",
        closest_judged.over_bytes[worst], " over its limit of ",
        MemoryLimit(in.cluster, o, worst), " (", closest_judged.overshoot_bytes,
        " bytes over on all devices, after ", closest_moves,
        " repair moves and ", evaluations, " simulations)"));
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewMemoryFirstPolicy() {
  return std::make_unique<MemoryFirstPolicy>();
}

}  // namespace placer
