#!/bin/bash
# tile_out one store at a time (A) against HEAD and against the batched copy
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs
S="-s algorithms/51_fft_fused.cu=.devscripts/head/51_fft_fused.cu -s algorithms/common/team_dft.cuh=.devscripts/head/team_dft.cuh -s algorithms/common/device.cuh=.devscripts/head/device.cuh -s algorithms/common/warp_buffer.cuh=.devscripts/head/warp_buffer.cuh"
timeout 170 python3 scripts/ab-bench -v 51 $S -B .devscripts/ab25e.txt -n 3 -r 3 --out $OUT/logs/ab-head > $OUT/logs/ab-head.log 2>&1; echo "ab head rc=$?"; tail -7 $OUT/logs/ab-head.log | cut -c1-70,95-
timeout 170 python3 scripts/ab-bench -v 51 -s algorithms/51_fft_fused.cu=.devscripts/ff-batched.cu -B .devscripts/ab25e.txt -n 3 -r 3 --out $OUT/logs/ab-batched > $OUT/logs/ab-batched.log 2>&1; echo "ab batched rc=$?"; tail -7 $OUT/logs/ab-batched.log | cut -c1-70,95-
tar czf $OUT/logs.tgz -C $OUT logs
