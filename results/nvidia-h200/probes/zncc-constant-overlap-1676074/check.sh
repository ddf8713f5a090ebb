#!/bin/bash
# Session 36: the zncc rounding-bound fix on the GPU. Part "tests": build, the normalization GPU
# tests, the validator under zncc, the sanitizers on the normalization kernels. Part "ab": the A/B
# of the zncc experiments' cases against main's normalize.cu (343fdae).
set -uo pipefail
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
part=$1
B=build-device
t0=$(date +%s)
if [ "$part" = tests ]; then
  if [ ! -f $B/build.ninja ]; then meson setup $B -Dgpu_arch=auto > $OUT/setup.log 2>&1 || { tail -20 $OUT/setup.log; exit 1; }; fi
  ninja -C $B > $OUT/build.log 2>&1 || { grep -E "error|FAILED" -A3 $OUT/build.log | head -40; exit 1; }
  echo "built $(( $(date +%s) - t0 )) s"
  (XCORR_BUILD=$PWD/$B XCORR_NO_APT=1 source scripts/setup-env) > $OUT/package.log 2>&1; python3 -c "import xcorr" || tail -5 $OUT/package.log
  S="compute-sanitizer --error-exitcode 99 --print-limit 20"
  for t in memcheck racecheck; do
    (timeout 400 scripts/normalize-paths $t ./$B/xcorr register-tiled > $OUT/san-$t-paths.log 2>&1; echo rc=$? >> $OUT/san-$t-paths.log) &
    (timeout 400 scripts/normalize-paths $t ./$B/xcorr tensor-hankel-tf32 signals > $OUT/san-$t-store.log 2>&1; echo rc=$? >> $OUT/san-$t-store.log) &
    (timeout 400 $S --tool $t ./$B/xcorr_validate --variant fft --normalize zncc --quick --params covering > $OUT/san-$t-validate.log 2>&1; echo rc=$? >> $OUT/san-$t-validate.log) &
  done
  (XCORR_BUILD=$B timeout 450 python3 -m pytest -q --gpu-only -n 6 tests/test_normalize.py tests/test_normalize_fused.py tests/test_normalize_crop.py tests/test_zncc_suite.py tests/test_onedim_package.py tests/test_signal_suite.py "tests/test_gpu.py::test_binary_not_built_for_this_gpu" > $OUT/pytest.log 2>&1; echo "pytest rc=$?" >> $OUT/pytest.log) &
  timeout 300 ./$B/xcorr_validate --normalize zncc --params covering > $OUT/validate.log 2>&1; echo "validate rc=$?"; tail -1 $OUT/validate.log; grep ^FAIL $OUT/validate.log | head
  wait
  grep -E "FAILED|ERROR" $OUT/pytest.log | head -20; tail -2 $OUT/pytest.log
  for f in $OUT/san-*.log; do echo "$(basename $f): $(grep -E '^[0-9]+ passed|ERROR SUMMARY: [1-9]|^rc=' $f | tr '\n' ' ')"; done
fi
if [ "$part" = ab ]; then
  timeout 540 python3 scripts/ab-bench -s harness/normalize.cu=.devscripts/normalize.base.cu -B .devscripts/zncc-ab.txt \
    -v 20_register,50_fft,51_fft,28_tensor -n 2 -r 5 --out $OUT > $OUT/ab.log 2>&1; echo "ab rc=$?"
  cat $OUT/ab-summary.txt 2>/dev/null || tail -30 $OUT/ab.log
fi
echo "total $(( $(date +%s) - t0 )) s"
