// HumanBytes: bytes for tables and pages, in binary units with three
// significant digits ("512 B", "16.0 KiB", "2.86 GiB"); JSON reports keep
// exact bytes. Negative counts get a minus sign.
#ifndef PLACER_PLACER_HUMAN_BYTES_H_
#define PLACER_PLACER_HUMAN_BYTES_H_

#include <cstdint>
#include <string>

namespace placer {

std::string HumanBytes(int64_t bytes);

}  // namespace placer

#endif  // PLACER_PLACER_HUMAN_BYTES_H_
