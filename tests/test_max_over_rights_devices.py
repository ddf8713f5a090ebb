"""xcorr.max_over_rights(..., devices=): the rights split across GPUs, merged on the host.

CPU (CI): the merge (xcorr._api._merge_max_over_rights) of 2-3 fake devices' results over runs of
the rights, with ties across the runs, NaN and all-NaN positions, equals one call's answer computed
by NumPy (xcorr._reference.max_over_rights), continuing an earlier result too; the runs cover the
rights once at one call's chunk boundaries; the argument errors that come before any GPU work.
GPU (skipped here with the reason): devices="all" equals one call (values and indices exactly,
sums to float64 rounding) in every form, normalized, continued with out=/first_index=; two GPUs
both take a run (skipped with fewer)."""
import os
import shutil
import subprocess

import numpy as np
import pytest
from conftest import seeded_rng

try:
    import xcorr
    from xcorr import _api, _reference
except ImportError as e:
    if os.environ.get("XCORR_NO_PYTHON_PACKAGE"):
        pytest.skip(f"the package xcorr is not installed (XCORR_NO_PYTHON_PACKAGE): {e}", allow_module_level=True)
    raise


# --- CPU: the merge ---------------------------------------------------------------------------

def tied_maps(rng, lefts, rights, h, w):
    """Maps (lefts, rights, h, w) of small integers (ties everywhere, across any cut of the rights),
    NaN at random and at positions where every right is NaN."""
    g = rng.integers(-3, 4, size=(lefts, rights, h, w)).astype(np.float64)
    g[rng.random(g.shape) < 0.15] = np.nan
    g[:, :, 0, 0] = np.nan          # no right has a value: NaN, index -1
    g[:, 1:, 1, 1] = np.nan         # only the first right has one
    g[:, :-1, 2, 2] = np.nan        # only the last right has one
    return g


def as_device(result, stats):
    """A reference result as a GPU writes it: float32 value, int32 index, float64 sums."""
    dtypes = (np.float32, np.int32, np.float64, np.float64)
    return tuple(np.ascontiguousarray(x, dt) for x, dt in zip(result[:4 if stats else 2], dtypes))


def check_equal(got, want, stats):
    np.testing.assert_array_equal(got[0], np.asarray(want[0], np.float32))  # NaN where NaN
    np.testing.assert_array_equal(got[1], want[1])
    if stats:
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-12, equal_nan=True)
        np.testing.assert_allclose(got[3], want[3], rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("stats", [False, True])
@pytest.mark.parametrize("cuts", [(7,), (3, 9), (1, 2), (5, 12)])
@pytest.mark.parametrize("first_index", [0, 40])
def test_merged_runs_equal_one_call(stats, cuts, first_index):
    rng = seeded_rng(("merge", stats, cuts, first_index))
    M = 13
    g = tied_maps(rng, 2, M, 5, 6)
    want = _reference.max_over_rights(g, stats, first_index)
    bounds = (0,) + cuts + (M,)
    parts = [as_device(_reference.max_over_rights(g[:, a:b], stats, first_index + a), stats)
             for a, b in zip(bounds, bounds[1:])]
    got = _api._merge_max_over_rights(parts[0], parts[1:])
    assert got is parts[0]  # in place
    check_equal(got, want, stats)
    # every tie across the runs resolved to the earlier run's (smaller) index
    assert (got[1][~np.isnan(got[0])] >= first_index).all() and (got[1][np.isnan(got[0])] == -1).all()


@pytest.mark.parametrize("stats", [False, True])
def test_merge_continues_an_earlier_result(stats):
    """out= continued: the first device continues the earlier result, the others are merged into
    it; the same as one call continuing it."""
    rng = seeded_rng(("merge-continued", stats))
    g = tied_maps(rng, 1, 20, 4, 7)
    earlier = _reference.max_over_rights(tied_maps(rng, 1, 6, 4, 7), stats, 0)
    want = _reference.max_over_rights(g, stats, 6, earlier)
    first = as_device(_reference.max_over_rights(g[:, :8], stats, 6, earlier), stats)
    rest = [as_device(_reference.max_over_rights(g[:, a:b], stats, 6 + a), stats) for a, b in ((8, 16), (16, 20))]
    check_equal(_api._merge_max_over_rights(first, rest), want, stats)


def test_merge_in_blocks_on_threads_equals_one_block():
    rng = seeded_rng("merge-blocks")
    g = tied_maps(rng, 3, 9, 11, 13)
    want = _reference.max_over_rights(g, True, 0)
    parts = [as_device(_reference.max_over_rights(g[:, a:b], True, a), True) for a, b in ((0, 3), (3, 5), (5, 9))]
    got = _api._merge_max_over_rights(parts[0], parts[1:], workers=4, block=37)
    check_equal(got, want, True)


def test_merge_refuses_what_it_cannot_change_in_place():
    value, index = np.zeros((4, 6), np.float32), np.zeros((4, 6), np.int32)
    with pytest.raises(ValueError, match="C-contiguous"):
        _api._merge_max_over_rights((value[:, ::2], index[:, ::2]), [])
    with pytest.raises(ValueError, match="size"):
        _api._merge_max_over_rights((value, index), [(value[:2], index[:2])])


# --- CPU: the runs ----------------------------------------------------------------------------

@pytest.mark.parametrize("units,chunk,count", [(1, 1, 1), (10, 3, 2), (33, 16, 2), (2, 1, 3), (5, 16, 4),
                                                (125 * 16, 16, 2), (7, 2, 8), (100, 7, 3)])
def test_runs_cover_the_rights_once_at_chunk_boundaries(units, chunk, count):
    runs = _api._device_runs(units, chunk, count)
    assert 1 <= len(runs) <= count
    assert runs[0][0] == 0 and runs[-1][1] == units
    assert all(a < b for a, b in runs) and all(b == c for (_, b), (c, _) in zip(runs, runs[1:]))
    assert all(a % chunk == 0 for a, _ in runs)
    sizes = [-(-(b - a) // chunk) for a, b in runs]  # chunks per run: as even as possible
    assert max(sizes) - min(sizes) <= 1
    assert len(runs) == min(count, -(-units // chunk))


def test_chunk_units_as_the_reducer_cuts_them():
    same = 4096 * 4096  # 2DTM: a 4096 x 4096 image, "same": 64 MiB a map, 16 in 1 GiB
    assert _api._chunk_units("one-to-many", 1, 2000, same) == 16
    assert _api._chunk_units("one-to-many", 1, 5, same) == 5
    assert _api._chunk_units("n-to-m", 3, 2000, same) == 5       # every left, runs of rights
    assert _api._chunk_units("n-to-mn", 3, 2000, same) == 5      # runs of groups of 3
    assert _api._chunk_units("n-to-m", 32, 100, same) == 1       # at least one right
    assert _api._chunk_units("one-to-many", 1, 9, 1 << 29) == 1  # a map over the budget: one a chunk


# --- CPU: the GPUs' side played by the float64 reference --------------------------------------

class FakeGpus:
    """_api's GPU side on the CPU: parse_devices gives `count` GPUs, and a device plan's
    max_over_rights_slice the reference's answer over the rights it is given (integer data: exact
    in float32), checked to be whole batches of the plan and the last plan; every call recorded."""

    def __init__(self, monkeypatch, count):
        self.calls, real = [], _api._xcorr
        fake = self

        class Binding:
            def __getattr__(self, name):
                return getattr(real, name)

            @staticmethod
            def parse_devices(text, what="--gpus"):
                assert what == "devices="
                return list(range(count)) if text == "all" else [int(d) for d in text.split(",")]

            @staticmethod
            def empty_pinned(n):
                return np.empty(n, np.float32)

        class DevicePlan:
            def __init__(self, plan, device):
                self.plan, self.device = plan, device

            def units(self):
                p = self.plan
                nL = p._matrix_shapes[0][0] if len(p._matrix_shapes[0]) == 3 else 1
                return p.right_shape[0] // (nL if p.form == "n-to-mn" else 1), nL

            def max_over_rights_slice(self, last, left, rights, value, index, sum_, sumsq, accumulate, first_right):
                p = self.plan
                per, nL = self.units()
                group = nL if p.form == "n-to-mn" else 1
                n = len(rights) // group
                rest = last.units()[0] if last is not None else 0
                assert last is None or last.device == self.device
                assert n > rest and (n - rest) % per == 0, (n, per, rest)
                fake.calls.append((self.device, per, rest, n, first_right, accumulate))
                maps = p._reference_maps(left, "numpy", rights, "numpy")
                grouped = _reference.right_maps(p.form, nL, len(rights), maps)
                arrays = [x for x in (value, index, sum_, sumsq) if x is not None]
                got = _reference.max_over_rights(grouped, p.stats, first_right, arrays if accumulate else None)
                for x, y in zip(arrays, got):
                    np.copyto(x, y.reshape(x.shape), casting="unsafe")

        def plan_for(left, kl, right, kr, out, device, lshape, rshape, **setup):
            plan = _api.Plan.__new__(_api.Plan)
            plan._setup(lshape, rshape, **setup)
            plan._plan = DevicePlan(plan, device)
            return plan

        monkeypatch.setattr(_api, "_xcorr", Binding())
        monkeypatch.setattr(_api, "_plan_for", plan_for)
        monkeypatch.setattr(_api, "_plans", {})


@pytest.mark.parametrize("form,ls,rs", [(None, (40, 30), (23, 5, 4)), ("n-to-m", (2, 20, 24), (19, 3, 5)),
                                        ("n-to-mn", (3, 16, 18), (27, 4, 4))])
@pytest.mark.parametrize("stats", [False, True])
@pytest.mark.parametrize("gpus", [1, 2, 3])
def test_runs_batches_and_merge_equal_one_call_with_fake_gpus(monkeypatch, form, ls, rs, stats, gpus):
    """The whole of devices= but the GPU: chunks of 2 rights (a map budget of 2 maps per left),
    batches of 2 chunks, runs over 1-3 GPUs, ties across them; then continued with out=."""
    fake = FakeGpus(monkeypatch, gpus)
    rng = seeded_rng(("fake-gpus", form, ls, rs, stats, gpus))
    left = rng.integers(-2, 3, ls).astype(np.float32)
    rights = rng.integers(-2, 3, rs).astype(np.float32)
    group = ls[0] if form == "n-to-mn" else 1
    rights[-3 * group:] = rights[:3 * group]  # ties between the first and the last GPU
    nL = ls[0] if len(ls) == 3 else 1
    out_elems = (ls[-2] + rs[-2] - 1) * (ls[-1] + rs[-1] - 1)
    monkeypatch.setattr(_api, "REDUCE_CHUNK_BYTES", 2 * nL * out_elems * 4)
    monkeypatch.setattr(_api, "RIGHTS_BATCH_BYTES", 4 * group * rs[1] * rs[2] * 4)
    kw = dict(form=form, stats=stats)
    want = xcorr.max_over_rights(left, rights, algorithm="reference", **kw)
    got = xcorr.max_over_rights(left, rights, devices="all", **kw)
    check_equal(got, want, stats)
    units = len(rights) // group
    runs = _api.last_devices_run
    assert len(runs) == gpus and [d for d, _, _ in runs] == list(range(gpus))
    assert sum(n for _, _, n in runs) == units and all(f % 2 == 0 for _, f, _ in runs)
    assert all(per in (2, 4) or per == n for _, per, _, n, _, _ in fake.calls), fake.calls
    assert [n for *_, n, _, _ in fake.calls] == [n for _, _, n in runs], (fake.calls, runs)
    assert [f for _, _, _, _, f, _ in fake.calls] == [f for _, f, _ in runs]  # each GPU from its run's first
    assert not any(acc for *_, acc in fake.calls)
    if gpus == 1:  # 4-right batches and a shorter last one
        assert fake.calls[0][1:4] == (4, units % 4, units), fake.calls
    # continued: the first GPU continues out=, the indices from first_index
    fake.calls.clear()
    again = xcorr.max_over_rights(left, rights, devices=list(range(gpus))[::-1], out=got, first_index=units, **kw)
    assert again is got
    both = xcorr.max_over_rights(left, np.concatenate([rights, rights]), algorithm="reference", **kw)
    check_equal(got, both, stats)
    assert [acc for *_, acc in fake.calls] == [True] + [False] * (gpus - 1)
    assert [d for d, *_ in fake.calls] == list(range(gpus))[::-1]


# --- CPU: arguments refused before any GPU work -----------------------------------------------

LEFT = np.zeros((32, 32), np.float32)
RIGHTS = np.zeros((4, 5, 5), np.float32)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(devices="all", algorithm="reference"), "reference runs on the CPU"),
    (dict(devices=[0], algorithm="reference"), "reference runs on the CPU"),
    (dict(devices=[]), "non-empty list"),
    (dict(devices=()), "non-empty list"),
    (dict(devices="0,1"), "'all' or a list"),
    (dict(devices=1), "'all' or a list"),
    (dict(devices=[-1]), "non-empty list of CUDA device indices"),
    (dict(devices=[True]), "non-empty list of CUDA device indices"),
    (dict(devices=[0.0]), "non-empty list of CUDA device indices"),
    (dict(devices=[0, 0]), "devices= '0,0': device 0 is given twice"),
    (dict(devices="all", stream=0), "give no stream="),
    (dict(devices="all", algorithm="fft-large", params={"left": "fixed"}), "left=fixed"),
    (dict(devices="all", first_index=-1), "first_index"),
    (dict(devices="all", first_index=(1 << 31) - 3), "int32"),
    (dict(devices="all", out=[np.zeros((36, 36), np.float32), np.zeros((36, 36), np.int32)]), "earlier max_over_rights"),
    (dict(devices="all", out=(np.zeros((36, 36), np.float32), np.zeros((36, 36), np.int64))), "int32"),
    (dict(devices="all", stats=True, out=(np.zeros((36, 36), np.float32), np.zeros((36, 36), np.int32))), "sum"),
    (dict(devices="all", k=2), None),  # max_over_rights takes no k=: TypeError below
])
def test_bad_arguments_are_value_errors_before_any_gpu_work(kwargs, needle):
    if needle is None:
        with pytest.raises(TypeError):
            xcorr.max_over_rights(LEFT, RIGHTS, **kwargs)
        return
    with pytest.raises(ValueError, match=needle):
        xcorr.max_over_rights(LEFT, RIGHTS, **kwargs)


def test_bad_arrays_are_value_errors_before_any_gpu_work():
    with pytest.raises(ValueError, match="stack of rights"):
        xcorr.max_over_rights(LEFT, RIGHTS[0], devices="all")  # one right: one-to-one
    with pytest.raises(ValueError, match="float32"):
        xcorr.max_over_rights(LEFT.astype(np.int32), RIGHTS, devices="all")
    with pytest.raises(ValueError, match="mode"):
        xcorr.max_over_rights(LEFT, RIGHTS, devices="all", mode="nope")


def test_without_a_gpu_a_valid_call_is_no_gpu_error():
    try:
        xcorr.gpu_info()
        pytest.skip("a GPU is present: the GPU tests below run the call")
    except xcorr.NoGPUError:
        pass
    with pytest.raises(xcorr.NoGPUError, match='algorithm="reference"'):
        xcorr.max_over_rights(LEFT, RIGHTS, devices="all")


# --- GPU --------------------------------------------------------------------------------------

def gpu_count():
    if shutil.which("nvidia-smi") is None:
        return 0
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in r.stdout.splitlines()) if r.returncode == 0 else 0


def assert_same(got, want, stats):
    """devices= against one call: values and indices exactly, sums to float64 summation order."""
    assert type(got) is type(want)
    assert got.value.dtype == np.float32 and got.index.dtype == np.int32
    np.testing.assert_array_equal(got.value, want.value)
    np.testing.assert_array_equal(got.index, want.index)
    if stats:
        scale = np.nanmax(np.abs(want.sumsq)) + 1
        np.testing.assert_allclose(got.sum, want.sum, rtol=1e-9, atol=1e-9 * scale)
        np.testing.assert_allclose(got.sumsq, want.sumsq, rtol=1e-9, atol=1e-9 * scale)


# left, rights, mode, form, normalize: 2048 x 2048 "same" maps are 16 MiB, 64 a chunk, so that 150
# rights are three chunks (two runs on two GPUs, three on three); zncc-chunks two chunks of the
# chunked maps (not fft-large's folds: normalized); the others are one chunk (one GPU).
CASES = {
    "2dtm-like": ((2048, 2048), (150, 24, 24), "same", None, None),
    "zncc-chunks": ((1024, 1024), (300, 8, 8), "same", None, "zncc"),  # 4 MiB maps: chunks of 256
    "zncc-valid": ((300, 280), (40, 17, 13), "valid", None, "zncc"),
    "n-to-m": ((3, 96, 80), (21, 9, 11), "full", "n-to-m", None),
    "n-to-mn": ((2, 64, 64), (14, 8, 8), "same", "n-to-mn", "zero-lag"),
}


@pytest.mark.parametrize("stats", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_devices_all_equals_one_call(gpu, monkeypatch, case, stats):
    ls, rs, mode, form, normalize = CASES[case]
    rng = seeded_rng(("devices-all", case))
    left = rng.random(ls, dtype=np.float32) - 0.5
    rights = rng.random(rs, dtype=np.float32) - 0.5
    group = ls[0] if form == "n-to-mn" else 1
    k = len(rights) // 4 // group * group
    rights[-k:] = rights[:k]  # equal maps in different runs and batches: ties
    kw = dict(mode=mode, form=form, normalize=normalize, stats=stats)
    want = xcorr.max_over_rights(left, rights, **kw)
    got = xcorr.max_over_rights(left, rights, devices="all", **kw)
    assert_same(got, want, stats)
    runs = _api.last_devices_run
    assert sum(n for _, _, n in runs) * group == len(rights)
    # a second call reuses the GPUs' plans and gives the same again
    assert_same(xcorr.max_over_rights(left, rights, devices="all", **kw), want, stats)
    # batches of one chunk each (two uploads in flight, a shorter last batch's plan): the same
    monkeypatch.setattr(_api, "RIGHTS_BATCH_BYTES", 1)
    assert_same(xcorr.max_over_rights(left, rights, devices="all", **kw), want, stats)


@pytest.mark.parametrize("stats", [False, True])
def test_gpu_devices_continue_an_earlier_result(gpu, stats):
    """out= and first_index=: batches through devices= give what the same batches give as one call
    each (one call's per batch, continued), and so does a devices= batch after a one-call one."""
    rng = seeded_rng(("devices-continued", stats))
    left = rng.random((2048, 2048), dtype=np.float32)
    rights = rng.random((200, 16, 16), dtype=np.float32)
    rights[150:170] = rights[10:30]  # ties across the batches
    kw = dict(mode="same", stats=stats)
    want = xcorr.max_over_rights(left, rights[:70], **kw)
    want = xcorr.max_over_rights(left, rights[70:], out=want, first_index=70, **kw)
    best = xcorr.max_over_rights(left, rights[:70], devices="all", **kw)
    got = xcorr.max_over_rights(left, rights[70:], devices="all", out=best, first_index=70, **kw)
    assert got is best
    assert_same(best, want, stats)
    best = xcorr.max_over_rights(left, rights[:70], **kw)
    assert_same(xcorr.max_over_rights(left, rights[70:], devices=[0], out=best, first_index=70, **kw), want, stats)


def test_gpu_devices_that_do_not_exist_are_value_errors(gpu):
    with pytest.raises(ValueError, match=f"devices= '{gpu_count() + 7}': device {gpu_count() + 7} does not exist"):
        xcorr.max_over_rights(LEFT, RIGHTS, devices=[gpu_count() + 7])
    with pytest.raises(ValueError, match="does not exist"):
        xcorr.max_over_rights(LEFT, RIGHTS, devices=[0, gpu_count()])


def test_gpu_devices_take_host_arrays_only(gpu):
    cupy = pytest.importorskip("cupy")
    with pytest.raises(ValueError, match="host"):
        xcorr.max_over_rights(cupy.asarray(LEFT), cupy.asarray(RIGHTS), devices="all")


def test_gpu_two_gpus_each_take_a_run(gpu):
    if gpu_count() < 2:
        pytest.skip(f"needs two GPUs ({gpu_count()} found)")
    rng = seeded_rng("devices-two")
    left = rng.random((2048, 2048), dtype=np.float32) - 0.5
    rights = rng.random((150, 24, 24), dtype=np.float32) - 0.5
    want = xcorr.max_over_rights(left, rights, mode="same", stats=True)
    got = xcorr.max_over_rights(left, rights, mode="same", stats=True, devices=[1, 0])
    assert_same(got, want, True)
    runs = _api.last_devices_run
    # 2048 x 2048 maps of 16 MiB: chunks of 64 rights, 0-63 on GPU 1, 64-149 on GPU 0
    assert [d for d, _, _ in runs] == [1, 0] and [(f, n) for _, f, n in runs] == [(0, 64), (64, 86)], runs
