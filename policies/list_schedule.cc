#include "policies/list_schedule.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace placer {

ListSchedule::ListSchedule(const PolicyInput& in, const PolicyOptions& o,
                           const GroupGraph& groups, std::vector<int> family,
                           std::vector<int> hint)
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

double ListSchedule::DataReady(int g, int d) const {
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

bool ListSchedule::Decides(int g) const {
  return UnitPinnedDevice(groups_, o_, g) < 0 && !Whole(family_[g]);
}

bool ListSchedule::Fits(int g, int d) const {
  int f = family_[g];
  if (!Whole(f)) return FitsAlone(g, d);
  if (family_device_[f] >= 0) return family_device_[f] == d;
  return loads_.FitsBytes(reserved_[d] + family_bytes_[f], d);
}

int ListSchedule::BestDevice(int g, double* start_out) const {
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

double ListSchedule::Cost(int g, int d) const {
  return StartOn(g, d) + groups_.seconds(g, d) + ContentionSeconds(g, d) +
         CrossingSeconds(g, d);
}

double ListSchedule::StartOn(int g, int d) const {
  return std::max(free_[d], DataReady(g, d));
}

void ListSchedule::Assign(int g, int d, double start) {
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

absl::Status ListSchedule::NoDevice(const std::string& policy, int g) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      policy, ": '", in_.view.forward().op(groups_.members(g)[0]).key,
      "' fits on no device (it needs ", groups_.memory_bytes(g),
      " more bytes; every device is full)"));
}

bool ListSchedule::FitsAlone(int g, int d) const {
  return loads_.FitsBytes(
      reserved_[d] + groups_.memory_bytes(g) + loads_.ReadBytes(g, d), d);
}

bool ListSchedule::ChoosesForFamily(int g) const {
  int f = family_[g];
  return Whole(f) && family_device_[f] < 0;
}

void ListSchedule::LayOutWork() {
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

template <typename Add>
void ListSchedule::ForEachBin(int u, Add add) const {
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

void ListSchedule::AddWork(int u, double sign, double* bins) const {
  ForEachBin(u, [&](int b, double seconds) { bins[b] += sign * seconds; });
}

double ListSchedule::ContentionSeconds(int g, int d) const {
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

const std::vector<double>& ListSchedule::FamilyWork(int f) const {
  std::vector<double>& work = family_work_[f];
  if (work.empty()) {
    work.assign(kBins, 0);
    for (int u : members_[f]) AddWork(u, 1, work.data());
  }
  return work;
}

int ListSchedule::KnownDevice(int u) const {
  if (device_[u] >= 0) return device_[u];
  int f = family_[u];
  if (Whole(f) && family_device_[f] >= 0) return family_device_[f];
  return hint_.empty() ? -1 : hint_[u];
}

double ListSchedule::CrossingSeconds(int g, int d) const {
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

}  // namespace placer
