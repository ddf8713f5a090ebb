"""scripts/dev/probe-variant: a variant file at another revision, built beside today's under its own
names, in a scratch clone of this repository (no build: its output is checked as text; the device
calls of notes/53_fft_large.md compiled and measured such probes)."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def probe(cwd, *args):
    return subprocess.run([sys.executable, str(cwd / "scripts" / "dev" / "probe-variant"), *args],
                          capture_output=True, text=True)


def test_a_probe_of_the_revision_before_a_header_change_renames_both_and_is_removed_again(tmp_path):
    clone = tmp_path / "tree"
    git(tmp_path, "clone", "-q", str(ROOT), str(clone))
    # The working tree's scripts/dev/probe-variant (this change's, committed or not) into the clone.
    (clone / "scripts" / "dev" / "probe-variant").write_text((ROOT / "scripts" / "dev" / "probe-variant").read_text())
    header = clone / "algorithms" / "common" / "block_fft.cuh"
    header.write_text(header.read_text() + "// changed after the probed revision\n")
    git(clone, "commit", "-q", "-am", "a header changed")
    before = git(clone, "status", "--porcelain", "--untracked-files=all")
    r = probe(clone, "HEAD~1", "53_fft_large.cu", "old")
    assert r.returncode == 0, r.stderr
    made = sorted(p.name for p in (clone / "algorithms").glob("5?_probe_fft_large_old.cu"))
    assert len(made) == 1, made
    src = (clone / "algorithms" / made[0]).read_text()
    assert f"algorithms/{made[0]}: variant fft-large-old" in r.stdout
    assert '    .name = "fft-large-old",' in src and '.name = "fft-large",' not in src
    assert src.count(".folds_max_over_rights = true,") == 1  # the probe folds the maximum as fft-large does
    assert re.search(r"^namespace xcorr::fft_large_old \{\nusing namespace xcorr::probe_old;", src, re.M)
    # The header that differs is the old one, renamed; one that does not stays shared.
    assert '#include "common/probe_old_block_fft.cuh"' in src and '#include "common/cp_async.cuh"' in src
    old = (clone / "algorithms" / "common" / "probe_old_block_fft.cuh").read_text()
    assert "namespace xcorr::probe_old {" in old and "changed after the probed revision" not in old
    assert f"  '53_fft_large.cu',\n  '{made[0]}',\n" in (clone / "algorithms" / "meson.build").read_text()
    # A tag or file it cannot take: a clear refusal, nothing written.
    for bad in (["HEAD", "53_fft_large.cu", "Old-1"], ["HEAD", "53_nothing.cu", "x"], ["HEAD", "53_fft_large.cu"]):
        r = probe(clone, *bad)
        assert r.returncode == 2 and r.stderr.startswith("probe-variant: "), (bad, r.stderr)
    r = probe(clone, "--remove")
    assert r.returncode == 0 and r.stdout.count("removed ") == 2, r.stdout
    assert git(clone, "status", "--porcelain", "--untracked-files=all") == before
