#include "deepinfer/engine/sequence_handoff.h"

#include <nlohmann/json.hpp>

namespace deepinfer {

using nlohmann::json;

std::string handoff_meta(const SequenceHandoff& h) {
  json j = {{"version", 1},
            {"fingerprint", h.fingerprint},
            {"prompt_ids", h.prompt_ids},
            {"cached_tokens", h.cached_tokens},
            {"first_token", h.first_token},
            {"first_drew", h.first_drew},
            {"page_bytes", h.page_bytes},
            {"constant_pages", h.constant_pages},
            {"prompt_pages", h.prompt_pages}};
  if (!h.ipc_handle.empty()) {
    static const char* kHex = "0123456789abcdef";
    std::string hex;
    for (unsigned char c : h.ipc_handle) hex += {kHex[c >> 4], kHex[c & 15]};
    j["ipc_handle"] = hex;
  }
  if (h.has_logprobs) {
    j["first_logprob"] = h.first_logprob;
    json top = json::array();
    for (const auto& [id, lp] : h.first_top) top.push_back({id, lp});
    j["first_top"] = std::move(top);
  }
  return j.dump();
}

StatusOr<SequenceHandoff> handoff_from_meta(std::string_view meta, std::string pages) {
  json j = json::parse(meta, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return invalid_argument("handoff header: not a JSON object");
  SequenceHandoff h;
  try {
    if (j.value("version", 0) != 1)
      return invalid_argument("handoff header: version must be 1, got " +
                              j.value("version", json()).dump());
    h.fingerprint = j.at("fingerprint").get<std::string>();
    h.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
    h.cached_tokens = j.at("cached_tokens").get<int64_t>();
    h.first_token = j.at("first_token").get<int32_t>();
    h.first_drew = j.at("first_drew").get<bool>();
    h.page_bytes = j.at("page_bytes").get<int64_t>();
    h.constant_pages = j.at("constant_pages").get<int64_t>();
    h.prompt_pages = j.at("prompt_pages").get<int64_t>();
    if (j.contains("ipc_handle")) {
      const std::string hex = j.at("ipc_handle").get<std::string>();
      if (hex.empty() || hex.size() % 2 != 0 ||
          hex.find_first_not_of("0123456789abcdef") != std::string::npos)
        return invalid_argument("handoff header: ipc_handle must be lowercase hex digits");
      for (size_t i = 0; i < hex.size(); i += 2)
        h.ipc_handle += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    }
    if (j.contains("first_logprob")) {
      h.has_logprobs = true;
      h.first_logprob = j.at("first_logprob").get<float>();
      for (const json& t : j.at("first_top"))
        h.first_top.emplace_back(t.at(0).get<int32_t>(), t.at(1).get<float>());
    }
  } catch (const json::exception& e) {
    return invalid_argument(std::string("handoff header: ") + e.what());
  }
  if (h.page_bytes <= 0 || h.constant_pages < 0 || h.prompt_pages < 0)
    return invalid_argument(
        "handoff header: page_bytes must be positive and page counts "
        "not negative");
  const int64_t expected = h.ipc_handle.empty() ? h.state_bytes() : 0;  // IPC: on the device
  if (static_cast<int64_t>(pages.size()) != expected)
    return invalid_argument("handoff pages: " + std::to_string(pages.size()) + " bytes, expected " +
                            std::to_string(expected) +
                            (h.ipc_handle.empty()
                                 ? " (" + std::to_string(h.num_pages()) + " pages of " +
                                       std::to_string(h.page_bytes) + ")"
                                 : " (a CUDA IPC state travels on the device)"));
  h.pages = std::move(pages);
  return h;
}

}  // namespace deepinfer
