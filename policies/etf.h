// ETF list scheduling (earliest task first), memory-aware as in Baechi
// (Jeon et al. 2020): what m_etf is and what m_sct runs after its LP.
#ifndef PLACER_POLICIES_ETF_H_
#define PLACER_POLICIES_ETF_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policies/group_graph.h"
#include "policies/policy.h"

namespace placer {

// ETF in a few passes: the first knows only what it has placed; each
// later one knows where the previous pass put every unit (a family chosen
// early, as the decoder's first steps are, sees where the encoder's last
// layer went). Each pass repeatedly schedules the ready unit that can
// start earliest, on the device of least ListSchedule::Cost, ties by node
// key. With `favorite_parent` (m-SCT; may be null), a unit whose favorite
// parent is placed goes to that parent's device when it fits there, the
// parent's device is free by the time the unit's data is there, and it
// costs no more than ETF's own choice. Returns the pass whose placement
// simulates fastest (ties: the earliest), or the first pass's error;
// errors name `policy`.
absl::StatusOr<Placement> EtfSchedule(const PolicyInput& in,
                                      const PolicyOptions& o,
                                      const GroupGraph& groups,
                                      const std::vector<int>& family,
                                      const std::vector<int>* favorite_parent,
                                      const std::string& policy);

}  // namespace placer

#endif  // PLACER_POLICIES_ETF_H_
