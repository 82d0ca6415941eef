#include "deepinfer/recipe/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace deepinfer::recipe {

void python_json_quote(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |v| < 1e16.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -5 + 1 && exp < 16) {
    if (exp >= 0) {
      if (digits.size() <= static_cast<size_t>(exp) + 1) {
        out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

void python_json_dump(const Json& v, std::string* out) {
  switch (v.type()) {
    case Json::value_t::null:
      *out += "null";
      break;
    case Json::value_t::boolean:
      *out += v.get<bool>() ? "true" : "false";
      break;
    case Json::value_t::number_integer:
      *out += std::to_string(v.get<int64_t>());
      break;
    case Json::value_t::number_unsigned:
      *out += std::to_string(v.get<uint64_t>());
      break;
    case Json::value_t::number_float:
      *out += python_float_repr(v.get<double>());
      break;
    case Json::value_t::string:
      python_json_quote(v.get_ref<const std::string&>(), out);
      break;
    case Json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& x : v) {
        if (!first) *out += ", ";
        first = false;
        python_json_dump(x, out);
      }
      out->push_back(']');
      break;
    }
    case Json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) *out += ", ";
        first = false;
        python_json_quote(it.key(), out);
        *out += ": ";
        python_json_dump(it.value(), out);
      }
      out->push_back('}');
      break;
    }
    default:
      *out += "null";
      break;
  }
}

bool python_json_loads(std::string_view text, Json* out) {
  try {
    *out = Json::parse(text);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace deepinfer::recipe
