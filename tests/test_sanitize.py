"""scripts/sanitize (device-check -s) without a GPU: stand-ins for compute-sanitizer and the build's
binaries, so that what the script concludes from its processes is held here. A part whose sanitizer
found something (exit 99) once left no exit status behind (the background subshell inherited
`set -e`) and the tool was reported clean (notes/sanitizers.md): a finding must fail the run, and so
must a process that dies or never prints the sanitizer's summary."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "sanitize"

SANITIZER = r'''#!/bin/sh
# compute-sanitizer's stand-in: records its command line, runs the application, and answers as the
# tool would, or as FAKE_FIND / FAKE_DIE / FAKE_QUIET say for a command line holding their text.
# POSIX sh, not Python: a run of the script starts some two hundred of these, and Python's start-up
# (twice a process, with the validator's) was most of this file's time.
tool="" options="" prev=""
while [ $# -gt 0 ] && [ "$1" != --print-limit ]; do  # OPTIONS --print-limit N APP...
  [ "$prev" != --tool ] || tool=$1
  options="${options:+$options }$1" prev=$1
  shift
done
shift 2
line="$*"
hit() {  # NAME [TEXT]: whether TEXT (default: the application's command line) holds one of $NAME's |-separated texts
  eval "pats=\${$1:-}"
  text=${2-$line}
  set -f; old=$IFS; IFS='|'
  for t in $pats; do
    [ -n "$t" ] || continue
    case $text in *"$t"*) IFS=$old; set +f; return 0 ;; esac
  done
  IFS=$old; set +f
  return 1
}
summary() {
  if [ "$tool" = racecheck ]; then echo "========= RACECHECK SUMMARY: $1 hazard$2 displayed ($1 error$2, 0 warnings)"
  else echo "========= ERROR SUMMARY: $1 error$2"; fi
}
case $1 in *xcorr_sanitizer_probe)  # the positive control: reported unless FAKE_BLIND says
  printf '%s\t%s\n' "$options" "$line" >>"$FAKE_LOG.control"
  if hit FAKE_BLIND "$tool $options"; then summary 0 s; exit 0; fi  # e.g. "racecheck --tool racecheck --kernel-name"
  if [ "$tool" = racecheck ]; then
    echo "========= Error: Race reported between Write access at shared_race_kernel+0x40 and Read access"
  else
    echo "========= Invalid __global__ write of size 4 bytes"
  fi
  exit 99 ;;
esac
# the settings it runs under, sorted by name (as dash's `export -p` lists them): XCORR_*, SANITIZER_FILTER
# (the shell's own list, not awk's ENVIRON: a process less a stand-in)
env="" vars=$(export -p)
set -f; old=$IFS; IFS='
'
for v in $vars; do
  case $v in "export "*=*) ;; *) continue ;; esac
  v=${v#export }; v=${v%%=*}
  case $v in XCORR_*|SANITIZER_FILTER) eval "env=\"\${env:+\$env }$v=\${$v}\"" ;; esac
done
IFS=$old; set +f
printf '%s\t%s\t%s\t%s\n' "$tool" "$env" "$options" "$line" >>"$FAKE_LOG"
# (the seconds since boot, to 10 ms, without a process: /proc/uptime's first field)
[ -z "${FAKE_SPAN:-}" ] || read -r t0 _ </proc/uptime
if hit FAKE_SLEEP; then  # a part that outlasts the deadline: it prints a case first, as the real one would
  echo "PASS  block-per-pair  n-to-m 1x[1x3001] * 1x[1x257]"
  printf '%s' "PASS  block-per-pair  n-to-m 1x[1x1500] * 1x[1x1700]  (cut mid-li"
  sleep "${FAKE_SLEEP_S:-60}"
fi
"$@"
rc=$?
[ -z "${FAKE_SPAN:-}" ] || { read -r t1 _ </proc/uptime; echo "$t0 $t1 $line" >>"$FAKE_SPAN"; }  # when this process ran, for the concurrency cap's test
if hit FAKE_DIE; then exit 134; fi
if hit FAKE_QUIET; then exit 0; fi
if hit FAKE_FIND; then
  echo "========= Error: Race reported between Write access at kernel+0x40 and Read access"
  summary 1 ""
  exit 99
fi
summary 0 s
exit $rc
'''

VALIDATE = r'''#!/bin/sh
line="$*"
holds() { [ -n "$1" ] && case $line in *"$1"*) true ;; *) false ;; esac; }
if holds "${FAKE_EMPTY:-}"; then  # every case skipped: what the real one answers
  echo "SKIP  block-per-pair  one-to-one 1x[12x12] * 1x[5x5]  a stand-in skips it"
  echo "xcorr_validate: error: nothing validated (every case was skipped; the SKIP lines say why)"
  echo "0 passed, 0 failed, 1 skipped"
  exit 2
fi
if holds "${FAKE_FAIL_CASE:-}"; then
  echo "FAIL  block-per-pair  one-to-one 1x[5x7] * 1x[3x2]  err=1.0e+00"
  echo "1 passed, 1 failed, 0 skipped"
  exit 1
fi
echo "2 passed, 0 failed, 1 skipped"
'''

# nvidia-smi's stand-in: no GPU (the keys hash its answer, "none" without one), but a card's name
# where FAKE_CARD gives one, a line each, so that a test can run the same build on two cards: the
# key unchanged, the ledger line's card another. It also keeps a GPU machine's own nvidia-smi out.
NVIDIA_SMI = r'''#!/bin/sh
case "$*" in *--query-gpu=name\ *) [ -n "${FAKE_CARD:-}" ] && { printf '%b\n' "$FAKE_CARD"; exit 0; } ;; esac
exit 9
'''

XCORR = r'''#!/bin/sh
# xcorr list [--json] of a build of three variants (four with FAKE_NORMALIZE_VARIANT: register-tiled,
# the normalization's parts; block-per-pair alone with FAKE_BPP_ONLY: a build of one variant, 108
# racecheck processes to walk, not 211; FAKE_WITHOUT=NAME: the build without variant NAME, fft-fused
# or tensor-wgmma: 139 or 180)
all='"one-to-one", "one-to-many", "n-to-mn", "n-to-m"'
json='{"name": "block-per-pair", "windows": ["full", "valid", "same"], "forms": ['"$all"']},
      {"name": "fft-fused", "windows": ["full", "valid"], "forms": ['"$all"']},
      {"name": "tensor-wgmma", "windows": ["full"], "forms": ["one-to-many", "n-to-mn", "n-to-m"]}'
names="block-per-pair fft-fused tensor-wgmma"
case ${FAKE_WITHOUT:-} in
  fft-fused) json='{"name": "block-per-pair", "windows": ["full", "valid", "same"], "forms": ['"$all"']},
      {"name": "tensor-wgmma", "windows": ["full"], "forms": ["one-to-many", "n-to-mn", "n-to-m"]}'
    names="block-per-pair tensor-wgmma" ;;
  tensor-wgmma) json='{"name": "block-per-pair", "windows": ["full", "valid", "same"], "forms": ['"$all"']},
      {"name": "fft-fused", "windows": ["full", "valid"], "forms": ['"$all"']}'
    names="block-per-pair fft-fused" ;;
esac
if [ -n "${FAKE_BPP_ONLY:-}" ]; then
  json='{"name": "block-per-pair", "windows": ["full", "valid", "same"], "forms": ['"$all"']}'
  names=block-per-pair
fi
if [ -n "${FAKE_NORMALIZE_VARIANT:-}" ]; then
  json="$json"', {"name": "register-tiled", "windows": ["full"], "forms": ['"$all"']}'
  names="$names register-tiled"
fi
if [ $# = 2 ] && [ "$1" = list ] && [ "$2" = --json ]; then echo "[$json]"
elif [ $# = 1 ] && [ "$1" = list ]; then for n in $names; do echo "$n (a stand-in)"; done
else exit 2; fi
'''
STANDINS = [("bin", "compute-sanitizer", SANITIZER), ("bin", "nvidia-smi", NVIDIA_SMI), ("build", "xcorr_validate", VALIDATE),
            ("build", "xcorr", XCORR), ("build", "xcorr_sanitizer_probe", "#!/bin/sh\n")]


def write_tree(tree):
    """A copy of the scripts beside sources of their own (a line in a file of each shared folder), the
    three variants registered in files of their own: the keys' sources, which the repository's
    (lib/, algorithms/, ...) would otherwise be, so that another edit there while the tests run
    changes no key between two runs of a test."""
    (tree / "scripts").mkdir(parents=True)
    for name in ("sanitize", "sanitize-keys", "normalize-paths"):
        (tree / "scripts" / name).write_bytes((ROOT / "scripts" / name).read_bytes())
        (tree / "scripts" / name).chmod(0o755)
    for d in ("algorithms/common", "lib", "harness", "tools"):
        (tree / d).mkdir(parents=True)
        (tree / d / "a.cu").write_text(f"// {d}\n")
    for file, name in [("30_block_per_pair.cu", "block-per-pair"), ("51_fft_fused.cu", "fft-fused"),
                       ("26_tensor_wgmma.cu", "tensor-wgmma")]:
        (tree / "algorithms" / file).write_text(f'XCORR_REGISTER_VARIANT(Variant{{\n    .name = "{name}",\n}});\n')
    for f in ("meson.build", "meson_options.txt", "algorithms/meson.build"):
        (tree / f).write_text("")
    return tree


def write_standins(where):
    """bin/ (compute-sanitizer, nvidia-smi) and build/ (the build's binaries) under WHERE."""
    for d, name, text in STANDINS:
        (where / d).mkdir(parents=True, exist_ok=True)
        (where / d / name).write_text(text)
        (where / d / name).chmod(0o755)
    return where / "bin", where / "build"


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    """(bin, build, script): the stand-ins, and scripts/sanitize in a tree of its own (write_tree), once a
    module: they are never changed (a test that needs another build or tree makes one)."""
    where = tmp_path_factory.mktemp("standins")
    return (*write_standins(where), write_tree(where / "tree") / "scripts" / "sanitize")


def sanitize(bin_dir, build, script, out, log, tools, *extra, **env):
    """SCRIPT BUILD OUT TOOLS EXTRA... on the stand-ins: (the completed process, FAKE_LOG's lines)"""
    log.unlink(missing_ok=True)
    Path(f"{log}.control").unlink(missing_ok=True)
    r = subprocess.run([str(script), str(build), str(out), tools, *extra], capture_output=True,
                       text=True, timeout=120, cwd=ROOT,
                       env={"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOG": str(log), **env})
    calls = log.read_text().splitlines() if log.exists() else []
    return r, calls


@pytest.fixture(scope="module")
def clean(standins, tmp_path_factory):
    """() -> (stdout, calls, OUT/sanitize-ledger.txt) of `memcheck racecheck` over the stand-ins, which
    finds nothing, run once a module: several tests start from it (the whole run against its shares,
    the ledger of every process proven), and it was most of their time."""
    run = []

    def get():
        if not run:
            where = tmp_path_factory.mktemp("clean")
            r, calls = sanitize(*standins, where / "out", where / "calls.log", "memcheck racecheck")
            assert r.returncode == 0 and calls, r.stdout + r.stderr
            run.append((r.stdout, calls, (where / "out" / "sanitize-ledger.txt").read_text()))
        return run[0]
    return get


SLOW = "--form n-to-m --shape 1x3001"  # the part that outlasts the deadline (FAKE_SLEEP)


@pytest.fixture(scope="module")
def memcheck_cut(standins, tmp_path_factory):
    """() -> (the completed process, calls, OUT/sanitize-ledger.txt, OUT/sanitize-memcheck.log) of
    memcheck over the stand-ins with SANITIZE_DEADLINE=3 and the SLOW part sleeping past it, run once a
    module: three tests start from this same run (what a deadline leaves, the ledger it writes, the
    times in it), and each waited out the deadline for it."""
    run = []

    def get():
        if not run:
            where = tmp_path_factory.mktemp("memcheck-cut")
            r, calls = sanitize(*standins, where / "out", where / "calls.log", "memcheck", SANITIZE_DEADLINE="3", FAKE_SLEEP=SLOW)
            out = [where / "out" / f for f in ("sanitize-ledger.txt", "sanitize-memcheck.log")]
            run.append((r, calls, *(f.read_text() if f.exists() else "" for f in out)))
        return run[0]
    return get


@pytest.fixture
def fake(tmp_path, standins, clean, memcheck_cut, tree_first):
    """run(EXTRA..., tools=, ENV=...): scripts/sanitize over the stand-ins into tmp_path/out, FAKE_LOG
    tmp_path/calls.log; run.bin and run.build are the stand-ins' folders, run.clean() the module's
    clean run of memcheck and racecheck (the fixture clean), run.memcheck_cut() the module's memcheck
    run cut at a deadline (the fixture memcheck_cut), run.tree_first() the module's racecheck run at
    TREE_SHARDS (the fixture tree_first: its calls, ledger and FAKE_LOG's whole lines)."""
    def run(*extra, tools="memcheck racecheck", build=standins[1], **env):
        return sanitize(standins[0], build, standins[2], tmp_path / "out", tmp_path / "calls.log", tools, *extra, **env)
    run.bin, run.build, run.script, run.clean, run.memcheck_cut, run.tree_first = *standins, clean, memcheck_cut, tree_first
    return run


# The parts of one tool for the stand-in build (block-per-pair with windows, fft-fused, no
# register-tiled or fft: no normalization parts): maps, windows and reductions per form, fft-fused's
# four, the signals per form and chunked.
PARTS_PER_TOOL = 4 * 3 + 4 + 4 + 1
# racecheck's jobs, a process per variant and part: the maps, reductions and signals of each form
# through the variants that have the form (2 + 3 + 3 + 3: tensor-wgmma has no one-to-one), the
# windows of each form through block-per-pair and fft-fused (tensor-wgmma has full alone), fft-fused's
# four, the chunked signals through all three; each but the reductions' in SHARDS processes
SHARDS = 4
JOBS = 11 * 2 + 4 * 2 + 4 + 3  # sharded: maps and signals of each form, windows, fft-fused's, chunked
BPP_JOBS = 4 + 4 + 4 + 1  # block-per-pair's among them (maps, windows, signals, chunked): twice the shards
RACE_JOBS = SHARDS * (JOBS - BPP_JOBS) + 2 * SHARDS * BPP_JOBS + 11
# the same at SANITIZE_SHARDS=2, which the tests of the ledger's keys run (tree below): what they
# prove is which processes an edit asks again for, each shard a process of a key of its own, and 111
# processes prove it as 211 did, in half the forks. The tests of the shares' dealing and of the
# halving, the order and the lone 64ths run there too, on the proofs of tree_first's ledger (the
# default counts stay proved by the clean run: test_clean_parts_report_clean,
# test_racecheck_splits_each_job_into_shards_of_the_validators_checks)
TREE_SHARDS = 2
TREE_JOBS = TREE_SHARDS * (JOBS - BPP_JOBS) + 2 * TREE_SHARDS * BPP_JOBS + 11


def test_clean_parts_report_clean(clean):
    stdout, calls, _ = clean()  # (which exited 0)
    assert "memcheck: clean (" in stdout and "racecheck: clean (" in stdout
    assert len(set(calls)) == len(calls)  # each part once
    mem = [c for c in calls if c.startswith("memcheck")]
    race = [c for c in calls if c.startswith("racecheck")]
    assert len(mem) == PARTS_PER_TOOL and len(race) == RACE_JOBS
    assert all(c.count("--variant ") == 1 for c in race)  # racecheck: one variant a process
    assert not any("--variant tensor-wgmma" in c and ("--form one-to-one" in c or "--windows only" in c) for c in race)
    assert sum("--windows only" in c and "--variant block-per-pair" in c for c in race) == 4 * 2 * SHARDS
    # the same work: each memcheck part's arguments are those of racecheck's jobs, less the variant
    # and the shard
    def without_variant(c):
        words = c.split("\t")[-1].split()
        split = ("--variant", "--shard")
        return " ".join(w for i, w in enumerate(words) if w not in split and (i == 0 or words[i - 1] not in split))
    assert {without_variant(c) for c in mem} == {without_variant(c) for c in race}
    assert sum("--windows only" in c for c in mem) == 4
    assert any("XCORR_FFT_MAX_CHUNK=2" in c and "--shape 1x3001,1x257" in c for c in calls)  # the env reaches it
    # the cases of every part are summed: 2 passed and 1 skipped a process
    assert f"memcheck: clean ({2 * PARTS_PER_TOOL} passed, 0 failed, {PARTS_PER_TOOL} skipped)" in stdout
    assert f"racecheck: clean ({2 * RACE_JOBS} passed, 0 failed, {RACE_JOBS} skipped)" in stdout


def test_a_finding_fails_the_run_and_names_its_part(fake, tmp_path):
    # (racecheck's processes but the n-to-m windows' proven by the module's ledger: those, which find
    # something, still run; the others would only have run clean. A build of block-per-pair alone,
    # FAKE_BPP_ONLY, racecheck at TREE_SHARDS, proven by tree_first's ledger: the finding is named by
    # its part, and by its variant and shard, whatever else is built and however many shards)
    ledger = tmp_path / "ledger.txt"
    ledger.write_text("".join(line + "\n" for line in tree_proofs_but(fake, "n-to-m-windows@")))
    r, _ = fake(FAKE_FIND="--form n-to-m --shape 37x53,29x41 --shape 33x35,31x33 --shape 5x7,3x2 --shape 1x17,1x9 "
                          "--shape 100x61,37x80 --windows only", SANITIZE_LEDGER=str(ledger), FAKE_BPP_ONLY="1",
                SANITIZE_SHARDS=str(TREE_SHARDS))
    assert r.returncode == 1
    assert "memcheck: FINDINGS in: n-to-m-windows (exit 99)" in r.stdout
    assert "racecheck: FINDINGS in: n-to-m-windows@block-per-pair.1of4 (exit 99)" in r.stdout
    assert "Race reported between" in r.stdout  # the finding itself is shown
    assert "shared_race_kernel" not in r.stdout  # not the control's planted one


@pytest.mark.parametrize("env, part", [
    ({"FAKE_DIE": "--form one-to-many --reductions only"}, "one-to-many-reductions (exit 134)"),
    ({"FAKE_QUIET": "--variant fft-fused --shape 129x127,120x131 --shape 151x171"}, "fft-rows-apart (exit 0)"),
    ({"FAKE_FAIL_CASE": "--form n-to-mn --shape 1x3001"}, "signals-n-to-mn (exit 1)"),
])
def test_a_part_that_dies_stays_silent_or_fails_a_case_is_a_finding(fake, env, part):
    r, _ = fake(tools="memcheck", **env)
    assert r.returncode == 1 and f"memcheck: FINDINGS in: {part}" in r.stdout, r.stdout


# (2 and 3 shares: an even and an odd share of the same round-robin dealing; 4 proved nothing more)
@pytest.mark.parametrize("n", [2, 3])
def test_the_shares_split_each_tools_parts(fake, n):
    # (racecheck at TREE_SHARDS shards a job, its whole the module's tree_first run at those shards, and
    # memcheck's, which SANITIZE_SHARDS does not split, the module's clean run's: a share deals whatever
    # processes the walk numbers, so 111 processes dealt prove it as 211 did, in half the walks and runs)
    shares = [fake(f"{k}/{n}", SANITIZE_SHARDS=str(TREE_SHARDS)) for k in range(1, n + 1)]
    assert all(r.returncode == 0 for r, _ in shares)
    whole = [c for c in fake.clean()[1] if c.startswith("memcheck")] + fake.tree_first()[2]
    together = [c for _, calls in shares for c in calls]
    assert sorted(together) == sorted(whole) and len(set(together)) == len(together)
    for _, calls in shares:  # each share has its part of each tool's parts, of the windows and signals too
        for tool, jobs, windows, signals in (("memcheck", PARTS_PER_TOOL, 4, 4),
                                             ("racecheck", TREE_JOBS, 4 * 3 * TREE_SHARDS, (7 + 4 * 2) * TREE_SHARDS)):
            mine = [c for c in calls if c.startswith(tool)]
            assert abs(len(mine) - jobs / n) < 1
            assert abs(sum("--windows only" in c for c in mine) - windows / n) < 1
            assert abs(sum("1x1500,1x1700" in c for c in mine) - signals / n) < 1


@pytest.mark.parametrize("args, needle", [
    (["3/2"], "3/2: K/N with 1 <= K <= N"),
    (["0/2"], "0/2: K/N"),
])
def test_bad_share_is_refused(fake, args, needle):
    r, calls = fake(*args)
    assert r.returncode == 2 and needle in r.stderr and not calls


def test_bad_tool_and_missing_build_are_refused(fake, tmp_path):
    r, calls = fake(tools="memcheck leakcheck")
    assert r.returncode == 2 and "leakcheck: not a compute-sanitizer tool" in r.stderr and not calls
    r = subprocess.run([str(SCRIPT), str(tmp_path / "nowhere"), str(tmp_path / "out"), "memcheck"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no xcorr and xcorr_validate there" in r.stderr


def test_a_part_with_nothing_to_run_is_named_not_a_finding(fake):
    """A build of some variants only (device-check -v 52: signals alone) skips every 2-D reduction
    case; xcorr_validate then exits 2 ("nothing validated"), which is no finding of the tool."""
    r, _ = fake(tools="memcheck", FAKE_EMPTY="--reductions only")
    assert r.returncode == 0, r.stdout
    assert ("memcheck: nothing to run for these variants in: n-to-m-reductions n-to-mn-reductions "
            "one-to-many-reductions one-to-one-reductions") in r.stdout
    assert "memcheck: clean (" in r.stdout
    # but an empty part with a finding, or another error exit, is still one
    r, _ = fake(tools="memcheck", FAKE_EMPTY="--reductions only", FAKE_FIND="--form n-to-m --reductions only")
    assert r.returncode == 1 and "FINDINGS in: n-to-m-reductions (exit 99)" in r.stdout


def test_an_empty_share_is_refused(fake):
    """-Z K/N past the build's parts ran nothing and read "clean (0 passed)": now exit 2."""
    r, calls = fake("30/30", tools="memcheck")
    assert r.returncode == 2 and "share 30/30 is empty: memcheck has 21 parts" in r.stderr and not calls


def test_a_deadline_names_the_unfinished_parts_and_keeps_the_finished_verdicts(fake, tmp_path):
    """-T (SANITIZE_DEADLINE): a device call's time limit once killed a whole racecheck share and
    left nothing; now the parts still running at the deadline are stopped and named, never clean,
    and the ones that finished keep their verdict."""
    slow = SLOW
    r, _, _, joined = fake.memcheck_cut()  # memcheck, SANITIZE_DEADLINE=3, FAKE_SLEEP=slow (the module's run)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "memcheck: UNFINISHED at the deadline (3 s), no finding in their logs: signals-n-to-m (" in r.stdout
    assert "no finding in the parts that finished" in r.stdout and "memcheck: clean" not in r.stdout
    joined = joined.splitlines()
    # every part's header on a line of its own, the one after the part cut mid-line too
    assert sum(line.startswith("##### part ") for line in joined) == PARTS_PER_TOOL and "##### part signals-n-to-m" in joined
    assert "signals-n-to-m (2 cases done)" in r.stdout
    # a finding elsewhere still makes it exit 1
    r, _ = fake(tools="memcheck", SANITIZE_DEADLINE="3", FAKE_SLEEP=slow, FAKE_FIND="--form one-to-one --reductions only")
    assert r.returncode == 1 and "FINDINGS in: one-to-one-reductions (exit 99)" in r.stdout
    r, calls = fake(tools="memcheck", SANITIZE_DEADLINE="soon")
    assert r.returncode == 2 and "whole seconds" in r.stderr and not calls


def test_part_logs_stream_to_out_while_running(fake, tmp_path):
    """What a call killed from outside leaves: each running part's log under OUT/sanitize-parts/."""
    import threading
    import time
    seen = []

    def look():
        for _ in range(100):
            found = list((tmp_path / "out" / "sanitize-parts").glob("memcheck.signals-n-to-m.log"))
            if found:
                seen.append(found[0])
                return
            time.sleep(0.05)
    t = threading.Thread(target=look)
    t.start()
    r, _ = fake(tools="memcheck", FAKE_SLEEP="--form n-to-m --shape 1x3001", FAKE_SLEEP_S="2")
    t.join()
    assert r.returncode == 0 and seen
    assert not (tmp_path / "out" / "sanitize-parts").exists()  # joined into sanitize-memcheck.log at the end
    progress = (tmp_path / "out" / "sanitize-progress.txt").read_text().splitlines()
    assert len(progress) == PARTS_PER_TOOL and all(" exit=0 cases=" in line for line in progress)
    line = next(line for line in progress if line.startswith("memcheck signals-n-to-m "))
    m = re.fullmatch(r"memcheck signals-n-to-m exit=0 cases=2 seconds=(\d+) ERROR SUMMARY: 0 errors", line)
    assert m and int(m.group(1)) >= 2, line  # the stand-in slept 2 s


def test_at_most_sanitize_jobs_run_at_once_and_the_queue_meets_the_deadline(fake, tmp_path):
    span = tmp_path / "span"
    r, calls = fake(tools="memcheck", SANITIZE_JOBS="3", FAKE_SLEEP="--params", FAKE_SLEEP_S="0.3", FAKE_SPAN=str(span))
    assert r.returncode == 0 and len(calls) == PARTS_PER_TOOL, r.stdout + r.stderr
    spans = [tuple(map(float, line.split()[:2])) for line in span.read_text().splitlines()]
    most = max(sum(a <= t < b for a, b in spans) for t, _ in spans)
    assert 2 <= most <= 3  # parallel, but never more than SANITIZE_JOBS
    # one at a time, 1 s each, a 3 s deadline: the rest of the queue is named, not run
    r, calls = fake(tools="memcheck", SANITIZE_JOBS="1", SANITIZE_DEADLINE="3", FAKE_SLEEP="--params", FAKE_SLEEP_S="1")
    assert r.returncode == 3 and "memcheck: NOT RUN, the deadline had passed:" in r.stdout, r.stdout
    assert 2 <= len(calls) <= 4
    r, calls = fake(tools="memcheck", SANITIZE_JOBS="0")
    assert r.returncode == 2 and "SANITIZE_JOBS=0" in r.stderr and not calls


def test_the_normalization_runs_a_process_per_form_and_racecheck_one_per_variant_too(fake, tmp_path):
    """Its one process (both variants, every form, three modes) had not finished under racecheck after
    430 s: now a process per form, and under racecheck per variant as well; and
    normalize-paths, whose seven problems (eight now) in one racecheck process were cut at 311 s,
    a process per problem under racecheck."""
    # (racecheck at 2 shards a job: the normalization's still twice as many as the others'; beside
    # register-tiled, block-per-pair alone, FAKE_BPP_ONLY: its four forms are every form)
    _, calls = fake(tools="memcheck racecheck", FAKE_NORMALIZE_VARIANT="1", FAKE_BPP_ONLY="1", SANITIZE_SHARDS="2")
    norm = [c for c in calls if "--normalize all" in c]
    mem = [c for c in norm if c.startswith("memcheck")]
    race = [c for c in norm if c.startswith("racecheck")]
    assert len(mem) == 4 and all(c.count("--form ") == 1 for c in mem), mem
    assert len(race) == 4 * 2 * 2 and all("--variant register-tiled" in c and c.count("--variant") == 1 for c in race)
    names = subprocess.run([str(ROOT / "scripts" / "normalize-paths"), "names"], capture_output=True, text=True,
                           check=True).stdout.split()
    assert len(names) == 8 and "staged" in names and "strip" in names and "store" in names
    progress = [line.split()[:2] for line in (tmp_path / "out" / "sanitize-progress.txt").read_text().splitlines()]
    paths = [(tool, part) for tool, part in progress if part.startswith("normalize-paths")]
    assert sorted(paths) == sorted([("memcheck", "normalize-paths")] +
                                   [("racecheck", f"normalize-paths@{n}") for n in names])


def test_racecheck_splits_each_job_into_shards_of_the_validators_checks(fake):
    """A racecheck process of one variant's form of signals or windows (block-per-pair's, say) was
    longer than a device call (55 of ~93 cases in 480 s): each job but the reductions'
    few cases is SANITIZE_SHARDS processes of xcorr_validate --shard K/N, which together run its
    checks once; block-per-pair's and the normalization's, the longest (block-per-pair's
    window shards 276-342 s), in twice as many."""
    calls = [c for c in fake.clean()[1] if c.startswith("racecheck")]  # (the module's run at the default shards)
    for variant, n in (("fft-fused", SHARDS), ("block-per-pair", 2 * SHARDS)):
        windows = sorted((c.split("\t")[-1] for c in calls if f"--variant {variant}" in c and "--form n-to-m " in c
                          and "--windows only" in c), key=lambda w: int(w.split()[-1].split("/")[0]))
        assert [w.split()[-2:] for w in windows] == [["--shard", f"{k}/{n}"] for k in range(1, n + 1)]
        assert len({w.rsplit(" --shard", 1)[0] for w in windows}) == 1  # the same job, n shards
    assert not any("--shard" in c for c in calls if "--reductions only" in c)
    r, calls = fake(tools="racecheck", SANITIZE_SHARDS="1")
    assert r.returncode == 0 and len(calls) == JOBS + 11
    assert not any("--shard" in c for c in calls)
    r, calls = fake(tools="racecheck", SANITIZE_SHARDS="many")
    assert r.returncode == 2 and "SANITIZE_SHARDS=many" in r.stderr and not calls


def test_the_ledger_carries_clean_processes_over_to_the_next_call(fake, tmp_path):
    """Racecheck over every variant outlasts a session's device time: each call's
    OUT/sanitize-ledger.txt lists what finished clean under a key of the sources, and the next call
    (SANITIZE_LEDGER, device-check -L) runs only the rest, until the whole is proven."""
    slow = SLOW
    r, calls, cut_ledger, _ = fake.memcheck_cut()  # memcheck, SANITIZE_DEADLINE=3, FAKE_SLEEP=slow (the module's run)
    assert r.returncode == 3 and len(calls) == PARTS_PER_TOOL
    ledger = tmp_path / "ledger.txt"
    ledger.write_text(cut_ledger)
    entries = [line.split() for line in ledger.read_text().splitlines() if not line.startswith("#")]
    # a key per process (what it ran), 16 hex digits
    assert len(entries) == PARTS_PER_TOOL - 1 and len({e[0] for e in entries}) == len(entries)
    assert all(re.fullmatch(r"[0-9a-f]{16}", e[0]) for e in entries)
    assert "signals-n-to-m" not in {e[2] for e in entries} and "signals-one-to-one" in {e[2] for e in entries}
    # the next call runs the unfinished part alone, and with the ledger's the tool is clean
    r, calls = fake(tools="memcheck", SANITIZE_LEDGER=str(ledger))
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(calls) == 1 and "--form n-to-m --shape 1x3001" in calls[0]
    assert f"memcheck: clean (2 passed, 0 failed, 1 skipped; {PARTS_PER_TOOL - 1} processes proven earlier" in r.stdout
    after = (tmp_path / "out" / "sanitize-ledger.txt").read_text().splitlines()
    assert len([line for line in after if not line.startswith("#")]) == PARTS_PER_TOOL
    # a finding is never entered, and another key (other sources) proves nothing
    r, _ = fake(tools="memcheck", FAKE_FIND=slow)
    listed = {line.split()[2] for line in (tmp_path / "out" / "sanitize-ledger.txt").read_text().splitlines()
              if not line.startswith("#")}
    assert r.returncode == 1 and "signals-n-to-m" not in listed and "signals-n-to-mn" in listed
    ledger.write_text("".join(f"0123456789abcdef {e[1]} {e[2]} {e[3]}\n" for e in entries))
    r, calls = fake(tools="memcheck", SANITIZE_LEDGER=str(ledger))
    assert r.returncode == 0 and len(calls) == PARTS_PER_TOOL and "proven earlier" not in r.stdout
    r, calls = fake(tools="memcheck", SANITIZE_LEDGER=str(tmp_path / "none.txt"))
    assert r.returncode == 2 and "no such file" in r.stderr and not calls


def test_a_proof_holds_on_the_card_it_ran_on(fake, tmp_path):
    """The keys hash the driver and the compute capability, which an H100 and an H200 share: a ledger
    proven on H100s answered "clean" on an H200 without running a process there, where the reductions
    ask for the H200's own run. Each line names its card, and proves nothing on another."""
    h100, h200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
    r, calls = fake(tools="memcheck", FAKE_CARD=h100)
    assert r.returncode == 0 and len(calls) == PARTS_PER_TOOL, r.stdout + r.stderr
    ledger = tmp_path / "ledger.txt"
    ledger.write_text((tmp_path / "out" / "sanitize-ledger.txt").read_text())
    proofs = [line.split() for line in ledger.read_text().splitlines() if not line.startswith("#")]
    assert len(proofs) == PARTS_PER_TOOL and {p[3] for p in proofs} == {"NVIDIA_H100_80GB_HBM3"}
    r, calls = fake(tools="memcheck", FAKE_CARD=h100, SANITIZE_LEDGER=str(ledger))
    assert r.returncode == 0 and not calls
    assert f"{PARTS_PER_TOOL} processes proven earlier on NVIDIA_H100_80GB_HBM3 (the ledger)" in r.stdout
    # on another card, every process runs again; the H100's proofs stay in the ledger beside its own
    r, calls = fake(tools="memcheck", FAKE_CARD=h200, SANITIZE_LEDGER=str(ledger))
    assert r.returncode == 0 and len(calls) == PARTS_PER_TOOL and "proven earlier" not in r.stdout
    after = [line.split() for line in (tmp_path / "out" / "sanitize-ledger.txt").read_text().splitlines()
             if not line.startswith("#")]
    assert sorted(p[3] for p in after) == ["NVIDIA_H100_80GB_HBM3"] * PARTS_PER_TOOL + ["NVIDIA_H200"] * PARTS_PER_TOOL
    assert {p[0] for p in after if p[3] == "NVIDIA_H200"} == {p[0] for p in proofs}  # the same keys
    assert f"ledger: {PARTS_PER_TOOL} of this run's {PARTS_PER_TOOL} processes proven clean, 0 left" in r.stdout
    # two cards in one host: both names, and a ledger of one of them proves nothing there
    r, calls = fake(tools="memcheck", FAKE_CARD=f"{h200}\\n{h100}", SANITIZE_LEDGER=str(ledger))
    assert len(calls) == PARTS_PER_TOOL and " NVIDIA_H100_80GB_HBM3+NVIDIA_H200\n" in (
        tmp_path / "out" / "sanitize-ledger.txt").read_text()


def test_the_ledger_times_each_process_and_the_next_call_starts_the_longest_first(fake, tmp_path):
    """A long process that starts late in a call is cut at the deadline, and the next call starts it
    over from nothing (48 processes proven in a 464 s call, 16 cut after up to 231 s).
    The ledger keeps how long each process took, a lower bound ("+") where the deadline stopped it,
    and the next call starts the longest first; a process it has no time for takes its shards', else
    its variant's in the same part of another form.
    Only the order changes: not what runs, nor what a share holds."""
    out = tmp_path / "out"

    def took(text, tool="memcheck"):
        lines = [line.split() for line in text.splitlines() if line.startswith(f"# took {tool} ")]
        assert len({t[3] for t in lines}) == len(lines)  # a line a process
        return {t[3]: t[4] for t in lines}
    slow = SLOW
    r, _, cut_ledger, _ = fake.memcheck_cut()  # memcheck, SANITIZE_DEADLINE=3, FAKE_SLEEP=slow (the module's run)
    times = took(cut_ledger)
    assert r.returncode == 3 and len(times) == PARTS_PER_TOOL
    assert re.fullmatch(r"\d+\+", times["signals-n-to-m"])  # stopped at the deadline: a lower bound
    assert all(re.fullmatch(r"\d+", s) for p, s in times.items() if p != "signals-n-to-m")

    # the order: one at a time, by the times, longest first; a part of another form with no time of
    # its own takes this one's (the signals of every form with signals-n-to-m's); none known: the middle
    ledger = tmp_path / "ledger.txt"
    ledger.write_text("# took memcheck signals-n-to-m 300+\n# took memcheck one-to-many 130\n"
                      "# took memcheck one-to-one 5\n")
    r, calls = fake(tools="memcheck", SANITIZE_JOBS="1", SANITIZE_LEDGER=str(ledger))
    parts = [c.split("\t")[-1] for c in calls]
    assert r.returncode == 0 and len(parts) == PARTS_PER_TOOL
    forms = ["one-to-one", "one-to-many", "n-to-mn", "n-to-m"]
    assert [re.search(r"--form (\S+) --shape 1x3001", c).group(1) for c in parts[:4]] == forms
    assert [re.search(r"--form (\S+) --shape 37x53.* --windows none$", c).group(1) for c in parts[4:7]] == forms[1:]
    assert "--form one-to-one --shape 37x53" in parts[-1] and "--windows none" in parts[-1]
    whole = [c for c in fake.clean()[1] if c.startswith("memcheck")]  # (the module's run: memcheck first, then racecheck)
    assert sorted(calls) == sorted(whole)
    # this run's times to the end replace the earlier ones (the ledger's 300+ and 130 above); a run's
    # shorter lower bound does not
    times = took((out / "sanitize-ledger.txt").read_text())
    assert re.fullmatch(r"\d+", times["signals-n-to-m"]) and int(times["signals-n-to-m"]) < 100
    assert int(times["one-to-many"]) < 100 and len(times) == PARTS_PER_TOOL
    ledger.write_text("# took memcheck signals-n-to-m 300\n")
    fake(tools="memcheck", SANITIZE_DEADLINE="2", FAKE_SLEEP=slow, SANITIZE_LEDGER=str(ledger))
    assert took((out / "sanitize-ledger.txt").read_text())["signals-n-to-m"] == "300"

    # racecheck: a shard's time stands for its siblings', and for its variant's in the same part of
    # the other forms (their signals, each form's block-per-pair shards); the shares hold the same
    # (a time to the end: one cut at the deadline also splits the shards, the next test)
    # (one at a time, the signals' processes alone: the others proven, which does not change the order)
    # (a build of block-per-pair and tensor-wgmma, FAKE_WITHOUT=fft-fused: 73 processes to walk at
    # TREE_SHARDS, not 211; tensor-wgmma's signal shards, with no time, are the others that come after
    # block-per-pair's. At TREE_SHARDS, block-per-pair's signals in 4 shards, the others proven by
    # tree_first's ledger: a shard's time stands for its siblings' and its mirrors' at any count)
    took = "# took racecheck signals-n-to-m@block-per-pair.3of4 250\n"
    ledger.write_text("".join(line + "\n" for line in tree_proofs_but(fake, "signals-")) + took)
    race = dict(tools="racecheck", FAKE_WITHOUT="fft-fused", SANITIZE_SHARDS=str(TREE_SHARDS))
    r, calls = fake(SANITIZE_JOBS="1", SANITIZE_LEDGER=str(ledger), **race)
    first = [c.split("\t")[-1] for c in calls[:4 * 4]]
    assert r.returncode == 0 and all("--variant block-per-pair" in c and "--shape 1x3001,1x257" in c for c in first)
    assert [c.split()[-1] for c in first] == [f"{k}/4" for k in range(1, 5)] * 4
    assert [re.search(r"--form (\S+)", c).group(1) for c in first[::4]] == ["one-to-one", "one-to-many", "n-to-mn", "n-to-m"]
    assert "--variant block-per-pair" not in calls[4 * 4] or "--shape 1x3001,1x257" not in calls[4 * 4]
    assert all("1x3001,1x257" in c or "1x1500,1x1700" in c for c in calls)  # the rest proven
    # (every process but the signals' proven in both: the order of those that run is what changes)
    proven = tmp_path / "proven.txt"
    proven.write_text("".join(line + "\n" for line in tree_proofs_but(fake, "signals-")))
    ledger.write_text(proven.read_text() + took)
    for k in (1, 2):
        _, ordered = fake(f"{k}/2", SANITIZE_LEDGER=str(ledger), **race)
        _, plain = fake(f"{k}/2", SANITIZE_LEDGER=str(proven), **race)
        assert sorted(ordered) == sorted(plain) and ordered != plain


def test_sanitize_order_shortest_walks_the_short_processes_first(fake, tmp_path):
    """Where the ledger's longest processes cannot finish in a call, longest-first gave them every slot
    and a call proved 8 and 23 processes; SANITIZE_ORDER=shortest walks the tiers the other
    way (the same processes, the same shares), and a value it does not know is refused."""
    ledger = tmp_path / "ledger.txt"
    ledger.write_text("# took memcheck signals-n-to-m 300+\n# took memcheck one-to-many 130\n"
                      "# took memcheck one-to-one 5\n")
    r, calls = fake(tools="memcheck", SANITIZE_JOBS="1", SANITIZE_LEDGER=str(ledger), SANITIZE_ORDER="shortest")
    parts = [c.split("\t")[-1] for c in calls]
    assert r.returncode == 0 and len(parts) == PARTS_PER_TOOL
    assert "--form one-to-one --shape 37x53" in parts[0] and "--windows none" in parts[0]
    assert [re.search(r"--form (\S+) --shape 1x3001", c).group(1) for c in parts[-4:]] == \
        ["one-to-one", "one-to-many", "n-to-mn", "n-to-m"]
    _, longest = fake(tools="memcheck", SANITIZE_JOBS="1", SANITIZE_LEDGER=str(ledger))
    assert sorted(calls) == sorted(longest) and calls != longest
    assert "--shape 1x3001" in longest[0].split("\t")[-1]
    r, calls = fake(tools="memcheck", SANITIZE_ORDER="quickest")
    assert r.returncode == 2 and "SANITIZE_ORDER=quickest: longest or shortest" in r.stderr and not calls


TOOK = "# took racecheck signals-n-to-m@block-per-pair."


def proofs_but(fake, tmp_path, drop):
    """The ledger lines of every racecheck process of the stand-in build, proven, but those holding DROP."""
    proven = fake.clean()[2].splitlines()
    return [line for line in proven if not line.startswith("#") and " racecheck " in line and drop not in line]


def tree_proofs_but(fake, drop):
    """The same at TREE_SHARDS, from the module's tree_first run, for the tests that run racecheck at
    those shards: what they look at (which shards split, run alone, in which order and share) is the
    same at any shard count, a level of halving sooner, and their walks are half as long."""
    proven = fake.tree_first()[1].splitlines()
    return [line for line in proven if not line.startswith("#") and " racecheck " in line and drop not in line]


def write_ledger(tmp_path, proofs, times):
    """A ledger of PROOFS and "# took racecheck signals-n-to-m@block-per-pair.TIME" for each of TIMES."""
    ledger = tmp_path / "ledger.txt"
    ledger.write_text("".join(line + "\n" for line in proofs) + "".join(f"{TOOK}{t}\n" for t in times))
    return ledger


def tree_ledger_but(fake, tmp_path, drop, times):
    return write_ledger(tmp_path, tree_proofs_but(fake, drop), times)


def shards(calls, form, variant="block-per-pair"):
    """The --shard K/N of each sanitized process of VARIANT's FORM signals among CALLS, sorted."""
    return sorted(c.split()[-1] for c in calls if f"--variant {variant} " in c and f"--form {form} " in c
                  and "--shape 1x3001,1x257" in c)


def test_a_shard_cut_at_the_deadline_runs_as_its_two_halves_until_proven(fake, tmp_path):
    """A shard longer than a call was cut there and started over from nothing in the next, forever
    (block-per-pair's signal shards 1of8 cut at 447 s in two calls, register-tiled's
    one-to-many signal shards at 300-330 s). One the ledger marks cut ("SECONDS+") after two minutes
    or more, which no proof covers, runs as --shard K/2M and (K+M)/2M, which run its checks once
    between them (one cut sooner had started late, not run long); its siblings with no time of their
    own, and its variant's shards of the same part in the other forms, likewise (once).
    Proven halves stay proven; -Z keeps both halves in their parent's share."""
    def fraction(shard):
        k, m = map(int, shard.split("/"))
        return {i for i in range(64) if i % m == k - 1}

    # (racecheck at TREE_SHARDS shards a job, block-per-pair's signals in 2 * TREE_SHARDS = 4, its
    # other processes proven by the module's tree_first ledger: the halving is the same from any
    # parent, 4 -> 8 -> 16 as 8 -> 16 -> 32, and the walks are half as long)
    def race(*extra, **env):
        return fake(*extra, tools="racecheck", SANITIZE_SHARDS=str(TREE_SHARDS), **env)
    # every process proven but block-per-pair's n-to-m signals: 1of4 cut at 447 s, its siblings
    # finished (not proven here, so that they run: whole, by their own times)
    # (up to the other forms' split below, a build of block-per-pair alone, FAKE_BPP_ONLY: these runs
    # look at its n-to-m shards alone, and the other variants' proven processes were most of their walk)
    keep = tree_proofs_but(fake, "signals-n-to-m@block-per-pair.")
    siblings = [f"{k}of4 120" for k in range(2, 5)]
    ledger = write_ledger(tmp_path, keep, ["1of4 447+"] + siblings)
    r, calls = race(FAKE_BPP_ONLY="1", SANITIZE_LEDGER=str(ledger))
    assert r.returncode == 0, r.stdout + r.stderr
    n_to_m = shards(calls, "n-to-m")
    assert n_to_m == sorted(["1/8", "5/8"] + [f"{k}/4" for k in range(2, 5)])
    assert set().union(*map(fraction, n_to_m)) == set(range(64))  # every check once between them
    assert sum(len(fraction(s)) for s in n_to_m) == 64
    assert len(calls) == len(n_to_m)  # the rest proven
    out = (tmp_path / "out" / "sanitize-ledger.txt").read_text()
    assert " racecheck signals-n-to-m@block-per-pair.1of8 none\n" in out and " racecheck signals-n-to-m@block-per-pair.5of8 none\n" in out
    assert "# took racecheck signals-n-to-m@block-per-pair.1of4 447+" in out  # the parent's mark stays: halves next time
    # the next call: the halves are proven, nothing of the part runs, the parent is not run whole
    ledger.write_text(out)
    r, calls = race(FAKE_BPP_ONLY="1", SANITIZE_LEDGER=str(ledger))
    assert r.returncode == 0 and not calls and "racecheck: clean (" in r.stdout, r.stdout

    # a half cut again splits again (a quarter of the parent), within 64 shards
    write_ledger(tmp_path, keep, ["1of4 447+", "5of8 300+"] + siblings)
    _, calls = race(FAKE_BPP_ONLY="1", SANITIZE_LEDGER=str(ledger))
    n_to_m = shards(calls, "n-to-m")
    assert "1/8" in n_to_m and "5/16" in n_to_m and "13/16" in n_to_m and "5/8" not in n_to_m and "1/4" not in n_to_m
    assert set().union(*map(fraction, n_to_m)) == set(range(64)) and sum(len(fraction(s)) for s in n_to_m) == 64

    # a shard halved earlier stays halved when its siblings' times no longer mark the part cut (the
    # parent's own line gone, a sibling the longest and finished)
    write_ledger(tmp_path, keep, ["1of8 200+", "5of8 50"] + siblings)
    _, calls = race(FAKE_BPP_ONLY="1", SANITIZE_LEDGER=str(ledger))
    assert shards(calls, "n-to-m") == sorted(["1/16", "9/16", "5/8"] + [f"{k}/4" for k in range(2, 5)])

    # a cut shard's never-run siblings and its variant's shards of the part's other forms split too
    # (from here on every process but the signals' proven: what is looked at is which signal shards
    # run, and in which share; the proofs change neither)
    # (and a build of block-per-pair and fft-fused, FAKE_WITHOUT=tensor-wgmma: what is looked at is
    # block-per-pair's split and fft-fused's, another variant's, not)
    signals_open = tree_proofs_but(fake, "signals-")
    write_ledger(tmp_path, signals_open, [])
    ledger.write_text(ledger.read_text() + "# took racecheck signals-one-to-many@block-per-pair.1of4 448+\n")
    _, calls = race(SANITIZE_LEDGER=str(ledger), FAKE_WITHOUT="tensor-wgmma")
    for form in ("one-to-one", "one-to-many", "n-to-mn", "n-to-m"):
        assert shards(calls, form) == sorted(f"{k}/8" for k in range(1, 9)), form
    assert shards(calls, "n-to-m", "fft-fused") == sorted(f"{k}/2" for k in range(1, 3))  # other variants do not
    # -Z: the two shares hold every process once, both halves of a parent in the same share
    halves = []
    for k in (1, 2):
        _, share = race(f"{k}/2", SANITIZE_LEDGER=str(ledger), FAKE_WITHOUT="tensor-wgmma")
        halves.append(share)
    assert sorted(halves[0] + halves[1]) == sorted(calls)
    for share in halves:
        got = set(shards(share, "n-to-m"))
        assert all((f"{k}/8" in got) == (f"{k + 4}/8" in got) for k in range(1, 5)), got
    # one cut before two minutes had started late, not run long: it runs whole again, unless its
    # family says otherwise
    # (these two look at block-per-pair's n-to-m shards alone: its build alone, FAKE_BPP_ONLY, and
    # every other process proven, as in the first runs above; the family's cut one-to-many shard is
    # in the build, and its halves run)
    write_ledger(tmp_path, keep, ["1of4 119+"])
    _, calls = race(SANITIZE_LEDGER=str(ledger), FAKE_BPP_ONLY="1")
    assert shards(calls, "n-to-m") == sorted(f"{k}/4" for k in range(1, 5))
    write_ledger(tmp_path, keep, ["1of4 119+"])
    ledger.write_text(ledger.read_text() + "# took racecheck signals-one-to-many@block-per-pair.2of4 300+\n")
    _, calls = race(SANITIZE_LEDGER=str(ledger), FAKE_BPP_ONLY="1")
    assert shards(calls, "n-to-m") == sorted(f"{k}/8" for k in range(1, 9))
    # memcheck's parts are not the validator's shards: a cut one runs whole again
    ledger.write_text("# took memcheck signals-n-to-m 300+\n")
    r, calls = fake(tools="memcheck", SANITIZE_LEDGER=str(ledger))
    assert r.returncode == 0 and len(calls) == PARTS_PER_TOOL and not any("--shard" in c for c in calls)


def test_a_shard_of_another_form_follows_its_mirrors_split_in_one_call(fake, tmp_path):
    """The forms' signal parts run the same checks shard for shard (the same shapes and parameters),
    so a shard with no time of its own follows the split its mirror in another form reached over
    several calls, in one call, instead of halving a level a call from the family's verdict
    (warp-per-overlap-shared's n-to-m signals went 8 -> 16 -> 32 -> 64 shards over
    three calls; its n-to-mn signals would have taken as many)."""
    # (a build of block-per-pair alone, FAKE_BPP_ONLY: these look at its signal shards alone, and the
    # other variants' processes, proven by the module's ledger, were most of each run's walk; racecheck
    # at TREE_SHARDS, block-per-pair's signals in 4 shards, the other processes proven by tree_first's
    # ledger: the mirrors' trees are the same a level of halving sooner)
    ledger = write_ledger(tmp_path, tree_proofs_but(fake, "signals-n-to-m"),
                          ["1of4 447+", "1of8 300+", "5of8 100"] + [f"{k}of4 120" for k in range(2, 5)])
    r, calls = fake(tools="racecheck", FAKE_BPP_ONLY="1", SANITIZE_LEDGER=str(ledger), SANITIZE_SHARDS=str(TREE_SHARDS))
    assert r.returncode == 0, r.stdout + r.stderr
    tree = sorted(["1/16", "9/16", "5/8"] + [f"{k}/4" for k in range(2, 5)])
    assert shards(calls, "n-to-m") == tree
    assert shards(calls, "n-to-mn") == tree  # its own shards have no time: the mirror's tree, whole
    # where its own time says otherwise, its own time decides
    ledger.write_text(ledger.read_text() + "# took racecheck signals-n-to-mn@block-per-pair.1of4 90\n"
                      "# took racecheck signals-n-to-mn@block-per-pair.2of4 400+\n")
    _, calls = fake(tools="racecheck", FAKE_BPP_ONLY="1", SANITIZE_LEDGER=str(ledger), SANITIZE_SHARDS=str(TREE_SHARDS))
    assert shards(calls, "n-to-mn") == sorted(["1/4", "2/8", "6/8"] + [f"{k}/4" for k in range(3, 5)])


def lone_and_others(span, lone):
    """FAKE_SPAN's file read and removed: the (start, end) of the one process whose command holds LONE,
    and those of all the others."""
    rows = [line.split(maxsplit=2) for line in span.read_text().splitlines()]
    span.unlink()
    (one,) = [(float(a), float(b)) for a, b, line in rows if lone in line]
    return one, [(float(a), float(b)) for a, b, line in rows if lone not in line]


def test_a_64th_cut_at_the_deadline_runs_alone_first_in_the_first_half(fake, tmp_path):
    """Halving stops at 64 shards, where a shard holds a check or two: one of those that a deadline
    cut would be cut again in every call (warp-per-overlap-shared's n-to-m signal check
    13of64, 0 cases done in 446 s, among 15 other processes taking turns on the GPU). It runs before
    every other process, with none beside it, stopped at half the deadline so that the rest of the
    call still proves the others; the summary names it."""
    # (a build of block-per-pair alone, FAKE_BPP_ONLY: these look at its signal shards alone, and the
    # other variants' processes, proven by the module's ledger, were most of each run's walk; racecheck
    # at TREE_SHARDS, block-per-pair's signals from 4 shards, the other processes proven by
    # tree_first's ledger: 64ths are 64ths whatever the parent, one level of halving more, and the
    # walks are half as long)
    def race(**env):
        return fake(tools="racecheck", FAKE_BPP_ONLY="1", SANITIZE_SHARDS=str(TREE_SHARDS), **env)

    ledger = tree_ledger_but(fake, tmp_path, "signals-n-to-m@block-per-pair.",
                        ["1of4 447+", "1of8 300+", "1of16 300+", "1of32 300+", "1of64 446+", "33of64 120", "17of32 120",
                         "9of16 120", "5of8 120"] + [f"{k}of4 120" for k in range(2, 5)])
    span = tmp_path / "span"
    r, calls = race(SANITIZE_LEDGER=str(ledger), SANITIZE_JOBS="4", FAKE_SPAN=str(span),
                    FAKE_SLEEP="--shard 1/64", FAKE_SLEEP_S="1")
    assert r.returncode == 0, r.stdout + r.stderr
    ran = sorted(c.split()[-1] for c in calls)
    assert ran == sorted(["1/64", "33/64", "17/32", "9/16", "5/8"] + [f"{k}/4" for k in range(2, 5)])
    assert calls[0].endswith("--shard 1/64")  # first
    (a, b), others = lone_and_others(span, "--shard 1/64")
    assert len(others) == len(calls) - 1 and all(t0 >= b for t0, _ in others)  # alone: the others after it
    assert "run alone on the GPU, first (a check no shard can shorten): signals-n-to-m@block-per-pair.1of64" in r.stdout
    assert " racecheck signals-n-to-m@block-per-pair.1of64 none\n" in (tmp_path / "out" / "sanitize-ledger.txt").read_text()
    # still too long alone: stopped at half the deadline, and the others run in the rest of the call
    r, calls = race(SANITIZE_LEDGER=str(ledger), SANITIZE_DEADLINE="8", FAKE_SLEEP="--shard 1/64", FAKE_SLEEP_S="30")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "UNFINISHED at the deadline (8 s), no finding in their logs: signals-n-to-m@block-per-pair.1of64" in r.stdout
    assert "NOT RUN" not in r.stdout and len(calls) == 8, r.stdout
    # what the next call owes: those the summary names unproven (the 64th, and any other a slow machine cut)
    unproven = [p for line in r.stdout.splitlines() if "UNFINISHED" in line or "NOT RUN" in line
                for p in line.split(": ", 2)[-1].split() if "@" in p]
    assert re.search(rf"ledger: \d+ of this run's \d+ processes proven clean, {len(unproven)} left \(", r.stdout)
    took = (tmp_path / "out" / "sanitize-ledger.txt").read_text()
    assert f"{TOOK}1of64 446+" in took and f"{TOOK}33of64 " in took  # the longest cut stays; the others proven
    # a 64th never timed runs alone where its mirror took two minutes, even one that finished (alone,
    # in an earlier call): among sixteen others it would not
    ledger = tree_ledger_but(fake, tmp_path, "signals-n-to-m", ["1of4 447+", "1of8 300+", "1of16 300+", "1of32 300+", "1of64 200"])
    r, calls = race(SANITIZE_LEDGER=str(ledger))
    assert "run alone on the GPU, first (a check no shard can shorten): signals-n-to-mn@block-per-pair.1of64 \n" in r.stdout
    assert any(c.endswith("--form n-to-m --shape 1x3001,1x257 --shape 1x1500,1x1700 --windows also --shard 1/64")
               for c in calls)  # its own finished time: not alone
    # one cut itself runs before those alone for their mirrors' sake, whatever the catalog's order
    # (n-to-mn's parts come before n-to-m's)
    ledger = tree_ledger_but(fake, tmp_path, "signals-n-to-m", ["1of4 447+", "1of8 300+", "1of16 300+", "1of32 300+", "1of64 446+"])
    r, calls = race(SANITIZE_LEDGER=str(ledger))
    assert [c.split("--form ")[1].split()[0] for c in calls[:2]] == ["n-to-m", "n-to-mn"]
    assert calls[0].endswith("--shard 1/64") and calls[1].endswith("--shard 1/64")
    assert ("first (a check no shard can shorten): signals-n-to-m@block-per-pair.1of64 "
            "signals-n-to-mn@block-per-pair.1of64 \n") in r.stdout
    # an earlier shard (of 32) cut is halved as before, not run alone (its parent of 16 cut too: from
    # 4 shards, the family's cut halves the 4ths alone, and the 8ths split where a half has a time)
    write_ledger(tmp_path, [line for line in ledger.read_text().splitlines() if not line.startswith("#")],
                 ["1of16 300+", "1of32 300+"])
    r, calls = race(SANITIZE_LEDGER=str(ledger))
    assert "run alone" not in r.stdout and any(c.endswith("--shard 1/64") for c in calls)


def test_a_normalize_paths_problem_cut_at_the_deadline_runs_alone_in_either_order(fake, tmp_path):
    """normalize-paths runs a process per problem, which no shard can split (signals,
    0 of 1 done in 411 s among sixteen): one cut after two minutes runs alone, first (in the first
    half of the deadline) longest first, last (after every other process has ended) shortest first."""
    ledger = tmp_path / "ledger.txt"
    ledger.write_text("# took racecheck normalize-paths@signals 411+\n# took racecheck normalize-paths@strip 300\n")
    span = tmp_path / "span"
    # (the other jobs a process each, SANITIZE_SHARDS=1, of block-per-pair and the normalization's
    # register-tiled alone, FAKE_BPP_ONLY: 41 processes, not ~250; normalize-paths' are never sharded,
    # run through register-tiled whatever else is built, and what is looked at is when they run beside
    # the others, of which there are still more than 20)
    # (normalize-paths' PYTHON, which writes a problem's inputs with NumPy before the sanitized
    # process, a stand-in that writes nothing: the stand-in xcorr reads no input, and a NumPy start-up
    # a problem was most of these runs' CPU; the sanitized process and its command are the same)
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    env = dict(tools="racecheck", FAKE_NORMALIZE_VARIANT="1", FAKE_BPP_ONLY="1", SANITIZE_LEDGER=str(ledger), SANITIZE_JOBS="4",
               SANITIZE_SHARDS="1", FAKE_SPAN=str(span), PYTHON=str(python), FAKE_SLEEP="/strip-left.npy", FAKE_SLEEP_S="3")
    r, _ = fake(**env)  # (strip, the longest of the rest, sleeps: still running when a walk reaches the alone one)
    assert "run alone on the GPU, first (a check no shard can shorten): normalize-paths@signals \n" in r.stdout
    (_, end), others = lone_and_others(span, "/signals-left.npy")
    assert len(others) > 20 and all(a >= end for a, _ in others)
    r, _ = fake(**env, SANITIZE_ORDER="shortest")
    assert "run alone on the GPU, last (a check no shard can shorten): normalize-paths@signals \n" in r.stdout
    (start, _), others = lone_and_others(span, "/signals-left.npy")
    assert len(others) > 20 and all(b <= start for _, b in others)
    # one that finished, or was cut sooner than two minutes (it started late), runs among the others
    ledger.write_text("# took racecheck normalize-paths@signals 100+\n")
    r, _ = fake(**env)
    assert "run alone" not in r.stdout


def test_each_tool_first_reports_the_defect_planted_for_it(fake, tmp_path):
    """The positive control: a tool that reports nothing on xcorr_sanitizer_probe's planted defect,
    under the parts' own options, would call every variant clean (a kernel filter matching none of
    our kernels, a tool that never attached); racecheck instruments our kernels alone. (Racecheck's
    processes but the signals' are proven by the ledger of the module's clean run, keyed on their
    commands with the filter: the control runs all the same. A build of block-per-pair alone,
    FAKE_BPP_ONLY, racecheck at TREE_SHARDS, proven by tree_first's ledger: the options are each
    tool's, the same in every part and process, whatever its shard.)"""
    ledger = tmp_path / "ledger.txt"
    ledger.write_text("".join(line + "\n" for line in tree_proofs_but(fake, "signals-")))
    r, calls = fake(tools="memcheck racecheck initcheck synccheck", SANITIZE_LEDGER=str(ledger), FAKE_BPP_ONLY="1",
                    SANITIZE_SHARDS=str(TREE_SHARDS))
    assert r.returncode == 0, r.stdout + r.stderr
    control = (tmp_path / "calls.log.control").read_text().splitlines()
    assert [c.split("\t")[-1].split()[-1] for c in control] == ["oob", "race", "uninit"]  # none for synccheck
    assert "--kernel-name kns=xcorr" in control[1] and "--kernel-name" not in control[0] + control[2]
    race = [c for c in calls if c.startswith("racecheck")]
    assert race and all("--kernel-name kns=xcorr" in c.split("\t")[2] for c in race)
    assert not any("--kernel-name" in c for c in calls if not c.startswith("racecheck"))
    assert "SANITIZER_FILTER=--kernel-name kns=xcorr" in race[0]  # normalize-paths' processes get it too
    joined = (tmp_path / "out" / "sanitize-racecheck.log").read_text()
    assert joined.startswith("##### control: xcorr_sanitizer_probe\n========= Error: Race reported")
    assert "no planted defect for synccheck" in (tmp_path / "out" / "sanitize-synccheck.log").read_text()


def test_a_blind_tool_fails_the_run_and_runs_none_of_its_parts(fake, tmp_path):
    # (racecheck's jobs unsharded, of a build of block-per-pair alone: its clean run beside the blind
    # tool is the point, not what it runs)
    r, calls = fake(FAKE_BLIND="memcheck", SANITIZE_SHARDS="1", FAKE_BPP_ONLY="1")
    assert r.returncode == 1 and "memcheck: BLIND: the defect planted for it" in r.stdout, r.stdout
    assert not any(c.startswith("memcheck") for c in calls) and "racecheck: clean (" in r.stdout
    assert "memcheck" not in (tmp_path / "out" / "sanitize-ledger.txt").read_text()
    assert (tmp_path / "out" / "sanitize-memcheck.log").read_text().startswith("##### control")
    # a blind call keeps the ledger it was given (one that keyed nothing once returned it empty)
    ledger = tmp_path / "ledger.txt"
    ledger.write_text((tmp_path / "out" / "sanitize-ledger.txt").read_text())
    r, calls = fake(tools="racecheck", FAKE_BLIND="racecheck", SANITIZE_LEDGER=str(ledger), SANITIZE_SHARDS="1", FAKE_BPP_ONLY="1")
    assert r.returncode == 1 and not calls and "racecheck: BLIND" in r.stdout
    assert (tmp_path / "out" / "sanitize-ledger.txt").read_text() == ledger.read_text()


def test_racecheck_instruments_every_kernel_where_its_filter_hides_the_planted_race(fake):
    # (a process a job, SANITIZE_SHARDS=1, of a build of block-per-pair alone, FAKE_BPP_ONLY: the filter
    # is the same words in every process, sharded or not, whatever its variant)
    r, calls = fake(tools="racecheck", FAKE_BLIND="racecheck --tool racecheck --kernel-name", SANITIZE_SHARDS="1", FAKE_BPP_ONLY="1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the planted race went unreported under --kernel-name kns=xcorr: every kernel instrumented" in r.stdout
    assert calls and not any("--kernel-name" in c for c in calls)
    # and where it goes unreported either way, racecheck is blind
    r, calls = fake(tools="racecheck", FAKE_BLIND="racecheck", SANITIZE_SHARDS="1", FAKE_BPP_ONLY="1")
    assert r.returncode == 1 and "racecheck: BLIND" in r.stdout and not calls
    r, calls = fake(tools="racecheck", SANITIZE_RACECHECK_KERNELS="", SANITIZE_SHARDS="1", FAKE_BPP_ONLY="1")
    assert r.returncode == 0 and calls and not any("--kernel-name" in c for c in calls)


def test_a_build_without_the_probe_is_refused(fake, tmp_path):
    _, build = write_standins(tmp_path)
    (build / "xcorr_sanitizer_probe").unlink()
    r, calls = fake(tools="memcheck", build=build)
    assert r.returncode == 2 and "no xcorr_sanitizer_probe there" in r.stderr and not calls


def test_the_ledger_key_follows_the_build_and_the_sources(fake, tmp_path):
    """A ledger entry proves a process of these sources and this build: a variant added to the build
    proves nothing earlier of the processes that run every built variant (memcheck's parts); a shared
    source changed proves nothing earlier at all (test_an_edit_of_one_variant_asks_again_for_its_
    processes_alone)."""
    r, _ = fake(tools="memcheck")
    ledger = tmp_path / "ledger.txt"
    ledger.write_text((tmp_path / "out" / "sanitize-ledger.txt").read_text())
    r, calls = fake(tools="memcheck", SANITIZE_LEDGER=str(ledger))
    assert r.returncode == 0 and not calls  # the same build: all proven
    r, calls = fake(tools="memcheck", SANITIZE_LEDGER=str(ledger), FAKE_NORMALIZE_VARIANT="1")  # + register-tiled
    validator = [c for c in calls if "xcorr_validate" in c]
    # fft-fused's four parts name their variant and stay proven; the rest run, the normalization's new
    assert len(validator) == PARTS_PER_TOOL - 4 + 4 and "4 processes proven earlier" in r.stdout, r.stdout
    assert all("--variant fft-fused" not in c for c in validator)


def test_a_run_killed_from_outside_keeps_the_ledger_of_what_finished(fake, tmp_path):
    """The device tool kills a call at its limit: the ledger gets a line as each process ends clean,
    so the processes that finished before the kill stay proven."""
    import signal
    import time
    out = tmp_path / "out"
    p = subprocess.Popen([str(fake.script), str(fake.build), str(out), "memcheck"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={"PATH": f"{fake.bin}:/usr/bin:/bin", "FAKE_LOG": str(tmp_path / "calls.log"),
                              "FAKE_SLEEP": "--form n-to-m --shape 1x3001", "FAKE_SLEEP_S": "60"})
    try:
        progress = out / "sanitize-progress.txt"
        for _ in range(600):
            if progress.exists() and len(progress.read_text().splitlines()) == PARTS_PER_TOOL - 1:
                break
            time.sleep(0.1)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    entries = [line.split() for line in (out / "sanitize-ledger.txt").read_text().splitlines()
               if not line.startswith("#")]
    assert len(entries) == PARTS_PER_TOOL - 1 and "signals-n-to-m" not in {e[2] for e in entries}


def tree_run(standins, where, work, ledger, first=False, whole=False, **extra):
    """racecheck over the stand-in build at TREE_SHARDS by WHERE's scripts/sanitize, with LEDGER (none:
    FIRST), into WORK (its out, its FAKE_LOG), its new ledger then written to LEDGER; the validator's
    command lines (and, WHOLE, FAKE_LOG's whole lines after them)."""
    env = {"PATH": f"{standins[0]}:/usr/bin:/bin", "FAKE_LOG": str(work / "tree.log"),
           "SANITIZE_SHARDS": str(TREE_SHARDS)}
    (work / "tree.log").unlink(missing_ok=True)
    r = subprocess.run([str(where / "scripts" / "sanitize"), str(standins[1]), str(work / "o3"),
                        "racecheck"], capture_output=True, text=True, timeout=120,
                       env={**env, **({} if first else {"SANITIZE_LEDGER": str(ledger)}), **extra})
    assert r.returncode == 0, r.stdout + r.stderr
    ledger.write_text((work / "o3" / "sanitize-ledger.txt").read_text())
    log = work / "tree.log"
    lines = log.read_text().splitlines() if log.exists() else []
    calls = [c.split("\t")[-1] for c in lines]
    return (calls, lines) if whole else calls


@pytest.fixture(scope="module")
def tree_first(standins, tmp_path_factory):
    """() -> (calls, ledger, FAKE_LOG's lines) of the first run (no ledger) over a fresh write_tree, once
    a module: the three tests of the tree fixture each began with this same run (the same sources, the
    same build: the same keys, wherever the tree is; each test's own tree is a fresh write_tree, and its
    next run with this ledger proving every process, or asking again for exactly what its edit changed,
    is what it checks). Its ledger also proves the stand-ins' racecheck processes at TREE_SHARDS for the
    tests that run at those shards (tree_proofs_but), and its lines are the whole of such a run (the
    shares' test): the stand-ins' tree is another write_tree, of the same keys."""
    run = []

    def get():
        if not run:
            work = tmp_path_factory.mktemp("tree-first")
            ledger = work / "tree-ledger.txt"
            calls, lines = tree_run(standins, write_tree(work / "tree"), work, ledger, first=True, whole=True)
            run.append((calls, ledger.read_text(), lines))
        return run[0]
    return get


@pytest.fixture
def tree(tmp_path, standins, tree_first):
    """A copy of the scripts beside sources of their own, the variants registered in files of their
    own (write_tree), run on the stand-in build: what an edit of one file proves again. Racecheck at
    TREE_SHARDS shards a job (TREE_JOBS processes, not RACE_JOBS): the keys are what these tests
    look at, and each shard is still a process of a key of its own."""
    tree = write_tree(tmp_path / "tree")
    ledger = tmp_path / "tree-ledger.txt"

    def run(first=False, where=tree, **extra):
        """racecheck over the stand-in build with the last run's ledger (none: first, the module's
        first run over a tree as fresh as this one, tree_first); the validator's command lines."""
        if first and where == tree and not extra and not run.ran:  # (before any edit of this tree)
            calls, text, _ = tree_first()
            ledger.write_text(text)
            run.ran = True
            return list(calls)
        run.ran = True
        return tree_run(standins, where, tmp_path, ledger, first=first, **extra)
    run.tree, run.ran = tree, False
    return run


def test_an_edit_of_one_variant_asks_again_for_its_processes_alone(fake, tree):
    """Racecheck over every variant is most of a session's device time: a change to one variant's
    file proves again that variant's processes, not the other variants' (each names its variant)."""
    first = tree(first=True)
    assert len(first) == TREE_JOBS
    assert tree() == []  # nothing changed: everything proven
    f = tree.tree / "algorithms" / "30_block_per_pair.cu"
    f.write_text(f.read_text() + "// a changed line\n")
    again = tree()
    assert again and all("--variant block-per-pair" in c for c in again)
    assert sorted(again) == sorted(c for c in first if "--variant block-per-pair" in c)
    # a shared source: every process again
    (tree.tree / "algorithms" / "common" / "a.cu").write_text("// shared, changed\n")
    assert len(tree()) == TREE_JOBS
    assert tree() == []
    (tree.tree / "lib" / "a.cu").write_text("// lib, changed\n")
    assert len(tree()) == TREE_JOBS


def test_an_edit_of_the_script_asks_again_only_for_the_commands_it_changes(fake, tree):
    """The ledger's key is what a process ran, not the script's text: a comment or a change to one
    part's command leaves the other parts proven; a change to the rules that judge a process clean
    (ledger_rules) proves nothing earlier; the revision's label is not a setting."""
    assert len(tree(first=True)) == TREE_JOBS
    script = tree.tree / "scripts" / "sanitize"
    text = script.read_text()
    script.write_text(text.replace("set -uo pipefail", "# a comment\nset -uo pipefail", 1))
    assert tree(XCORR_GIT_REVISION="abc1234") == []
    elsewhere = tree.tree.parent / "elsewhere"  # another checkout's path: the same processes
    shutil.copytree(tree.tree, elsewhere)
    assert tree(where=elsewhere) == []
    assert "XCORR_FFT_MAX_CHUNK=2 sanitize_part \"$tool\" fft-chunked" in text
    script.write_text(text.replace("XCORR_FFT_MAX_CHUNK=2 sanitize_part \"$tool\" fft-chunked",
                                   "XCORR_FFT_MAX_CHUNK=3 sanitize_part \"$tool\" fft-chunked"))
    again = tree()
    assert again and all("--shape 37x53,29x41" in c and "--variant fft-fused" in c and "--windows" not in c
                         for c in again) and len(again) == TREE_SHARDS  # fft-chunked's shards alone
    assert tree(XCORR_FFT_MERGE_ROWS="1") != []  # a setting of the environment is part of what ran
    script.write_text(text.replace("ledger_rules=2", "ledger_rules=3"))
    assert len(tree()) == TREE_JOBS


def test_the_ledger_keeps_the_proofs_a_run_does_not_look_at_and_drops_the_stale_ones(fake, tmp_path):
    """A call of one tool keeps the other tool's proofs (a ledger carries the whole run over calls);
    a line of a process that this run keys otherwise (its sources or command changed) is dropped."""
    _, _, both = fake.clean()  # (which exited 0)
    ledger = tmp_path / "ledger.txt"
    race = [line for line in both.splitlines() if " racecheck " in line]
    assert race
    stale = "0123456789abcdef memcheck signals-n-to-m none\n"  # the same process under another key
    ledger.write_text(both + stale)
    r, calls = fake(tools="memcheck", SANITIZE_LEDGER=str(ledger))
    after = (tmp_path / "out" / "sanitize-ledger.txt").read_text()
    assert r.returncode == 0 and not calls and f"{PARTS_PER_TOOL} of this run's {PARTS_PER_TOOL} processes proven clean, 0 left" in r.stdout
    assert all(line in after.splitlines() for line in race) and stale not in after
    assert len(after.splitlines()) == len(both.splitlines())  # once each


def test_a_change_to_the_verdict_proves_nothing_earlier(fake, tree):
    """A proof is only as good as the rules that judged it: verdict() and the patterns are in every key."""
    assert len(tree(first=True)) == TREE_JOBS
    script = tree.tree / "scripts" / "sanitize"
    text = script.read_text()
    looser = text.replace('if [ "$rc" != 0 ] || ! grep -qE "$zero" "$f"; then echo bad; return; fi',
                          'if ! grep -qE "$zero" "$f"; then echo bad; return; fi')
    assert looser != text
    script.write_text(looser)
    assert len(tree()) == TREE_JOBS
