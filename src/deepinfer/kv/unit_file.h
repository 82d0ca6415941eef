// The on-disk form of one prefix-cache unit (disk tier): a fixed little-endian header, the page
// and snapshot bytes, and a SHA-256 trailer. Every reader verifies before it hands anything out,
// because a unit's bytes go straight into a sequence's KV state: a torn or stale file must be a
// miss, never wrong attention.
//
// Layout (offsets in bytes):
//     0  magic "DIKVUNIT"          8  u32 format version     12  u8 retention, 3 zero bytes
//    16  SHA-256 of the layout fingerprint (a file of another model or page layout is rejected)
//    48  key                      80  parent               112  i64 end_tokens
//   120  u64 page length         128  u64 snapshot length
//   136  i64 expires_at_s        144  i64 ~expires_at_s (the only mutable field, see below)
//   152  SHA-256 of bytes [0, 136)
//   184  page, snapshot, then SHA-256 of bytes [0, 136) + page + snapshot
// The expiry sits outside both digests, guarded by its complement instead, so a hit can extend
// retention with one 16-byte pwrite inside the first sector instead of rewriting megabytes; a torn
// rewrite breaks the complement and the unit is dropped, like any other corruption.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/kv/unit_record.h"

namespace deepinfer::kv {

inline constexpr uint32_t kUnitFormatVersion = 1;
inline constexpr int64_t kUnitHeaderBytes = 184;
inline constexpr int64_t kUnitTrailerBytes = 32;
inline constexpr int64_t kUnitExpiryOffset = 136;

// SHA-256 of the caller's layout fingerprint (model, page layout, numerics).
using LayoutTag = std::array<uint8_t, 32>;
LayoutTag layout_tag(std::string_view fingerprint);

// A verified header: everything but the payload.
struct UnitHeader {
  UnitKey key;
  UnitKey parent;
  int64_t end_tokens = 0;
  Retention retention = Retention::kChat;
  int64_t expires_at_s = 0;
  int64_t page_bytes = 0;
  int64_t snapshot_bytes = 0;

  int64_t file_bytes() const {
    return kUnitHeaderBytes + page_bytes + snapshot_bytes + kUnitTrailerBytes;
  }
};

// The file's bytes for `record`.
std::string encode_unit(const UnitRecord& record, const LayoutTag& layout);

// Parses and verifies the header at the start of `bytes` (the payload is not looked at).
// kDataLoss naming `path` and the fault: truncated, bad magic, unknown version, header checksum
// mismatch, torn expiry, wrong layout fingerprint, bad retention or lengths.
StatusOr<UnitHeader> decode_header(std::string_view bytes, const LayoutTag& layout,
                                   const std::string& path);

// Verifies the whole file (header, exact length, trailer checksum) and only then builds a record.
StatusOr<UnitRecord> decode_unit(std::string_view bytes, const LayoutTag& layout,
                                 const std::string& path);

// Reads only the header (and the file's size, which must match it): the start-up index scan.
// kNotFound if the file is gone, kDataLoss as decode_header, else the I/O error.
StatusOr<UnitHeader> read_header(const std::string& path, const LayoutTag& layout);

// Reads and decodes the whole file. kNotFound if the file is gone.
StatusOr<UnitRecord> read_unit(const std::string& path, const LayoutTag& layout);

// Overwrites the expiry and its complement in place (one 16-byte pwrite), then fdatasyncs.
Status write_expiry_in_place(const std::string& path, int64_t expires_at_s);

// Temp files are "<name>.tmp.XXXXXX" beside the final name; a start-up scan removes them.
bool is_temp_file_name(std::string_view file_name);

// An atomic write in three steps, so a caller can run the slow first one outside its locks.
// 1: the bytes in a fresh temp file beside dir/name (O_EXCL, O_CLOEXEC), fsynced. Returns the
// temp path; on failure (ENOSPC, EFBIG, ...) the temp is removed and the error names the path.
StatusOr<std::string> write_temp_file(const std::string& dir, const std::string& name,
                                      std::string_view bytes);
// 2: renames the temp over dir/name. On failure the temp is removed and dir/name is untouched.
Status rename_temp_file(const std::string& temp_path, const std::string& dir,
                        const std::string& name);
// 3: fsyncs the directory, which makes the rename durable.
Status sync_directory(const std::string& dir);
// All three: readers see the old file or the whole new one, never a mix, even after SIGKILL.
Status write_file_atomically(const std::string& dir, const std::string& name,
                             std::string_view bytes);

}  // namespace deepinfer::kv
