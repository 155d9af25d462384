// ListSchedule: the state that the list schedulers (heft, m_etf, m_sct;
// policies/heft.cc, etf.cc, m_sct.cc) build a placement in, unit by unit:
// where units went, when they end, and what each device still holds.
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
#ifndef PLACER_POLICIES_LIST_SCHEDULE_H_
#define PLACER_POLICIES_LIST_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "policies/device_loads.h"
#include "policies/group_graph.h"
#include "policies/policy.h"

namespace placer {

class ListSchedule {
 public:
  // `family`: PlacementFamilies(in, o, groups). `hint`: empty, or a
  // device per unit.
  ListSchedule(const PolicyInput& in, const PolicyOptions& o,
               const GroupGraph& groups, std::vector<int> family,
               std::vector<int> hint = {});

  // When g's inputs would all be on device d.
  double DataReady(int g, int d) const;

  // Whether g's placement is its own choice: not pinned and not in a
  // family placed whole (a family's first member chooses for all).
  bool Decides(int g) const;

  // Whether g fits on d next to what is assigned and reserved there: for
  // a family placed whole, whether d is its device or, before it has one,
  // whether all of it fits.
  bool Fits(int g, int d) const;

  // The device of least Cost for g among those that fit (or its pinned or
  // family device); -1 when none fits.
  int BestDevice(int g, double* start_out) const;

  // What BestDevice minimizes: g's finish on d plus contention and
  // crossings (see the class comment).
  double Cost(int g, int d) const;

  double StartOn(int g, int d) const;
  int device(int g) const { return device_[g]; }
  const std::vector<int>& devices() const { return device_; }

  void Assign(int g, int d, double start);

  absl::Status NoDevice(const std::string& policy, int g) const;

  Placement placement() const { return groups_.Expand(device_); }

 private:
  static constexpr int kBins = 256;

  // Whether family f is placed on one device: more than one member and
  // not split for lack of memory.
  bool Whole(int f) const { return members_[f].size() > 1 && !split_[f]; }
  bool FitsAlone(int g, int d) const;
  // Whether g chooses for its whole family (its first member to go).
  bool ChoosesForFamily(int g) const;

  // Each unit's ASAP start at min seconds, and the bin width.
  void LayOutWork();
  // Calls add(bin, seconds) for each bin u's work overlaps at its ASAP
  // interval.
  template <typename Add>
  void ForEachBin(int u, Add add) const;
  // Adds sign * u's work to `bins`.
  void AddWork(int u, double sign, double* bins) const;
  // The work by which g (its unscheduled family, when g chooses for it)
  // would overfill the bins reserved on d, beyond what it overfills alone.
  double ContentionSeconds(int g, int d) const;
  // The work per bin of family f before any member is placed (computed
  // once: a family has no member placed while one chooses for it).
  const std::vector<double>& FamilyWork(int f) const;
  // Where u is or will be: placed, bound with its family, or hinted; -1:
  // not known yet.
  int KnownDevice(int u) const;
  // Seconds of the crossings between g (its family, when g chooses for
  // it) on d and units whose device is known (see the class comment).
  double CrossingSeconds(int g, int d) const;

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

}  // namespace placer

#endif  // PLACER_POLICIES_LIST_SCHEDULE_H_
