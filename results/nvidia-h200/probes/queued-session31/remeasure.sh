#!/bin/bash
# Queued in session 31: 32-to-32 at 256 measured again at 6ae4564 or later (fft-fused's n-to-m pair
# groups take that case: the only suite case whose code path changed). On the H200 it replaces the
# 1.24 ms of results/nvidia-h200 (fig23, Table 1); on an H100, results/nvidia-h100-80gb-hbm3's.
# Run from the repository root with OUT set, carrying .whl (meson-python for the package) and
# .devscripts (rev):  bash results/nvidia-h200/probes/queued-session31/remeasure.sh
# Then, here: unpack $OUT/results.tgz over results/, `scripts/reproduce --no-run`, commit.
export XCORR_GIT_REVISION=${XCORR_GIT_REVISION:-$(cat .devscripts/rev 2>/dev/null)}
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 400 python3 scripts/run_experiments.py fig23 table1 --remeasure fft-fused \
  --remeasure-cases '^fft-fused\|n-to-m\|256x256\|256x256\|32\|32\|' --no-progress > $OUT/remeasure.log 2>&1
echo "== remeasure rc=$?"; tail -5 $OUT/remeasure.log
tar czf $OUT/results.tgz results/*/fig23.json results/*/table1.json  # both GPUs' files: the one measured on changed
tar tzf $OUT/results.tgz
