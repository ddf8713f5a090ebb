#!/bin/bash
# Queued in session 29 (not yet run): p18, p16's pair groups with the output-row pass walking the
# outputs in their own order (README.md here says why), A/B'd against the working tree (A = tree,
# B = the patch), ncu of the pair and output-row passes at 32-to-32 at 256 for both builds, the
# validator (also with chunks of 3 rights: partial groups and a partial last chunk) and
# compute-sanitizer on the patched build, then the whole GPU suite at the tree.
# Run from the repository root on the H200 with OUT set (the device tool sets it):
#   bash results/nvidia-h100-80gb-hbm3/probes/pair-groups-1135654/p18/run.sh
# About 9 minutes (every step has its own timeout; the whole stays under 580 s).
Q=results/nvidia-h100-80gb-hbm3/probes/pair-groups-1135654/p18
export XCORR_GIT_REVISION=${XCORR_GIT_REVISION:-$(cat .devscripts/rev 2>/dev/null)}
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs
SH="--shape 151x171,141x163 --shape 193x200,192x185 --shape 129x127,120x131 --shape 301x351,291x333 --shape 200x300,190x310 --shape 9x300,250x20 --shape 60x61,50x45 --shape 700x3,20x501 --shape 400x380,390x370"
mkdir -p /tmp/queued/p18/algorithms && cp algorithms/51_fft_fused.cu /tmp/queued/p18/algorithms/ &&
  (cd /tmp/queued/p18 && git apply -p1 "$OLDPWD/$Q/p18-pair-groups-outputs-in-order.patch") || { echo "p18: does not apply"; exit 1; }
timeout 200 python3 scripts/ab-bench -v 51 -s algorithms/51_fft_fused.cu=/tmp/queued/p18/algorithms/51_fft_fused.cu \
  -B $Q/cases-p18.txt -n 3 -r 3 --out $OUT/logs/ab-p18 > $OUT/logs/ab-p18.log 2>&1; echo "ab p18 rc=$?"
tail -10 $OUT/logs/ab-p18.log | cut -c1-70,95-
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__inst_issued.avg.pct_of_peak_sustained_active
for side in a b; do
  B=build-ab-a; [ $side = b ] && B=build-ab-b/build
  timeout 40 ncu --clock-control none --cache-control all --metrics "$M" -k regex:"cols_kernel|out_rows" --launch-skip 2 --launch-count 2 --csv --page raw \
    $B/xcorr_bench --case "variant=fft-fused form=n-to-m size=256 nL=32 nR=32" --min-time 0.001 --benchmark_repetitions=1 \
    > $OUT/logs/ncu-p18-$side.csv 2> $OUT/logs/ncu-p18-$side.err; echo "ncu $side rc=$?"
  python3 -c "
import csv
rows=[r for r in csv.reader(open('$OUT/logs/ncu-p18-$side.csv')) if len(r)>5]; h=rows[0]
for r in rows[2:]:
    d=dict(zip(h,r)); print('$side', d['Kernel Name'][:32], *[d[k] for k in '$M'.split(',')])
"
done
ninja -C build-ab-b/build xcorr_validate > $OUT/logs/validate-build.log 2>&1 || echo "validate build failed"
V=build-ab-b/build/xcorr_validate
timeout 60 $V --variant fft-fused --form n-to-m $SH --windows also --normalize all > $OUT/logs/validate.log 2>&1
echo "validate rc=$?"; tail -1 $OUT/logs/validate.log; grep -m5 "^FAIL" $OUT/logs/validate.log
XCORR_FFT_MAX_CHUNK=3 timeout 40 $V --variant fft-fused --form n-to-m $SH --windows also > $OUT/logs/validate-chunk3.log 2>&1
echo "validate chunks of 3 rc=$?"; tail -1 $OUT/logs/validate-chunk3.log; grep -m5 "^FAIL" $OUT/logs/validate-chunk3.log
for t in memcheck racecheck synccheck; do
  timeout 40 compute-sanitizer --tool $t --error-exitcode 9 $V --variant fft-fused --form n-to-m --shape 151x171,141x163 \
    --shape 301x351,291x333 --shape 129x127,120x131 --windows none > $OUT/logs/p18-$t.log 2>&1
  echo "p18 $t rc=$?"; tail -1 $OUT/logs/p18-$t.log
done
tar czf $OUT/logs.tgz -C $OUT logs
