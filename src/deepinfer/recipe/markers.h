// Literal marker texts of the DeepSeek chat format, and the DSML tag spellings per version.
#pragma once

#include <string>

namespace deepinfer::recipe {

enum class Variant {
  kV41,  // DeepSeek-V4.1: SYSTEM marker, spaced DSML tag names ("<｜DSML｜ calls>")
  kV4,   // DeepSeek-V4: no SYSTEM marker, "<｜DSML｜tool_calls>"
};

inline constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
inline constexpr const char* kEos = "<｜end▁of▁sentence｜>";
inline constexpr const char* kSystem = "<｜System｜>";
inline constexpr const char* kUser = "<｜User｜>";
inline constexpr const char* kAssistant = "<｜Assistant｜>";
inline constexpr const char* kThinkOpen = "<think>";
inline constexpr const char* kThinkClose = "</think>";
inline constexpr const char* kDsml = "｜DSML｜";
inline constexpr const char* kReminder = "<｜latest_reminder｜>";
inline constexpr const char* kImage = "<｜deepseek_image｜>";

// Internal field of a mapped message: the byte offsets in its flattened content where an image
// part's kImage was put, so the encoder marks those (and only those) as markup. Removed from
// incoming requests, so a client cannot set it.
inline constexpr const char* kImageOffsetsField = "__deepinfer_image_offsets";

// Tag texts built from the version's block/element names.
struct DsmlTags {
  std::string calls_open;    // <｜DSML｜ calls>
  std::string calls_close;   // </｜DSML｜ calls>
  std::string invoke_open;   // <｜DSML｜ invoke   (then ` name="..">`)
  std::string invoke_close;  // </｜DSML｜ invoke>
  std::string param_open;    // <｜DSML｜ parameter   (then ` name=".." string="..">`)
  std::string param_close;   // </｜DSML｜ parameter>

  static const DsmlTags& of(Variant v) {
    static const DsmlTags v41 = make(" calls", " invoke", " parameter");
    static const DsmlTags v4 = make("tool_calls", "invoke", "parameter");
    return v == Variant::kV41 ? v41 : v4;
  }

 private:
  static DsmlTags make(const std::string& calls, const std::string& invoke,
                       const std::string& param) {
    std::string d = kDsml;
    return {"<" + d + calls + ">",   "</" + d + calls + ">", "<" + d + invoke,
            "</" + d + invoke + ">", "<" + d + param,        "</" + d + param + ">"};
  }
};

}  // namespace deepinfer::recipe
