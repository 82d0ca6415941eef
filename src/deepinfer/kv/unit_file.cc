#include "deepinfer/kv/unit_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <system_error>

#include "deepinfer/base/check.h"

namespace deepinfer::kv {
namespace {

static_assert(std::endian::native == std::endian::little, "unit files are little-endian");

constexpr char kMagic[8] = {'D', 'I', 'K', 'V', 'U', 'N', 'I', 'T'};
constexpr size_t kDigestedHeader = 136;  // [0, 136): the immutable header fields
constexpr size_t kHeaderDigestAt = 152;
// Far above any real unit; keeps length sums from overflowing on a corrupt header.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 40;
constexpr std::string_view kTempInfix = ".tmp.";
constexpr size_t kTempRandomChars = 6;  // mkostemp's XXXXXX

using Digest = std::array<uint8_t, 32>;

Digest sha256(std::initializer_list<std::string_view> parts) {
  Digest d;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  DI_CHECK(ctx != nullptr);
  unsigned len = 0;
  bool ok = EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1;
  for (std::string_view p : parts) ok = ok && EVP_DigestUpdate(ctx, p.data(), p.size()) == 1;
  ok = ok && EVP_DigestFinal_ex(ctx, d.data(), &len) == 1;
  EVP_MD_CTX_free(ctx);
  DI_CHECK(ok && len == d.size());
  return d;
}

template <typename T>
void put(std::string& out, size_t at, const T& v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}

template <typename T>
T get(std::string_view in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

std::string_view bytes_of(const Digest& d) {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// A full disk or a file-size limit is exhaustion the caller can act on (evict, retry later).
Status io_error(const std::string& what, const std::string& path, int err) {
  std::string message = what + " " + path + ": " + errno_text(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return resource_exhausted(std::move(message));
  return internal_error(std::move(message));
}

// pread/pwrite until done; a short count from a signal or a size limit just loops.
bool pwrite_all(int fd, std::string_view bytes, off_t offset) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// Returns the number of bytes read (less than size only at end of file), or -1 with errno.
ssize_t pread_all(int fd, char* out, size_t size, off_t offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens for reading; kNotFound when the file is gone (an eviction raced the reader).
StatusOr<int> open_for_read(const std::string& path, int64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("no unit file " + path);
    return io_error("cannot open", path, err);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error("cannot stat", path, err);
  }
  *size = static_cast<int64_t>(st.st_size);
  return fd;
}

Status check_length(const UnitHeader& h, int64_t actual, const std::string& path) {
  if (actual < h.file_bytes()) {
    return data_loss(path + ": truncated unit file: " + std::to_string(actual) +
                     " bytes, header says " + std::to_string(h.file_bytes()));
  }
  if (actual > h.file_bytes()) {
    return data_loss(path + ": length mismatch: " + std::to_string(actual) +
                     " bytes, header says " + std::to_string(h.file_bytes()));
  }
  return ok_status();
}

}  // namespace

LayoutTag layout_tag(std::string_view fingerprint) {
  return sha256({"deepinfer-unit-layout-v1", fingerprint});
}

std::string encode_unit(const UnitRecord& r, const LayoutTag& layout) {
  std::string out(static_cast<size_t>(kUnitHeaderBytes), '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put(out, 8, kUnitFormatVersion);
  put(out, 12, static_cast<uint8_t>(r.retention));
  std::memcpy(out.data() + 16, layout.data(), layout.size());
  std::memcpy(out.data() + 48, r.key.digest.data(), 32);
  std::memcpy(out.data() + 80, r.parent.digest.data(), 32);
  put(out, 112, r.end_tokens);
  put(out, 120, static_cast<uint64_t>(r.page.size()));
  put(out, 128, static_cast<uint64_t>(r.snapshot.size()));
  put(out, kUnitExpiryOffset, r.expires_at_s);
  put(out, kUnitExpiryOffset + 8, ~r.expires_at_s);
  const std::string_view fixed(out.data(), kDigestedHeader);
  const Digest header_digest = sha256({fixed});
  std::memcpy(out.data() + kHeaderDigestAt, header_digest.data(), header_digest.size());
  const Digest trailer = sha256({fixed, r.page, r.snapshot});
  out.reserve(out.size() + r.page.size() + r.snapshot.size() + trailer.size());
  out.append(r.page).append(r.snapshot).append(bytes_of(trailer));
  return out;
}

StatusOr<UnitHeader> decode_header(std::string_view b, const LayoutTag& layout,
                                   const std::string& path) {
  if (b.size() < static_cast<size_t>(kUnitHeaderBytes)) {
    return data_loss(path + ": truncated unit file: " + std::to_string(b.size()) +
                     " bytes, shorter than the " + std::to_string(kUnitHeaderBytes) +
                     "-byte header");
  }
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) {
    return data_loss(path + ": bad magic (not a DIKVUNIT file)");
  }
  const uint32_t version = get<uint32_t>(b, 8);
  if (version != kUnitFormatVersion) {
    return data_loss(path + ": unit format version " + std::to_string(version) + ", expected " +
                     std::to_string(kUnitFormatVersion));
  }
  const Digest digest = sha256({b.substr(0, kDigestedHeader)});
  if (std::memcmp(digest.data(), b.data() + kHeaderDigestAt, digest.size()) != 0) {
    return data_loss(path + ": header checksum mismatch");
  }
  const int64_t expires = get<int64_t>(b, kUnitExpiryOffset);
  if (get<int64_t>(b, kUnitExpiryOffset + 8) != ~expires) {
    return data_loss(path + ": torn expiry field (expires_at_s and its complement disagree)");
  }
  if (std::memcmp(b.data() + 16, layout.data(), layout.size()) != 0) {
    return data_loss(path + ": wrong layout fingerprint (a unit of another model or page layout)");
  }
  const uint8_t retention = get<uint8_t>(b, 12);
  if (retention > static_cast<uint8_t>(Retention::kChat)) {
    return data_loss(path + ": bad retention " + std::to_string(retention));
  }
  const uint64_t page = get<uint64_t>(b, 120), snapshot = get<uint64_t>(b, 128);
  const int64_t end_tokens = get<int64_t>(b, 112);
  if (page > kMaxPayloadBytes || snapshot > kMaxPayloadBytes || end_tokens < 0) {
    return data_loss(path + ": bad lengths (page " + std::to_string(page) + ", snapshot " +
                     std::to_string(snapshot) + ", end_tokens " + std::to_string(end_tokens) + ")");
  }
  UnitHeader h;
  std::memcpy(h.key.digest.data(), b.data() + 48, 32);
  std::memcpy(h.parent.digest.data(), b.data() + 80, 32);
  h.end_tokens = end_tokens;
  h.retention = static_cast<Retention>(retention);
  h.expires_at_s = expires;
  h.page_bytes = static_cast<int64_t>(page);
  h.snapshot_bytes = static_cast<int64_t>(snapshot);
  return h;
}

StatusOr<UnitRecord> decode_unit(std::string_view b, const LayoutTag& layout,
                                 const std::string& path) {
  ASSIGN_OR_RETURN(const UnitHeader h, decode_header(b, layout, path));
  RETURN_IF_ERROR(check_length(h, static_cast<int64_t>(b.size()), path));
  const std::string_view page = b.substr(kUnitHeaderBytes, h.page_bytes);
  const std::string_view snapshot = b.substr(kUnitHeaderBytes + h.page_bytes, h.snapshot_bytes);
  const Digest digest = sha256({b.substr(0, kDigestedHeader), page, snapshot});
  if (std::memcmp(digest.data(), b.data() + b.size() - kUnitTrailerBytes, digest.size()) != 0) {
    return data_loss(path + ": checksum mismatch over header and payload");
  }
  UnitRecord r;
  r.key = h.key;
  r.parent = h.parent;
  r.end_tokens = h.end_tokens;
  r.page = std::string(page);
  r.snapshot = std::string(snapshot);
  r.expires_at_s = h.expires_at_s;
  r.retention = h.retention;
  return r;
}

StatusOr<UnitHeader> read_header(const std::string& path, const LayoutTag& layout) {
  int64_t size = 0;
  ASSIGN_OR_RETURN(const int raw_fd, open_for_read(path, &size));
  const Fd fd(raw_fd);
  std::string header(static_cast<size_t>(kUnitHeaderBytes), '\0');
  const ssize_t n = pread_all(fd.get(), header.data(), header.size(), 0);
  if (n < 0) return io_error("cannot read", path, errno);
  header.resize(static_cast<size_t>(n));
  ASSIGN_OR_RETURN(const UnitHeader h, decode_header(header, layout, path));
  RETURN_IF_ERROR(check_length(h, size, path));
  return h;
}

StatusOr<UnitRecord> read_unit(const std::string& path, const LayoutTag& layout) {
  int64_t size = 0;
  ASSIGN_OR_RETURN(const int raw_fd, open_for_read(path, &size));
  const Fd fd(raw_fd);
  std::string bytes(static_cast<size_t>(size), '\0');
  const ssize_t n = pread_all(fd.get(), bytes.data(), bytes.size(), 0);
  if (n < 0) return io_error("cannot read", path, errno);
  bytes.resize(static_cast<size_t>(n));
  return decode_unit(bytes, layout, path);
}

Status write_expiry_in_place(const std::string& path, int64_t expires_at_s) {
  const Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("no unit file " + path);
    return io_error("cannot open", path, err);
  }
  std::string field(16, '\0');
  put(field, 0, expires_at_s);
  put(field, 8, ~expires_at_s);
  if (!pwrite_all(fd.get(), field, kUnitExpiryOffset)) {
    return io_error("cannot write the expiry of", path, errno);
  }
  if (::fdatasync(fd.get()) != 0) return io_error("cannot sync", path, errno);
  return ok_status();
}

bool is_temp_file_name(std::string_view name) {
  const size_t tail = kTempInfix.size() + kTempRandomChars;
  return name.size() > tail && name.substr(name.size() - tail, kTempInfix.size()) == kTempInfix;
}

StatusOr<std::string> write_temp_file(const std::string& dir, const std::string& name,
                                      std::string_view bytes) {
  const std::string final_path = dir + "/" + name;
  std::string temp_path = final_path + std::string(kTempInfix) + "XXXXXX";
  const int raw_fd = ::mkostemp(temp_path.data(), O_CLOEXEC);
  if (raw_fd < 0) return io_error("cannot create a temp file for", final_path, errno);
  const Fd fd(raw_fd);
  int err = 0;
  if (!pwrite_all(fd.get(), bytes, 0)) {
    err = errno;
  } else if (::fsync(fd.get()) != 0) {
    err = errno;
  }
  if (err != 0) {
    ::unlink(temp_path.c_str());
    return io_error("cannot write", final_path + " (temp " + temp_path + ")", err);
  }
  return temp_path;
}

Status rename_temp_file(const std::string& temp_path, const std::string& dir,
                        const std::string& name) {
  const std::string final_path = dir + "/" + name;
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path.c_str());
    return io_error("cannot rename " + temp_path + " to", final_path, err);
  }
  return ok_status();
}

Status sync_directory(const std::string& dir) {
  const Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) return io_error("cannot open directory", dir, errno);
  if (::fsync(dir_fd.get()) != 0) return io_error("cannot sync directory", dir, errno);
  return ok_status();
}

Status write_file_atomically(const std::string& dir, const std::string& name,
                             std::string_view bytes) {
  ASSIGN_OR_RETURN(const std::string temp_path, write_temp_file(dir, name, bytes));
  RETURN_IF_ERROR(rename_temp_file(temp_path, dir, name));
  return sync_directory(dir);
}

}  // namespace deepinfer::kv
