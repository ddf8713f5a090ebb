#!/bin/bash
# Queued in session 32: every fft-fused case of the GPU that comes, measured again at HEAD where it
# was measured at another revision. On the H200 that is all 177 (they are at 0b44b72 / 5f9fd46,
# before 6ae4564's pair groups and 37182fb / 03529df's merged rows; ~5 minutes); on the H100 only
# those measured before the last change to fft-fused (all were at 4f4fcac / 03529df in session 32).
# Run from the repository root with OUT set, carrying .whl and .devscripts (rev):
#   bash results/nvidia-h200/probes/queued-session32/remeasure.sh
# Then, here: unpack $OUT/results.tgz over the tree, `scripts/reproduce --no-run`, commit naming the GPU.
export XCORR_GIT_REVISION=${XCORR_GIT_REVISION:-$(cat .devscripts/rev 2>/dev/null)}
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
E="fig17 fig20 fig23 nmn piv table1 window_table windows zncc_frames"
timeout 540 python3 scripts/run_experiments.py $E --remeasure fft-fused --max-minutes 7.5 --no-progress > $OUT/remeasure.log 2>&1
echo "== remeasure rc=$? (4: stopped by --max-minutes with work left: run it again)"; tail -3 $OUT/remeasure.log
tar czf $OUT/results.tgz $(for e in $E; do echo results/*/$e.json; done)
