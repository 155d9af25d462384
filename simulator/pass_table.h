// PassTable: a value per pass of a strategy's step — the forward or the
// backward of a stage for a micro-batch — in one array, so that the
// lowering (its passes), the executor (what has run, what has arrived) and
// whatever else keeps a table per pass name the pass, not its position.
//
// Contract: a table of `stages` x `micro_batches` x 2 entries, each
// `empty` until set; at() takes a stage in [0, stages), a micro-batch in
// [0, micro_batches) (checked in debug builds only, as std::vector's
// operator[]). all() holds them in (stage, micro-batch, forward then
// backward) order, and index() is an entry's position there. Not
// thread-safe: its owner guards it.
#ifndef PLACER_SIMULATOR_PASS_TABLE_H_
#define PLACER_SIMULATOR_PASS_TABLE_H_

#include <cassert>
#include <cstddef>
#include <vector>

namespace placer {

template <typename T>
class PassTable {
 public:
  PassTable() = default;
  PassTable(int stages, int micro_batches, const T& empty = T())
      : stages_(stages),
        micro_batches_(micro_batches),
        entries_(static_cast<size_t>(stages) * micro_batches * 2, empty) {}

  T& at(int stage, int micro_batch, bool backward) {
    return entries_[index(stage, micro_batch, backward)];
  }
  const T& at(int stage, int micro_batch, bool backward) const {
    return entries_[index(stage, micro_batch, backward)];
  }
  // The position of pass (stage, micro_batch, backward) in all().
  size_t index(int stage, int micro_batch, bool backward) const {
    assert(stage >= 0 && stage < stages_);
    assert(micro_batch >= 0 && micro_batch < micro_batches_);
    return (static_cast<size_t>(stage) * micro_batches_ + micro_batch) * 2 +
           (backward ? 1 : 0);
  }
  const std::vector<T>& all() const { return entries_; }
  std::vector<T>& all() { return entries_; }
  int stages() const { return stages_; }
  int micro_batches() const { return micro_batches_; }

 private:
  int stages_ = 0;
  int micro_batches_ = 0;
  std::vector<T> entries_;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_PASS_TABLE_H_
