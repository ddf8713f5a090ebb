"""scripts/tm-scaling: 2-D template matching on one GPU and on all of a host's.

CPU (CI): where the script looks for its planted template is where the float64 reference finds it
(odd and even template sides; a place one pixel off is not), its comparison of a k-GPU answer with
one GPU's catches a changed value, index or sum, its argument errors exit 2 before any GPU work,
and without a GPU it exits 3 with the reason. GPU (skipped here with the reason): a small run on
every GPU of the machine writes one run per GPU count, each answer checked by the script itself."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import suite_helpers
from in_process import in_process_script

try:
    import xcorr
except ImportError as e:
    if os.environ.get("XCORR_NO_PYTHON_PACKAGE"):
        pytest.skip(f"the package xcorr is not installed (XCORR_NO_PYTHON_PACKAGE): {e}", allow_module_level=True)
    raise


@pytest.fixture(scope="module")
def tm():
    return suite_helpers.load_script("tm-scaling")


@pytest.mark.parametrize("side", [7, 8])
def test_the_planted_template_is_where_the_reference_finds_it(tm, side):
    base, templates = tm.noise(37, side, 5, seed=3)
    image, want = tm.plant(base, templates, 4)
    assert want[0] == 4 and not np.array_equal(image, base)
    ref = xcorr.max_over_rights(image, templates, mode="same", stats=True, algorithm="reference")
    assert ref.value.shape == image.shape
    assert tm.found(ref, want) is None
    j, y, x = want
    assert "not the planted" in tm.found(ref, (j, y + 1, x))  # a convention one pixel off is caught
    assert "not the planted" in tm.found(ref, (j, y, x - 1))
    assert "template 4 at" in tm.found(ref, (3, y, x))  # and another template's number


def test_a_k_gpu_answer_must_be_one_gpus(tm):
    rng = np.random.default_rng(1)
    one = xcorr.MaxOverRightsStats(rng.standard_normal((6, 5)).astype(np.float32), rng.integers(0, 9, (6, 5), dtype=np.int32),
                                   rng.standard_normal((6, 5)) * 100, rng.random((6, 5)) * 100)
    same = xcorr.MaxOverRightsStats(*(a.copy() for a in one))
    assert tm.differs(same, one) is None
    same.sum[2, 3] += 1e-12 * 100  # float64 summation order: within
    assert tm.differs(same, one) is None
    for field, change, needle in (("value", lambda a: a.__setitem__((0, 0), a[0, 0] + 1e-6), "values"),
                                  ("index", lambda a: a.__setitem__((5, 4), a[5, 4] + 1), "indices"),
                                  ("sumsq", lambda a: a.__setitem__((1, 1), a[1, 1] * (1 + 1e-6)), "sumsq")):
        other = xcorr.MaxOverRightsStats(*(a.copy() for a in one))
        change(getattr(other, field))
        assert needle in tm.differs(other, one), field


@pytest.mark.parametrize("args, needle", [(["--counts", "0"], "every count must be at least 1"),
                                          (["--counts", "10,x"], "expected template counts"),
                                          (["--repeat", "0"], "--repeat must be at least 1"),
                                          (["--image", "64", "--template", "65"], "--template must be from 1"),
                                          (["--gpus", "0,nosuch"], "")])
def test_bad_arguments_exit_2_before_any_gpu_work(args, needle):
    r = in_process_script("tm-scaling", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "tm-scaling: error:" in r.stderr and needle in r.stderr, r.stderr


def test_without_a_gpu_it_exits_3_with_the_reason(gpu_info, tmp_path):
    if gpu_info[0] is not None:
        pytest.skip("this machine has a GPU: test_gpu_a_small_run_checks_and_writes_a_run_per_gpu_count runs instead")
    out = tmp_path / "tm.json"
    r = subprocess.run([sys.executable, str(suite_helpers.ROOT / "scripts" / "tm-scaling"), "--image", "64", "--template",
                        "8", "--counts", "4", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3 and r.stderr.startswith("tm-scaling: no GPU: "), (r.stdout, r.stderr)
    assert not out.exists()


def test_gpu_a_small_run_checks_and_writes_a_run_per_gpu_count(gpu, tmp_path):
    out = tmp_path / "tm.json"
    r = in_process_script("tm-scaling", "--image", "300", "--template", "31", "--counts", "7,40", "--repeat", "1",
                          "--out", out)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    gpus = len(xcorr._xcorr.parse_devices("all"))
    assert [c["templates"] for c in data["counts"]] == [7, 40]
    for c in data["counts"]:
        assert [len(run["devices"]) for run in c["runs"]] == list(range(1, gpus + 1))
        for run in c["runs"]:
            assert run["templates_per_s"] == pytest.approx(c["templates"] / run["seconds"])
        assert c["runs"][0]["speedup"] == 1.0
    assert data["image"] == [300, 300] and data["template"] == [31, 31] and data["git_revision"]
    assert data["nvidia_smi"].get("gpus") and data["gpu"] == xcorr.gpu_info()["name"]
