#!/bin/bash
# Queued (prepared in session 28, not yet run): p16, n-to-m pairs in groups of eight lefts with the
# left fastest (chunk_pair_of), so that the pair pass reads each right's spectrum from DRAM once
# per group instead of once per pair (ncu at 32-to-32 at 256: 1.13 GB of DRAM reads for 67 MB of
# spectra; notes, session 28). Run from the repository root on the H200 with OUT set:
#   bash results/nvidia-h200/probes/queued-p16/run.sh
# A = the working tree, B = the patch; ncu of the pair and output-row passes at 32-to-32 at 256
# for both builds (DRAM bytes, L2 hit rate, issue); then the validator and sanitizers on the
# patched build. About 6 minutes.
Q=results/nvidia-h200/probes/queued-p16
export XCORR_GIT_REVISION=${XCORR_GIT_REVISION:-$(cat .devscripts/rev 2>/dev/null)}
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs /tmp/queued/p16/algorithms
cp algorithms/51_fft_fused.cu /tmp/queued/p16/algorithms/ && (cd /tmp/queued/p16 && git apply -p1 "$OLDPWD/$Q/p16-pair-groups.patch") ||
  { echo "p16: does not apply"; exit 1; }
timeout 240 python3 scripts/ab-bench -v 51 -s algorithms/51_fft_fused.cu=/tmp/queued/p16/algorithms/51_fft_fused.cu -B $Q/cases.txt \
  -n 3 -r 3 --out $OUT/logs/ab-p16 > $OUT/logs/ab-p16.log 2>&1; echo "ab p16 rc=$?"; tail -10 $OUT/logs/ab-p16.log | cut -c1-70,95-
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__inst_issued.avg.pct_of_peak_sustained_active
for side in a b; do
  B=build-ab-a; [ $side = b ] && B=build-ab-b/build
  timeout 60 ncu --clock-control none --cache-control all --metrics "$M" -k regex:"cols_kernel|out_rows" --launch-skip 2 --launch-count 2 --csv --page raw \
    $B/xcorr_bench --case "variant=fft-fused form=n-to-m size=256 nL=32 nR=32" --min-time 0.001 --benchmark_repetitions=1 \
    > $OUT/logs/ncu-$side.csv 2> $OUT/logs/ncu-$side.err; echo "ncu $side rc=$?"
  python3 -c "
import csv
rows=[r for r in csv.reader(open('$OUT/logs/ncu-$side.csv')) if len(r)>5]; h=rows[0]
for r in rows[2:]:
    d=dict(zip(h,r)); print('$side', d['Kernel Name'][:32], *[d[k] for k in '$M'.split(',')])
"
done
ninja -C build-ab-b/build xcorr_validate > $OUT/logs/validate-build.log 2>&1 || { echo "validate build failed"; tail -5 $OUT/logs/validate-build.log; }
V=build-ab-b/build/xcorr_validate
SH="--shape 151x171,141x163 --shape 193x200,192x185 --shape 129x127,120x131 --shape 301x351,291x333 --shape 200x300,190x310 --shape 9x300,250x20 --shape 60x61,50x45 --shape 700x3,20x501 --shape 400x380,390x370"
timeout 150 $V --variant fft-fused $SH --windows also --normalize all > $OUT/logs/validate.log 2>&1; echo "validate rc=$?"; tail -1 $OUT/logs/validate.log; grep -m5 "^FAIL" $OUT/logs/validate.log
for t in memcheck racecheck synccheck; do
  timeout 70 compute-sanitizer --tool $t --error-exitcode 9 $V --variant fft-fused --form n-to-m --shape 151x171,141x163 --shape 301x351,291x333 \
    --shape 129x127,120x131 --windows none > $OUT/logs/$t.log 2>&1; echo "$t rc=$?"; tail -1 $OUT/logs/$t.log
done
tar czf $OUT/logs.tgz -C $OUT logs
