// The end of a distributed step: each rank's share of the step's report
// goes through the rank group's store, and every rank gets the run's.
//
// Contract: every rank calls ExchangeStepReports once per step, in step
// order, with its own StepReport (entries of devices it does not drive are
// zero; node runs and transfers are those it made) and its outcome.
// Merged: loss, busy seconds, tracked and allocated peaks summed (each
// device has one rank), seconds the slowest rank's, node runs and
// transfers every rank's in rank order. A failed step (this rank's, or one
// another rank published or reported) returns the run's first failure, the
// same on every rank; a rank whose share does not come within the group's
// timeout is named; shares of a different size (ranks running different
// graphs) are DataLoss. Rows of step k-2 are deleted at step k (every rank
// has read them by then).
#ifndef PLACER_RUNTIME_STEP_EXCHANGE_H_
#define PLACER_RUNTIME_STEP_EXCHANGE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/executor.h"
#include "runtime/rank_group.h"

namespace placer {

absl::StatusOr<StepReport> ExchangeStepReports(RankGroup& ranks, int step,
                                               const StepReport& mine,
                                               const absl::Status& outcome);

}  // namespace placer

#endif  // PLACER_RUNTIME_STEP_EXCHANGE_H_
