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
  mallopt(M_ARENA_MAX, 1);        // one heap, so the settings below hold
  mallopt(M_MMAP_MAX, 0);         // large blocks from the heap, reused
  mallopt(M_TRIM_THRESHOLD, -1);  // never give the heap's top back
}

}  // namespace placer
