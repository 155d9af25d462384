#include "base/host_setup.h"

#include <dlfcn.h>
#include <malloc.h>

namespace placer {

void SetBlasThreads(int threads) {
  // Looked up at run time: the reference BLAS has no such call.
  using SetThreads = void (*)(int);
  auto set = reinterpret_cast<SetThreads>(
      dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set != nullptr) set(threads);
}

// glibc's HEAP_MAX_SIZE on 64-bit hosts: 2 x the 32 MiB largest mmap
// threshold.
constexpr int kArenaHeapBytes = 64 << 20;

void KeepFreedHostMemory() {
  // Not one arena: every device's worker allocates, and with a single
  // heap they queue on its lock (two data-parallel replicas on cpu2 each
  // ran 1.6x slower than alone). glibc trims per-thread heaps by the same
  // threshold, so the settings hold in every arena.
  mallopt(M_MMAP_MAX, 0);         // large blocks from the heap, reused
  mallopt(M_TRIM_THRESHOLD, -1);  // never give the heap's top back
  // A per-thread arena grows by heaps of 64 MiB, and glibc unmaps a heap
  // once it is wholly free, whatever the trim threshold, unless M_TOP_PAD
  // asks to keep that much free (heap_trim); a pad of one heap keeps them
  // all. Without it a worker whose step frees its top heaps (how often
  // depends on what the process ran before) faults them in every step.
  mallopt(M_TOP_PAD, kArenaHeapBytes);
}

}  // namespace placer
