// PairTable: a value per (row, device) — a view value's readers on a
// device, a gradient sum's buffer there — that every entry starts as
// `empty`. Dense (one array) while rows x devices is at most kDenseLimit,
// where indexing beats hashing; past it only the pairs touched are kept,
// in a hash map (a sum's partials lie on few of a thousand devices, and
// filling rows x devices entries per lowering would cost more than the
// simulation). Internal to simulator/.
//
// Contract: at() returns the entry, creating it as `empty` when absent;
// get() reads without creating. Not thread-safe (one simulation's).
#ifndef PLACER_SIMULATOR_PAIR_TABLE_H_
#define PLACER_SIMULATOR_PAIR_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"

namespace placer {

template <typename T>
class PairTable {
 public:
  static constexpr int64_t kDenseLimit = int64_t{1} << 20;

  PairTable() = default;
  PairTable(int64_t rows, int devices, T empty)
      : devices_(devices),
        empty_(empty),
        dense_(rows * devices <= kDenseLimit) {
    if (dense_) values_.assign(static_cast<size_t>(rows * devices), empty);
  }

  T& at(int row, int device) {
    const int64_t key = Key(row, device);
    if (dense_) return values_[static_cast<size_t>(key)];
    return SparseAt(key);
  }
  T get(int row, int device) const {
    const int64_t key = Key(row, device);
    if (dense_) return values_[static_cast<size_t>(key)];
    return SparseGet(key);
  }

 private:
  // Out of line, so that the dense path of at() and get() inlines.
  ABSL_ATTRIBUTE_NOINLINE T& SparseAt(int64_t key) {
    return sparse_.try_emplace(key, empty_).first->second;
  }
  ABSL_ATTRIBUTE_NOINLINE T SparseGet(int64_t key) const {
    auto found = sparse_.find(key);
    return found == sparse_.end() ? empty_ : found->second;
  }

  int64_t Key(int row, int device) const {
    return static_cast<int64_t>(row) * devices_ + device;
  }

  int devices_ = 0;
  T empty_{};
  bool dense_ = true;
  std::vector<T> values_;
  absl::flat_hash_map<int64_t, T> sparse_;
};

}  // namespace placer

#endif  // PLACER_SIMULATOR_PAIR_TABLE_H_
