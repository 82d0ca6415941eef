#include "deepinfer/loader/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace deepinfer {
namespace {

using nlohmann::json;

// The reference implementation's limit; real V4 headers are well under 10 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Parses an unsigned JSON integer that fits in int64 (nlohmann keeps non-negative integer
// literals as number_unsigned; negatives and floats are rejected).
bool get_u63(const json& j, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  const uint64_t v = j.get<uint64_t>();
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = v;
  return true;
}

struct Span {
  uint64_t begin, end;
  size_t index;
};

}  // namespace

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapping, MappedFile::open(path));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->label_ = path;
  RETURN_IF_ERROR(file->parse(mapping->data(), mapping->size()));
  file->mapping_ = std::move(mapping);
  return file;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse_buffer(const uint8_t* data,
                                                                         size_t size,
                                                                         std::string label) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->label_ = std::move(label);
  RETURN_IF_ERROR(file->parse(data, size));
  return file;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

Status SafetensorsFile::parse(const uint8_t* data, size_t size) {
  const std::string& f = label_;
  if (size < 8) {
    return data_loss(f + ": file is " + std::to_string(size) +
                     " bytes, too short for the 8-byte safetensors header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];  // little-endian
  if (header_len > size - 8) {
    return data_loss(f + ": header length " + std::to_string(header_len) +
                     " extends beyond the file (" + std::to_string(size) + " bytes; truncated?)");
  }
  if (header_len > kMaxHeaderBytes) {
    return data_loss(f + ": header length " + std::to_string(header_len) + " exceeds the " +
                     std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  const char* hbegin = reinterpret_cast<const char*>(data + 8);
  const char* hend = hbegin + header_len;
  const uint8_t* data_section = data + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  // Duplicate top-level keys would otherwise be silently merged by the JSON parser.
  std::string duplicate;
  std::set<std::string> seen;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!seen.insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(hbegin, hend, cb);
  } catch (const json::exception& e) {
    return data_loss(f + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return data_loss(f + ": header JSON is not an object");
  if (!duplicate.empty()) return data_loss(f + ": tensor '" + duplicate + "' appears twice");

  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return data_loss(f + ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return data_loss(f + ": __metadata__ value for '" + m.key() + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = f + ": tensor '" + name + "': ";
    if (!v.is_object()) return data_loss(where + "entry is not an object");

    auto dt = v.find("dtype");
    if (dt == v.end()) return data_loss(where + "missing 'dtype'");
    if (!dt->is_string()) return data_loss(where + "'dtype' is not a string");
    StatusOr<DType> dtype = parse_dtype(dt->get<std::string>());
    if (!dtype.ok()) return unimplemented(where + dtype.status().message());

    auto sh = v.find("shape");
    if (sh == v.end()) return data_loss(where + "missing 'shape'");
    if (!sh->is_array()) return data_loss(where + "'shape' is not an array");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const json& d : *sh) {
      uint64_t dim;
      if (!get_u63(d, &dim)) return data_loss(where + "shape has a non-integer or negative entry");
      if (__builtin_mul_overflow(numel, dim, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return data_loss(where + "shape element count overflows");
      shape.push_back(static_cast<int64_t>(dim));
    }

    auto off = v.find("data_offsets");
    if (off == v.end()) return data_loss(where + "missing 'data_offsets'");
    uint64_t begin, end;
    if (!off->is_array() || off->size() != 2 || !get_u63((*off)[0], &begin) ||
        !get_u63((*off)[1], &end))
      return data_loss(where + "'data_offsets' is not a pair of non-negative integers");
    if (begin > end) {
      return data_loss(where + "data_offsets [" + std::to_string(begin) + ", " +
                       std::to_string(end) + "] are out of order");
    }
    if (end > data_size) {
      return data_loss(where + "data_offsets [" + std::to_string(begin) + ", " +
                       std::to_string(end) + "] extend past the data section (" +
                       std::to_string(data_size) + " bytes; file truncated?)");
    }
    uint64_t expected;
    if (__builtin_mul_overflow(numel, dtype_size(*dtype), &expected) || expected != end - begin) {
      return data_loss(where + "holds " + std::to_string(end - begin) + " bytes but shape " +
                       shape_to_string(shape) + " of " + dtype_name(*dtype) + " needs " +
                       std::to_string(numel) + " x " + std::to_string(dtype_size(*dtype)));
    }

    TensorInfo t;
    t.name = name;
    t.dtype = *dtype;
    t.shape = std::move(shape);
    t.data = data_section + begin;
    t.nbytes = static_cast<size_t>(end - begin);
    t.file = f;
    spans.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }

  // Overlap check over byte ranges; empty tensors occupy nothing and cannot overlap.
  std::erase_if(spans, [](const Span& s) { return s.begin == s.end; });
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end) {
      const TensorInfo& a = tensors_[spans[i - 1].index];
      const TensorInfo& b = tensors_[spans[i].index];
      return data_loss(f + ": tensors '" + a.name + "' [" + std::to_string(spans[i - 1].begin) +
                       ", " + std::to_string(spans[i - 1].end) + ") and '" + b.name + "' [" +
                       std::to_string(spans[i].begin) + ", " + std::to_string(spans[i].end) +
                       ") overlap");
    }
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return ok_status();
}

}  // namespace deepinfer
