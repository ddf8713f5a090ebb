"""scripts/batch-scaling without a GPU: its bookkeeping (speed-ups against the one-GPU run, the
reused out= array and the fresh call's overhead over it, the pair count of 4-D outputs, the
first-touch timing, the check against the one-GPU result) through a
stand-in for the package whose "GPUs" compute the float64 reference; the real runs are on the device."""
import json
import re
import sys
import types

import numpy as np
import pytest

import suite_helpers
from xcorr_np import correlate


def load_script():
    return suite_helpers.load_script("batch-scaling")


def fake_xcorr(calls, wrong_on=None):
    """A package whose correlate2d computes the reference full output (windows ignored: the script
    passes the same one every time), into out= when given; device lists are recorded, and the run on
    `wrong_on` devices returns a perturbed result."""
    m = types.ModuleType("xcorr")
    m.NoGPUError = RuntimeError
    m.gpu_info = lambda: {"name": "Fake GPU"}
    m._xcorr = types.SimpleNamespace(parse_devices=lambda text: [0, 1, 2])

    def correlate2d(left, right, form, devices, chunk=None, out=None, **window):
        calls.append((tuple(devices), out is not None))
        res = correlate(form, left.astype(np.float64), right.astype(np.float64)).astype(np.float32)
        if wrong_on is not None and len(devices) == wrong_on:
            res = res + 1.0
        if out is None:
            return res
        out[...] = res
        return out
    m.correlate2d = correlate2d
    return m


def test_every_gpu_count_is_timed_fresh_and_into_a_reused_array(monkeypatch, tmp_path, capsys):
    calls = []
    monkeypatch.setitem(sys.modules, "xcorr", fake_xcorr(calls))
    out = tmp_path / "s.json"
    assert load_script().main(["--no-ceilings", "--left", "2:5x6", "--right", "3:4x3", "--max-shift", "-1", "--repeat", "2",
                               "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fresh 0.00 GB array written once (one thread)" in printed
    assert json.loads(printed[printed.index("{"):]) == json.loads(out.read_text())  # the JSON printed is the file's
    result = json.loads(out.read_text())
    runs = result["runs"]
    assert [r["devices"] for r in runs] == [[0], [0, 1], [0, 1, 2]]
    for r in runs:
        assert r["pairs_per_second"] == 6 / r["seconds"]  # n-to-m 2 x 3: six output matrices, not one call
        assert r["pairs_per_second_out_reused"] == 6 / r["seconds_out_reused"]
        assert r["fresh_overhead_seconds"] == r["seconds"] - r["seconds_out_reused"]
        assert r["difference_to_one_gpu"] == 0.0
        assert r["seconds"] > 0 and r["seconds_out_reused"] > 0
        assert r["output_gb"] == 6 * 8 * 8 * 4 / 1e9  # full outputs of 5x6 and 4x3: 8 x 8
    assert result["first_touch_seconds"] > 0
    assert runs[0]["speedup"] == runs[0]["speedup_out_reused"] == 1.0
    assert runs[2]["speedup_out_reused"] == runs[0]["seconds_out_reused"] / runs[2]["seconds_out_reused"]
    # per GPU count: a warm-up and --repeat calls each way, fresh arrays first
    for k in (1, 2, 3):
        mine = [o for d, o in calls if len(d) == k]
        assert mine == [False] * 3 + [True] * 3


def test_a_split_that_differs_from_one_gpu_fails(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "xcorr", fake_xcorr([], wrong_on=2))
    assert load_script().main(["--no-ceilings", "--left", "2:5x6", "--right", "3:4x3", "--repeat", "1"]) == 1
    assert "differs from the one-GPU result" in capsys.readouterr().err


def test_each_gpu_counts_best_call_records_its_phases(monkeypatch, tmp_path, capsys):
    """The package's per-device phases of the fastest timed call (xcorr._api.last_batch), with the
    split each device ran, go into the JSON and the printout: the call numbers make "which call"
    checkable."""
    calls = []
    m = fake_xcorr(calls)
    m._api = types.SimpleNamespace(last_batch=None)
    inner = m.correlate2d

    def correlate2d(left, right, form, devices, chunk=None, out=None, **window):
        res = inner(left, right, form, devices, chunk=chunk, out=out, **window)
        n = len(calls)
        m._api.last_batch = {"pieces": [], "seconds": [{"device": d, "setup": n, "pipeline": 2.0 * n,
                                                        "teardown": 0.5, "split": "blocks"} for d in devices]}
        return res
    m.correlate2d = correlate2d
    monkeypatch.setitem(sys.modules, "xcorr", m)
    out = tmp_path / "s.json"
    assert load_script().main(["--no-ceilings", "--left", "2:5x6", "--right", "3:4x3", "--repeat", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for r in json.loads(out.read_text())["runs"]:
        for key in ("phases_fresh", "phases_out_reused"):
            ph = r[key]
            assert [d["device"] for d in ph] == r["devices"]
            # one of the two timed calls of that kind (the warm-up is never the one recorded)
            k = len(r["devices"])
            first = [i + 1 for i, (d, o) in enumerate(calls) if len(d) == k and o == (key == "phases_out_reused")]
            assert ph[0]["setup"] in first[1:] and ph[0]["pipeline"] == 2.0 * ph[0]["setup"]
    assert re.search(r"out= reused GPU 2: setup +\d+\.\d ms, pipeline +\d+\.\d ms, teardown +500\.0 ms, split blocks",
                     printed)
    assert all(d["split"] == "blocks" for r in json.loads(out.read_text())["runs"] for d in r["phases_fresh"])


def test_a_package_with_empty_pinned_is_also_timed_into_a_page_locked_array(monkeypatch, tmp_path, capsys):
    """Where the package has empty_pinned, each GPU count is also timed into one page-locked out=
    (allocated once, reused): its seconds, speed-up against one GPU and pair rate are recorded, and
    a wrong result into it fails the run like any other."""
    calls, allocated = [], []
    m = fake_xcorr(calls)

    def empty_pinned(shape):
        allocated.append(shape)
        return np.full(shape, np.nan, np.float32)
    m.empty_pinned = empty_pinned
    monkeypatch.setitem(sys.modules, "xcorr", m)
    out = tmp_path / "s.json"
    assert load_script().main(["--no-ceilings", "--left", "2:5x6", "--right", "3:4x3", "--max-shift", "-1", "--repeat", "2",
                               "--out", str(out)]) == 0
    assert "out= page-locked, reused:" in capsys.readouterr().out
    runs = json.loads(out.read_text())["runs"]
    assert len(allocated) == 1 and tuple(allocated[0]) == (6, 8, 8)  # the result's shape, once
    for r in runs:
        assert r["seconds_out_pinned"] > 0 and r["pairs_per_second_out_pinned"] == 6 / r["seconds_out_pinned"]
    assert runs[0]["speedup_out_pinned"] == 1.0
    assert runs[1]["speedup_out_pinned"] == runs[0]["seconds_out_pinned"] / runs[1]["seconds_out_pinned"]
    for k in (1, 2, 3):  # fresh, reused, page-locked: a warm-up and --repeat calls each
        assert [o for d, o in calls if len(d) == k] == [False] * 3 + [True] * 6

    # the page-locked array written wrong by the two-GPU run: that run fails
    calls.clear()
    inner = m.correlate2d

    def wrong_into_pinned(left, right, form, devices, chunk=None, out=None, **window):
        res = inner(left, right, form, devices, chunk=chunk, out=out, **window)
        if pinned_seen and out is pinned_seen[0] and len(devices) == 2:
            out += 1.0
        return res
    pinned_seen = []
    m.empty_pinned = lambda shape: pinned_seen.append(empty_pinned(shape)) or pinned_seen[-1]
    m.correlate2d = wrong_into_pinned
    assert load_script().main(["--no-ceilings", "--left", "2:5x6", "--right", "3:4x3", "--max-shift", "-1", "--repeat", "1"]) == 1
    assert "differs from the one-GPU result" in capsys.readouterr().err


def test_batch_scaling_figure_is_drawn_the_same_from_the_committed_json(tmp_path):
    """The committed two-H200 JSON holds every row with its floor, and its figure is drawn
    from it without a GPU, byte-identical twice (scripts/reproduce redraws it on every run)."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    src = root / "results" / "nvidia-h200" / "multi-gpu" / "batch_scaling.json"
    r = json.loads(src.read_text())
    assert [len(run["devices"]) for run in r["runs"]] == [1, 2]
    for run in r["runs"]:
        for row, floor in (("seconds", "floor_fresh"), ("seconds_out_reused", "floor_out_reused"),
                           ("seconds_out_pinned", "floor_out_pinned")):
            assert 0 < run[floor] <= run[row] * 1.05, (run["devices"], row)  # a floor, not above the row
    kinds = {c["kind"] for c in r["ceilings"]["copies"]}
    assert {"pinned", "pageable", "pageable_fresh", "host_copy", "staged", "staged_fresh"} <= kinds
    png = tmp_path / "b.png"
    digests = []
    for _ in range(2):
        out = subprocess.run([sys.executable, str(root / "scripts" / "batch-scaling"), "--plot", str(src),
                              "--png", str(png)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        digests.append(png.read_bytes())
    assert digests[0] == digests[1] and digests[0][:8] == b"\x89PNG\r\n\x1a\n"


def test_copy_ceiling_host_copies_cover_the_array_in_parts():
    """xcsuite/copy_ceiling's host jobs (the probe's memcpy on T threads) copy every element exactly
    once, whatever T against the size (the GPU side of the probe runs on the GPU machine only)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import numpy as np
    from xcsuite import copy_ceiling
    src = np.arange(37, dtype=np.float32)
    for t in (1, 2, 5, 16, 64):
        dst = np.full_like(src, np.nan)
        jobs = copy_ceiling._host_copies(dst, src, t)
        assert len(jobs) == min(t, src.size)
        for job in jobs:
            job()
        assert np.array_equal(dst, src), t


@pytest.mark.parametrize("share, rows, piece", [(4096, None, 1000), (4096, None, 4096), (64 * 4 * 33, 64, 1000),
                                                 (32 * 4 * 101, 32, 4 * 32 * 7), (12 * 4 * 5, 12, 1 << 20)])
def test_copy_ceiling_pieces_move_each_byte_of_the_share_once(share, rows, piece):
    """pieces_of's copies (cudaMemcpy and cudaMemcpy2D emulated on bytes) take each byte of the
    device's share once and put it where the batch's layout has it: contiguous pieces in order, or
    blocks whose device side holds a run of every row's columns (a block piece's output) landing in
    rows at the pitch."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from xcsuite import copy_ceiling
    pieces = copy_ceiling.pieces_of(share, rows, piece)
    # The device holds each block's output contiguously; what the host must end up with is the
    # share's rows x pitch layout, so build the device side from the wanted host image.
    host_want = np.arange(share, dtype=np.int64)
    device = np.full(share, -1, np.int64)
    for dst, pitch, src, width, height in pieces:
        for r in range(height):
            device[src + r * width: src + (r + 1) * width] = host_want[dst + r * pitch: dst + r * pitch + width]
    host = np.full(share, -1, np.int64)
    written = np.zeros(share, np.int64)
    for dst, pitch, src, width, height in pieces:
        assert width > 0 and width % 4 == 0 and (height == 1 or width <= pitch)
        for r in range(height):
            host[dst + r * pitch: dst + r * pitch + width] = device[src + r * width: src + (r + 1) * width]
            written[dst + r * pitch: dst + r * pitch + width] += 1
    covered = share if rows is None else rows * (share // rows // 4 * 4)
    assert (written[:covered] == 1).all() and (written[covered:] == 0).all()
    assert np.array_equal(host[:covered], host_want[:covered])
    srcs = sorted((src, width * height) for _, _, src, width, height in pieces)  # the device side: back to back
    assert srcs[0][0] == 0 and all(a + n == b for (a, n), (b, _) in zip(srcs, srcs[1:]))
    assert len(pieces) == max(1, -(-covered // piece))


def test_the_compute_floor_shares_are_the_batch_s_and_unmeasured_says_why(monkeypatch, tmp_path):
    """compute_seconds times each GPU's share alone: n-to-m's lefts, one-to-many's rights, in
    contiguous runs covering the stack once; where it cannot be measured (no PyTorch, this fake
    package) the row says why instead of a number."""
    bs = load_script()
    assert bs.share_bounds("n-to-m", 64, 4096, 2) == [("lefts", 0, 32), ("lefts", 32, 64)]
    assert bs.share_bounds("one-to-many", 1, 7, 3) == [("rights", 0, 2), ("rights", 2, 4), ("rights", 4, 7)]
    assert bs.share_bounds("n-to-mn", 4, 8, 2) is None
    for n, k in ((5, 3), (64, 2), (3, 3), (7, 1)):
        runs = bs.share_bounds("n-to-m", n, 9, k)
        assert runs[0][1] == 0 and runs[-1][2] == n and all(a[2] == b[1] for a, b in zip(runs, runs[1:]))
        assert max(b - a for _, a, b in runs) - min(b - a for _, a, b in runs) <= 1
    monkeypatch.setitem(sys.modules, "xcorr", fake_xcorr([]))
    out = tmp_path / "s.json"
    assert bs.main(["--no-ceilings", "--left", "2:5x6", "--right", "3:4x3", "--repeat", "1", "--out", str(out)]) == 0
    for run in json.loads(out.read_text())["runs"]:
        assert run["compute_seconds"] is None and run["compute_not_measured"] in (
            "no PyTorch here to hold the device arrays", "this package has no Plan")


def test_copy_ceiling_device_jobs_issue_the_pieces_copies():
    """_device_copies on a recording runtime: without piece_bytes one cudaMemcpy of each GPU's whole
    share to its place; with pieces, pieces_of's copies in order (1-D, or 2-D for blocks)."""
    import ctypes
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from xcsuite import copy_ceiling

    class Runtime:
        def __init__(self):
            self.calls = []

        def cudaSetDevice(self, d):
            self.calls.append(("device", d))
            return 0

        def cudaMemcpy(self, dst, src, n, kind):
            self.calls.append(("1d", dst.value or 0, src.value, n))
            return 0

        def cudaMemcpy2D(self, dst, dpitch, src, spitch, width, height, kind):
            self.calls.append(("2d", dst.value or 0, dpitch, src.value, width, height))
            return 0

    bufs = [ctypes.c_void_p(1 << 20), ctypes.c_void_p(1 << 21)]
    rt = Runtime()
    for job in copy_ceiling._device_copies(rt, [3, 5], bufs, 4096, 800, 2):
        job()
    assert rt.calls == [("device", 3), ("1d", 4096, 1 << 20, 800), ("device", 5), ("1d", 4896, 1 << 21, 800)]
    rt = Runtime()
    copy_ceiling._device_copies(rt, [3], bufs, 0, 800, 1, None, 300)[0]()
    assert rt.calls[1:] == [("1d", 0, 1 << 20, 300), ("1d", 300, (1 << 20) + 300, 300), ("1d", 600, (1 << 20) + 600, 200)]
    rt = Runtime()
    copy_ceiling._device_copies(rt, [3], bufs, 0, 800, 1, 4, 100)[0]()
    want = [("2d", d, pitch, (1 << 20) + src, w, h) for d, pitch, src, w, h in copy_ceiling.pieces_of(800, 4, 100)]
    assert rt.calls[1:] == want and len(want) == 8 and all(c[2] == 200 and c[5] == 4 for c in want)


@pytest.mark.parametrize("content, needle", [("not json", "not a batch_scaling JSON"),
                                             ('{"cases": {}}', "not a batch_scaling JSON"),
                                             ('{"runs": []}', "not a batch_scaling JSON"),
                                             (None, "No such file")])
def test_plot_refuses_a_file_that_is_no_batch_scaling_json(content, needle, tmp_path):
    """--plot of another JSON (or none) ended in a traceback; it writes no figure."""
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    src, png = tmp_path / "b.json", tmp_path / "b.png"
    if content is not None:
        src.write_text(content)
    r = subprocess.run([sys.executable, str(root / "scripts" / "batch-scaling"), "--plot", str(src), "--png",
                        str(png)], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"batch-scaling: --plot {src}: ") and needle in lines[0], lines
    assert not png.exists()


@pytest.mark.parametrize("run, needle", [({"seconds_out_reused": None}, "run 1's seconds_out_reused is null, not a number"),
                                         ({"seconds": "1"}, "run 1's seconds is \"1\", not a number"),
                                         ({"floor_fresh": [1]}, "run 1's floor_fresh is [1], not a number or null")])
def test_plot_refuses_a_time_that_is_no_number(run, needle, tmp_path):
    """A committed JSON with one time made null (or a string): a TypeError traceback; no figure."""
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    data = json.loads((root / "results" / "nvidia-h200" / "multi-gpu" / "batch_scaling.json").read_text())
    data["runs"][1].update(run)
    src, png = tmp_path / "b.json", tmp_path / "b.png"
    src.write_text(json.dumps(data))
    r = subprocess.run([sys.executable, str(root / "scripts" / "batch-scaling"), "--plot", str(src), "--png",
                        str(png)], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0] == f"batch-scaling: --plot {src}: {needle}", lines
    assert not png.exists() and not r.stdout


@pytest.mark.parametrize("args, needle", [(["--chunk", "0"], "--chunk must be at least 1 output matrix, not 0"),
                                          (["--max-shift", "-7"], "--max-shift must be 0 or more (-1: the full output)"),
                                          (["--gpus", "foo"], "--gpus 'foo': expected all or device ordinals")])
def test_bad_options_are_bad_usage_before_the_gpu_is_asked(args, needle, monkeypatch, capsys):
    """A bad --chunk, --max-shift or --gpus text exited 3 "no GPU" on a machine without one (and
    --chunk 0 or --max-shift -7 reached the package on one with it): usage errors, exit 2, first."""
    m = fake_xcorr([])

    def parse_devices(text):
        if text == "foo":
            raise ValueError("--gpus 'foo': expected all or device ordinals separated by commas, e.g. 0,1")
        raise m.NoGPUError("no GPU here")

    def no_gpu():
        raise m.NoGPUError("no GPU here")
    m._xcorr = types.SimpleNamespace(parse_devices=parse_devices)
    m.gpu_info = no_gpu
    monkeypatch.setitem(sys.modules, "xcorr", m)
    with pytest.raises(SystemExit) as e:
        load_script().main(args)
    assert e.value.code == 2 and needle in capsys.readouterr().err
    assert load_script().main(["--gpus", "0,1"]) == 3  # well formed: then the GPU's own answer
    assert "no GPU" in capsys.readouterr().err


@pytest.mark.parametrize("gpus, cores, want", [(2, 32, (1, 2, 4, 8, 16, 32, 48)), (1, 32, (1, 2, 4, 8, 16, 32)),
                                               (2, 2, (1, 2)), (2, 24, (1, 2, 4, 8, 16, 32, 36)), (1, 1, (1,)),
                                               (4, 128, (1, 2, 4, 8, 16, 32, 64, 128)), (1, 64, (1, 2, 4, 8, 16, 32))])
def test_the_copy_probe_tries_as_many_host_threads_as_the_batch_drains_with(gpus, cores, want):
    """The staged floor is measured with up to the host threads the batch's drains use on that many
    GPUs at once (lib/batch.cpp's copy_threads: 1.5 x a GPU's share of the cores, within the cores
    and 32, per GPU): on two GPUs of a 32-core host, 48, not fewer than the batch (a pageable
    floor probed with 16 threads came out above the batch itself)."""
    assert load_script().probe_threads(gpus, cores) == want
