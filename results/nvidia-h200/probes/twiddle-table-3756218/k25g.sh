#!/bin/bash
# remeasure the staged fft-fused cases of the suite at 3756218
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs
timeout 270 python3 scripts/run_experiments.py --no-progress --max-minutes 4 --remeasure fft-fused --remeasure-cases "$(cat .devscripts/remeasure-k25b.txt)" > $OUT/logs/remeasure.log 2>&1; echo "remeasure rc=$?"; grep -v "skipped; --force" $OUT/logs/remeasure.log | tail -3
tar czf $OUT/results.tgz results/nvidia-h200/*.json
tar czf $OUT/logs.tgz -C $OUT logs
