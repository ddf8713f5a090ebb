"""examples/template_matching_2dtm.py as a user runs it (--small, the float64 CPU reference): every
planted copy found at its position and angle and nothing else; a search that cannot find them (half
the angles) fails with exit status 1 and names the copies; scripts/slurm-2dtm writes a job array of
one task per micrograph, and task i's body processes file i. CPU only (the GPU run is the last test,
on a GPU)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, run

EXAMPLE = ROOT / "examples" / "template_matching_2dtm.py"
SLURM = ROOT / "scripts" / "slurm-2dtm"
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+) \|\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)$", re.M)


def example(*args, **kw):
    return run([sys.executable, str(EXAMPLE), *map(str, args)], timeout=300, **kw)


def planted_rows(stdout):
    """(planted y, x, angle, found y, x, angle, z) of each row of the table whose copy was found."""
    return [(int(a), int(b), float(c), int(d), int(e), float(f), float(g)) for a, b, c, d, e, f, g in ROW.findall(stdout)]


def test_small_finds_every_copy_at_its_position_and_angle():
    r = example("--small", "--reference")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "xcorr: reference" in r.stdout
    assert "copies found at their position and angle: 100%; false detections: 0" in r.stdout, r.stdout
    rows = planted_rows(r.stdout)
    threshold = float(re.search(r"threshold z > ([\d.]+)", r.stdout).group(1))
    assert len(rows) == 3 and "missed" not in r.stdout and "false" not in r.stdout.split("threshold")[1].split("copies")[0]
    for py, px, pa, fy, fx, fa, z in rows:
        assert max(abs(py - fy), abs(px - fx)) <= 2 and abs((pa - fa + 180) % 360 - 180) <= 5 and z > threshold
    assert re.search(r"\d+ templates/s", r.stdout)


def test_a_search_that_misses_copies_fails_and_names_them():
    """Half the circle searched (an angle set wrong for an asymmetric particle): the copies planted at
    180-360 degrees are not found, and the example says so with exit status 1."""
    r = example("--small", "--reference", "--angles", "0:180:5")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "missed" in r.stdout and "copies found at their position and angle: 100%" not in r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("template_matching_2dtm: the copy at (") and "was not found" in last, r.stderr


def test_too_faint_copies_fail():
    r = example("--small", "--reference", "--amplitude", "3")
    assert r.returncode == 1 and "was not found" in r.stderr, r.stdout + r.stderr


def usage_error(r, *needles):
    """argparse's refusal: exit 2, its usage, then one error line holding every needle."""
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.startswith("usage: "), r.stderr
    assert all(n in r.stderr.strip().splitlines()[-1] for n in needles), r.stderr


@pytest.mark.parametrize("args, needle", [(["--angles", "0:360"], "--angles 0:360: not START:STOP:STEP"),
                                          (["--micrograph", "/nonexistent.npy"], "--micrograph /nonexistent.npy: no such file")])
def test_bad_options_are_one_line(args, needle):
    usage_error(example("--small", *args), needle)


def test_slurm_array_has_a_task_per_file_and_task_i_processes_file_i(tmp_path):
    files = []
    for seed in range(3):
        f = tmp_path / f"mic-{seed}.npy"
        r = example("--small", "--seed", seed, "--save-micrograph", f)
        assert r.returncode == 0 and f.is_file(), r.stderr
        files.append((f, [tuple(map(float, t)) for t in re.findall(r"\((\d+), (\d+), ([\d.]+)\)", r.stdout)]))
    d = tmp_path / "run"
    r = run([sys.executable, str(SLURM), *(str(f) for f, _ in files), "--dir", str(d), "--max-running", "2",
             "--python", sys.executable, "--no-submit", "--", "--small", "--reference"])
    assert r.returncode == 0, r.stderr
    script = (d / "2dtm.sbatch").read_text()
    assert "#SBATCH --array=0-2%2\n" in script and "#SBATCH --gres=gpu:1\n" in script
    assert f"{EXAMPLE} --micrograph \"$micrograph\" --out \"$out\" --small --reference" in script
    assert (d / "micrographs.txt").read_text().splitlines() == [str(f) for f, _ in files]
    assert f"sbatch --parsable {d / '2dtm.sbatch'}" in r.stdout
    # Task 1's body (the #SBATCH lines are comments to bash): file 1 processed, no other.
    task = subprocess.run(["bash", str(d / "2dtm.sbatch")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SLURM_ARRAY_TASK_ID": "1"})
    assert task.returncode == 0, task.stdout + task.stderr
    assert sorted(p.name for p in (d / "results").iterdir()) == ["mic-1.npz"]
    result = np.load(d / "results" / "mic-1.npz")
    assert str(result["micrograph"]) == str(files[1][0])
    found = sorted(zip(result["y"].tolist(), result["x"].tolist(), result["angle"].tolist()))
    planted = sorted(files[1][1])
    assert len(found) == len(planted) == 3
    for (fy, fx, fa), (py, px, pa) in zip(found, planted):
        assert max(abs(fy - py), abs(fx - px)) <= 2 and abs((fa - pa + 180) % 360 - 180) <= 5
    assert result["scaled_mip"].shape == (96, 96) and (result["z"] > result["threshold"]).all()
    again = subprocess.run(["bash", str(d / "2dtm.sbatch")], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "SLURM_ARRAY_TASK_ID": "1"})
    assert again.returncode == 0 and "nothing to do" in again.stdout  # a resubmission skips finished files


def test_slurm_submits_with_sbatch_and_refuses_bad_input(tmp_path):
    f = tmp_path / "a.npy"
    np.save(f, np.zeros((8, 8), np.float32))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args\necho 4242\n")
    (fake / "sbatch").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    r = run([sys.executable, str(SLURM), str(f), "--dir", str(tmp_path / "run"), "--gres", ""], env=env)
    assert r.returncode == 0 and "submitted job 4242" in r.stdout, r.stderr
    assert (tmp_path / "args").read_text().split() == ["--parsable", str(tmp_path / "run" / "2dtm.sbatch")]
    assert "--gres" not in (tmp_path / "run" / "2dtm.sbatch").read_text()
    usage_error(run([sys.executable, str(SLURM), str(tmp_path / "b.npy"), "--dir", str(tmp_path / "r2")]),
                "no such file", "b.npy")
    (tmp_path / "x").mkdir()
    np.save(tmp_path / "x" / "a.npy", np.zeros((8, 8)))
    usage_error(run([sys.executable, str(SLURM), str(f), str(tmp_path / "x" / "a.npy"), "--dir", str(tmp_path / "r3")]),
                "two micrographs of one name", "file): a")
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r3").exists()


@pytest.mark.gpu
def test_small_on_the_gpu(gpu):
    """The same search as a user runs it on a GPU (algorithm auto, float32): the same detections."""
    r = example("--small")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "xcorr: reference" not in r.stdout
    assert "copies found at their position and angle: 100%; false detections: 0" in r.stdout, r.stdout
