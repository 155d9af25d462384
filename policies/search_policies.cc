// local_search and best: simulator-driven refinement and the portfolio.
#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "policies/device_loads.h"
#include "policies/group_graph.h"
#include "policies/policies.h"
#include "policies/search_clock.h"
#include "simulator/memory_check.h"

namespace placer {
namespace {

// Within the memory limits; the step time when so.
std::optional<double> Evaluate(const PolicyInput& in, const PolicyOptions& o,
                               const Placement& p) {
  absl::StatusOr<SimulationResult> r = Simulate(in.simulation, p);
  if (!r.ok() ||
      !CheckMemory(in.cluster, r->peak_memory_bytes,
                   MemoryLimits(in.cluster, o))
           .ok()) {
    return std::nullopt;
  }
  return r->step_seconds;
}

// local_search's start without an initial placement: the shorter simulated
// step of m_etf's and expert's placements (both place in milliseconds),
// else heft's, else single's.
absl::StatusOr<Placement> LocalSearchStart(const PolicyInput& in,
                                           const PolicyOptions& o) {
  std::optional<Placement> start;
  double start_seconds = 0;
  std::string errors;
  using Make = std::unique_ptr<PlacementPolicy> (*)();
  const std::vector<std::vector<Make>> tiers = {
      {NewMEtfPolicy, NewExpertPolicy}, {NewHeftPolicy}, {NewSinglePolicy}};
  for (const std::vector<Make>& tier : tiers) {
    for (Make make : tier) {
      absl::StatusOr<Placement> p = make()->Place(in, o);
      if (!p.ok()) {
        absl::StrAppend(&errors, errors.empty() ? "" : "; ",
                        p.status().message());
        continue;
      }
      std::optional<double> step = Evaluate(in, o, *p);
      if (step && (!start || *step < start_seconds)) {
        start = std::move(*p);
        start_seconds = *step;
      }
    }
    if (start) break;
  }
  if (!start) {
    return absl::ResourceExhaustedError(
        absl::StrCat("local_search: no starting placement: ", errors));
  }
  return *start;
}

// Hill climbing from the initial placement (or LocalSearchStart's): first
// a descent that moves each structural group whole to each other device
// until no such move helps, then random changes of placement units: moves
// a unit to another device, swaps two units on different devices, moves a
// parameter's home unit with every unit that reads the parameter, or
// moves a unit's structural group (MergeFamilies: whole layers with the
// units that ride with them, 32 groups). A change is kept when the
// simulated step gets shorter within memory. Two unit picks in three come
// from the current critical path.
class LocalSearchPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    SearchClock clock(o, "local_search");
    Placement current;
    if (o.initial) {
      current = *o.initial;
    } else {
      ASSIGN_OR_RETURN(Placement seed, LocalSearchStart(in, o));
      current = seed;
    }
    absl::StatusOr<SimulationResult> base = CheckPlacement(in, o, current);
    if (!base.ok()) {
      return WithContext(base.status(),
                         "local_search: the initial placement: ");
    }
    const int devices = in.cluster.num_devices();
    if (devices < 2) return current;
    GroupGraph units = PlacementUnits(in, o);
    std::vector<int> movable;
    for (int u = 0; u < units.num_units(); ++u) {
      if (UnitPinnedDevice(units, o, u) < 0) movable.push_back(u);
    }
    if (movable.empty()) return current;
    double best = base->step_seconds;
    std::vector<int> critical;
    auto refresh_critical = [&](const SimulationResult& r) {
      critical.clear();
      for (const CriticalStep& s : r.critical_path) {
        if (!s.is_transfer) {
          int u = units.unit_of(in.view.node(s.index).forward_op);
          if (UnitPinnedDevice(units, o, u) < 0) critical.push_back(u);
        }
      }
    };
    refresh_critical(*base);
    // Units that read a parameter homed in unit h move with h as a family
    // (an unrolled layer and its weights), so shared weights stay local.
    std::vector<std::vector<int>> family(units.num_units());
    for (int u = 0; u < units.num_units(); ++u) {
      for (const GroupEdge& e : units.parameter_reads(u)) {
        if (family[e.to].empty()) family[e.to].push_back(e.to);
        if (std::find(family[e.to].begin(), family[e.to].end(), u) ==
            family[e.to].end()) {
          family[e.to].push_back(u);
        }
      }
    }
    std::vector<int> homes;
    for (int u = 0; u < units.num_units(); ++u) {
      bool pinned = false;
      for (int m : family[u]) pinned |= UnitPinnedDevice(units, o, m) >= 0;
      if (!family[u].empty() && !pinned) homes.push_back(u);
    }
    // Structural groups: whole parameter families (with the parameter-free
    // units that ride with them) merged into kStructuralGroups groups, the
    // coarse moves that shift a layer or a run of layers at once.
    constexpr int kStructuralGroups = 32;
    std::vector<int> structural = MergeFamilies(
        units, PlacementFamilies(in, o, units), kStructuralGroups);
    std::vector<std::vector<int>> members_of_group;
    for (int u : movable) {
      if (structural[u] >= static_cast<int>(members_of_group.size())) {
        members_of_group.resize(structural[u] + 1);
      }
      members_of_group[structural[u]].push_back(u);
    }
    std::mt19937_64 rng(o.seed);
    int64_t evaluations = 0;
    clock.Report(0, best);
    auto more = [&] {
      return !clock.Expired() &&
             (o.max_evaluations <= 0 || evaluations < o.max_evaluations);
    };
    // First a descent over the structural groups: each group in turn,
    // whole, to each other device; sweeps until none helps.
    for (bool improved = true; improved && more();) {
      improved = false;
      for (size_t g = 0; g < members_of_group.size() && more(); ++g) {
        if (members_of_group[g].empty()) continue;
        for (int to = 0; to < devices && more(); ++to) {
          Placement next = current;
          bool changes = false;
          for (int m : members_of_group[g]) {
            for (int op : units.members(m)) {
              changes |= next.device_of_op[op] != to;
              next.device_of_op[op] = to;
            }
          }
          if (!changes) continue;
          ++evaluations;
          std::optional<double> step = Evaluate(in, o, next);
          if (step && *step < best) {
            best = *step;
            current = std::move(next);
            improved = true;
          }
          clock.Report(evaluations, best);
        }
      }
    }
    if (absl::StatusOr<SimulationResult> r = Simulate(in.simulation, current);
        r.ok()) {
      refresh_critical(*r);
    }
    while (more()) {
      auto pick = [&]() {
        if (!critical.empty() && rng() % 3 != 0) {
          return critical[rng() % critical.size()];
        }
        return movable[rng() % movable.size()];
      };
      Placement next = current;
      auto put = [&](int unit, int device) {
        for (int g : units.members(unit)) next.device_of_op[g] = device;
      };
      int a = pick();
      int from = next.device_of_op[units.members(a)[0]];
      int kind = static_cast<int>(rng() % 8);
      if (kind == 7) {  // move a structural group
        const std::vector<int>& group = members_of_group[structural[a]];
        int to = static_cast<int>(rng() % (devices - 1));
        if (to >= from) ++to;
        for (int m : group) put(m, to);
      } else if (kind < 2 && !homes.empty()) {  // move a weight and its readers
        int h = homes[rng() % homes.size()];
        int at = next.device_of_op[units.members(h)[0]];
        int to = static_cast<int>(rng() % (devices - 1));
        if (to >= at) ++to;
        for (int m : family[h]) put(m, to);
      } else if (kind < 4) {  // swap
        int b = movable[rng() % movable.size()];
        int other = next.device_of_op[units.members(b)[0]];
        if (from == other) continue;
        put(a, other);
        put(b, from);
      } else {  // move
        int to = static_cast<int>(rng() % (devices - 1));
        if (to >= from) ++to;
        put(a, to);
      }
      ++evaluations;
      std::optional<double> step = Evaluate(in, o, next);
      if (step && *step < best) {
        best = *step;
        current = std::move(next);
        absl::StatusOr<SimulationResult> r = Simulate(in.simulation, current);
        if (r.ok()) refresh_critical(*r);
      }
      clock.Report(evaluations, best);
    }
    clock.ReportNow(evaluations, best);
    return current;
  }
};

// The portfolio: every other heuristic, then local search from the winner
// and from local_search's own start (LocalSearchStart), the remaining
// budget split between the two; the best placement seen wins. With an
// evaluation cap, the second search repeats local_search exactly, so best
// is never worse than any policy it runs.
}  // namespace

absl::StatusOr<HeuristicWinner> BestHeuristic(
    const PolicyInput& in, const PolicyOptions& o,
    const std::function<void(const std::string&, double, int64_t)>&
        after_each) {
  const SearchClock clock(o, "best");
  HeuristicWinner winner;
  bool found = false;
  bool tight = false;  // some heuristic was over a memory limit
  std::string errors;
  for (const PolicyInfo& info : Policies()) {
    if (info.kind != PolicyKind::kHeuristic) continue;
    // The heuristics cannot stop midway; once one has a placement, a
    // stop request skips the rest.
    if (found && clock.StopRequested()) break;
    absl::StatusOr<Placement> p = info.make()->Place(in, o);
    if (!p.ok()) {
      tight |= p.status().code() == absl::StatusCode::kResourceExhausted;
      absl::StrAppend(&errors, errors.empty() ? "" : "; ", p.status().message());
      continue;
    }
    ++winner.evaluations;
    std::optional<double> step = Evaluate(in, o, *p);
    if (step && (!found || *step < winner.step_seconds)) {
      found = true;
      winner.placement = std::move(*p);
      winner.step_seconds = *step;
      winner.policy = info.name;
    }
    if (after_each) {
      after_each(info.name, found ? winner.step_seconds : 0,
                 winner.evaluations);
    }
  }
  if ((!found || tight) && !clock.StopRequested()) {
    // Memory before speed, before giving up; and on a cluster tight enough
    // that some heuristic was over a limit, a look at what memory_first
    // finds with a tenth of the budget (its deal, which keeps consecutive
    // layers together, can beat the heuristics that fit there).
    PolicyOptions look = o;
    if (found) {
      look.budget_seconds = o.budget_seconds / 10;
      if (o.max_evaluations > 0) {
        look.max_evaluations = std::max<int64_t>(1, o.max_evaluations / 10);
      }
    }
    absl::StatusOr<Placement> p = NewMemoryFirstPolicy()->Place(in, look);
    if (p.ok()) {
      ++winner.evaluations;
      std::optional<double> step = Evaluate(in, o, *p);
      if (step && (!found || *step < winner.step_seconds)) {
        found = true;
        winner.placement = std::move(*p);
        winner.step_seconds = *step;
        winner.policy = "memory_first";
      }
    } else if (!found) {
      absl::StrAppend(&errors, "; ", p.status().message());
    }
    if (after_each) {
      after_each("memory_first", found ? winner.step_seconds : 0,
                 winner.evaluations);
    }
  }
  if (!found) {
    return absl::ResourceExhaustedError(
        absl::StrCat("best: no policy found a placement: ", errors));
  }
  return winner;
}

namespace {

class BestPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PolicyInput& in,
                                  const PolicyOptions& o) override {
    SearchClock clock(o, "best");
    std::optional<Placement> best;
    double best_seconds = 0;
    int64_t evaluations = 0;  // of finished stages
    auto report = [&](const std::string& stage, int64_t stage_evaluations,
                      double stage_best) {
      double b = best ? best_seconds : 0;
      if (stage_best > 0 && (b == 0 || stage_best < b)) b = stage_best;
      clock.ReportNow(evaluations + stage_evaluations, b, stage);
    };
    auto consider = [&](const Placement& p) {
      ++evaluations;
      std::optional<double> step = Evaluate(in, o, p);
      if (step && (!best || *step < best_seconds)) {
        best = p;
        best_seconds = *step;
      }
    };
    ASSIGN_OR_RETURN(
        HeuristicWinner winner,
        BestHeuristic(
            in, o, [&](const std::string& name, double so_far, int64_t done) {
              report(name, done, so_far);
            }));
    evaluations += winner.evaluations;
    best = std::move(winner.placement);
    best_seconds = winner.step_seconds;
    std::vector<Placement> starts = {*best};
    absl::StatusOr<Placement> own = LocalSearchStart(in, o);
    if (own.ok() && own->device_of_op != best->device_of_op) {
      starts.push_back(*own);
    }
    for (size_t k = 0; k < starts.size() && !clock.StopRequested(); ++k) {
      PolicyOptions refine = o;
      refine.initial = starts[k];
      refine.budget_seconds =
          clock.remaining_seconds() / static_cast<double>(starts.size() - k);
      int64_t stage_evaluations = 0;
      if (clock.reporting()) {
        refine.on_progress = [&](const SearchProgress& p) {
          stage_evaluations = p.evaluations;
          report("local_search", p.evaluations, p.best_step_seconds);
        };
      }
      absl::StatusOr<Placement> refined =
          NewLocalSearchPolicy()->Place(in, refine);
      evaluations += stage_evaluations;
      if (refined.ok()) consider(*refined);
    }
    report("best", 0, 0);
    return *best;
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> NewLocalSearchPolicy() {
  return std::make_unique<LocalSearchPolicy>();
}
std::unique_ptr<PlacementPolicy> NewBestPolicy() {
  return std::make_unique<BestPolicy>();
}

}  // namespace placer
