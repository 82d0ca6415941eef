#!/usr/bin/env python3
"""Summarizes a safetensors model directory from its headers alone (no tensor data is read):
tensors and bytes per dtype, the layer indices present, and the config's key dims. For checking
a large generated model (make-tiny-model --preset v4-flash-8layer) where it was written."""
import collections
import glob
import json
import os
import struct
import sys


def main(d):
    by_dtype = collections.Counter()
    bytes_by_dtype = collections.Counter()
    layers = set()
    names = set()
    files = sorted(glob.glob(os.path.join(d, "*.safetensors")))
    for f in files:
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        size = os.path.getsize(f)
        end = 8 + n
        for name, t in header.items():
            if name == "__metadata__":
                continue
            lo, hi = t["data_offsets"]
            assert 8 + n + hi <= size, "%s: %s runs past the end of the file" % (f, name)
            end = max(end, 8 + n + hi)
            by_dtype[t["dtype"]] += 1
            bytes_by_dtype[t["dtype"]] += hi - lo
            names.add(name)
            if name.startswith("layers."):
                layers.add(int(name.split(".")[1]))
        assert end == size, "%s: %d bytes after the last tensor" % (f, size - end)
    cfg = json.load(open(os.path.join(d, "config.json")))
    print("files %d, tensors %d, %.2f GB" % (len(files), len(names),
                                             sum(bytes_by_dtype.values()) / 1e9))
    for k in sorted(by_dtype):
        print("  %-8s %6d tensors %8.2f GB" % (k, by_dtype[k], bytes_by_dtype[k] / 1e9))
    print("layers", sorted(layers), "mtp", any(x.startswith("mtp.") for x in names))
    keys = ["hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim", "q_lora_rank",
            "o_groups", "o_lora_rank", "sliding_window", "index_n_heads", "index_head_dim",
            "index_topk", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
            "compress_ratios", "num_hash_layers", "quantization_config"]
    for k in keys:
        print("  %s: %s" % (k, json.dumps(cfg.get(k))))


if __name__ == "__main__":
    main(sys.argv[1])
