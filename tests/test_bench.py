"""The benchmark binary: registration from the registry (CPU), bad cases (CPU), and a smoke run
whose JSON has what the experiment scripts parse (GPU)."""
import json
import re

import pytest

from conftest import binary, run

NAME = re.compile(r"^(?P<variant>[^/]+)/(?P<form>[^/]+)/hL:\d+/wL:\d+/hR:\d+/wR:\d+/nL:\d+/nR:\d+(/[\w+-]+:[\w.+-]+)*$")


def test_list_registers_every_variant_and_form(registry):
    r = run([binary("xcorr_bench"), "--benchmark_list_tests"])
    assert r.returncode == 0, r.stderr
    names = r.stdout.split()
    for v in registry:
        for form in v["forms"]:
            assert any(n.startswith(f"{v['name']}/{form}/") for n in names), (v["name"], form)
    for n in names:
        base = n.split("/min_time:")[0].removesuffix("/manual_time")
        assert NAME.match(base), n


@pytest.mark.parametrize("case,needle", [
    ("variant=nope form=one-to-one size=8", "unknown algorithm"),
    ("variant=overlap-wise form=sideways size=8", "unknown form"),
    ("variant=overlap-wise form=one-to-one size=8 warps=5", "not available"),
    ("variant=overlap-wise form=one-to-one size=0", "empty"),
    ("variant=overlap-wise form=n-to-mn size=8 nL=3 nR=4", "multiple"),
    ("variant=overlap-wise form=one-to-one size=eight", "not an integer"),
])
def test_bad_case(case, needle, overlap_wise):
    r = run([binary("xcorr_bench"), "--case", case, "--benchmark_list_tests"])
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_help_lists_its_own_options_then_google_benchmarks():
    r = run([binary("xcorr_bench"), "--help"])
    assert r.returncode == 0, r.stderr
    ours = [r.stdout.find(o) for o in ["--case", "--cases", "--min-time", "--batch", "--cold", "--launch-floor",
                                       "--seed"]]
    assert -1 not in ours, r.stdout
    assert max(ours) < r.stdout.find("--benchmark_filter"), r.stdout


def test_smoke_json(gpu, tmp_path, overlap_wise):
    out = tmp_path / "b.json"
    r = run([binary("xcorr_bench"), "--case", "variant=overlap-wise form=one-to-many size=17 nL=1 nR=3",
             "--case", "variant=overlap-wise form=n-to-m hL=9 wL=20 hR=5 wR=7 nL=2 nR=3 warps=8",
             "--min-time", "0.002", "--benchmark_repetitions=2", f"--benchmark_out={out}",
             "--benchmark_out_format=json"])
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    ctx = data["context"]
    assert ctx["xcorr_gpu_name"] and ctx["xcorr_git_revision"]
    reps = [b for b in data["benchmarks"] if b["run_type"] == "iteration"]
    assert len(reps) == 4 and not any(b.get("error_occurred") for b in reps)
    for b in reps:
        assert NAME.match(b["run_name"].split("/min_time:")[0].removesuffix("/manual_time"))
        assert b["time_unit"] == "us" and b["real_time"] > 0
        assert b["batch"] >= 1 and b["FLOPS"] > 0
        assert b["label"].startswith("family=baseline;timed=kernel")
    first = reps[0]
    assert (first["hL"], first["nR"], first["fmas"]) == (17, 3, 3 * 17 ** 4)
    # FLOPS is 2 * fmas / time per call.
    assert first["FLOPS"] == pytest.approx(2 * first["fmas"] / (first["real_time"] * 1e-6), rel=0.05)
