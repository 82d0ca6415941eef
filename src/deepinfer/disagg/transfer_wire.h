// The state-transfer wire format (TCP, little-endian) and the socket I/O both ends share.
//
// Request:  "DIKVXFR1" | u32 op | 32-byte handoff id | u32 n | n x u32 chunk index
//   op 1 FETCH (n = 0): the header, the meta and every chunk;
//   op 2 RESEND: the listed chunks again (after a checksum failure);
//   op 3 DONE (n = 0): the decode worker has the state; the prefill worker forgets it.
// FETCH answer: "DIKVXFR1" | u32 status (0 ok, 1 unknown or expired id) | u64 meta bytes |
//   u64 payload bytes | u32 chunk bytes | u32 chunks | SHA-256 of the meta | the meta.
// A chunk: u32 index | u32 bytes | SHA-256 of its bytes | its bytes.
// DONE answer: u32 0.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "deepinfer/base/socket_io.h"
#include "deepinfer/base/status.h"

namespace deepinfer::disagg::wire {

inline constexpr std::string_view kMagic = "DIKVXFR1";
inline constexpr size_t kIdBytes = 32;
enum Op : uint32_t { kFetch = 1, kResend = 2, kDone = 3 };
enum Answer : uint32_t { kOk = 0, kUnknownId = 1 };
inline constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8 + 4 + 4 + 32;
inline constexpr size_t kChunkHeadBytes = 4 + 4 + 32;
inline constexpr uint32_t kMaxResendIndices = 1 << 20;

using Digest = std::array<uint8_t, 32>;
Digest sha256(std::string_view bytes);

// The socket helpers live in base/socket_io.h; the protocol code names them here.
using net::connect_tcp;
using net::Deadline;
using net::Fd;
using net::get_u32;
using net::get_u64;
using net::put_u32;
using net::put_u64;
using net::read_exact;
using net::split_host_port;
using net::write_all;

}  // namespace deepinfer::disagg::wire
