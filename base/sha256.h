// SHA-256 through OpenSSL's libcrypto: content fingerprints, stored-file
// names and the hashes an access file keeps of bearer tokens.
#ifndef PLACER_BASE_SHA256_H_
#define PLACER_BASE_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace placer {

// Lower-case hex SHA-256 of `bytes` (64 characters).
std::string Sha256Hex(absl::string_view bytes);

// Whether two byte strings are equal, in time that depends on their length
// only (OpenSSL's CRYPTO_memcmp); strings of different lengths are unequal.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace placer

#endif  // PLACER_BASE_SHA256_H_
