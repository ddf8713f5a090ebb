#!/bin/bash
# Queued in session 30 (not yet run): p19, the staged path's H in an L2-sized ring (README.md here).
# A = the working tree, B = the tree with p19-h-ring.patch; one B build, its ring chosen by the
# environment, so the sweep is one build: first B with the ring off (what the patch costs the
# default path), then ring sizes, the discard and the second stream each alone; ncu of one call's
# DRAM bytes with the L2 left as the call leaves it (--cache-control none); then the patch applied
# to this copy of the tree for the validator (ring sizes down to one output, one to three slots,
# partial blocks, memory chunks, one stream), compute-sanitizer, and the package's graph-replay
# and stream tests with the ring on.
# Run from the repository root on the H200 with OUT set (the device tool sets it):
#   bash results/nvidia-h200/probes/queued-session30/run.sh
# About 9 minutes (every step has its own timeout; the whole stays under 580 s).
Q=results/nvidia-h200/probes/queued-session30
export XCORR_GIT_REVISION=${XCORR_GIT_REVISION:-$(cat .devscripts/rev 2>/dev/null)}
mkdir -p $OUT/logs
P19=/tmp/queued/p19/algorithms/51_fft_fused.cu
mkdir -p /tmp/queued/p19 && cp -r algorithms tests /tmp/queued/p19/ &&
  (cd /tmp/queued/p19 && patch -p1 --quiet < "$OLDPWD/$Q/p19-h-ring.patch") || { echo "p19: does not apply"; exit 1; }
ab() {  # NAME ENV...: A/B of the tree against p19's build under ENV (B only)
  local name=$1; shift
  local env=(); for e in "$@"; do env+=(--env-b "$e"); done
  timeout 120 python3 scripts/ab-bench --build-a build-ab-a --build-b build-ab-b/build "${env[@]}" \
    -B $Q/cases-p19.txt -n 2 -r 3 --out $OUT/logs/ab-$name > $OUT/logs/ab-$name.log 2>&1
  echo "== ab $name ($*) rc=$?"; tail -10 $OUT/logs/ab-$name.log | cut -c1-70,95-
}
# The builds (A: the tree, B: p19), and B with the ring off
timeout 200 python3 scripts/ab-bench -v 51 -s algorithms/51_fft_fused.cu=$P19 -B $Q/cases-p19.txt -n 2 -r 3 \
  --out $OUT/logs/ab-off > $OUT/logs/ab-off.log 2>&1; echo "== ab off rc=$?"; tail -10 $OUT/logs/ab-off.log | cut -c1-70,95-
ab mb16 XCORR_FFT_RING_MB=16 XCORR_FFT_DISCARD=1
ab mb8 XCORR_FFT_RING_MB=8 XCORR_FFT_DISCARD=1
ab mb24-l4 XCORR_FFT_RING_MB=24 XCORR_FFT_DISCARD=1 XCORR_FFT_RING_LEFTS=4
ab mb16-keep XCORR_FFT_RING_MB=16
ab mb16-one XCORR_FFT_RING_MB=16 XCORR_FFT_DISCARD=1 XCORR_FFT_RING_ONE_STREAM=1
# ncu: DRAM bytes of the kernels of the first calls, the L2 not flushed (the ring's point)
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
for side in off mb16; do
  env=(); [ $side = mb16 ] && env=(XCORR_FFT_RING_MB=16 XCORR_FFT_DISCARD=1)
  env "${env[@]}" timeout 60 ncu --clock-control none --cache-control none --metrics "$M" --launch-count 300 --csv --page raw \
    build-ab-b/build/xcorr_bench --case "variant=fft-fused form=n-to-m size=256 nL=32 nR=32" --min-time 0.001 \
    --benchmark_repetitions=1 > $OUT/logs/ncu-$side.csv 2> $OUT/logs/ncu-$side.err; echo "== ncu $side rc=$?"
  python3 - $OUT/logs/ncu-$side.csv <<'PY'
import csv, re, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 3]
h, rows = rows[0], rows[2:]  # the header, the units, the kernels
calls, cur, prev = [], [], ""
for r in rows:
    d = dict(zip(h, r))
    m = re.search(r"\w+_kernel<[^>]*>", d["Kernel Name"])  # cols_kernel<512, 2>
    name = m.group(0) if m else d["Kernel Name"]
    if name.startswith("rows_kernel") and not prev.startswith(("rows_kernel", "cols_kernel<512, 0>")) and cur:
        calls.append(cur); cur = []
    cur.append(d); prev = name
calls.append(cur)
for i, c in enumerate(calls[:3]):
    f = lambda k: sum(float(d[k].replace(",", "")) for d in c)
    print(f"call {i}: {len(c)} kernels, {f('gpu__time_duration.sum') / 1e3:.0f} us summed, "
          f"DRAM {f('dram__bytes_read.sum') / 1e6:.0f} MB read, {f('dram__bytes_write.sum') / 1e6:.0f} MB written")
PY
done
# p19 into this copy of the tree: validator, sanitizers, package tests with the ring on
patch -p1 --quiet < $Q/p19-h-ring.patch || { echo "p19: does not apply to the tree"; exit 1; }
source scripts/setup-env > $OUT/logs/setup.log 2>&1 || { tail -30 $OUT/logs/setup.log; exit 1; }
SH="--shape 151x171,141x163 --shape 193x200,192x185 --shape 129x127,120x131 --shape 301x351,291x333 --shape 9x300,250x20 --shape 400x380,390x370"
V="timeout 45 build/xcorr_validate --variant fft-fused --form one-to-many --form n-to-mn --form n-to-m $SH"
for cfg in "XCORR_FFT_RING=1 XCORR_FFT_DISCARD=1" "XCORR_FFT_RING=2 XCORR_FFT_RING_LEFTS=1 XCORR_FFT_DISCARD=1" \
           "XCORR_FFT_RING=3 XCORR_FFT_RING_LEFTS=2 XCORR_FFT_RING_SLOTS=1 XCORR_FFT_DISCARD=1" \
           "XCORR_FFT_RING=2 XCORR_FFT_RING_SLOTS=3 XCORR_FFT_MAX_CHUNK=2 XCORR_FFT_DISCARD=1" \
           "XCORR_FFT_RING=2 XCORR_FFT_RING_ONE_STREAM=1 XCORR_FFT_DISCARD=1" "XCORR_FFT_DISCARD=1"; do
  n=$(echo $cfg | tr ' =' '_-' | cut -c1-60)
  env $cfg $V --windows also --normalize all > $OUT/logs/validate-$n.log 2>&1
  echo "== validate ($cfg) rc=$?: $(tail -1 $OUT/logs/validate-$n.log)"; grep -m3 "^FAIL" $OUT/logs/validate-$n.log
done
for t in memcheck racecheck synccheck; do
  XCORR_FFT_RING=2 XCORR_FFT_RING_LEFTS=1 XCORR_FFT_DISCARD=1 timeout 50 compute-sanitizer --tool $t --error-exitcode 9 \
    build/xcorr_validate --variant fft-fused --form one-to-many --form n-to-m --shape 151x171,141x163 --shape 129x127,120x131 \
    --windows none > $OUT/logs/san-$t.log 2>&1
  echo "== $t (ring) rc=$?: $(tail -1 $OUT/logs/san-$t.log)"
done
XCORR_FFT_RING=1 XCORR_FFT_DISCARD=1 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_python_package.py \
  -k "replay or stream" > $OUT/logs/pytest-ring.log 2>&1; echo "== package tests (ring) rc=$?: $(tail -1 $OUT/logs/pytest-ring.log)"
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $OUT/logs
