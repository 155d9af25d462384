// Factories of the placement policies. Use NewPolicy(name) (policy.h)
// unless a specific one is meant.
#ifndef PLACER_POLICIES_POLICIES_H_
#define PLACER_POLICIES_POLICIES_H_

#include <memory>

#include "policies/policy.h"

namespace placer {

std::unique_ptr<PlacementPolicy> NewSinglePolicy();
std::unique_ptr<PlacementPolicy> NewExpertPolicy();
std::unique_ptr<PlacementPolicy> NewHashPolicy();
std::unique_ptr<PlacementPolicy> NewCriticalPathPolicy();
std::unique_ptr<PlacementPolicy> NewMetisPolicy();
std::unique_ptr<PlacementPolicy> NewHeftPolicy();
std::unique_ptr<PlacementPolicy> NewMEtfPolicy();
std::unique_ptr<PlacementPolicy> NewMSctPolicy();
std::unique_ptr<PlacementPolicy> NewMTopoPolicy();
std::unique_ptr<PlacementPolicy> NewLocalSearchPolicy();
std::unique_ptr<PlacementPolicy> NewBestPolicy();

}  // namespace placer

#endif  // PLACER_POLICIES_POLICIES_H_
