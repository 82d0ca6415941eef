// For tests: the fields of the real V4-Flash config.json (spec §2.1) that the KV geometry and the
// state layout read.
#pragma once

#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::v4::testing {

inline Config flash_state_config() {
  Config c;
  c.model_type = "deepseek_v4";
  c.num_layers = 43;
  c.head_dim = 512;
  c.rope_dim = 64;
  c.sliding_window = 128;
  c.index_head_dim = 128;
  c.num_mtp_layers = 1;
  c.compress_ratios = {0, 0};
  for (int l = 2; l < 43; ++l) c.compress_ratios.push_back(l % 2 == 0 ? 4 : 128);
  c.compress_ratios.push_back(0);
  return c;
}

}  // namespace deepinfer::v4::testing
