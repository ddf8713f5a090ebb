"""`xcorr run --peaks` and `--max-over-rights` (CONVENTIONS.md, "Reductions: peaks and
maxima"): the answer instead of the maps, written as an .npz. On the CPU through the float64
reference: a planted template's shift and index are found, the arrays have the documented names,
dtypes and shapes (1-D: lags), the .npz is a stored zip numpy reads with its CRCs right, written by
the rules of every output (atomic, through links, never over an input), and every bad input exits
2 with one line and leaves no file. On a GPU (gpu fixture): the plan's answer passes --validate and
agrees with the reference's; xcorr_validate's reduction cases and xcorr_bench's reduce= cases pass."""
import json
import os
import re
import zipfile

import numpy as np
import pytest

from conftest import binary, one_line_error, run, save, seeded_rng, xrun
from test_cli import temp_files


def reduce_run(xcorr, tmp_path, form, left, right, *args, algorithm="reference", out="p.npz", dims=None):
    out = tmp_path / out
    extra = ["--dims", str(dims)] if dims else []
    r = xrun(xcorr, "--algorithm", algorithm, "--form", form, *extra, save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def maps(xcorr, tmp_path, form, left, right, *args, dims=None):
    """The float32 maps of the same run (no reduction)."""
    out = tmp_path / "maps.npy"
    extra = ["--dims", str(dims)] if dims else []
    r = xrun(xcorr, "--algorithm", "reference", "--form", form, *extra, save(tmp_path / "ml.npy", left),
             save(tmp_path / "mr.npy", right), "--out", out, *args)
    assert r.returncode == 0, r.stderr
    return np.load(out)


def planted(rng, h=40, w=50, th=9, tw=11, at=(12, 20)):
    left = rng.standard_normal((h, w)).astype(np.float32)
    return left, left[at[0]:at[0] + th, at[1]:at[1] + tw].copy()


# --- peaks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("normalize", ["none", "zncc"])
@pytest.mark.parametrize("subpixel", ["parabolic", "gaussian", "none"])
def test_peaks_find_a_planted_template(xcorr, tmp_path, normalize, subpixel):
    left, right = planted(seeded_rng(("peaks", normalize, subpixel)))
    z = reduce_run(xcorr, tmp_path, "one-to-one", left, right, "--peaks", "3", "--subpixel", subpixel,
                   "--mode", "valid", "--normalize", normalize)
    assert sorted(z) == ["shift", "subpixel", "value"]
    assert z["value"].dtype == np.float32 and z["value"].shape == (1, 3)
    assert z["shift"].dtype == np.int32 and z["shift"].shape == (1, 3, 2)
    assert z["subpixel"].dtype == np.float32 and z["subpixel"].shape == (1, 3, 2)
    assert tuple(z["shift"][0, 0]) == (12, 20)
    assert np.all(np.diff(z["value"][0]) <= 0), z["value"]  # descending
    if normalize == "zncc":
        assert abs(z["value"][0, 0] - 1) < 1e-5
    # The fit moves the peak by at most half a shift; none leaves it where it is.
    off = z["subpixel"][0, 0] - z["shift"][0, 0]
    assert np.all(np.abs(off) <= 0.5 + 1e-6), off
    if subpixel == "none":
        assert np.all(off == 0), off


def test_peaks_are_the_largest_values_of_the_map(xcorr, tmp_path):
    """Every map of a one-to-many: the k values are the k largest of the reference map (r = 0) at
    the shifts returned."""
    rng = seeded_rng("largest")
    left = rng.random((17, 23), dtype=np.float32)
    right = rng.random((4, 5, 7), dtype=np.float32)
    z = reduce_run(xcorr, tmp_path, "one-to-many", left, right, "--peaks", "5", "--max-shift", "6,4")
    m = maps(xcorr, tmp_path, "one-to-many", left, right, "--max-shift", "6,4")
    assert z["value"].shape == (4, 5) and z["shift"].shape == (4, 5, 2)
    for i in range(4):
        flat = np.sort(m[i].ravel())[::-1][:5]
        np.testing.assert_allclose(z["value"][i], flat, rtol=1e-6)
        for v, (dy, dx) in zip(z["value"][i], z["shift"][i]):
            assert -6 <= dy <= 6 and -4 <= dx <= 4
            np.testing.assert_allclose(m[i, dy + 6, dx + 4], v, rtol=1e-6)


def test_min_distance_keeps_peaks_apart(xcorr, tmp_path):
    rng = seeded_rng("min-distance")
    left = rng.random((30, 30), dtype=np.float32)
    right = rng.random((7, 7), dtype=np.float32)
    z = reduce_run(xcorr, tmp_path, "one-to-one", left, right, "--peaks", "6", "--min-distance", "3")
    s = z["shift"][0][~np.isnan(z["value"][0])]
    assert len(s) >= 2
    for a in range(len(s)):
        for b in range(a + 1, len(s)):
            assert np.max(np.abs(s[a] - s[b])) > 3, (s[a], s[b])


def test_k_beyond_the_window_leaves_the_rest_absent(xcorr, tmp_path):
    """A valid window of 3 x 3 shifts holds 9 values: peaks 4..11 are absent, NaN at shift (0, 0)."""
    rng = seeded_rng("beyond")
    z = reduce_run(xcorr, tmp_path, "one-to-one", rng.random((6, 6), dtype=np.float32),
                   rng.random((4, 4), dtype=np.float32), "--peaks", "12", "--mode", "valid")
    assert np.all(np.isfinite(z["value"][0, :9])) and np.all(np.isnan(z["value"][0, 9:]))
    assert np.all(z["shift"][0, 9:] == 0) and np.all(np.isnan(z["subpixel"][0, 9:]))
    assert len({tuple(s) for s in z["shift"][0, :9]}) == 9


def test_peaks_of_signals_are_lags(xcorr, tmp_path):
    rng = seeded_rng("lags")
    left = rng.standard_normal((3, 200)).astype(np.float32)
    right = np.stack([left[i, 37 + 10 * i:37 + 10 * i + 21] for i in range(3)])
    z = reduce_run(xcorr, tmp_path, "n-to-mn", left, right, "--peaks", "2", "--normalize", "zncc", "--mode", "valid",
                   dims=1)
    assert z["value"].shape == z["shift"].shape == z["subpixel"].shape == (3, 2)
    assert z["shift"].dtype == np.int32 and z["subpixel"].dtype == np.float32
    assert list(z["shift"][:, 0]) == [37, 47, 57]


def test_the_npz_is_a_stored_zip_with_good_crcs(xcorr, tmp_path):
    rng = seeded_rng("zip")
    reduce_run(xcorr, tmp_path, "one-to-one", rng.random((8, 8), dtype=np.float32),
               rng.random((3, 3), dtype=np.float32), "--peaks", "2")
    with zipfile.ZipFile(tmp_path / "p.npz") as z:
        assert z.testzip() is None  # every CRC-32 right
        assert [i.filename for i in z.infolist()] == ["value.npy", "shift.npy", "subpixel.npy"]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())


def test_reference_validate_passes(xcorr, tmp_path):
    rng = seeded_rng("validate")
    left, right = rng.random((12, 14), dtype=np.float32), rng.random((3, 5, 4), dtype=np.float32)
    for args in (["--peaks", "4", "--min-distance", "1", "--subpixel", "gaussian"], ["--max-over-rights", "--stats"]):
        out = tmp_path / "v.npz"
        r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-many", save(tmp_path / "l.npy", left),
                 save(tmp_path / "r.npy", right), "--out", out, "--validate", *args)
        assert r.returncode == 0, r.stdout + r.stderr
        assert re.search(r"0 failed checks: ok$", r.stdout.strip()), r.stdout
        assert out.exists()


def test_nan_inputs_are_reduced_and_validated(xcorr, tmp_path):
    """A NaN in the left makes the shifts that overlap it NaN: never a peak, and a maximum taken over
    the other rights; --validate passes (the contract's reading for NaN inputs)."""
    rng = seeded_rng("nan")
    left = rng.random((12, 13), dtype=np.float32)
    left[5, 6] = np.nan
    right = rng.random((3, 4, 4), dtype=np.float32)
    right[2, 1, 1] = np.nan
    for args in (["--peaks", "200"], ["--max-over-rights"]):
        out = tmp_path / "n.npz"
        r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-many", save(tmp_path / "l.npy", left),
                 save(tmp_path / "r.npy", right), "--out", out, "--validate", *args)
        assert r.returncode == 0, r.stdout + r.stderr
        with np.load(out) as z:
            m = maps(xcorr, tmp_path, "one-to-many", left, right)
            if "shift" in z:
                finite = np.isfinite(m).reshape(3, -1).sum(axis=1)
                assert list(np.isfinite(z["value"]).sum(axis=1)) == list(np.minimum(finite, 200))
            else:  # NaN with index -1 exactly where every right's value is NaN (the left's NaN)
                none = np.isnan(m).all(axis=0)
                assert none.any() and not none.all()
                np.testing.assert_array_equal(np.isnan(z["value"][0]), none)
                np.testing.assert_array_equal(z["index"][0] == -1, none)


def test_nan_inputs_validate_their_stats(xcorr, tmp_path):
    rng = seeded_rng("nan-stats")
    left = rng.random((12, 13), dtype=np.float32)
    left[5, 6] = np.nan
    right = rng.random((3, 4, 4), dtype=np.float32)
    right[2, 1, 1] = np.nan  # NaN sums where the other rights' maps are finite
    out = tmp_path / "n.npz"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-many", save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, "--validate",
             "--max-over-rights", "--stats")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert np.isnan(np.load(out)["sum"]).any()  # the sums propagate NaN


# --- the maximum over the rights -------------------------------------------------------------------

def test_max_over_rights_finds_the_planted_template(xcorr, tmp_path):
    rng = seeded_rng("mor")
    left = rng.standard_normal((40, 40)).astype(np.float32)
    rights = rng.standard_normal((6, 9, 9)).astype(np.float32)
    rights[3] = left[10:19, 15:24]
    z = reduce_run(xcorr, tmp_path, "one-to-many", left, rights, "--max-over-rights", "--stats", "--mode", "valid",
                   "--normalize", "zncc")
    assert sorted(z) == ["index", "sum", "sumsq", "value"]
    assert z["value"].shape == z["index"].shape == z["sum"].shape == z["sumsq"].shape == (1, 32, 32)
    assert (z["value"].dtype, z["index"].dtype, z["sum"].dtype, z["sumsq"].dtype) == (
        np.float32, np.int32, np.float64, np.float64)
    at = np.unravel_index(np.argmax(z["value"][0]), (32, 32))
    assert at == (10, 15) and z["index"][0][at] == 3 and abs(z["value"][0][at] - 1) < 1e-5
    m = maps(xcorr, tmp_path, "one-to-many", left, rights, "--mode", "valid", "--normalize", "zncc").astype(np.float64)
    np.testing.assert_allclose(z["value"][0], m.max(axis=0), atol=1e-6)
    np.testing.assert_array_equal(z["index"][0], m.argmax(axis=0))
    np.testing.assert_allclose(z["sum"][0], m.sum(axis=0), atol=1e-5)
    np.testing.assert_allclose(z["sumsq"][0], (m * m).sum(axis=0), atol=1e-5)


@pytest.mark.parametrize("form,nl,nr,lefts,index", [("n-to-m", 2, 5, 2, 4), ("n-to-mn", 2, 6, 2, 2)])
def test_max_over_rights_per_left(xcorr, tmp_path, form, nl, nr, lefts, index):
    """Left 1 holds right 5 (n-to-mn: its group 2, right 1 + 2*2) or right 4 (n-to-m): that index wins
    at the planted shift."""
    rng = seeded_rng(("mor", form))
    left = rng.standard_normal((nl, 30, 30)).astype(np.float32)
    rights = rng.standard_normal((nr, 7, 7)).astype(np.float32)
    rights[1 + nl * index if form == "n-to-mn" else index] = left[1, 5:12, 8:15]
    z = reduce_run(xcorr, tmp_path, form, left, rights, "--max-over-rights", "--mode", "valid", "--normalize", "zncc")
    assert sorted(z) == ["index", "value"] and z["value"].shape == (lefts, 24, 24)
    assert z["index"][1, 5, 8] == index and abs(z["value"][1, 5, 8] - 1) < 1e-5
    assert z["index"].min() >= 0 and z["index"].max() < (nr // nl if form == "n-to-mn" else nr)


def test_max_over_rights_of_signals(xcorr, tmp_path):
    rng = seeded_rng("mor1d")
    left = rng.standard_normal(100).astype(np.float32)
    rights = rng.standard_normal((4, 9)).astype(np.float32)
    rights[2] = left[30:39]
    z = reduce_run(xcorr, tmp_path, "one-to-many", left, rights, "--max-over-rights", "--mode", "valid",
                   "--normalize", "zncc", dims=1)
    assert z["value"].shape == z["index"].shape == (1, 92)
    assert z["index"][0, 30] == 2 and np.argmax(z["value"][0]) == 30


# --- files ---------------------------------------------------------------------------------

def small_inputs(tmp_path, nr=3):
    rng = seeded_rng("small")
    return (save(tmp_path / "l.npy", rng.random((9, 10), dtype=np.float32)),
            save(tmp_path / "r.npy", rng.random((nr, 3, 4), dtype=np.float32)))


def test_npz_output_overwrites_atomically_and_follows_links(xcorr, tmp_path):
    left, right = small_inputs(tmp_path)
    out, link = tmp_path / "o.npz", tmp_path / "hard.npz"
    out.write_bytes(b"old")
    os.link(out, link)
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-many", left, right, "--out", out, "--peaks", "1")
    assert r.returncode == 0, r.stderr
    assert np.load(out)["value"].shape == (3, 1) and link.read_bytes() == b"old"
    sym = tmp_path / "sym.npz"
    sym.symlink_to("target.npz")
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-many", left, right, "--out", sym, "--max-over-rights")
    assert r.returncode == 0, r.stderr
    assert sym.is_symlink() and np.load(tmp_path / "target.npz")["index"].shape == (1, 11, 13)
    assert temp_files(tmp_path) == []


def test_npz_output_over_an_input_is_refused(xcorr, tmp_path):
    left, right = small_inputs(tmp_path)
    alias = tmp_path / "in.npz"
    os.link(left, alias)
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-many", alias, right, "--out", alias, "--peaks", "2")
    one_line_error(r, 2, "same file as the left input")
    np.load(left)  # untouched


@pytest.mark.parametrize("args,needle", [
    (["--peaks", "0"], "--peaks"),
    (["--peaks", "-2"], "--peaks"),
    (["--peaks", "two"], "--peaks"),
    (["--peaks"], "--peaks needs a value"),
    (["--peaks", "2", "--min-distance", "-1"], "--min-distance"),
    (["--peaks", "2", "--subpixel", "cubic"], "cubic"),
    (["--min-distance", "2"], "--min-distance applies to --peaks"),
    (["--subpixel", "gaussian"], "--subpixel applies to --peaks"),
    (["--stats"], "--stats applies to --max-over-rights"),
    (["--peaks", "2", "--stats"], "--stats applies to --max-over-rights"),
    (["--max-over-rights", "--min-distance", "1"], "--min-distance applies to --peaks"),
    (["--peaks", "2", "--max-over-rights"], "both reduce"),
    (["--peaks", "1", "--peaks", "2"], "given twice"),
    (["--peaks", "2", "--chunk", "1"], "--chunk"),
    (["--max-over-rights", "--form", "one-to-one"], "one-to-one"),
    (["--peaks", "2", "--out", "{tmp}/p.npy"], ".npz"),
    (["--max-over-rights", "--out", "{tmp}/m"], ".npz"),
])
def test_bad_reduction_is_refused(xcorr, tmp_path, args, needle):
    left, right = small_inputs(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    form = [] if "--form" in args else ["--form", "one-to-many"]
    out = [] if "--out" in args else ["--out", str(tmp_path / "o.npz")]
    before = sorted(p.name for p in tmp_path.iterdir())
    r = xrun(xcorr, "--algorithm", "reference", *form, left, right, *out, *args)
    one_line_error(r, 2, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no file, no temporary


def test_help_names_the_reductions(xcorr):
    r = run([xcorr, "run", "--help"])
    assert r.returncode == 0
    for option in ("--peaks K", "--min-distance R", "--subpixel", "--max-over-rights", "--stats", ".npz"):
        assert option in r.stdout, option


# --- on a GPU ----------------------------------------------------------------------------------

def gpu_algorithms(registry):
    names = [v["name"] for v in registry]
    return [a for a in ("overlap-wise", "auto") if a == "auto" or a in names]


def test_gpu_peaks_agree_with_the_reference(gpu, registry, xcorr, tmp_path):
    rng = seeded_rng("gpu-peaks")
    left = rng.standard_normal((2, 48, 40)).astype(np.float32)
    right = np.stack([left[0, 7:18, 3:16], left[1, 20:31, 11:24]])
    args = ["--peaks", "4", "--min-distance", "2", "--subpixel", "gaussian", "--normalize", "zncc", "--mode", "valid"]
    want = reduce_run(xcorr, tmp_path, "n-to-mn", left, right, *args)
    for algorithm in gpu_algorithms(registry):
        r = xrun(xcorr, "--algorithm", algorithm, "--form", "n-to-mn", save(tmp_path / "l.npy", left),
                 save(tmp_path / "r.npy", right), "--out", tmp_path / "g.npz", "--validate", *args)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip().endswith("ok"), r.stdout
        with np.load(tmp_path / "g.npz") as z:
            assert z["value"].shape == (2, 4) and z["shift"].dtype == np.int32
            np.testing.assert_array_equal(z["shift"][:, 0], want["shift"][:, 0])
            np.testing.assert_allclose(z["value"][:, 0], want["value"][:, 0], atol=1e-4)
            np.testing.assert_allclose(z["subpixel"][:, 0], want["subpixel"][:, 0], atol=0.01)


@pytest.mark.parametrize("form,nl,nr", [("one-to-many", 1, 5), ("n-to-m", 2, 3), ("n-to-mn", 2, 6)])
def test_gpu_max_over_rights_agrees_with_the_reference(gpu, registry, xcorr, tmp_path, form, nl, nr):
    rng = seeded_rng(("gpu-mor", form))
    left = rng.standard_normal((nl, 37, 41)).astype(np.float32)
    rights = rng.standard_normal((nr, 9, 8)).astype(np.float32)
    want = reduce_run(xcorr, tmp_path, form, left, rights, "--max-over-rights", "--stats")
    for algorithm in gpu_algorithms(registry):
        r = xrun(xcorr, "--algorithm", algorithm, "--form", form, save(tmp_path / "l.npy", left),
                 save(tmp_path / "r.npy", rights), "--out", tmp_path / "g.npz", "--validate", "--max-over-rights",
                 "--stats")
        assert r.returncode == 0, r.stdout + r.stderr
        with np.load(tmp_path / "g.npz") as z:
            scale = np.abs(want["value"]).max()
            np.testing.assert_allclose(z["value"], want["value"], atol=1e-5 * scale)
            assert np.mean(z["index"] == want["index"]) > 0.99  # near-ties may go either way within the bound
            np.testing.assert_allclose(z["sum"], want["sum"], atol=1e-4 * scale * nr)


def test_validator_reduction_cases_pass(gpu, registry):
    if "overlap-wise" not in [v["name"] for v in registry]:
        pytest.skip("overlap-wise is not in this build (meson -Dvariants=...)")
    r = run([binary("xcorr_validate"), "--variant", "overlap-wise", "--reductions", "only"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    lines = r.stdout.splitlines()
    peaks = [l for l in lines if "reduce=peaks" in l]
    mor = [l for l in lines if "reduce=max-over-rights" in l]
    assert peaks and mor and all(l.startswith("PASS") for l in peaks + mor), r.stdout[-3000:]
    text = "\n".join(peaks)
    for needle in ("inputs=nan", "inputs=constant", "gaussian", "parabolic", "min-distance 2", "window=valid",
                   "normalize zncc"):
        assert needle in text, needle
    assert "stats" in "\n".join(mor)
    for form in ("one-to-many", "n-to-m", "n-to-mn"):
        assert any(form in l for l in mor), form


def test_bench_times_a_checked_reduction(gpu, registry, tmp_path):
    if "overlap-wise" not in [v["name"] for v in registry]:
        pytest.skip("overlap-wise is not in this build (meson -Dvariants=...)")
    out = tmp_path / "b.json"
    r = run([binary("xcorr_bench"), "--min-time", "0.01",
             "--case", "variant=overlap-wise form=one-to-many size=32 nR=4 reduce=peaks k=3 min_distance=2 subpixel=gaussian",
             "--case", "variant=overlap-wise form=n-to-m size=24 nL=2 nR=3 reduce=max-over-rights stats=1",
             "--benchmark_out=" + str(out), "--benchmark_out_format=json"])
    assert r.returncode == 0, r.stderr
    bench = json.loads(out.read_text())["benchmarks"]
    assert len(bench) == 2 and not any(b.get("error_occurred") for b in bench), bench
    assert "/reduce:peaks" in bench[0]["name"] and "/reduce:max-over-rights" in bench[1]["name"]
    assert all(b["check_samples"] > 0 for b in bench)


@pytest.mark.parametrize("case,needle", [
    ("reduce=peaks k=0", "k="),
    ("reduce=peaks k=2 subpixel=cubic", "cubic"),
    ("reduce=peaks min_distance=-1", "min_distance="),
    ("reduce=sideways", "reduce="),
    ("k=3", "k= applies to reduce=peaks"),
    ("reduce=peaks stats=1", "stats= applies to reduce=max-over-rights"),
    ("reduce=max-over-rights stats=maybe", "stats="),
])
def test_bench_bad_reduction_case(registry, case, needle):
    if "overlap-wise" not in [v["name"] for v in registry]:
        pytest.skip("overlap-wise is not in this build (meson -Dvariants=...)")
    r = run([binary("xcorr_bench"), "--case", "variant=overlap-wise form=one-to-many size=8 nR=2 " + case,
             "--benchmark_list_tests"])
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_bench_max_over_rights_of_one_to_one_is_refused(registry):
    if "overlap-wise" not in [v["name"] for v in registry]:
        pytest.skip("overlap-wise is not in this build (meson -Dvariants=...)")
    r = run([binary("xcorr_bench"), "--case", "variant=overlap-wise form=one-to-one size=8 reduce=max-over-rights",
             "--benchmark_list_tests"])
    assert r.returncode == 2 and "one-to-one" in r.stderr, r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--reductions", "maybe"], "--reductions: expected only, also or none"),
    (["--reductions", "only", "--reductions", "none"], "--reductions is given twice"),
    (["--reductions", "only", "--shape", "9x9,3x3"], "--reductions only"),
    (["--reductions", "only", "--windows", "none"], "--reductions only"),
    (["--reductions"], "needs a value"),
])
def test_validator_bad_reductions_option(args, needle):
    r = run([binary("xcorr_validate"), *args])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, (r.returncode, r.stderr)


def test_validator_help_names_the_reductions():
    r = run([binary("xcorr_validate"), "--help"])
    assert r.returncode == 0 and "--reductions" in r.stdout, r.stdout
