#!/usr/bin/env python3
"""Sums an ncu --csv --page raw capture (gpu__time_duration.sum) by kernel name.

Usage: scripts/ncu_durations.py CSV [--top N]
Prints each kernel's total over all launches, its launch count and its share, largest first
(a capture of bench forward mixes prefill and decode launches; prefill's dominate).
--last-step: only the last decode step's launches (those after the last argmax but one, through
the last argmax: each step ends with its sampling).
"""
import argparse
import csv
import sys
from collections import defaultdict


def rows(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own messages are not CSV rows
    reader = csv.DictReader(lines)
    for r in reader:
        name, dur = r.get("Kernel Name"), r.get("gpu__time_duration.sum")
        if not name or not dur:
            continue
        try:
            yield name, float(dur.replace(",", ""))
        except ValueError:  # the units row
            continue


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--last-step", action="store_true")
    args = ap.parse_args()
    launches = list(rows(args.csv))
    if args.last_step:
        ends = [i for i, (name, _) in enumerate(launches) if "argmax" in name]
        if len(ends) < 2:
            sys.exit(f"ncu_durations.py: fewer than two argmax launches in {args.csv}")
        launches = launches[ends[-2] + 1 : ends[-1] + 1]
    total, count = defaultdict(float), defaultdict(int)
    for name, ns in launches:
        short = name.rsplit("(", 1)[0]  # drop the parameter list
        total[short] += ns
        count[short] += 1
    if not total:
        sys.exit(f"ncu_durations.py: no kernel rows with gpu__time_duration.sum in {args.csv}")
    whole = sum(total.values())
    print(f"{'ms':>10} {'share':>6} {'launches':>8}  kernel")
    for name, ns in sorted(total.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{ns / 1e6:10.3f} {100 * ns / whole:5.1f}% {count[name]:8d}  {name}")
    print(f"{whole / 1e6:10.3f} 100.0% {sum(count.values()):8d}  all")


if __name__ == "__main__":
    main()
