"""The normalization and signal tables (python -m xcsuite table): ratios, flags and ordering from figure
points, on made-up points where every number is known, and on the committed H200 results."""
import json
import math
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from xcsuite import tables

ROOT = Path(__file__).resolve().parent.parent


def point(experiment, variant, normalize, total_us, group="new", hR=23, flops=1e12):
    return {"experiment": experiment, "variant": variant, "normalize": normalize, "total_us": total_us,
            "group": group, "form": "n-to-m", "nL": 1000, "hL": 256, "wL": 256, "nR": 1, "hR": hR, "wR": 21,
            "shifts": "-16:16,-16:16", "window": "max_shift=16", "flops": flops}


def test_normalization_table_ratios_and_target():
    pts = pd.DataFrame([
        point("e", "a", "none", 100.0), point("e", "a", "zncc", 120.0),     # x1.20: within
        point("e", "b", "none", 50.0), point("e", "b", "zncc", 130.0),      # x2.60: over
        point("e", "c", "zncc", 400.0),                                     # no raw: no ratio
        point("e", "torch", "none", 300.0, group="peer"), point("e", "torch", "zncc", 900.0, group="peer"),
        point("e", "a", "none", 10.0, hR=5), point("e", "a", "zncc", 12.6, hR=5),  # another problem: x1.26
    ])
    t = tables.build_normalization_table(pts)
    assert len(t) == 5  # the normalized points, one row each
    by = {(r["variant"], r["problem"].split("* ")[1][:5]): r for _, r in t.iterrows()}
    a, b, c = by[("a", "1x[23")], by[("b", "1x[23")], by[("c", "1x[23")]
    assert a["raw_us"] == 100.0 and a["ratio"] == pytest.approx(1.2) and a["meets_target"]
    assert b["ratio"] == pytest.approx(2.6) and not b["meets_target"]
    assert math.isnan(c["raw_us"]) and c["meets_target"] is None
    assert not by[("a", "1x[5x")]["meets_target"]  # 1.26 > 1.25: the other problem's raw time, not this one's
    assert by[("torch", "1x[23")]["peer"]
    md = tables.normalization_markdown(t, pts)
    # the fastest normalized of ours (a, 120) against the fastest raw of ours (b, 50), the peer against a
    assert "Fastest normalized: **a** 120 µs; fastest raw: b 50 µs (x2.40)" in md
    assert "fastest peer: torch 900 µs, x7.5 our fastest's time" in md
    assert "| c | – | 400 µs | – |" in md and "| b | 50 µs | 130 µs | x2.60 (> 1.25) |" in md


def test_signal_table_orders_and_compares_with_the_fastest_peer():
    pts = pd.DataFrame([point("s", "x", "none", 30.0, flops=4e12), point("s", "y", "none", 10.0),
                        point("s", "torch", "none", 20.0, group="peer"), point("s", "cupy", "none", 80.0, group="peer"),
                        point("s", "z", "none", 40.0)])
    t = tables.build_signal_table(pts, {"x": "fp32", "y": "tf32", "z": "fp32", "torch": "fp32"})
    assert t["variant"].tolist() == ["y", "torch", "x", "z", "cupy"]  # fastest first
    assert t.set_index("variant")["vs_best_peer"].to_dict() == pytest.approx(
        {"y": 0.5, "torch": 1.0, "x": 1.5, "z": 2.0, "cupy": 4.0})
    md = tables.signal_markdown(t)
    # bold: the fastest of ours at each precision (y for tf32, x for fp32), never a peer or a slower one
    assert "| **y** | tf32 | 10 µs |" in md and "| **x** | fp32 | 30 µs | 4 |" in md and "| z | fp32 |" in md
    assert "| torch (peer) | fp32 | 20 µs |" in md and "| cupy (peer) | – |" in md
    assert t["peak_pct"].isna().all()  # no peaks given: no percentages
    t = tables.build_signal_table(pts, {"x": "fp32", "y": "tf32", "z": "3xtf32"}, fp32_peak_tflops=8.0,
                                  tf32_peak_tflops=100.0)
    pct = t.set_index("variant")["peak_pct"]
    # x: 4 TFLOP/s of the FP32 peak 8; y (tf32, 1 TFLOP/s) of the TF32 peak 100; z (3xtf32) of FP32's
    assert pct["x"] == pytest.approx(50.0) and pct["y"] == pytest.approx(1.0) and pct["z"] == pytest.approx(12.5)
    assert math.isnan(pct["cupy"])  # a precision not known
    assert "| **x** | fp32 | 30 µs | 4 | 50% | x1.50 |" in tables.signal_markdown(t)


def test_tables_from_the_committed_h200_results(tmp_path):
    """On the measured results: seed 003's frames with the 23 x 21 template are normalized fastest by
    fft-fused on the cropped frames, and the ambient-noise case by fft-segmented, ahead of every peer."""
    from xcsuite.cli import table

    gpu = tmp_path / "nvidia-h200"
    shutil.copytree(ROOT / "results" / "nvidia-h200", gpu)
    with warnings.catch_warnings():  # points recorded as failed (PyTorch out of memory, failed peers) are
        warnings.simplefilter("error")  # results, not gaps: they warned, a warning per series
        t = table.make_normalization_table(gpu)
    frames = t[(t["experiment"] == "zncc_frames") & t["problem"].str.contains(r"1x\[23x21\]")]
    assert frames.sort_values("normalized_us").iloc[0]["variant"] == "fft-fused"
    assert (gpu / "normalization_table.md").read_text().count("### ") == t.groupby(
        ["experiment", "problem", "normalize"]).ngroups
    s = table.make_signal_table(gpu)
    ambient = s[s["experiment"] == "signals_ambient"]
    assert ambient.iloc[0]["variant"] == "fft-segmented" and ambient.iloc[0]["vs_best_peer"] < 1
    assert "### signals_seed004" in (gpu / "signal_table.md").read_text()


# --- the headline table (README's results table) --------------------------------------------------

def srow(variant, family, time_us, counts="32-to-32", size=256, precision="fp32", shifts="", params="",
         cold=False, status="ok", peak_pct=50.0):
    return {"variant": variant, "family": family, "time_us": time_us, "counts": counts, "size": size,
            "precision": precision, "shifts": shifts, "params": params, "cold": cold, "status": status,
            "peak_pct": peak_pct}


def test_headline_cells_take_the_fastest_raw_full_output_run_per_column():
    s = pd.DataFrame([
        srow("overlap-wise", "baseline", 9000.0),
        srow("grouped-overlap", "warp-shuffle", 3000.0), srow("split-row", "warp-shuffle", 2500.0),
        srow("multi-matrix-both+grouped-overlap", "multi-matrix", 2000.0),
        srow("tensor-wgmma", "hopper", 1000.0, precision="3xtf32", peak_pct=116.0),  # FP32-class: counted
        srow("tensor-tiled-tf32", "hopper", 400.0, precision="tf32"),                # one TF32 pass: not
        srow("fft", "fft", 300.0), srow("fft", "fft", 280.0), srow("fft+plan", "fft", 600.0),  # fft: the faster of two
        srow("fft-fused", "hopper", 200.0),                                          # its own column, not "new"
        srow("fft-fused", "hopper", 50.0, shifts="-16:16,-16:16"),                   # a window: not headline
        srow("fft-fused", "hopper", 40.0, params="normalize=zncc"),                  # normalized: not headline
        srow("fft-fused", "hopper", 30.0, cold=True),                                # cold: not headline
        srow("fft-fused", "hopper", 20.0, status="failed"),                          # failed: never
        srow("torch-fft", "peer", 700.0),
        srow("fft", "fft", 99.0, counts="1-to-32", size=64),                         # another problem
    ])
    c = tables.headline_cells(s)
    assert list(zip(c["counts"], c["size"])) == [("1-to-32", 64), ("32-to-32", 256)]  # HEADLINE_ROWS' order
    r = c[c["counts"] == "32-to-32"].iloc[0]
    assert (r["overlap-wise"], r["paper"], r["paper_variant"]) == (9000.0, 2000.0, "multi-matrix-both+grouped-overlap")
    assert (r["new"], r["new_variant"], r["new_peak_pct"]) == (1000.0, "tensor-wgmma", 116.0)
    assert (r["fft"], r["fft-fused"], r["torch-fft"], r["ours_best"]) == (280.0, 200.0, 700.0, 200.0)
    assert r["torch_over_ours"] == pytest.approx(3.5)
    md = tables.headline_markdown(c)
    line = next(x for x in md.splitlines() if x.startswith("| 32-to-32 |"))
    assert "**200 µs**" in line and "| 3.5x |" in line and "116%" in line and "| – |" not in line
    assert "| – |" in next(x for x in md.splitlines() if x.startswith("| 1-to-32 |"))  # unmeasured columns


def test_readme_holds_the_committed_headline_and_window_tables():
    """README.md's results table is results/nvidia-h200/headline.md's, and docs/results.md holds it
    and the window table, the winners of window_table.csv (python -m xcsuite table --readme): hand-kept,
    the window table's rows of 128 to 512 were three remeasurements old."""
    from xcsuite.cli import table
    for doc, names in (("README.md", ["headline", "multigpu"]), ("docs/results.md", list(table.README_BLOCKS))):
        assert doc in table.DOC_FILES
        readme = (ROOT / doc).read_text()
        for name in names:
            assert table.readme_with_tables(readme, ROOT / "results" / "nvidia-h200", [name]) == readme, \
                f"{doc}'s {name} table differs from results/nvidia-h200's: run python -m xcsuite table --readme"
    assert "| 256 | fft-fused 11.1 µs |" in table.readme_block("window", ROOT / "results" / "nvidia-h200")
    with pytest.raises(ValueError, match="no block"):
        table.readme_with_tables("no markers here", ROOT / "results" / "nvidia-h200")


def test_the_multi_gpu_table_reads_each_row_beside_its_floor(tmp_path):
    """The README's multi-GPU table (python -m xcsuite table --readme) from a batch_scaling and a
    sweep_scaling JSON: each result array's time on one GPU and on all, its speed-up, the floors and
    the speed-up they allow (one GPU's time over all GPUs' floor); then each sweep group's wall times
    and the suite's. Where a JSON is missing its part is left out; where both are, an error."""
    from xcsuite.cli import table

    def run(devices, fresh, reused, pinned, floors, compute):
        return {"devices": devices, "output_gb": 1.14, "seconds": fresh, "seconds_out_reused": reused,
                "seconds_out_pinned": pinned, "floor_fresh": floors[0], "floor_out_reused": floors[1],
                "floor_out_pinned": floors[2], "compute_seconds": compute}
    batch = {"gpu": "NVIDIA H200", "nvidia_smi": ["0, NVIDIA H200, 580.159.04, 1980 MHz, 3201 MHz"],
             "git_revision": "0123456789abcdef", "form": "n-to-m", "left": [64, 96, 96], "right": [4096, 96, 96],
             "window": {"max_shift": 16}, "repeat": 5,
             "runs": [run([0], 0.060, 0.040, 0.024, (0.047, 0.029, 0.021), 0.008),
                      run([0, 1], 0.050, 0.032, 0.012, (0.043, 0.028, 0.0105), 0.004)]}
    group = {"experiments": ["fig15", "fig16"], "cases": 10, "runs": [{"seconds": 30.0}, {"seconds": 15.0}],
             "nvidia_smi": ["0, NVIDIA H200, GPU-aa, 580.159.04, 1980 MHz, 3201 MHz"]}
    sweep = {"by_group": True, "gpus": ["NVIDIA H200"] * 2, "git_revision": "fedcba9876", "cases": 10,
             "machines": [["GPU-aa", "GPU-bb"]], "groups": [group], "seconds": {"1": 30.0, "2": 15.0}}
    md = table.multigpu_markdown(batch, sweep)
    rows = {line.split(" | ")[0]: line for line in md.splitlines() if line.startswith("| ")}
    assert "| 24 ms | 12 ms | 2.00x | 21 ms | 10.5 ms | 2.29x |" in rows["| out= reused, page-locked"]
    assert "| 40 ms | 32 ms | 1.25x | 29 ms | 28 ms | 1.43x |" in rows["| out= reused, pageable"]
    assert "| 8 ms | 4 ms | 2.00x |  |  |  |" in rows["| the GPUs' work alone (results left on them)"]
    assert rows["| fig15, fig16"] == "| fig15, fig16 | 10 | 30.0 s | 15.0 s | 2.00x |"
    assert "**2.00x**" in rows["| **the quick suite**"]
    assert "2 x NVIDIA H200, driver 580.159.04, revision 0123456" in md and "revision fedcba9" in md
    assert "quick suite" not in table.multigpu_markdown(batch, None) and "page-locked" in md
    assert "page-locked" not in table.multigpu_markdown(None, sweep)
    whole = {"gpus": ["NVIDIA H200"] * 2, "git_revision": "fedcba9876", "cases": 10,  # what the main job writes
             "nvidia_smi": group["nvidia_smi"], "runs": [{"gpus": 1, "seconds": 40.0}, {"gpus": 2, "seconds": 25.0}]}
    md_whole = table.multigpu_markdown(None, whole)
    assert "| **the quick suite** | 10 | 40.0 s | 25.0 s | **1.60x** |" in md_whole
    assert "driver 580.159.04" in md_whole and "group by group" not in md_whole
    with pytest.raises(ValueError, match="neither"):
        table.multigpu_markdown(None, None)
    gpu = tmp_path / "some-gpu"  # the block reads results/<gpu>/multi-gpu/, the sweep there or not
    (gpu / "multi-gpu").mkdir(parents=True)
    (gpu / "multi-gpu" / "batch_scaling.json").write_text(json.dumps(batch))
    doc = "a\n" + "\n".join(m.format(slug="some-gpu") for m in table.README_BLOCKS["multigpu"]) + "\nz\n"
    filled = table.readme_with_tables(doc, gpu, ["multigpu"])
    assert "| 24 ms | 12 ms | 2.00x |" in filled and "quick suite" not in filled and filled.endswith("z\n")
    assert table.readme_with_tables(filled, gpu, ["multigpu"]) == filled  # a second copy changes nothing


def test_the_multi_gpu_table_has_2dtm_over_the_gpus_and_judges_its_target(tmp_path):
    """scripts/tm-scaling's JSON in the multi-GPU table: per template count one GPU's and all GPUs'
    time and rate and the speed-up, and the target (experiments/reductions.py: TM_GPUS_SPEEDUP)
    judged at the largest count; one GPU alone: no verdict."""
    from experiments.reductions import TM_GPUS_SPEEDUP
    from xcsuite.cli import table

    def count(n, one, two):
        return {"templates": n, "runs": [{"devices": [0], "seconds": one, "templates_per_s": n / one, "speedup": 1.0},
                                         {"devices": [0, 1], "seconds": two, "templates_per_s": n / two,
                                          "speedup": one / two}]}
    tm = {"gpu": "NVIDIA H200", "nvidia_smi": {"gpus": [{"index": "0", "driver_version": "580.159.04"}]},
          "git_revision": "abcdef0123", "image": [4096, 4096], "template": [384, 384], "mode": "same", "repeat": 3,
          "counts": [count(1000, 0.40, 0.25), count(10000, 3.60, 1.80)]}
    md = table.multigpu_markdown(None, None, tm)
    rows = {line.split(" | ")[0]: line for line in md.splitlines() if line.startswith("| ")}
    assert rows["| 1000"] == "| 1000 | 0.4 s | 0.25 s | 2,500 | 4,000 | 1.60x |"
    assert rows["| 10000"] == "| 10000 | 3.6 s | 1.8 s | 2,778 | 5,556 | 2.00x |"
    assert "2 x NVIDIA H200, driver 580.159.04, revision abcdef0" in md
    assert f"at least {TM_GPUS_SPEEDUP}x" in md and "(10000): 2.00x, **holds**" in md
    tm["counts"][-1] = count(10000, 3.60, 3.60 / (TM_GPUS_SPEEDUP - 0.01))
    assert "misses" in table.multigpu_markdown(None, None, tm)
    tm["counts"] = [{"templates": 64, "runs": [tm["counts"][0]["runs"][0]]}]  # one GPU: nothing to judge
    assert "Target" not in table.multigpu_markdown(None, None, tm)
    gpu = tmp_path / "some-gpu"  # the README block reads it beside the others
    (gpu / "multi-gpu").mkdir(parents=True)
    (gpu / "multi-gpu" / "tm_scaling.json").write_text(json.dumps(tm))
    doc = "a\n" + "\n".join(m.format(slug="some-gpu") for m in table.README_BLOCKS["multigpu"]) + "\nz\n"
    assert "| 64 | 0.4 s | 0.4 s |" in table.readme_with_tables(doc, gpu, ["multigpu"])


def test_text_files_are_replaced_at_once(tmp_path, monkeypatch):
    """A write that fails half-way leaves the old file whole and no temporary file beside it."""
    import os
    from xcsuite import paths
    f = tmp_path / "headline.md"
    f.write_text("old table\n")
    real = os.fdopen

    class Broken:
        def __init__(self, fd, mode):
            self.f = real(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[:3])
            self.f.flush()
            raise OSError("disk full")

    monkeypatch.setattr(os, "fdopen", Broken)
    with pytest.raises(OSError, match="disk full"):
        paths.write_text_atomic(f, "new table\n" * 100)
    assert f.read_text() == "old table\n" and [p.name for p in tmp_path.iterdir()] == ["headline.md"]
