#!/bin/bash
# session 31: pair groups (12e0... HEAD) on the device: checks, then the A/B by environment
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 240 scripts/device-check -v 51 -V "--variant fft-fused" -s -S "memcheck racecheck" 2>&1 | tail -12
mkdir -p $OUT/logs
XCORR_BUILD=build-device timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "pair_groups or (fft_memory_chunks and fft-fused)" > $OUT/logs/pytest.log 2>&1
echo "== pytest rc=$?: $(tail -1 $OUT/logs/pytest.log)"; grep -m5 -E "^(FAILED|ERROR)|Error" $OUT/logs/pytest.log
timeout 150 python3 scripts/ab-bench --build-a build-device --build-b build-device --env-a XCORR_FFT_PAIR_GROUPS=0 \
  -B .devscripts/cases-p18.txt -n 3 -r 3 --out $OUT/logs/ab > $OUT/logs/ab.log 2>&1
echo "== ab rc=$?"; tail -12 $OUT/logs/ab.log | cut -c1-70,95-
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $OUT/logs
