"""A batch split across GPUs and into pieces (lib/xcorr/batch.hpp): `xcorr run
--gpus LIST --chunk N` and `xcorr explain --gpus/--chunk`.

CPU (runs everywhere): the split itself, from `xcorr explain --json` (no GPU needed): the pieces
cover every output exactly once, in order, each within --chunk, the devices' runs equal to within
one output, and every output of every piece pairs the same left and right matrices as the whole
batch does (the pair map of each piece's own form, offset by its first left and right); the
reference run piece by piece on the CPU (`--algorithm reference --chunk N`) equals the whole
reference bit for bit in every form, window and normalization; bad --gpus/--chunk exit 2 with one
line and write nothing. The chunked reference runs through the GPU's pipeline schedule (batch.cpp's
run_pipeline: two slots, inputs copied only when the slot does not hold them, taken from the other
slot when it does, outputs drained through a staging buffer, every event wait and record) on an
emulated asynchronous machine (queues running behind the host, in random orders the waits allow),
so those tests check the schedule (removing any one of its waits fails a dozen of them): piece
counts odd, even, below the slots, pieces of different shapes (plans), and a piece large enough
that its copy out of staging is split over threads. --split blocks: n-to-m blocks (all of a
device's lefts x a run of rights, their outputs rows of the batch's) cover every output once and
equal the whole reference bit for bit through the same schedule (their rows copied out to their
places).
GPU (skipped without one): named variants and auto, pieces on every GPU found, --validate against
the CPU reference; with two GPUs or more, both get pieces."""
import json
import os
import re

import numpy as np
import pytest

from conftest import one_line_error, run, save, seeded_rng, xrun
from xcorr_np import FORMS, correlate, pairs

DESCRIBE = re.compile(r"^(one-to-one|one-to-many|n-to-mn|n-to-m) (\d+)x\[(\d+)x(\d+)\] \* (\d+)x\[(\d+)x(\d+)\]")

STACKS = {"one-to-one": (1, 1), "one-to-many": (1, 7), "n-to-mn": (3, 12), "n-to-m": (4, 5)}


def explain_json(xcorr, form, nL, nR, *extra, env=None):
    """`xcorr explain --json` of lefts of 9 x 11 and rights of 4 x 5 (with `env` added to the environment)."""
    r = run([xcorr, "explain", "--form", form, "--left", f"{nL}:9x11", "--right", f"{nR}:4x5", "--json", *extra],
            env={**os.environ, **env} if env else None)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def explain_pieces(xcorr, form, nL, nR, *extra):
    return explain_json(xcorr, form, nL, nR, *extra)["pieces"]


def check_split(form, nL, nR, pieces, chunk, devices, by_rights=False):
    """The pieces cover every output of the batch exactly once, each within `chunk`; output i of a
    piece (its rows of `row` outputs, `pitch` apart) pairs the left and right that output pairs in
    the whole batch; pieces come in order of their first output; devices' runs are equal to within
    one output (by_rights: within one right's column of nL outputs) and taken in the order given.
    Returns the pieces' layouts."""
    whole = pairs(form, nL, nR)
    seen = np.zeros(len(whole), int)
    per_device = {}
    last_out0 = -1
    for c in pieces:
        m = DESCRIBE.match(c["problem"])
        assert m, c["problem"]
        pform, pnL, pnR = m.group(1), int(m.group(2)), int(m.group(5))
        assert (m.group(3), m.group(4), m.group(6), m.group(7)) == ("9", "11", "4", "5")  # sizes unchanged
        assert c["out0"] > last_out0, pieces  # in order
        last_out0 = c["out0"]
        assert c["outputs"] == len(pairs(pform, pnL, pnR)) == c["rows"] * c["row"] >= 1
        if chunk:
            assert c["outputs"] <= chunk
        for i, (pl, pq) in enumerate(pairs(pform, pnL, pnR)):
            k = c["out0"] + (i // c["row"]) * c["pitch"] + i % c["row"]
            assert (c["left0"] + pl, c["right0"] + pq) == whole[k], (c, i)
            seen[k] += 1
        per_device[c["device"]] = per_device.get(c["device"], 0) + c["outputs"]
    assert (seen == 1).all(), seen
    ordinals = [int(d) for d in devices.split(",")]
    assert set(per_device) <= set(ordinals)
    if len(whole) >= len(ordinals):  # every device works, runs equal to within one output
        assert sorted(per_device) == sorted(ordinals)
        assert max(per_device.values()) - min(per_device.values()) <= (nL if by_rights else 1)
    # Devices take the runs in the order given.
    firsts = [next(c["out0"] for c in pieces if c["device"] == d) for d in ordinals if d in per_device]
    assert firsts == sorted(firsts)
    return [(c["rows"], c["row"], c["pitch"]) for c in pieces]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("devices", ["0", "0,1", "3,1,2"])
@pytest.mark.parametrize("chunk", [None, 1, 2, 3, 5, 8])
def test_split_covers_every_output_once_with_the_batchs_pairs(xcorr, form, devices, chunk):
    nL, nR = STACKS[form]
    extra = ["--gpus", devices] + (["--chunk", str(chunk)] if chunk else [])
    pieces = explain_pieces(xcorr, form, nL, nR, *extra)
    layouts = check_split(form, nL, nR, pieces, chunk, devices)
    assert all(rows == 1 for rows, _, _ in layouts)  # whole-left pieces: contiguous runs
    assert [c["out0"] for c in pieces] == list(np.cumsum([0] + [c["outputs"] for c in pieces[:-1]]))


def rights_shares(nR, devices):
    """The devices' runs of the rights, as a batch divided by rights deals them: equal, contiguous,
    the first ones one longer, in the order given."""
    n = len(devices.split(","))
    base, extra = divmod(nR, n)
    firsts = [d * base + min(d, extra) for d in range(n + 1)]
    return list(zip(firsts, firsts[1:]))


@pytest.mark.parametrize("devices", ["0", "0,1", "3,1,2"])
@pytest.mark.parametrize("nL,nR,chunk", [(4, 40, 16), (4, 40, 20), (4, 40, 33), (6, 50, 36), (6, 50, 200),
                                         (7, 30, 49), (3, 64, 100), (4, 40, 15), (5, 9, 40), (4, 3, 100)])
def test_split_blocks_cover_every_output_once(xcorr, devices, nL, nR, chunk):
    """--split blocks: a device's whole lefts that take more than one piece become blocks of all
    of them and runs of at least as many rights (each right in one block of the device), the rest
    as --split lefts cuts it; where a block of all the lefts would take fewer rights than lefts
    (4 x 40 by 15), the first left goes as --split lefts cuts it and the last three make the blocks;
    where the whole lefts fit one piece (4 x 3 by 100) the pieces are --split lefts's. On several devices, where the right
    stack holds more data than the left one (rights of 4 x 5, lefts of 9 x 11: all but 7 x 30 and
    5 x 9), the devices divide the rights, not the lefts: each takes every left with its run of the
    rights, cut as blocks (or lefts) of that n-to-m batch, so that no right is uploaded twice."""
    extra = ["--gpus", devices, "--chunk", str(chunk)]
    ordinals = [int(d) for d in devices.split(",")]
    by_rights = len(ordinals) > 1 and nR * 4 * 5 > nL * 9 * 11
    pieces = explain_pieces(xcorr, "n-to-m", nL, nR, *extra, "--split", "blocks")
    check_split("n-to-m", nL, nR, pieces, chunk, devices, by_rights)
    lefts = explain_pieces(xcorr, "n-to-m", nL, nR, *extra)
    blocks = [c for c in pieces if c["rows"] > 1]
    # On one device: at each left boundary the w whole lefts left become blocks where they take more
    # than one piece and a block takes at least w rights: from the first left if w = nL qualifies.
    cut = [w for w in range(1, nL + 1) if w * nR > chunk and chunk // w >= w]
    if devices == "0":
        if nL in cut:
            assert blocks and all(c["problem"].startswith(f"n-to-m {nL}x") for c in blocks), pieces
            assert sorted(c["right0"] for c in blocks) == list(range(0, nR, chunk // nL))  # each right once
        elif not cut:
            assert pieces == lefts and not blocks
        elif chunk < nR:  # every left in pieces of its own, so every boundary is reached: the blocks
            # begin where the lefts left first qualify, max(cut) of them, the lefts before as --split lefts
            w = max(cut)
            assert blocks and {c["left0"] for c in blocks} == {nL - w} and all(c["rows"] == w for c in blocks), pieces
            assert [c for c in pieces if c["left0"] < nL - w] == [c for c in lefts if c["left0"] < nL - w]
    shares = rights_shares(nR, devices) if by_rights else [(0, nR)] * len(ordinals)
    for c in blocks:  # all of a device's whole lefts, runs of chunk // lefts rights (the last shorter)
        q0, q1 = shares[ordinals.index(c["device"])]
        assert c["rows"] == int(DESCRIBE.match(c["problem"]).group(2)) and c["pitch"] == nR
        run_ = chunk // c["rows"]
        assert q0 <= c["right0"] < q1 and (c["right0"] - q0) % run_ == 0, (c, q0, q1)
        assert c["row"] == min(run_, q1 - c["right0"]) or (by_rights and c["row"] == q1 - q0), (c, q0, q1)
    if by_rights:  # every piece within its device's rights, every left in each device's pieces
        for d, (q0, q1) in zip(ordinals, shares):
            own = [c for c in pieces if c["device"] == d]
            assert all(q0 <= c["right0"] and c["right0"] + c["row"] <= q1 for c in own), (d, own)
            assert {c["left0"] + r for c in own for r in range(c["rows"])} == set(range(nL))


@pytest.mark.parametrize("devices,chunk,nR", [("0", 16, 40), ("0,1", 12, 16), ("3,1,2", 10, 16)])
def test_split_auto_is_lefts_for_pageable_memory(xcorr, devices, chunk, nR):
    """--split auto (the default) cuts as lefts where nothing is page-locked, which is all that
    explain (no arrays) and xcorr run (its arrays are pageable) know, on one GPU, or on several
    where the left stack holds at least as much data as the right one (4 lefts of 9 x 11, 16
    rights of 4 x 5); and it differs from blocks here, so the default is not blocks."""
    extra = ["--gpus", devices, "--chunk", str(chunk)]
    for asked, ran in (("auto", "lefts"), ("lefts", "lefts"), ("blocks", "blocks")):  # explain says which
        assert explain_json(xcorr, "n-to-m", 4, nR, *extra, "--split", asked)["split"] == ran, asked
    text = run([xcorr, "explain", "--form", "n-to-m", "--left", "4:9x11", "--right", f"{nR}:4x5", *extra]).stdout
    assert "split lefts: auto for pageable arrays" in text, text
    auto = explain_pieces(xcorr, "n-to-m", 4, nR, *extra, "--split", "auto")
    assert auto == explain_pieces(xcorr, "n-to-m", 4, nR, *extra)
    assert auto == explain_pieces(xcorr, "n-to-m", 4, nR, *extra, "--split", "lefts")
    assert auto != explain_pieces(xcorr, "n-to-m", 4, nR, *extra, "--split", "blocks")


@pytest.mark.parametrize("devices,chunk", [("0,1", 20), ("3,1,2", 33), ("0,1", 1000)])
def test_split_auto_is_blocks_where_the_gpus_divide_the_rights(xcorr, devices, chunk):
    """On several GPUs, where the right stack holds more data than the left one (40 rights of 4 x 5
    against 4 lefts of 9 x 11), auto takes blocks even for pageable arrays and the GPUs divide the
    rights (each every left and its run of the rights: on two H100s 34.1 against 40.0 ms dividing
    the lefts, notes/multi-gpu.md); --split lefts still divides them by lefts."""
    extra = ["--gpus", devices, "--chunk", str(chunk)]
    assert explain_json(xcorr, "n-to-m", 4, 40, *extra)["split"] == "blocks"
    text = run([xcorr, "explain", "--form", "n-to-m", "--left", "4:9x11", "--right", "40:4x5", *extra]).stdout
    assert "split blocks: auto, the GPUs dividing the rights; each GPU takes every left" in text, text
    auto = explain_pieces(xcorr, "n-to-m", 4, 40, *extra)
    assert auto == explain_pieces(xcorr, "n-to-m", 4, 40, *extra, "--split", "blocks")
    ordinals = [int(d) for d in devices.split(",")]
    for d, (q0, q1) in zip(ordinals, rights_shares(40, devices)):
        own = [c for c in auto if c["device"] == d]
        assert {c["left0"] + r for c in own for r in range(c["rows"])} == {0, 1, 2, 3}
        assert sorted((c["right0"], c["right0"] + c["row"]) for c in own)[0][0] == q0
        assert max(c["right0"] + c["row"] for c in own) == q1
    by_lefts = explain_json(xcorr, "n-to-m", 4, 40, *extra, "--split", "lefts")
    assert by_lefts["split"] == "lefts" and by_lefts["pieces"] != auto
    assert explain_json(xcorr, "n-to-m", 4, 40, "--chunk", str(chunk))["split"] == "lefts"  # one GPU


def test_split_blocks_refused_where_nothing_is_cut(xcorr, tmp_path):
    """--split needs --gpus or --chunk (run and explain); a value other than auto, lefts or blocks
    exits 2."""
    r = run([xcorr, "explain", "--form", "n-to-m", "--left", "4:9x11", "--right", "40:4x5", "--split", "blocks"])
    one_line_error(r, 2, "--split")
    r = run([xcorr, "explain", "--form", "n-to-m", "--left", "4:9x11", "--right", "40:4x5", "--chunk", "16",
             "--split", "columns"])
    one_line_error(r, 2, "expected auto, lefts or blocks")
    rng = seeded_rng("split-refused")
    lp = save(tmp_path / "l.npy", rng.random((4, 9, 9), dtype=np.float32))
    rp = save(tmp_path / "r.npy", rng.random((40, 3, 3), dtype=np.float32))
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "n-to-m", lp, rp, "--out", out, "--split", "blocks")
    one_line_error(r, 2, "--split")
    assert not out.exists()


@pytest.mark.parametrize("normalize", ["none", "zncc", "zero-lag"])
def test_blocks_reference_equals_the_whole_reference(xcorr, tmp_path, normalize):
    """The reference cut into n-to-m blocks (rows of each block copied out of the staging to their
    places, through the pipeline's schedule on the emulated machine) equals the whole, bit for bit,
    in every window; block counts odd, even, with a shorter last block, and blocks beside
    one-to-many pieces (the chunk not a multiple of the lefts)."""
    rng = seeded_rng(("blocks", normalize))
    nL, nR, hL, wL, hR, wR = 4, 29, 9, 13, 5, 4
    left = (rng.random((nL, hL, wL), dtype=np.float32) + (1 if normalize == "zero-lag" else -0.5)).astype(np.float32)
    right = rng.random((nR, hR, wR), dtype=np.float32)
    lp, rp = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    for window in windows(hL, wL, hR, wR):
        base = ["--algorithm", "reference", "--form", "n-to-m", "--normalize", normalize, *window, lp, rp]
        assert xrun(xcorr, *base, "--out", tmp_path / "whole.npy").returncode == 0
        whole = np.load(tmp_path / "whole.npy")
        for chunk in (16, 20, 29, 30, 58, 100):
            rows = [c["rows"] for c in explain_pieces(xcorr, "n-to-m", nL, nR, "--chunk", str(chunk), "--split", "blocks")]
            assert max(rows) == nL, (chunk, rows)  # blocks were cut
            out = tmp_path / f"b{chunk}.npy"
            r = xrun(xcorr, *base, "--out", out, "--chunk", str(chunk), "--split", "blocks", "--validate")
            assert r.returncode == 0, r.stderr
            assert f"{len(rows)} pieces of at most" in r.stderr, r.stderr
            np.testing.assert_array_equal(np.load(out), whole, err_msg=f"chunk {chunk} {window}")


def windows(hL, wL, hR, wR):
    return [[], ["--mode", "same"], ["--max-shift", "2,3"], ["--shifts", f"{-hR}:{hL // 2},1:{wL + 2}"]]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("normalize", ["none", "zncc", "zero-lag"])
def test_chunked_reference_equals_the_whole_reference(xcorr, tmp_path, form, normalize):
    rng = seeded_rng(("batch", form, normalize))
    nL, nR = STACKS[form]
    hL, wL, hR, wR = 9, 13, 5, 4
    left = (rng.random((nL, hL, wL), dtype=np.float32) + (1 if normalize == "zero-lag" else -0.5)).astype(np.float32)
    right = rng.random((nR, hR, wR), dtype=np.float32)
    lp, rp = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    for window in windows(hL, wL, hR, wR):
        base = ["--algorithm", "reference", "--form", form, "--normalize", normalize, *window, lp, rp]
        r = xrun(xcorr, *base, "--out", tmp_path / "whole.npy")
        assert r.returncode == 0, r.stderr
        whole = np.load(tmp_path / "whole.npy")
        for chunk in (1, 2, 3, 5):
            out = tmp_path / f"c{chunk}.npy"
            r = xrun(xcorr, *base, "--out", out, "--chunk", str(chunk), "--validate")
            assert r.returncode == 0, r.stderr
            m = re.search(r"(\d+) pieces of at most (\d+) output matrices: \d+ on the CPU \(reference\)", r.stderr)
            assert m and int(m.group(2)) <= chunk and int(m.group(1)) >= whole.shape[0] / chunk, r.stderr
            got = np.load(out)
            assert got.shape == whole.shape and got.dtype == np.float32
            np.testing.assert_array_equal(got, whole, err_msg=f"chunk {chunk} {window}")


# (form, lefts, rights): n-to-m whose pieces of whole lefts take every right (held by a slot, or
# copied from the other slot) and end on a smaller piece; n-to-mn in whole groups (every left, held)
# or parts of groups (the same first left every other piece); one-to-many.
PIPELINE_STACKS = [("n-to-m", 7, 3), ("n-to-mn", 4, 12), ("one-to-many", 1, 9)]


@pytest.mark.parametrize("form,nL,nR", PIPELINE_STACKS)
def test_pipelined_reference_equals_the_whole_for_every_piece_count(xcorr, tmp_path, form, nL, nR):
    rng = seeded_rng(("pipeline", form))
    left = rng.random((nL, 9, 13), dtype=np.float32) - 0.5
    right = rng.random((nR, 5, 4), dtype=np.float32)
    lp, rp = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    base = ["--algorithm", "reference", "--form", form, "--max-shift", "3,2", lp, rp]
    assert xrun(xcorr, *base, "--out", tmp_path / "whole.npy").returncode == 0
    whole = np.load(tmp_path / "whole.npy")
    counts = set()
    for chunk in (1, 2, 3, 4, 5, 6, 7, 8, 14, 21, 1000):
        pieces = explain_pieces(xcorr, form, nL, nR, "--chunk", str(chunk))
        counts.add(len(pieces))
        out = tmp_path / f"c{chunk}.npy"
        r = xrun(xcorr, *base, "--out", out, "--chunk", str(chunk))
        assert r.returncode == 0, r.stderr
        assert f"{len(pieces)} pieces of at most" in r.stderr, r.stderr
        np.testing.assert_array_equal(np.load(out), whole, err_msg=f"chunk {chunk}: {len(pieces)} pieces")
    assert 1 in counts and any(c % 2 for c in counts if c > 1) and any(c % 2 == 0 for c in counts)


def test_pipelined_reference_large_piece_copied_out_by_several_threads(xcorr, tmp_path):
    """One piece of 34 x 513 x 513 floats (batch.cpp's host_copy splits the copy out of staging in
    parts of 64 Ki floats or more for the kept workers, up to copy_threads of them) equals 34 pieces
    of 263 Ki floats (at most 4 parts each), and the float64 reference. (The thread counts, spins
    and threads started per part that switches used to force here were measured and removed:
    notes/multi-gpu.md.)"""
    rng = seeded_rng("pipeline-large")
    left, right = rng.random((1, 512, 512), dtype=np.float32), rng.random((34, 2, 2), dtype=np.float32)
    assert 34 * 513 * 513 >= 32 * (1 << 18) and 513 * 513 < 8 * (1 << 16)
    lp, rp = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    base = [xcorr, "run", "--algorithm", "reference", "--form", "one-to-many", lp, rp]
    for name, chunk in (("one", "34"), ("many", "1")):
        r = run([*map(str, base), "--out", str(tmp_path / f"{name}.npy"), "--chunk", chunk])
        assert r.returncode == 0, r.stderr
    one, many = np.load(tmp_path / "one.npy"), np.load(tmp_path / "many.npy")
    np.testing.assert_array_equal(one, many)
    want = correlate("one-to-many", left.astype(np.float64), right.astype(np.float64))
    np.testing.assert_allclose(one, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("args,needle", [
    (["--chunk", "0"], "--chunk"),
    (["--chunk", "two"], "--chunk"),
    (["--chunk", "-3"], "--chunk"),
    (["--gpus", "0,0"], "given twice"),
    (["--gpus", "gpu0"], "expected all or device ordinals"),
    (["--gpus", "0,,1"], "expected all or device ordinals"),
    (["--gpus", ""], "expected all or device ordinals"),
])
def test_bad_split_options_exit_2(xcorr, tmp_path, args, needle):
    rng = seeded_rng(("bad-batch", *args))
    lp = save(tmp_path / "l.npy", rng.random((9, 9), dtype=np.float32))
    rp = save(tmp_path / "r.npy", rng.random((3, 3, 3), dtype=np.float32))
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "overlap-wise", "--form", "one-to-many", lp, rp, "--out", out, *args)
    one_line_error(r, 2, needle)
    assert not out.exists()


def test_reference_takes_no_gpus(xcorr, tmp_path):
    rng = seeded_rng("ref-gpus")
    lp = save(tmp_path / "l.npy", rng.random((9, 9), dtype=np.float32))
    rp = save(tmp_path / "r.npy", rng.random((3, 3, 3), dtype=np.float32))
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-many", lp, rp, "--out", out, "--gpus", "0")
    one_line_error(r, 2, "reference runs on the cpu")
    assert not out.exists()


# --- GPU ---------------------------------------------------------------------------------------------

def gpu_count():
    """GPUs visible to CUDA: `xcorr run --gpus all` uses every one of them."""
    import shutil
    if shutil.which("nvidia-smi") is None:
        return 0
    r = run(["nvidia-smi", "-L"])
    return sum(line.startswith("GPU ") for line in r.stdout.splitlines()) if r.returncode == 0 else 0


@pytest.mark.parametrize("algorithm", ["auto", "overlap-wise", "fft"])
@pytest.mark.parametrize("form", FORMS)
def test_gpu_pieces_on_every_gpu_match_the_reference(gpu, xcorr, registry, tmp_path, algorithm, form):
    if algorithm != "auto" and algorithm not in {v["name"] for v in registry}:
        pytest.skip(f"{algorithm} is not in this build")
    rng = seeded_rng(("gpu-batch", algorithm, form))
    nL, nR = STACKS[form]
    left, right = rng.random((nL, 37, 29), dtype=np.float32) - 0.5, rng.random((nR, 11, 6), dtype=np.float32)
    lp, rp = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    ref = tmp_path / "ref.npy"
    assert xrun(xcorr, "--algorithm", "reference", "--form", form, lp, rp, "--out", ref).returncode == 0
    for extra in (["--gpus", "all"], ["--gpus", "all", "--chunk", "2"], ["--chunk", "3"]):
        out = tmp_path / "o.npy"
        r = xrun(xcorr, "--algorithm", algorithm, "--form", form, lp, rp, "--out", out, "--validate", *extra)
        assert r.returncode == 0, (extra, r.stdout, r.stderr)
        want = np.load(ref).astype(np.float64)
        got = np.load(out)
        assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want), extra


def test_gpu_default_pieces_are_pipelined(gpu, xcorr, registry, tmp_path):
    """Without --chunk a device's run is cut into pieces of about 64 MB of output (whole lefts of
    n-to-m), so that their copies overlap each other's kernels: 8 lefts x 64 rights of full 257 x 257
    outputs (135 MB) are at least two pieces of at most 3 lefts, and still equal the reference."""
    if "fft" not in {v["name"] for v in registry}:
        pytest.skip("fft is not in this build")
    rng = seeded_rng("gpu-pipelined")
    left, right = rng.random((8, 256, 256), dtype=np.float32) - 0.5, rng.random((64, 2, 2), dtype=np.float32)
    lp, rp = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    out = tmp_path / "o.npy"
    for gpus in ("0", "all"):
        r = xrun(xcorr, "--algorithm", "fft", "--form", "n-to-m", lp, rp, "--out", out, "--validate", "--gpus", gpus)
        assert r.returncode == 0, r.stderr
        m = re.search(r"(\d+) pieces of at most (\d+) output matrices", r.stderr)
        assert m and int(m.group(1)) >= 2 and int(m.group(2)) <= 3 * 64 and int(m.group(2)) % 64 == 0, r.stderr
        # where each device's time went, a line per device
        # xcorr run's arrays are pageable: split auto cuts whole lefts
        assert re.search(r"GPU \d+: start [\d.]+ ms, setup [\d.]+ ms, pipeline [\d.]+ ms, teardown [\d.]+ ms, "
                         r"finish [\d.]+ ms, split lefts", r.stderr), r.stderr


def test_gpu_two_gpus_both_get_pieces(gpu, xcorr, tmp_path):
    if gpu_count() < 2:
        pytest.skip(f"needs two GPUs ({gpu_count()} found)")
    rng = seeded_rng("two-gpus")
    left, right = rng.random((4, 64, 64), dtype=np.float32), rng.random((6, 16, 16), dtype=np.float32)
    lp, rp = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "auto", "--form", "n-to-m", lp, rp, "--out", out, "--validate", "--gpus", "0,1")
    assert r.returncode == 0, r.stderr
    assert "on GPU 0" in r.stderr and "on GPU 1" in r.stderr, r.stderr


# --- the Python package: correlate2d/correlate1d(devices=, chunk=) --------------------------------

def _package():
    return pytest.importorskip("xcorr", reason="the package xcorr is not installed (XCORR_NO_PYTHON_PACKAGE)")


@pytest.mark.parametrize("kwargs,needle", [
    (dict(devices="most"), "devices must be 'all'"),
    (dict(devices=[]), "non-empty list"),
    (dict(devices=[0, -1]), "non-empty list"),
    (dict(devices=[True]), "non-empty list"),
    (dict(devices=3), "devices must be 'all'"),
    (dict(chunk=0), "chunk must be a positive"),
    (dict(chunk=2.5), "chunk must be a positive"),
    (dict(chunk=2, algorithm="reference"), "the reference runs on the CPU"),
    (dict(chunk=2, stream=0), "give no stream="),
    (dict(chunk=2, out=np.empty((3, 3), np.float32)), "out must have shape"),
    (dict(chunk=2, split="columns"), "split must be 'auto', 'lefts' or 'blocks'"),
    (dict(split="blocks"), "split= cuts a batch run with devices= or chunk="),
    (dict(split="blocks", algorithm="reference"), "split= cuts a batch run with devices= or chunk="),
])
def test_package_batch_options_are_checked(kwargs, needle):
    """Refused with a ValueError before any GPU is needed (so also in CI)."""
    xcorr = _package()
    rng = seeded_rng(("pkg-batch", needle))
    left, right = rng.random((2, 9, 8), dtype=np.float32), rng.random((3, 4, 5), dtype=np.float32)
    with pytest.raises(ValueError, match=re.escape(needle)):
        xcorr.correlate2d(left, right, form="n-to-m", **kwargs)


def test_package_batch_refuses_integer_arrays():
    xcorr = _package()
    with pytest.raises(ValueError, match="left must be float32"):
        xcorr.correlate2d(np.ones((2, 9, 8), np.int32), np.ones((3, 4, 5), np.float32), form="n-to-m", chunk=1)


@pytest.mark.peers
def test_package_batch_refuses_a_torch_out_and_names_its_numpy_view():
    """A batch takes NumPy arrays only; the docs once offered a pinned PyTorch tensor as out=, which
    was refused with no way on: the message names tensor.numpy() (the same memory, pinned or not)."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the peers' machine has it)")
    xcorr = _package()
    left, right = np.ones((2, 9, 8), np.float32), np.ones((3, 4, 5), np.float32)
    out = torch.empty((2, 3, 12, 12), dtype=torch.float32)
    with pytest.raises(ValueError, match=r"must be a NumPy array, got torch.*\.numpy\(\) is a NumPy view"):
        xcorr.correlate2d(left, right, form="n-to-m", chunk=1, out=out)


@pytest.mark.parametrize("form", FORMS)
def test_gpu_package_batch_matches_the_reference(gpu, form):
    xcorr = _package()
    rng = seeded_rng(("pkg-gpu-batch", form))
    nL, nR = STACKS[form]
    left, right = rng.random((nL, 33, 27)) - 0.5, rng.random((nR, 9, 12)).astype(np.float32)
    for kwargs in (dict(devices="all"), dict(devices="all", chunk=2), dict(chunk=1, mode="same"),
                   dict(chunk=3, normalize="zncc", max_shift=(4, 6))):
        opts = {k: v for k, v in kwargs.items() if k not in ("devices", "chunk")}
        want = xcorr.correlate2d(left, right, form=form, algorithm="reference", **opts)
        got = xcorr.correlate2d(left, right, form=form, **kwargs)
        assert got.dtype == np.float32 and got.shape == want.shape, kwargs
        if "normalize" in kwargs:
            assert np.abs(got - want).max() <= 1e-4, kwargs
        else:
            assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want), kwargs
    sig_l, sig_r = rng.random((3, 200)), rng.random((5, 31))
    want = xcorr.correlate1d(sig_l, sig_r, form="n-to-m", algorithm="reference", max_lag=20)
    got = xcorr.correlate1d(sig_l, sig_r, form="n-to-m", max_lag=20, chunk=4, devices="all")
    assert got.shape == want.shape and np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)


def test_gpu_package_batch_keeps_its_setup_between_calls(gpu):
    """What a device's run builds (plans, device buffers, streams, the pinned staging: batch.cpp's
    DeviceKit) outlives a call: a second call of the same problem reuses it (last_batch says so)
    and pins nothing more and, on other data, returns its own result, not what the first call left
    in the buffers; a call on another problem builds its own (the kept one freed first); each
    device's phases are reported (xcorr._api.last_batch); clear_cache() frees it all."""
    xcorr = _package()
    xcorr.clear_cache()
    assert xcorr._xcorr.batch_buffer_bytes() == 0
    rng = seeded_rng("pkg-batch-staging")
    right = rng.random((5, 9, 12), dtype=np.float32) - 0.5
    results = []
    for call, (shift, width) in enumerate(((0.0, 33), (3.0, 33), (1.0, 31), (2.0, 31))):
        left = rng.random((4, 40, width), dtype=np.float32) - 0.5 + np.float32(shift)
        want = xcorr.correlate2d(left, right, form="n-to-m", algorithm="reference")
        got = xcorr.correlate2d(left, right, form="n-to-m", chunk=3, devices=[0])  # 8 pieces: both slots
        assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want), shift
        results.append(xcorr._xcorr.batch_buffer_bytes())
        last = xcorr._api.last_batch
        pieces = last["pieces"]  # (device, first pair, pairs, algorithm), at most `chunk` pairs each
        assert [p[1] for p in pieces] == list(np.cumsum([0] + [p[2] for p in pieces[:-1]]))
        assert sum(p[2] for p in pieces) == 20 and max(p[2] for p in pieces) <= 3 and len(pieces) > 2
        assert [d["device"] for d in last["seconds"]] == [0]
        phases = last["seconds"][0]
        assert phases["pipeline"] > 0 and min(phases[k] for k in ("start", "setup", "teardown", "finish")) >= 0
        assert phases["reused"] == (call in (1, 3)), (call, phases)  # a new problem at calls 0 and 2
    assert results[0] > 0 and results[1] == results[0]  # two slots' staging, kept and reused
    xcorr.clear_cache()
    assert xcorr._xcorr.batch_buffer_bytes() == 0
    xcorr.correlate2d(left, right, form="n-to-m", chunk=3, devices=[0])
    assert not xcorr._api.last_batch["seconds"][0]["reused"]  # cleared: built again
    xcorr.clear_cache()


@pytest.mark.parametrize("args,needle", [
    (((2, -1),), "must not be negative"),
    (("2x3",), "sequence of ints"),
    (((2, 3), np.float64), "holds float32"),
])
def test_package_empty_pinned_checks_its_arguments(args, needle):
    """Refused with a ValueError before any GPU is needed (so also in CI)."""
    xcorr = _package()
    with pytest.raises(ValueError, match=re.escape(needle)):
        xcorr.empty_pinned(*args)


def test_gpu_package_batch_downloads_into_a_page_locked_out(gpu):
    """out= in page-locked memory (xcorr.empty_pinned): every device downloads its pieces straight
    into it (last_batch says direct, no staging is pinned) and the result, poisoned beforehand, is
    the reference's and bit for bit the staged path's (same pieces, same kernels); a pageable out=
    goes through the staging (direct False)."""
    xcorr = _package()
    xcorr.clear_cache()
    rng = seeded_rng("pkg-batch-direct")
    left, right = rng.random((6, 40, 33), dtype=np.float32) - 0.5, rng.random((5, 9, 12), dtype=np.float32) - 0.5
    want = xcorr.correlate2d(left, right, form="n-to-m", algorithm="reference", max_shift=(7, 5))
    pinned = xcorr.empty_pinned(want.shape)
    assert pinned.shape == want.shape and pinned.dtype == np.float32 and pinned.flags.c_contiguous
    pinned.fill(np.nan)
    got = xcorr.correlate2d(left, right, form="n-to-m", max_shift=(7, 5), chunk=4, devices="all", out=pinned)
    assert got is pinned and np.isfinite(got).all()
    assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)
    assert len(xcorr._api.last_batch["pieces"]) > 2  # both slots, more than once
    assert all(d["direct"] for d in xcorr._api.last_batch["seconds"]), xcorr._api.last_batch
    assert xcorr._xcorr.batch_buffer_bytes() == 0  # nothing staged
    pageable = np.full(want.shape, np.nan, np.float32)
    xcorr.correlate2d(left, right, form="n-to-m", max_shift=(7, 5), chunk=4, devices="all", out=pageable)
    assert not any(d["direct"] for d in xcorr._api.last_batch["seconds"])
    np.testing.assert_array_equal(pageable, pinned)
    xcorr.clear_cache()


def test_gpu_package_batch_bounces_a_large_pageable_input(gpu):
    """A right stack of 81 MB (pageable NumPy) is uploaded through batch.cpp's two pinned bounce
    buffers (4 MB each: twenty-odd parts, each buffer reused once its upload has read it), the
    small pageable left stack beside it bounced too, on every GPU: the result, poisoned
    beforehand, is the reference's, the same from a page-locked copy of the inputs (uploaded
    directly), and the same again through the kept buffers."""
    xcorr = _package()
    rng = seeded_rng("pkg-batch-bounce")
    left = rng.random((2, 94, 93), dtype=np.float32) - 0.5
    right = rng.random((2500, 90, 90), dtype=np.float32) - 0.5
    assert right.nbytes > 2 * (32 << 20)
    want = xcorr.correlate2d(left, right, form="n-to-m", algorithm="reference", max_shift=1)
    got = np.full(want.shape, np.nan, np.float32)
    xcorr.correlate2d(left, right, form="n-to-m", max_shift=1, devices="all", out=got)
    assert np.isfinite(got).all() and np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want)
    locked = xcorr.empty_pinned(right.shape)
    locked[...] = right
    again = xcorr.correlate2d(left, locked, form="n-to-m", max_shift=1, devices="all")
    np.testing.assert_array_equal(again, got)
    first = got.copy()
    got.fill(np.nan)
    xcorr.correlate2d(left, right, form="n-to-m", max_shift=1, devices="all", out=got)  # the kept buffers
    np.testing.assert_array_equal(first, got)


def test_gpu_package_batch_blocks_match_the_reference(gpu):
    """split="blocks": n-to-m runs cut into blocks of all a GPU's lefts and runs of rights (rows
    of each block downloaded to their places: a pitched copy into a page-locked out=, a row-wise
    host copy out of the staging into a pageable one), poisoned beforehand: both equal the
    reference, bit for bit each other (same pieces, same kernels), and split="lefts"'s within
    float32 rounding."""
    xcorr = _package()
    xcorr.clear_cache()
    rng = seeded_rng("pkg-batch-blocks")
    left, right = rng.random((5, 40, 33), dtype=np.float32) - 0.5, rng.random((37, 9, 12), dtype=np.float32) - 0.5
    want = xcorr.correlate2d(left, right, form="n-to-m", algorithm="reference", max_shift=(6, 4))
    kw = dict(form="n-to-m", max_shift=(6, 4), algorithm="overlap-wise", devices="all", chunk=60)
    pageable = np.full(want.shape, np.nan, np.float32)
    xcorr.correlate2d(left, right, split="blocks", out=pageable, **kw)
    assert np.isfinite(pageable).all() and np.linalg.norm(pageable - want) <= 1e-5 * np.linalg.norm(want)
    pieces = xcorr._api.last_batch["pieces"]
    assert len(pieces) > 2  # blocks of 5 lefts x 12 rights (one GPU), more pieces with more GPUs
    pinned = xcorr.empty_pinned(want.shape)
    pinned.fill(np.nan)
    xcorr.correlate2d(left, right, split="blocks", out=pinned, **kw)
    assert all(d["direct"] for d in xcorr._api.last_batch["seconds"])
    np.testing.assert_array_equal(pinned, pageable)
    lefts = xcorr.correlate2d(left, right, split="lefts", **kw)  # other pieces, other launches
    np.testing.assert_allclose(lefts, pageable, rtol=0, atol=1e-6 * np.abs(want).max())
    xcorr.clear_cache()


def test_gpu_package_batch_divided_by_rights_matches_the_reference(gpu):
    """On every GPU of the host, a batch whose right stack holds more data than its lefts (3 lefts of
    20 x 17, 50 rights of 9 x 8), auto split: into a pageable and a page-locked out=, both poisoned,
    the result equals the reference; on two GPUs or more each GPU took every left and its own run of
    the rights (no right on two GPUs) and its pieces' rows landed in the batch's rows."""
    xcorr = _package()
    xcorr.clear_cache()
    rng = seeded_rng("pkg-batch-by-rights")
    left, right = rng.random((3, 20, 17), dtype=np.float32) - 0.5, rng.random((50, 9, 8), dtype=np.float32) - 0.5
    left += 100  # an offset: a misplaced row or right shows as a large error
    want = xcorr.correlate2d(left, right, form="n-to-m", algorithm="reference", max_shift=(5, 3))
    kw = dict(form="n-to-m", max_shift=(5, 3), algorithm="fft", devices="all", chunk=40)
    for out in (np.full(want.shape, np.nan, np.float32), xcorr.empty_pinned(want.shape)):
        out.fill(np.nan)
        xcorr.correlate2d(left, right, out=out, **kw)
        assert np.isfinite(out).all() and np.linalg.norm(out - want) <= 1e-5 * np.linalg.norm(want)
        seconds, pieces = xcorr._api.last_batch["seconds"], xcorr._api.last_batch["pieces"]
        if len(seconds) > 1:  # pieces: (device, first output, outputs, algorithm)
            assert all(d["split"] == "blocks" for d in seconds)
            shares = rights_shares(50, ",".join(str(d["device"]) for d in seconds))
            for d, (q0, q1) in zip((d["device"] for d in seconds), shares):
                own = [c for c in pieces if c[0] == d]
                assert sum(c[2] for c in own) == 3 * (q1 - q0)  # every left with its run of the rights
                assert all(q0 <= c[1] % 50 < q1 for c in own), (d, q0, q1, own)
    xcorr.clear_cache()


def test_gpu_package_batch_auto_split_follows_page_locked_memory(gpu):
    """split="auto" (the default): blocks on every device where out= or the rights are page-locked
    (xcorr.empty_pinned), lefts where both are pageable (last_batch says per device), each result
    the explicit split's bit for bit."""
    xcorr = _package()
    xcorr.clear_cache()
    rng = seeded_rng("pkg-batch-auto-split")
    left, right = rng.random((5, 40, 33), dtype=np.float32) - 0.5, rng.random((37, 9, 12), dtype=np.float32) - 0.5
    kw = dict(form="n-to-m", max_shift=(6, 4), algorithm="overlap-wise", devices="all", chunk=60)
    pinned_right = xcorr.empty_pinned(right.shape)
    pinned_right[...] = right
    pinned_out = xcorr.empty_pinned(xcorr.correlate2d(left, right, **kw).shape)
    for r, out, want in ((right, None, "lefts"), (right, pinned_out, "blocks"), (pinned_right, None, "blocks")):
        if out is not None:
            out.fill(np.nan)
        got = xcorr.correlate2d(left, r, out=out, **kw)
        assert [d["split"] for d in xcorr._api.last_batch["seconds"]] == [want] * len(xcorr._api.last_batch["seconds"])
        np.testing.assert_array_equal(got, xcorr.correlate2d(left, right, split=want, **kw))
    xcorr.clear_cache()
