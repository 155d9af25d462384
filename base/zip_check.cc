#include "base/zip_check.h"

#include <zlib.h>

#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace placer {
namespace {

uint32_t Read32(absl::string_view b, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 3])) << 24;
}

uint16_t Read16(absl::string_view b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) |
                               static_cast<uint8_t>(b[at + 1]) << 8);
}

constexpr uint32_t kMaxInflatedBytes = uint32_t{1} << 30;

// Raw deflate data to exactly `size` bytes; false otherwise.
bool Inflate(absl::string_view in, uint32_t size, std::string* out) {
  out->assign(size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return false;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = size;
  const int status = inflate(&z, Z_FINISH);
  const bool whole = status == Z_STREAM_END && z.total_out == size;
  inflateEnd(&z);
  return whole;
}

}  // namespace

absl::Status CheckZipChecksums(absl::string_view bytes,
                               const std::string& source) {
  auto damaged = [&](const std::string& why) {
    return absl::DataLossError(
        absl::StrCat(source, " is damaged: ", why));
  };
  // The end-of-central-directory record: 22 bytes plus a comment of up to
  // 64 KiB, searched from the end.
  constexpr uint32_t kEnd = 0x06054b50, kCentral = 0x02014b50,
                     kLocal = 0x04034b50;
  if (bytes.size() < 22) return damaged("too short for a zip archive");
  size_t end = std::string::npos;
  const size_t lowest = bytes.size() > 22 + 65535 ? bytes.size() - 22 - 65535 : 0;
  for (size_t at = bytes.size() - 22 + 1; at-- > lowest;) {
    if (Read32(bytes, at) == kEnd) {
      end = at;
      break;
    }
  }
  if (end == std::string::npos) return damaged("no zip directory at its end");
  const uint16_t entries_here = Read16(bytes, end + 8);
  const uint16_t entries = Read16(bytes, end + 10);
  const uint32_t directory_size = Read32(bytes, end + 12);
  const uint32_t directory = Read32(bytes, end + 16);
  if (entries == 0xffff || directory == 0xffffffffu) {
    return damaged("a zip64 directory, which placer never writes");
  }
  if (static_cast<uint64_t>(directory) + directory_size > end) {
    return damaged("its zip directory lies outside the file");
  }
  // Readers differ in which count they trust: both must agree, and the
  // entries must fill the directory exactly.
  if (entries == 0 || entries_here != entries) {
    return damaged(absl::StrCat("its zip directory counts ", entries_here,
                                " and ", entries, " entries"));
  }
  size_t at = directory;
  std::set<std::string> names;
  for (int i = 0; i < entries; ++i) {
    if (at + 46 > end || Read32(bytes, at) != kCentral) {
      return damaged(absl::StrCat("zip directory entry ", i, " is unreadable"));
    }
    const uint16_t method = Read16(bytes, at + 10);
    const uint32_t crc = Read32(bytes, at + 16);
    const uint32_t compressed = Read32(bytes, at + 20);
    const uint32_t size = Read32(bytes, at + 24);
    const uint16_t name_length = Read16(bytes, at + 28);
    const uint16_t extra_length = Read16(bytes, at + 30);
    const uint16_t comment_length = Read16(bytes, at + 32);
    const uint32_t local = Read32(bytes, at + 42);
    if (at + 46 + name_length > end) {
      return damaged(absl::StrCat("zip directory entry ", i, " is truncated"));
    }
    const std::string name(bytes.substr(at + 46, name_length));
    at += 46 + name_length + extra_length + comment_length;
    if (compressed == 0xffffffffu || size == 0xffffffffu ||
        local == 0xffffffffu) {
      return damaged(absl::StrCat("entry '", name,
                                  "' is zip64, which placer never writes"));
    }
    // A reader looks entries up by name: two of one name would let the
    // checked one stand for the other.
    if (!names.insert(name).second) {
      return damaged(absl::StrCat("two entries are named '", name, "'"));
    }
    if (method != 0 && method != 8) {
      return damaged(absl::StrCat("entry '", name, "' uses compression method ",
                                  method, " (only stored and deflated entries "
                                  "are read)"));
    }
    if (method == 0 && compressed != size) {
      return damaged(absl::StrCat("entry '", name, "' has two sizes"));
    }
    // Deflate expands at most ~1032:1; a claim beyond that is a lie.
    if (method == 8 &&
        (size > kMaxInflatedBytes ||
         static_cast<uint64_t>(size) > 1032 * static_cast<uint64_t>(compressed) + 1024)) {
      return damaged(absl::StrCat("entry '", name, "' claims ", size,
                                  " bytes from ", compressed));
    }
    if (static_cast<uint64_t>(local) + 30 > bytes.size() ||
        Read32(bytes, local) != kLocal) {
      return damaged(absl::StrCat("entry '", name, "' has no local header"));
    }
    const uint16_t local_name_length = Read16(bytes, local + 26);
    if (static_cast<uint64_t>(local) + 30 + local_name_length > bytes.size() ||
        bytes.substr(local + 30, local_name_length) != name) {
      return damaged(absl::StrCat("entry '", name,
                                  "' is named otherwise in its local header"));
    }
    const uint64_t data = static_cast<uint64_t>(local) + 30 +
                          local_name_length + Read16(bytes, local + 28);
    if (data + compressed > bytes.size()) {
      return damaged(absl::StrCat("entry '", name, "' runs past the end"));
    }
    absl::string_view stored = bytes.substr(data, compressed);
    std::string inflated;
    if (method == 8) {
      if (!Inflate(stored, size, &inflated)) {
        return damaged(absl::StrCat("entry '", name,
                                    "' does not inflate to its ", size,
                                    " bytes"));
      }
      stored = inflated;
    }
    const uLong actual =
        crc32_z(crc32_z(0L, Z_NULL, 0),
                reinterpret_cast<const Bytef*>(stored.data()), stored.size());
    if (actual != crc) {
      return damaged(absl::StrCat("entry '", name,
                                  "' does not match its checksum"));
    }
  }
  if (at != static_cast<size_t>(directory) + directory_size) {
    return damaged("its zip directory's size does not match its entries");
  }
  return absl::OkStatus();
}

}  // namespace placer
