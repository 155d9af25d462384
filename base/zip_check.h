// Checks every entry of an in-memory zip archive against the CRC-32 its
// central directory records, before a reader that does not (LibTorch's
// PyTorchStreamReader, which reads checkpoints) is handed a damaged file:
// one flipped byte in a tensor of a 100 KB RL checkpoint made LibTorch's
// loader spend 2 s and 3.8 GB before failing (found by fuzzing).
//
// Contract: OK when every entry's bytes (stored, or deflated and inflated
// here, as LibTorch writes its code files) match its recorded CRC-32 and
// size; DataLoss naming `source` and the entry otherwise: a directory that
// cannot be read, two entries of one name (a reader would take either),
// another compression method, zip64 (placer's archives are small), an
// inflated size beyond what deflate can give or 1 GiB. Found by fuzzing:
// an archive with a renamed duplicate code entry crashed LibTorch's
// TorchScript importer (a SEGV in ScriptTypeParser), and one with a
// broken deflate stream made it allocate past 4 GB.
#ifndef PLACER_BASE_ZIP_CHECK_H_
#define PLACER_BASE_ZIP_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace placer {

absl::Status CheckZipChecksums(absl::string_view bytes,
                               const std::string& source);

}  // namespace placer

#endif  // PLACER_BASE_ZIP_CHECK_H_
