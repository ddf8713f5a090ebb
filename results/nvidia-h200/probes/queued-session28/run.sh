#!/bin/bash
# Queued in session 28 (not yet run): two patches of algorithms/51_fft_fused.cu, each A/B'd against
# the working tree and checked on its own build (README.md here says why):
#   p16  n-to-m pairs in groups of eight lefts, the left fastest (chunk_pair_of): the pair pass
#        reads each right's spectrum from DRAM once per group, not once per pair
#   p17  one-to-one: the right's row DFTs in the left's launch (rows_kernel's SecondStack)
# Run from the repository root on the H200 with OUT set (the device tool sets it):
#   bash results/nvidia-h200/probes/queued-session28/run.sh
# About 8.5 minutes (every step has its own timeout; the whole stays under 570 s).
Q=results/nvidia-h200/probes/queued-session28
export XCORR_GIT_REVISION=${XCORR_GIT_REVISION:-$(cat .devscripts/rev 2>/dev/null)}
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
mkdir -p $OUT/logs
SH="--shape 151x171,141x163 --shape 193x200,192x185 --shape 129x127,120x131 --shape 301x351,291x333 --shape 200x300,190x310 --shape 9x300,250x20 --shape 60x61,50x45 --shape 700x3,20x501 --shape 400x380,390x370"
patched() {  # patched NAME PATCH: a copy of the tree's file with PATCH applied, at /tmp/queued/NAME/algorithms
  mkdir -p /tmp/queued/$1/algorithms && cp algorithms/51_fft_fused.cu /tmp/queued/$1/algorithms/ &&
    (cd /tmp/queued/$1 && git apply -p1 "$OLDPWD/$Q/$2")
}
check() {  # check NAME FORM_ARGS...: validator and sanitizers on build-ab-b (the patched build)
  local name=$1; shift
  ninja -C build-ab-b/build xcorr_validate > $OUT/logs/$name-validate-build.log 2>&1 || { echo "$name: validate build failed"; return; }
  local V=build-ab-b/build/xcorr_validate
  timeout 100 $V --variant fft-fused "$@" $SH --windows also --normalize all > $OUT/logs/$name-validate.log 2>&1
  echo "$name validate rc=$?"; tail -1 $OUT/logs/$name-validate.log; grep -m5 "^FAIL" $OUT/logs/$name-validate.log
  for t in memcheck racecheck synccheck; do
    timeout 45 compute-sanitizer --tool $t --error-exitcode 9 $V --variant fft-fused "$@" --shape 151x171,141x163 \
      --shape 301x351,291x333 --shape 129x127,120x131 --windows none > $OUT/logs/$name-$t.log 2>&1
    echo "$name $t rc=$?"; tail -1 $OUT/logs/$name-$t.log
  done
}

# p16: A/B (xcorr_bench checks every case against the float64 reference before timing it), ncu of
# the pair and output-row passes at 32-to-32 at 256 for both builds, then the checks.
patched p16 p16-pair-groups.patch || { echo "p16: does not apply"; exit 1; }
timeout 200 python3 scripts/ab-bench -v 51 -s algorithms/51_fft_fused.cu=/tmp/queued/p16/algorithms/51_fft_fused.cu \
  -B $Q/cases-p16.txt -n 3 -r 3 --out $OUT/logs/ab-p16 > $OUT/logs/ab-p16.log 2>&1; echo "ab p16 rc=$?"
tail -10 $OUT/logs/ab-p16.log | cut -c1-70,95-
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__inst_issued.avg.pct_of_peak_sustained_active
for side in a b; do
  B=build-ab-a; [ $side = b ] && B=build-ab-b/build
  timeout 40 ncu --clock-control none --cache-control all --metrics "$M" -k regex:"cols_kernel|out_rows" --launch-skip 2 --launch-count 2 --csv --page raw \
    $B/xcorr_bench --case "variant=fft-fused form=n-to-m size=256 nL=32 nR=32" --min-time 0.001 --benchmark_repetitions=1 \
    > $OUT/logs/ncu-p16-$side.csv 2> $OUT/logs/ncu-p16-$side.err; echo "ncu $side rc=$?"
  python3 -c "
import csv
rows=[r for r in csv.reader(open('$OUT/logs/ncu-p16-$side.csv')) if len(r)>5]; h=rows[0]
for r in rows[2:]:
    d=dict(zip(h,r)); print('$side', d['Kernel Name'][:32], *[d[k] for k in '$M'.split(',')])
"
done
check p16 --form n-to-m

# p17: launch-bound cases, so five rounds; one-to-one checks.
patched p17 p17-one-to-one-rows-in-one-launch.patch || { echo "p17: does not apply"; exit 1; }
timeout 120 python3 scripts/ab-bench -v 51 -s algorithms/51_fft_fused.cu=/tmp/queued/p17/algorithms/51_fft_fused.cu \
  -B $Q/cases-p17.txt -n 5 -r 3 --out $OUT/logs/ab-p17 > $OUT/logs/ab-p17.log 2>&1; echo "ab p17 rc=$?"
tail -7 $OUT/logs/ab-p17.log | cut -c1-70,95-
check p17 --form one-to-one
tar czf $OUT/logs.tgz -C $OUT logs
