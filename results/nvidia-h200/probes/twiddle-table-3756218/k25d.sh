#!/bin/bash
# copies with every load before the first store (no per-element predicates): A/B against HEAD, ncu of 32-to-32 at 256 both sides, validator, sanitizers
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs
S="-s algorithms/51_fft_fused.cu=.devscripts/head/51_fft_fused.cu -s algorithms/common/team_dft.cuh=.devscripts/head/team_dft.cuh -s algorithms/common/device.cuh=.devscripts/head/device.cuh -s algorithms/common/warp_buffer.cuh=.devscripts/head/warp_buffer.cuh"
timeout 230 python3 scripts/ab-bench -v 51 $S -B .devscripts/ab25a.txt -n 3 -r 3 --out $OUT/logs/ab > $OUT/logs/ab.log 2>&1; echo "ab rc=$?"; tail -12 $OUT/logs/ab.log | cut -c1-70,95-
SH="--shape 151x171,141x163 --shape 193x200,192x185 --shape 129x127,120x131 --shape 301x351,291x333 --shape 200x300,190x310 --shape 9x300,250x20 --shape 60x61,50x45 --shape 700x3,20x501"
timeout 120 build/xcorr_validate --variant fft-fused $SH --windows also --normalize all > $OUT/logs/validate.log 2>&1; echo "validate rc=$?"; tail -1 $OUT/logs/validate.log; grep -m5 "^FAIL" $OUT/logs/validate.log
for t in memcheck racecheck; do
timeout 60 compute-sanitizer --tool $t --error-exitcode 9 build/xcorr_validate --variant fft-fused --shape 151x171,141x163 --shape 301x351,291x333 --shape 129x127,120x131 --windows none > $OUT/logs/$t.log 2>&1; echo "$t rc=$?"; tail -1 $OUT/logs/$t.log
done
head -1 .devscripts/ncu25.txt > .devscripts/ncu25a.txt
for side in a b; do
  B=build-ab-a; [ $side = b ] && B=build-ab-b/build
  XCORR_BUILD=$B OUT=$OUT/logs/ncu-$side timeout 60 scripts/ncu-fft-account .devscripts/ncu25a.txt > $OUT/logs/ncu-$side.log 2>&1; echo "ncu $side rc=$?"
done
tar czf $OUT/logs.tgz -C $OUT logs
