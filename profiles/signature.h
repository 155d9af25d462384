// The signature of a training-view node: what its time depends on, as a
// string key for measured profiles. Two nodes with equal signatures take
// the same time on the same device.
//
// Format: "<forward|backward|update> <op type>(<dtype>[dims],...){attrs}",
// where backward adds "grads=<0/1 per input>" and update names the
// parameter's dtype and dims and the number of partial gradients summed.
#ifndef PLACER_PROFILES_SIGNATURE_H_
#define PLACER_PROFILES_SIGNATURE_H_

#include <string>
#include <vector>

#include "graph/training_view.h"

namespace placer {

std::string NodeSignature(const TrainingView& view, int node);

// What adding a micro-batch's gradient into an update node's parameter
// buffer depends on: "accumulate <dtype>[dims]" (CostModel's
// AccumulateSeconds; measured by `placer profile`).
std::string AccumulateSignature(const TrainingView& view, int update_node);
// Adding one partial gradient of gradient sum `sum` into its device's
// buffer, inside a step: "add <dtype>[dims]" of the forward tensor
// (CostModel's PartialAddSeconds; measured warm by `placer profile`).
std::string PartialAddSignature(const TrainingView& view, int sum);

// For a backward node: which inputs of its forward op get a gradient.
std::vector<bool> InputsNeedingGradient(const TrainingView& view, int node);

}  // namespace placer

#endif  // PLACER_PROFILES_SIGNATURE_H_
