#!/bin/bash
# Queued in session 31: p20, every form's first chunk of rights in the lefts' row launch (README).
# One B build, the merge chosen by XCORR_FFT_MERGE_ROWS=1 (A: the tree; B: the patch, merge on),
# then the patch with the merge on under the validator (every staged form, windows, every
# normalization, memory chunks of 2) and memcheck / racecheck / synccheck.
# Run from the repository root with OUT set:  bash results/nvidia-h200/probes/queued-session31/run.sh
# About 6 minutes.
Q=results/nvidia-h200/probes/queued-session31
export XCORR_GIT_REVISION=${XCORR_GIT_REVISION:-$(cat .devscripts/rev 2>/dev/null)}
mkdir -p $OUT/logs
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee $OUT/logs/nvidia-smi.txt
P20=/tmp/queued/p20/algorithms/51_fft_fused.cu
mkdir -p /tmp/queued/p20 && cp -r algorithms /tmp/queued/p20/ &&
  (cd /tmp/queued/p20 && patch -p1 --quiet < "$OLDPWD/$Q/p20-merge-rows.patch") || { echo "p20: does not apply"; exit 1; }
timeout 240 python3 scripts/ab-bench -v 51 -s algorithms/51_fft_fused.cu=$P20 --env-b XCORR_FFT_MERGE_ROWS=1 \
  -B $Q/cases-p20.txt -n 3 -r 3 --out $OUT/logs/ab-p20 > $OUT/logs/ab-p20.log 2>&1
echo "== ab p20 rc=$?"; tail -12 $OUT/logs/ab-p20.log | cut -c1-70,95-
V=build-ab-b/build/xcorr_validate
ninja -C build-ab-b/build xcorr_validate > $OUT/logs/validate-build.log 2>&1 || echo "validate build failed"
SH="--shape 151x171,141x163 --shape 129x127,120x131 --shape 9x300,250x20 --shape 200x300,190x310 --shape 60x61,50x45"
export XCORR_FFT_MERGE_ROWS=1
timeout 90 $V --variant fft-fused $SH --windows also --normalize all > $OUT/logs/validate.log 2>&1
echo "== validate (merge on) rc=$?: $(tail -1 $OUT/logs/validate.log)"; grep -m5 "^FAIL" $OUT/logs/validate.log
XCORR_FFT_MAX_CHUNK=2 timeout 60 $V --variant fft-fused $SH --windows also > $OUT/logs/validate-chunk2.log 2>&1
echo "== validate (merge on, chunks of 2) rc=$?: $(tail -1 $OUT/logs/validate-chunk2.log)"; grep -m5 "^FAIL" $OUT/logs/validate-chunk2.log
for t in memcheck racecheck synccheck; do
  XCORR_FFT_MAX_CHUNK=2 timeout 60 compute-sanitizer --tool $t --error-exitcode 9 $V --variant fft-fused \
    --shape 151x171,141x163 --shape 129x127,120x131 --windows none > $OUT/logs/san-$t.log 2>&1
  echo "== $t (merge on) rc=$?: $(tail -1 $OUT/logs/san-$t.log)"
done
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $OUT/logs
