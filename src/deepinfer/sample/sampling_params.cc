#include "deepinfer/sample/sampling_params.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

namespace deepinfer::sample {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// Written as !(in range) so NaN is rejected too.
Status check_closed(const char* field, float v, float lo, float hi) {
  if (!(v >= lo && v <= hi)) {
    return invalid_argument(std::string(field) + " must be in [" + num(lo) + ", " + num(hi) +
                            "], got " + num(v));
  }
  return ok_status();
}

Status check_token_id(const std::string& field, int64_t id, int64_t vocab_size) {
  if (id < 0 || id >= vocab_size) {
    return invalid_argument(field + " must be a token id in [0, " + std::to_string(vocab_size) +
                            "), got " + std::to_string(id));
  }
  return ok_status();
}

Status type_error(const std::string& field, const char* want, const nlohmann::json& v) {
  return invalid_argument(field + " must be " + want + ", got " + v.type_name());
}

// Integers, or floats with an integral value (pydantic's lax mode accepts 16.0 for an int).
Status read_int64(const std::string& field, const nlohmann::json& v, int64_t lo, int64_t hi,
                  int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return invalid_argument(field + " is out of range, got " + v.dump());
    }
    *out = static_cast<int64_t>(u);
    return ok_status();
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return invalid_argument(field + " is out of range, got " + v.dump());
    *out = i;
    return ok_status();
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
        d <= static_cast<double>(hi)) {
      *out = static_cast<int64_t>(d);
      return ok_status();
    }
    return invalid_argument(field + " must be an integer, got " + v.dump());
  }
  return type_error(field, "an integer", v);
}

// Negative seeds (Python ints) keep their two's-complement bits.
StatusOr<uint64_t> read_seed(const std::string& field, const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  int64_t s = 0;
  RETURN_IF_ERROR(read_int64(field, v, std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max(), &s));
  return static_cast<uint64_t>(s);
}

Status read_int(const std::string& field, const nlohmann::json& v, int* out) {
  int64_t i = 0;
  RETURN_IF_ERROR(
      read_int64(field, v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), &i));
  *out = static_cast<int>(i);
  return ok_status();
}

Status read_float(const std::string& field, const nlohmann::json& v, float* out) {
  if (!v.is_number()) return type_error(field, "a number", v);
  *out = v.get<float>();
  return ok_status();
}

Status read_bool(const std::string& field, const nlohmann::json& v, bool* out) {
  if (!v.is_boolean()) return type_error(field, "a boolean", v);
  *out = v.get<bool>();
  return ok_status();
}

Status read_token_list(const std::string& field, const nlohmann::json& v,
                       std::vector<int32_t>* out) {
  if (!v.is_array()) return type_error(field, "an array of token ids", v);
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t id = 0;
    RETURN_IF_ERROR(read_int64(field + "[" + std::to_string(i) + "]", v[i],
                               std::numeric_limits<int32_t>::min(),
                               std::numeric_limits<int32_t>::max(), &id));
    out->push_back(static_cast<int32_t>(id));
  }
  return ok_status();
}

Status read_stop(const nlohmann::json& v, std::vector<std::string>* out) {
  out->clear();
  if (v.is_string()) {
    out->push_back(v.get<std::string>());
    return ok_status();
  }
  if (!v.is_array()) return type_error("stop", "a string or an array of strings", v);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return type_error("stop[" + std::to_string(i) + "]", "a string", v[i]);
    out->push_back(v[i].get<std::string>());
  }
  return ok_status();
}

Status read_logit_bias(const nlohmann::json& v, std::map<int32_t, float>* out) {
  if (!v.is_object()) return type_error("logit_bias", "an object of token id -> bias", v);
  out->clear();
  for (const auto& [key, bias] : v.items()) {
    int32_t id = 0;
    const char* end = key.data() + key.size();
    auto [ptr, ec] = std::from_chars(key.data(), end, id);
    if (key.empty() || ec != std::errc() || ptr != end) {
      return invalid_argument("logit_bias key \"" + key + "\" must be a decimal token id");
    }
    float f = 0;
    RETURN_IF_ERROR(read_float("logit_bias[" + key + "]", bias, &f));
    (*out)[id] = f;
  }
  return ok_status();
}

}  // namespace

Status validate(const SamplingParams& p, int64_t vocab_size) {
  if (vocab_size <= 0) {
    return invalid_argument("vocab_size must be positive, got " + std::to_string(vocab_size));
  }
  if (p.n < 1) return invalid_argument("n must be at least 1, got " + std::to_string(p.n));
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return invalid_argument("temperature must be a finite number >= 0, got " + num(p.temperature));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return invalid_argument("top_p must be in (0, 1], got " + num(p.top_p));
  }
  if (p.top_k < -1) {
    return invalid_argument("top_k must be -1 or 0 (disabled) or at least 1, got " +
                            std::to_string(p.top_k));
  }
  RETURN_IF_ERROR(check_closed("min_p", p.min_p, 0.0f, 1.0f));
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return invalid_argument("repetition_penalty must be a finite number > 0, got " +
                            num(p.repetition_penalty));
  }
  RETURN_IF_ERROR(check_closed("frequency_penalty", p.frequency_penalty, -2.0f, 2.0f));
  RETURN_IF_ERROR(check_closed("presence_penalty", p.presence_penalty, -2.0f, 2.0f));
  for (const auto& [id, bias] : p.logit_bias) {
    RETURN_IF_ERROR(check_token_id("logit_bias key", id, vocab_size));
    RETURN_IF_ERROR(check_closed(("logit_bias[" + std::to_string(id) + "]").c_str(), bias,
                                 -kMaxLogitBias, kMaxLogitBias));
  }
  if (p.max_tokens < 1) {
    return invalid_argument("max_tokens must be at least 1, got " + std::to_string(p.max_tokens));
  }
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) {
    return invalid_argument("min_tokens must be in [0, max_tokens=" + std::to_string(p.max_tokens) +
                            "], got " + std::to_string(p.min_tokens));
  }
  for (size_t i = 0; i < p.stop_token_ids.size(); ++i) {
    RETURN_IF_ERROR(check_token_id("stop_token_ids[" + std::to_string(i) + "]", p.stop_token_ids[i],
                                   vocab_size));
  }
  for (size_t i = 0; i < p.stop.size(); ++i) {
    if (p.stop[i].empty()) {
      return invalid_argument("stop[" + std::to_string(i) + "] must be a non-empty string");
    }
  }
  if (p.logprobs.has_value()) {
    int64_t hi = std::min<int64_t>(kMaxLogprobs, vocab_size);
    if (*p.logprobs < 0 || *p.logprobs > hi) {
      return invalid_argument("logprobs must be in [0, " + std::to_string(hi) + "], got " +
                              std::to_string(*p.logprobs));
    }
  }
  return ok_status();
}

StatusOr<SamplingParams> sampling_params_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return type_error("sampling params", "a JSON object", j);
  SamplingParams p;
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) {
      continue;  // null keeps the default (and leaves seed/logprobs unset)
    }
    if (key == "n") {
      RETURN_IF_ERROR(read_int(key, v, &p.n));
    } else if (key == "temperature") {
      RETURN_IF_ERROR(read_float(key, v, &p.temperature));
    } else if (key == "top_p") {
      RETURN_IF_ERROR(read_float(key, v, &p.top_p));
    } else if (key == "top_k") {
      RETURN_IF_ERROR(read_int(key, v, &p.top_k));
    } else if (key == "min_p") {
      RETURN_IF_ERROR(read_float(key, v, &p.min_p));
    } else if (key == "repetition_penalty") {
      RETURN_IF_ERROR(read_float(key, v, &p.repetition_penalty));
    } else if (key == "frequency_penalty") {
      RETURN_IF_ERROR(read_float(key, v, &p.frequency_penalty));
    } else if (key == "presence_penalty") {
      RETURN_IF_ERROR(read_float(key, v, &p.presence_penalty));
    } else if (key == "logit_bias") {
      RETURN_IF_ERROR(read_logit_bias(v, &p.logit_bias));
    } else if (key == "seed") {
      ASSIGN_OR_RETURN(p.seed, read_seed(key, v));
    } else if (key == "seq_seed") {
      ASSIGN_OR_RETURN(p.seq_seed, read_seed(key, v));
    } else if (key == "max_tokens") {
      RETURN_IF_ERROR(read_int(key, v, &p.max_tokens));
    } else if (key == "min_tokens") {
      RETURN_IF_ERROR(read_int(key, v, &p.min_tokens));
    } else if (key == "stop_token_ids") {
      RETURN_IF_ERROR(read_token_list(key, v, &p.stop_token_ids));
    } else if (key == "stop") {
      RETURN_IF_ERROR(read_stop(v, &p.stop));
    } else if (key == "include_stop_str_in_output") {
      RETURN_IF_ERROR(read_bool(key, v, &p.include_stop_str_in_output));
    } else if (key == "ignore_eos") {
      RETURN_IF_ERROR(read_bool(key, v, &p.ignore_eos));
    } else if (key == "logprobs") {
      int lp = 0;
      RETURN_IF_ERROR(read_int(key, v, &lp));
      p.logprobs = lp;
    } else if (key == "skip_special_tokens") {
      RETURN_IF_ERROR(read_bool(key, v, &p.skip_special_tokens));
    } else if (key == "so_args") {
      ASSIGN_OR_RETURN(p.so_args, structured_output_from_json(v));
    }
  }
  return p;
}

SamplingParams child_params(const SamplingParams& p, int index) {
  SamplingParams c = p;
  c.n = 1;
  if (c.seed.has_value()) *c.seed += static_cast<uint64_t>(index);
  if (c.seq_seed.has_value()) *c.seq_seed += static_cast<uint64_t>(index);
  return c;
}

}  // namespace deepinfer::sample
