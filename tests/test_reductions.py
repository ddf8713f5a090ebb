"""The reductions experiment (peaks, the maximum over the rights: experiments/reductions.py,
xcsuite/reduce_peers.py) on the CPU: its definition, its case names, the planted answers, the target
table on a hand-made results file, and the PyTorch reduction against the numpy reference (where
torch is importable)."""
import importlib.util

import numpy as np
import pytest
import scipy.signal
from suite_helpers import suite_registry  # noqa: F401  (puts the repository root on the path)

import experiments as suite
from xcsuite.spec import expand
from experiments import reductions as exp
from xcsuite import reduce_peers, resultfile
from xcsuite.benchjson import entry_key
from xcsuite.tables import build_reduction_table, reduction_measurements, reduction_markdown, reduction_pays

HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_registered_and_expands_every_case_with_its_reduction():
    assert "reductions" in suite.names() and "reductions" in suite.NOT_PAPER_EXPERIMENTS
    ex = expand(suite.load("reductions"), reduce_peers.registry())
    assert not ex.warnings
    by = {}
    for c in ex.cases:
        by.setdefault(c.variant, set()).add(c.shape.group)
        assert dict(c.params)["reduce"] == exp.REDUCE[c.shape.group]
    groups = {s.group for s in exp.SHAPES}
    tm = set(exp.TM_GROUPS)
    small = {exp.tm_group(n) for n in exp.TM_COUNTS if n <= exp.TM_SIDE_SERIES_MAX}
    big = tm - small
    assert len(tm) == len(exp.TM_COUNTS) and small and big
    assert by["xcorr-reduce"] == by["torch-reduce"] == groups
    assert by["xcorr-map+torch"] == groups - big  # the side series stop at TM_SIDE_SERIES_MAX templates
    # thousands of maps of 4096 x 4096 do not fit: no "same" window (2DTM's, the K3 micrograph's) has a map series
    assert by["xcorr-map"] == groups - tm - {exp.TM_K3}
    assert by["xcorr-reduce-batched"] == small | {exp.TM_K3} and by["torch-2dtm-circular"] == tm | {exp.TM_K3}
    # the counts the side series leave out are recorded as capped, and nothing else is unavailable
    assert ex.unavailable and all(sh.group in big and r.startswith("capped:") for _, sh, r in ex.unavailable)
    assert {(lab, sh.group) for lab, sh, _ in ex.unavailable} == {
        (exp.LABELS[v], g) for v in ("xcorr-reduce-batched", "xcorr-map+torch") for g in big}


def test_template_counts_run_from_64_to_ten_thousand_and_quick_keeps_the_smallest():
    assert exp.TM_COUNTS[0] == exp.TM_QUICK == 64 and exp.TM_COUNTS[-1] == 10_000
    assert list(exp.TM_COUNTS) == sorted(exp.TM_COUNTS)
    ex = expand(suite.load("reductions"), reduce_peers.registry())
    from xcsuite.spec import within_cap
    quick = {c.shape.group for c in within_cap(ex.cases, 2e14)}  # the smoke run's --max-fmas 2e14
    assert quick & set(exp.TM_GROUPS) == {exp.tm_group(exp.TM_QUICK)}
    assert {exp.PIV, exp.NTOM_GROUP, exp.ZNCC, exp.AMBIENT} <= quick


def test_the_floor_of_a_template_is_computed_from_the_shape_and_the_gpu():
    """The H200's floor for one 384 x 384 template in a 4096 x 4096 image ("same"): one read and one
    write of the 4320 x 2161 complex slot, ~31 µs at 4.8 TB/s, and ~1.7-2.3 GFLOP of transforms at
    66.9 TFLOP/s: ~57-65 µs, 15,000-18,000 templates/s."""
    f = exp.tm_floor(exp.tm_shape(1000), *exp.GPU_PEAKS["nvidia-h200"])
    assert (f["P"], f["Q"]) == (4320, 4320)
    assert f["bytes"] == 2 * 4320 * 2161 * 8
    assert f["bytes"] / 4.8e12 * 1e6 == pytest.approx(31.1, abs=0.1)
    assert 1.5e9 < f["flops_low"] < f["flops_high"] < 2.4e9
    assert 50 < f["low_us"] < f["high_us"] < 80
    # not a number written down: twice the bandwidth takes the memory term's half off
    g = exp.tm_floor(exp.tm_shape(1000), 9.6e12, 66.9e12)
    assert f["low_us"] - g["low_us"] == pytest.approx(f["bytes"] / 9.6e12 * 1e6)
    # the count does not change a template's floor; a smaller image does
    assert exp.tm_floor(exp.tm_shape(64), 4.8e12, 66.9e12) == f
    from xcsuite.spec import Shape
    small = Shape("one-to-many", 1024, 1024, 96, 96, 1, 8, window="same")
    assert exp.tm_floor(small, 4.8e12, 66.9e12)["low_us"] < f["low_us"] / 10


def test_the_issue_shapes():
    s = {x.group: x for x in exp.SHAPES}
    piv = s[exp.PIV]
    assert (piv.form, piv.nL, piv.nR, piv.hL, piv.shifts()) == ("n-to-mn", 8192, 8192, 32, (-8, 8, -8, 8))
    z = s[exp.ZNCC]
    assert (z.form, z.nR, z.hR, z.hL, z.window, z.normalize) == ("one-to-many", 64, 31, 1024, "valid", "zncc")
    amb = suite.load("signals_ambient").shapes[0]
    assert s[exp.AMBIENT].dims() == amb.dims() and s[exp.AMBIENT].shifts() == amb.shifts()
    for n in exp.TM_COUNTS:
        t = s[exp.tm_group(n)]
        assert (t.form, t.nR, t.hR, t.hL, t.window) == ("one-to-many", n, 384, 4096, "same")
    k3 = s[exp.TM_K3]  # a K3 frame as stored: 4092 rows of 5760 pixels
    assert (k3.form, k3.nR, k3.hR, k3.wR, k3.hL, k3.wL, k3.window) == ("one-to-many", 256, 384, 384, 4092, 5760, "same")
    assert exp.TM_K3 not in exp.TM_GROUPS and exp.REDUCE[exp.TM_K3] == "max-stats"


def test_case_name_gives_the_case_key():
    ex = expand(suite.load("reductions"), reduce_peers.registry())
    for c in ex.cases:
        rc = reduce_peers.parse_rcase(c.line())
        e = {"run_name": rc.name() + "/min_time:0.100/manual_time", "cold": 0}
        assert entry_key(e) == c.key, c.line()


def test_parse_reduce_and_refusals():
    assert reduce_peers.parse_reduce("peaks-k5-md15-gaussian") == {"kind": "peaks", "k": 5, "min_distance": 15,
                                                                  "subpixel": "gaussian", "stats": False}
    assert reduce_peers.parse_reduce("max-stats")["stats"] is True
    for bad in ("peaks-k0-none", "peaks-k1-cubic", "min"):
        with pytest.raises(ValueError):
            reduce_peers.parse_reduce(bad)
    from xcsuite.benchjson import UsageError
    with pytest.raises(UsageError):
        reduce_peers.parse_rcase("variant=torch-2dtm-circular form=n-to-m size=8 nL=2 nR=2 reduce=peaks-k1-none")


def test_planted_peak_is_the_correlation_maximum():
    rng = np.random.default_rng(1)
    base = rng.uniform(-1, 1, size=(30, 31))
    sat = reduce_peers.sat_np(base * base)
    h, w = 24, 25
    for u, t in (((0, 0), (6, 6)), ((5, 2), (1, 4)), ((3, 3), (3, 3))):
        L, R = base[u[0]:u[0] + h, u[1]:u[1] + w], base[t[0]:t[0] + h, t[1]:t[1] + w]
        full = scipy.signal.correlate2d(L, R, mode="full")
        y, x = np.unravel_index(np.argmax(full), full.shape)
        (sy, sx), v = reduce_peers.planted_peak_np(sat, u, t, h, w)
        assert (y - (h - 1), x - (w - 1)) == (sy, sx)
        assert v == pytest.approx(full[y, x], rel=1e-12)


def test_peaks_np_follows_the_contract():
    m = np.zeros((1, 5, 6))
    m[0, 2, 3], m[0, 2, 4], m[0, 0, 0], m[0, 4, 5] = 9, 8, 7, 6
    m[0, 1, 3], m[0, 3, 3], m[0, 2, 2] = 4, 2, 5
    v, s, sub = reduce_peers.peaks_np(m, 4, 1, "parabolic", dy0=-2, dx0=-3)
    assert v[0].tolist() == [9, 7, 6, 0]  # 8, 4, 5 and 2 suppressed; then the first zero left, row-major
    assert s[0].tolist() == [[0, 0], [-2, -3], [2, 2], [-2, -1]]
    v2, s2, sub2 = reduce_peers.peaks_np(np.arange(4.0).reshape(1, 2, 2), 6, 0, "gaussian")
    assert v2[0, :4].tolist() == [3, 2, 1, 0] and np.isnan(v2[0, 4:]).all()  # k beyond the window: absent
    assert s2[0, 4:].tolist() == [[0, 0], [0, 0]] and np.isnan(sub2[0, 4:]).all()
    dy = (4 - 2) / (2 * (4 - 18 + 2))
    dx = (5 - 8) / (2 * (5 - 18 + 8))
    assert sub[0, 0] == pytest.approx([dy, dx])
    assert sub[0, 1].tolist() == [-2, -3]  # on the window's edge: no offset
    g = reduce_peers.subpixel_offsets(np.array(2.0), np.array(4.0), np.array(1.0), "gaussian", np)
    assert float(g) == pytest.approx((np.log(2) - np.log(1)) / (2 * (np.log(2) - 2 * np.log(4) + np.log(1))))
    assert float(reduce_peers.subpixel_offsets(np.array(-1.0), np.array(4.0), np.array(1.0), "gaussian", np)) == \
        pytest.approx((-1 - 1) / (2 * (-1 - 8 + 1)))  # a non-positive value: parabolic
    assert float(reduce_peers.subpixel_offsets(np.array(1.0), np.array(1.0), np.array(1.0), "parabolic", np)) == 0


@pytest.mark.peers
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed here: the PyTorch reduction is checked where it is")
def test_peaks_torch_and_fold_max_agree_with_numpy():
    import torch

    rng = np.random.default_rng(3)
    maps = rng.normal(size=(7, 9, 11)).astype(np.float32)
    maps[2] = np.abs(maps[2]) + 0.1  # positive: the gaussian fit's own branch
    for k, r, fit in ((1, 0, "gaussian"), (5, 2, "parabolic"), (3, 0, "none"), (200, 3, "gaussian")):
        ref = reduce_peers.peaks_np(maps, k, r, fit, -4, -5)
        got = reduce_peers.peaks_torch(torch.from_numpy(maps), k, r, fit, -4, -5)
        np.testing.assert_allclose(got[0].numpy(), ref[0], rtol=1e-6, equal_nan=True)
        np.testing.assert_array_equal(got[1].numpy(), ref[1])
        np.testing.assert_allclose(got[2].numpy(), ref[2], atol=1e-5, equal_nan=True)
    state = None
    for b0 in range(0, 7, 3):
        state = reduce_peers.fold_max(state, torch.from_numpy(maps[b0:b0 + 3]).double(), b0)
    ref = reduce_peers.max_np(maps)
    for a, b in zip(state, ref):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-9)


def fake_results(times_us: dict, mem: dict | None = None) -> dict:
    """A reductions results file (the runner's format) with one ok record per (group, variant)."""
    shapes = {s.group: s for s in exp.SHAPES}
    cases = {}
    for (group, variant), us in times_us.items():
        s = shapes[group]
        from xcsuite.spec import Case
        c = Case(variant, s, (("reduce", exp.REDUCE[group]),))
        same = {"time_unit": "us", "iterations": 3}
        if mem and (group, variant) in mem:
            same["mem_bytes"] = float(mem[(group, variant)])
        rec = {**resultfile.identity_from_line(c.line()), "cold": False, "status": "ok", "n_reps": 2, "same": same,
               "reps": {"real_time": [us * 0.99, us * 1.01]}}
        assert resultfile.key_of(rec) == c.key
        cases[c.key] = rec
    return {"cases": cases}


def test_the_table_takes_the_protocols_mean_as_the_figure_does():
    """A repetition the IQR rule drops (a host stall in a Python peer's call) is dropped from the
    table's time too, so that the table and the figure (summary.csv's time_us) give one number."""
    data = fake_results({(exp.PIV, "torch-reduce"): 600})
    rec = next(iter(data["cases"].values()))
    rec["reps"]["real_time"] = [600.0, 601.0, 599.0, 600.0, 602.0, 598.0, 900.0]
    rec["n_reps"] = 7
    t_, _ = reduction_measurements(data)
    assert t_[(exp.PIV, "torch-reduce")] == pytest.approx(600.0)  # the plain mean would be ~643
    from xcsuite.stats import describe
    assert t_[(exp.PIV, "torch-reduce")] == pytest.approx(describe(rec["reps"]["real_time"])["mean"])


def test_target_table_says_hold_and_miss():
    counts = exp.TM_COUNTS
    tq, tmid, tm = exp.tm_group(counts[0]), exp.tm_group(counts[2]), exp.tm_group(counts[-1])
    times = {(exp.PIV, "xcorr-reduce"): 100, (exp.PIV, "torch-reduce"): 900,  # x9: holds (>= 8)
             (exp.NTOM_GROUP, "xcorr-reduce"): 600, (exp.NTOM_GROUP, "xcorr-map"): 1000,  # 0.6 > 0.5: misses
             (exp.NTOM_GROUP, "torch-reduce"): 3700,  # x6.2: holds
             (exp.ZNCC, "xcorr-reduce"): 400, (exp.ZNCC, "xcorr-map"): 700, (exp.ZNCC, "torch-reduce"): 4000,
             # 2DTM: 100 µs a template at the largest count (10,000/s: holds), batched slower there
             (tm, "xcorr-reduce"): 100.0 * counts[-1], (tm, "torch-reduce"): 550.0 * counts[-1],
             (tm, "torch-2dtm-circular"): 540.0 * counts[-1],
             (tmid, "xcorr-reduce"): 150.0 * counts[2], (tmid, "xcorr-reduce-batched"): 120.0 * counts[2],
             (tq, "xcorr-reduce-batched"): 10_000, (tq, "xcorr-reduce"): 12_000}
    mem = {(tm, "xcorr-reduce"): 900 << 20, (tq, "xcorr-reduce"): 880 << 20,
           (tmid, "xcorr-reduce-batched"): 5000 << 20, (tq, "xcorr-reduce-batched"): 400 << 20}
    t_, m_ = reduction_measurements(fake_results(times, mem))
    assert t_[(exp.PIV, "xcorr-reduce")] == pytest.approx(100)
    t = build_reduction_table(t_, m_)
    assert len(t) == len(exp.TARGETS)
    holds = {(r["case"], r["target"].split(" ")[0] + r["target"].split(" ")[1]): r["holds"] for _, r in t.iterrows()}
    assert holds[(exp.PIV, ">=8x")] is True
    assert holds[(exp.NTOM_GROUP, "time<=")] is False and holds[(exp.NTOM_GROUP, ">=6x")] is True
    assert holds[(exp.NTOM_GROUP, "ourmap")] is False  # 1000 µs > 700
    assert holds[(exp.ZNCC, "time<=")] is True and holds[(exp.ZNCC, ">=12x")] is False  # 0.57 holds, x10 misses
    assert holds[(exp.AMBIENT, ">=15x")] is None  # not measured
    tmrows = t[t["case"] == tm]
    # the rate at the largest count measured, on the faster of ours there; the memory on the one call
    # over every template (the batched loop's growth to its own largest count stands in the note)
    assert list(tmrows["ours"]) == ["xcorr-reduce", "xcorr-reduce"]
    assert list(tmrows["holds"]) == [True, True]  # 10,000/s and 20 MiB of growth
    assert tmrows["measured"].iloc[0] == pytest.approx(10_000)
    assert "1,818/s padded" in tmrows["note"].iloc[0] and f"{counts[2]}: 8,333/s" in tmrows["note"].iloc[0]
    assert f"batched: 400 MiB at 64, 5000 MiB at {counts[2]}" in tmrows["note"].iloc[1]
    md = reduction_markdown(t, reduction_pays(t_))
    assert "misses" in md and "**holds**" in md and "not measured" in md and "10,000 templates/s" in md
    # the memory grows with the count: misses; slower than 9,000/s: misses
    mem[(tm, "xcorr-reduce")] = 2000 << 20
    times[(tm, "xcorr-reduce")] = 120.0 * counts[-1]
    t = build_reduction_table(*reduction_measurements(fake_results(times, mem)))
    assert list(t[t["case"] == tm]["holds"]) == [False, False]


def test_an_older_results_file_without_the_large_counts_is_read_and_says_not_measured():
    """The smallest count alone (an older file's, or a quick run's): the rate is judged there, the
    memory's growth is not measured, and the other counts' rows are dashes."""
    tq = exp.tm_group(exp.TM_QUICK)
    times = {(tq, "xcorr-reduce"): 32_000, (tq, "torch-reduce"): 50_000, (exp.PIV, "xcorr-reduce"): 200}
    t_, m_ = reduction_measurements(fake_results(times, {(tq, "xcorr-reduce"): 7 << 30}))
    t = build_reduction_table(t_, m_)
    rows = t[t["case"] == tq]
    assert list(rows["holds"]) == [False, None]
    assert rows["measured"].iloc[0] == pytest.approx(2000)
    md = reduction_markdown(t, reduction_pays(t_))
    big = next(line for line in md.splitlines() if line.startswith(f"| {exp.tm_group(exp.TM_COUNTS[-1])} |"))
    assert big.count("–") == 8
