#include "placer/human_bytes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace placer {

std::string HumanBytes(int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 0) return "-" + HumanBytes(-bytes);
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  // Three significant digits; rounding may reach 1024 (show it as such).
  const int decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return absl::StrFormat("%.*f %s", decimals, value, kUnits[unit]);
}

}  // namespace placer
