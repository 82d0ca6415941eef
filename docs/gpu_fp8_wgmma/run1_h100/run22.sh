#!/usr/bin/env bash
# fp8_wgmma (branch fp8-wgmma): CudaLinear + CudaMoe op tests (main and the variants), invariance,
# goldens, then bench forward of main and the variants (pre: prefill's projections on wgmma too;
# mma: fp8_mma everywhere, the baseline; w65: fp8_mma up to 64 rows).
set -u
R=$OUT; export OUT=/tmp/g22; mkdir -p $OUT
nvidia-smi > $OUT/gpu.txt 2>&1
OPS_FILTER='CudaLinear.*:CudaMoe*' BENCH_TIMEOUT=120 VARIANTS_BEFORE=470 timeout 590 scripts/gpu_next_check.sh f > $OUT/phase_f.txt 2>&1
tar -cJf $R/g22.tar.xz -C /tmp g22
cat $OUT/phase_f.txt
