// make-tiny-model's deepseek_v4 presets: small configs with every layer kind for tests, and
// V4-Flash's real dims (spec §2.1) on its first 8 layers or on all 43 for benchmarks and the
// multi-GPU runs.
#pragma once

#include <string>
#include <vector>

namespace deepinfer::v4 {

struct TinyPreset {
  std::string name;
  std::vector<int> ratios;  // compress_ratios: layers, then MTP (0)
  int hash_layers = 0;
  // V4-Flash's real per-layer dims, always FP8 + MXFP4, streamed (tiny_model.h).
  bool flash_dims = false;
};

const std::vector<TinyPreset>& tiny_presets();  // in --help order
const TinyPreset* find_tiny_preset(const std::string& name);

// V4-Flash's schedule (spec §2.1) cut to its first `layers` layers, plus the MTP layer: layers 0
// and 1 sliding only (0), then CSA (4) on even and HCA (128) on odd layers, MTP 0.
std::vector<int> v4_flash_compress_ratios(int layers);

// The preset's config.json (no quantization_config; write_tiny_model adds it).
std::string tiny_preset_config_json(const TinyPreset& preset);

}  // namespace deepinfer::v4
