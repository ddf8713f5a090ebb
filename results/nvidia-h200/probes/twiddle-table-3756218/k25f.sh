#!/bin/bash
# candidate: table fill, batched tile_in, tile_out loop, kPair table behind its loads, opaque spectrum bases: A/B against HEAD, validator, sanitizers, fft-fused GPU tests
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs
S="-s algorithms/51_fft_fused.cu=.devscripts/head/51_fft_fused.cu -s algorithms/common/team_dft.cuh=.devscripts/head/team_dft.cuh -s algorithms/common/device.cuh=.devscripts/head/device.cuh -s algorithms/common/warp_buffer.cuh=.devscripts/head/warp_buffer.cuh"
timeout 230 python3 scripts/ab-bench -v 51 $S -B .devscripts/ab25a.txt -n 3 -r 3 --out $OUT/logs/ab > $OUT/logs/ab.log 2>&1; echo "ab rc=$?"; tail -12 $OUT/logs/ab.log | cut -c1-70,95-
SH="--shape 151x171,141x163 --shape 193x200,192x185 --shape 129x127,120x131 --shape 301x351,291x333 --shape 200x300,190x310 --shape 9x300,250x20 --shape 60x61,50x45 --shape 700x3,20x501"
timeout 100 build/xcorr_validate --variant fft-fused $SH --windows also --normalize all > $OUT/logs/validate.log 2>&1; echo "validate rc=$?"; tail -1 $OUT/logs/validate.log; grep -m5 "^FAIL" $OUT/logs/validate.log
for t in memcheck racecheck synccheck; do
timeout 50 compute-sanitizer --tool $t --error-exitcode 9 build/xcorr_validate --variant fft-fused --shape 151x171,141x163 --shape 301x351,291x333 --shape 129x127,120x131 --windows none > $OUT/logs/$t.log 2>&1; echo "$t rc=$?"; tail -1 $OUT/logs/$t.log
done
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_gpu.py tests/test_windows.py tests/test_plan.py tests/test_normalize_fused.py -k "fft_fused or fft-fused or mixed or fused" > $OUT/logs/tests.log 2>&1; echo "tests rc=$?"; tail -1 $OUT/logs/tests.log
tar czf $OUT/logs.tgz -C $OUT logs
