#!/bin/bash
# which of the three changes slows 32-to-32 at 256: A = working tree, B = one change undone
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs
for v in oldtile noopaque; do
timeout 250 python3 scripts/ab-bench -v 51 -s algorithms/51_fft_fused.cu=.devscripts/ff-$v.cu -B .devscripts/ab25b.txt -n 3 -r 3 --out $OUT/logs/ab-$v > $OUT/logs/ab-$v.log 2>&1; echo "ab $v rc=$?"; tail -6 $OUT/logs/ab-$v.log | cut -c1-70,95-
done
tar czf $OUT/logs.tgz -C $OUT logs
