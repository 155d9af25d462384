// What LibTorch's allocators really hand out during a step, per device:
// the executor's measure_allocations (StepReport::allocated_peak_bytes).
//
// Contract: AllocationTracker counts, from Start(base), every allocation
// reported by a thread carrying a ThreadAllocationReporter for its device
// and every free of such a block (frees of blocks allocated before Start
// are ignored); live() is base + the bytes live now, peaks() its
// per-device maximum.
// Thread-safe.
#ifndef PLACER_RUNTIME_ALLOCATION_TRACKER_H_
#define PLACER_RUNTIME_ALLOCATION_TRACKER_H_

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

namespace placer {

// What LibTorch's allocators hand out, per device, through c10's memory
// reporting hook (the one the autograd profiler's profile_memory uses).
class AllocationTracker {
 public:
  void Start(const std::vector<int64_t>& base) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.clear();
    current_ = base;
    peak_ = base;
  }
  void Record(void* ptr, int64_t bytes, int device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes > 0) {
      if (device < 0 || device >= static_cast<int>(current_.size())) return;
      live_[ptr] = {device, bytes};
      current_[device] += bytes;
      peak_[device] = std::max(peak_[device], current_[device]);
      return;
    }
    auto it = live_.find(ptr);
    if (it == live_.end()) return;  // allocated before the step
    current_[it->second.first] -= it->second.second;
    live_.erase(it);
  }
  std::vector<int64_t> peaks() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }
  // What is live on `device` now: base + what was allocated since Start
  // and not yet freed (0 for a device it does not count).
  int64_t live(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    return device >= 0 && device < static_cast<int>(current_.size())
               ? current_[device]
               : 0;
  }
  // peaks()[device] (0 for a device it does not count).
  int64_t peak(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    return device >= 0 && device < static_cast<int>(peak_.size())
               ? peak_[device]
               : 0;
  }

 private:
  std::mutex mu_;
  std::unordered_map<void*, std::pair<int, int64_t>> live_;
  std::vector<int64_t> current_, peak_;
};

// Installed on a thread: its allocations count for `device` (-1: none,
// frees only).
class ThreadAllocationReporter : public c10::MemoryReportingInfoBase {
 public:
  ThreadAllocationReporter(AllocationTracker* tracker, int device)
      : tracker_(tracker), device_(device) {}
  // LibTorch 1.x passes the totals as int64_t, 2.x as size_t: the one the
  // base class declares is the override (hence no `override` here).
  void reportMemoryUsage(void* ptr, int64_t alloc_size, int64_t, int64_t,
                         c10::Device) {
    tracker_->Record(ptr, alloc_size, device_);
  }
  void reportMemoryUsage(void* ptr, int64_t alloc_size, size_t, size_t,
                         c10::Device) {
    tracker_->Record(ptr, alloc_size, device_);
  }
  bool memoryProfilingEnabled() const { return true; }

 private:
  AllocationTracker* tracker_;
  int device_;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_ALLOCATION_TRACKER_H_
