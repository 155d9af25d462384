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

void KeepFreedHostMemory() {
  // Not one arena: every device's worker allocates, and with a single
  // heap they queue on its lock (two data-parallel replicas on cpu2 each
  // ran 1.6x slower than alone). glibc trims per-thread heaps by the same
  // threshold, so the settings hold in every arena.
  mallopt(M_MMAP_MAX, 0);         // large blocks from the heap, reused
  mallopt(M_TRIM_THRESHOLD, -1);  // never give the heap's top back
}

}  // namespace placer
