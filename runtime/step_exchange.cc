#include "runtime/step_exchange.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "base/stopwatch.h"

namespace placer {
namespace {

std::string Key(int step, int rank) {
  return absl::StrCat("placer/step/", step, "/", rank);
}

}  // namespace

absl::StatusOr<StepReport> ExchangeStepReports(RankGroup& ranks, int step,
                                               const StepReport& mine,
                                               const absl::Status& outcome) {
  const int devices = static_cast<int>(mine.busy_seconds.size());
  const bool allocations = !mine.allocated_peak_bytes.empty();
  // One row of doubles per rank: failed, loss, seconds, then per device
  // busy seconds, tracked peak and allocated peak (all of fixed size); then
  // the rank's count of transfers, its transfers (5 numbers each) and its
  // node runs (3 each).
  std::vector<double> row = {outcome.ok() ? 0.0 : 1.0, mine.loss, mine.seconds};
  for (int d = 0; d < devices; ++d) row.push_back(mine.busy_seconds[d]);
  for (int d = 0; d < devices; ++d) {
    row.push_back(d < static_cast<int>(mine.peak_memory_bytes.size())
                      ? static_cast<double>(mine.peak_memory_bytes[d])
                      : 0.0);
  }
  for (int d = 0; d < devices; ++d) {
    row.push_back(allocations ? static_cast<double>(mine.allocated_peak_bytes[d])
                              : 0.0);
  }
  const size_t fixed = row.size();
  row.push_back(static_cast<double>(mine.transfers.size()));
  for (const MeasuredTransfer& t : mine.transfers) {
    row.insert(row.end(), {static_cast<double>(t.value), static_cast<double>(t.src),
                           static_cast<double>(t.dst), static_cast<double>(t.bytes),
                           t.seconds});
  }
  for (const NodeRun& run : mine.node_runs) {
    row.insert(row.end(), {static_cast<double>(run.node),
                           static_cast<double>(run.device), run.seconds});
  }
  const int me = ranks.rank();
  RETURN_IF_ERROR(ranks.Put(
      Key(step, me), std::string(reinterpret_cast<const char*>(row.data()),
                                 row.size() * sizeof(double))));
  if (step >= 2) ranks.Delete(Key(step - 2, me)).IgnoreError();
  if (!outcome.ok()) {
    // The run's first failure, the same on every rank.
    std::optional<absl::Status> first = ranks.PublishedFailure();
    return first.has_value() ? *first : outcome;
  }
  std::vector<double> total(fixed, 0.0);
  StepReport merged;
  const SteadyClock::time_point start = SteadyClock::now();
  for (int r = 0; r < ranks.world_size(); ++r) {
    // Polls back off from 0.1 ms to 5 ms: ranks that finish together
    // (the usual case) meet within a fraction of a millisecond, and a long
    // wait costs few store round trips.
    auto pause = std::chrono::microseconds(100);
    while (true) {
      ASSIGN_OR_RETURN(bool there, ranks.Has(Key(step, r)));
      if (there) break;
      if (std::optional<absl::Status> remote = ranks.PublishedFailure()) {
        return *remote;
      }
      if (SecondsSince(start) > ranks.timeout_seconds()) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", r, " did not finish step ", step + 1, " within ",
            ranks.timeout_seconds(), " s of this rank (", me, ")"));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(2 * pause,
                                                 std::chrono::milliseconds(5));
    }
    ASSIGN_OR_RETURN(std::string bytes, ranks.Get(Key(step, r)));
    std::vector<double> theirs(bytes.size() / sizeof(double));
    std::memcpy(theirs.data(), bytes.data(), theirs.size() * sizeof(double));
    // The transfers' count, then 5 numbers a transfer and 3 a node run.
    const double count = theirs.size() > fixed ? theirs[fixed] : -1;
    const size_t transfers =
        count >= 0 && count <= static_cast<double>(theirs.size())
            ? static_cast<size_t>(count)
            : theirs.size();
    const size_t runs_at = fixed + 1 + 5 * transfers;
    if (bytes.size() % sizeof(double) != 0 || theirs.size() <= fixed ||
        theirs.size() < runs_at || (theirs.size() - runs_at) % 3 != 0) {
      return absl::DataLossError(absl::StrCat(
          "rank ", r, "'s report of step ", step + 1, " has ", bytes.size(),
          " bytes, not ", (fixed + 1) * sizeof(double),
          " plus 40 per transfer and 24 per node run: the ranks run "
          "different graphs"));
    }
    if (theirs[0] != 0) {
      std::optional<absl::Status> remote = ranks.PublishedFailure();
      return remote.has_value()
                 ? *remote
                 : absl::AbortedError(absl::StrCat("rank ", r, " failed"));
    }
    for (size_t k = 0; k < fixed; ++k) {
      total[k] = k == 2 ? std::max(total[k], theirs[k]) : total[k] + theirs[k];
    }
    for (size_t k = fixed + 1; k < runs_at; k += 5) {
      merged.transfers.push_back({static_cast<int>(theirs[k]),
                                  static_cast<int>(theirs[k + 1]),
                                  static_cast<int>(theirs[k + 2]),
                                  static_cast<int64_t>(theirs[k + 3]),
                                  theirs[k + 4]});
    }
    for (size_t k = runs_at; k < theirs.size(); k += 3) {
      merged.node_runs.push_back({static_cast<int>(theirs[k]),
                                  static_cast<int>(theirs[k + 1]),
                                  theirs[k + 2]});
    }
  }
  size_t k = 1;
  merged.loss = total[k++];
  merged.seconds = total[k++];
  for (int d = 0; d < devices; ++d) merged.busy_seconds.push_back(total[k++]);
  for (int d = 0; d < devices; ++d) {
    merged.peak_memory_bytes.push_back(static_cast<int64_t>(total[k++]));
  }
  for (int d = 0; d < devices; ++d, ++k) {
    if (allocations) {
      merged.allocated_peak_bytes.push_back(static_cast<int64_t>(total[k]));
    }
  }
  merged.handoff_seconds = mine.handoff_seconds;  // this rank's threads
  return merged;
}

}  // namespace placer
