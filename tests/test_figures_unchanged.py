"""A main-job run that changes no measurement commits no image, and one that changes results
rewrites only the figures whose data changed: `python -m xcsuite plot` twice from the
same results rewrites no file (not even its time stamp), and after one experiment's rows change only
that experiment's figure is rewritten (CPU only: the committed H200 summary, two experiments)."""
import io
import shutil

import pandas as pd
import pytest
from suite_helpers import ROOT

from xcsuite import paths


def stamps(folder):
    """Every file's identity and time stamp: a rewrite (os.replace) changes both."""
    return {f.name: (f.stat().st_ino, f.stat().st_mtime_ns) for f in sorted(folder.iterdir())}


@pytest.fixture
def plot(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    from xcsuite.cli import plot as plot_command

    monkeypatch.setattr(paths, "PLOTS", tmp_path / "plots")
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")

    def run(gpu, only):
        before = paths.FIGURES_WRITTEN
        assert plot_command.main([str(gpu), "--only", only]) == 0
        return paths.FIGURES_WRITTEN - before
    return run


def test_a_second_run_rewrites_nothing_and_a_changed_experiment_only_its_figure(plot, tmp_path):
    gpu = tmp_path / "results" / "nvidia-h200"
    gpu.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "nvidia-h200" / "summary.csv", gpu / "summary.csv")
    out = tmp_path / "plots" / "nvidia-h200"

    assert plot(gpu, "fig15,fig16") == 2
    first = stamps(out)
    assert set(first) == {"fig15.png", "fig16.png"}
    for name in first:  # what the main job commits, from the same summary
        assert (out / name).read_bytes() == (ROOT / "plots" / "nvidia-h200" / name).read_bytes(), name

    assert plot(gpu, "fig15,fig16") == 0
    assert stamps(out) == first

    summary = pd.read_csv(gpu / "summary.csv", keep_default_na=False, dtype=str)
    rows = summary["experiment"] == "fig15"
    assert rows.any() and (~rows).any()
    for column in ("time_us", "median_us", "min_us", "time_per_fma_ps"):
        summary.loc[rows, column] = [str(float(v) * 1.7) if v else v for v in summary.loc[rows, column]]
    old = (out / "fig15.png").read_bytes()
    paths.write_text_atomic(gpu / "summary.csv", summary.to_csv(index=False))

    assert plot(gpu, "fig15,fig16") == 1
    now = stamps(out)
    assert now["fig16.png"] == first["fig16.png"]
    assert now["fig15.png"] != first["fig15.png"] and (out / "fig15.png").read_bytes() != old


def test_the_same_pixels_in_other_bytes_are_the_same_figure(tmp_path):
    """Another matplotlib or zlib may write the same image in other bytes (compression, a text
    chunk): the pixels decide, and such a file is left as it is; other pixels, or a file that is
    not a PNG, are rewritten."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image, PngImagePlugin

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([1, 3, 2])
    (f,) = paths.save_figure(fig, tmp_path, "fig", dpi=40)
    with Image.open(f) as im:
        info = PngImagePlugin.PngInfo()
        info.add_text("Software", "another matplotlib")
        buf = io.BytesIO()
        im.save(buf, format="png", pnginfo=info, compress_level=1)
    f.write_bytes(buf.getvalue())
    stamp = stamps(tmp_path)
    before = paths.FIGURES_WRITTEN
    paths.save_figure(fig, tmp_path, "fig", dpi=40)
    assert stamps(tmp_path) == stamp and paths.FIGURES_WRITTEN == before and f.read_bytes() == buf.getvalue()

    ax.plot([2, 2, 2])
    paths.save_figure(fig, tmp_path, "fig", dpi=40)
    assert paths.FIGURES_WRITTEN == before + 1 and f.read_bytes() != buf.getvalue()
    f.write_bytes(b"not a png")
    paths.save_figure(fig, tmp_path, "fig", dpi=40)
    assert paths.FIGURES_WRITTEN == before + 2 and f.read_bytes().startswith(b"\x89PNG")
    plt.close(fig)
