#!/usr/bin/env python3
"""Checks that every tensor of checkpoint A is in checkpoint B with the same dtype, shape and
bytes (B may hold more, and shard them differently). For issue 22's 8-layer-prefix check:
make-tiny-model's v4-flash-8layer against v4-flash-full (or any longer streamed model) from
the same seed. Reads through mmap, one tensor at a time. Exit 1 on the first difference.

Usage: compare_checkpoint_tensors.py DIR_A DIR_B"""
import glob
import json
import mmap
import os
import struct
import sys


def tensors(d):
    """name -> (file, dtype, shape, begin, end) over every *.safetensors file in d."""
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for name, t in header.items():
            if name != "__metadata__":
                lo, hi = t["data_offsets"]
                out[name] = (f, t["dtype"], t["shape"], 8 + n + lo, 8 + n + hi)
    return out


def main(a_dir, b_dir):
    a, b = tensors(a_dir), tensors(b_dir)
    maps = {}

    def view(f):
        if f not in maps:
            fh = open(f, "rb")
            maps[f] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return maps[f]

    same_bytes = 0
    for name in sorted(a):
        if name not in b:
            sys.exit("%s: in %s, not in %s" % (name, a_dir, b_dir))
        fa, dta, sha, la, ha = a[name]
        fb, dtb, shb, lb, hb = b[name]
        if (dta, sha) != (dtb, shb):
            sys.exit("%s: %s %s against %s %s" % (name, dta, sha, dtb, shb))
        if view(fa)[la:ha] != view(fb)[lb:hb]:
            sys.exit("%s: same dtype and shape, different bytes" % name)
        same_bytes += ha - la
    print("all %d tensors of %s are in %s bitwise (%.2f GB); %s has %d more" %
          (len(a), a_dir, b_dir, same_bytes / 1e9, b_dir, len(b) - len(a)))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
