// Process-wide settings that LibTorch work on CPU devices needs to be
// measured honestly; both the executor and the profiler apply them, so
// that profiles and measured steps see the same machine.
//
// Contract: SetBlasThreads sets OpenBLAS's thread count (process-wide;
// OpenBLAS otherwise runs each product on every core, whichever device's
// worker calls it); a no-op with the reference BLAS. KeepFreedHostMemory
// makes glibc's malloc keep freed memory for reuse instead of returning it
// to the system (no mmap per large tensor, no heap trimming, in every
// per-thread arena): without it every fresh 8 MB gradient costs thousands
// of page faults, which on these machines made an SGD update 30x slower
// inside a step than in isolation.
// Both are idempotent.
#ifndef PLACER_BASE_HOST_SETUP_H_
#define PLACER_BASE_HOST_SETUP_H_

namespace placer {

void SetBlasThreads(int threads);
void KeepFreedHostMemory();

}  // namespace placer

#endif  // PLACER_BASE_HOST_SETUP_H_
