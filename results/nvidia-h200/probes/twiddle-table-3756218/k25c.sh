#!/bin/bash
# ncu per kernel of 32-to-32 at 256 and 384: working tree (A) against HEAD (B)
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs
S="-s algorithms/51_fft_fused.cu=.devscripts/head/51_fft_fused.cu -s algorithms/common/team_dft.cuh=.devscripts/head/team_dft.cuh -s algorithms/common/device.cuh=.devscripts/head/device.cuh -s algorithms/common/warp_buffer.cuh=.devscripts/head/warp_buffer.cuh"
timeout 200 python3 scripts/ab-bench -v 51 $S -B .devscripts/ab25b.txt -n 2 -r 3 --out $OUT/logs/ab > $OUT/logs/ab.log 2>&1; echo "ab rc=$?"; tail -6 $OUT/logs/ab.log | cut -c1-70,95-
for side in a b; do
  B=build-ab-a; [ $side = b ] && B=build-ab-b/build
  LAUNCHES=24 XCORR_BUILD=$B OUT=$OUT/logs/ncu-$side timeout 150 scripts/ncu-fft-account .devscripts/ncu25.txt > $OUT/logs/ncu-$side.log 2>&1; echo "ncu $side rc=$?"
done
tar czf $OUT/logs.tgz -C $OUT logs
