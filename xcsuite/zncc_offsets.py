"""zncc on offset data: where OpenCV's TM_CCOEFF_NORMED loses its digits and where xcorr
does not. The inputs, the comparison with the float64 reference, the results file's stable text and
the figure; scripts/zncc-offsets measures (GPU) and draws (anywhere).

The results live in results/<gpu>/accuracy/zncc_offsets.json, not beside the experiments' files:
every results/<gpu>/*.json is read as an experiment's results file (aggregate, plot, merge), and
this one is no such file."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from xcsuite import paths

OFFSETS = (0.0, 10.0, 100.0, 1e3, 4e3, 3e4)
IMAGE = (256, 256)
TEMPLATE = (31, 31)
TEMPLATE_AT = (100, 60)  # the template's top-left corner in the image: the right peak's place
NOISE = 1.0  # uniform(-NOISE, NOISE)
SEED = 65
TOLERANCE = 1e-4  # the contract: zncc within 1e-4 (absolute) of float64
SUBDIR = "accuracy"
NAME = "zncc_offsets"


def inputs(offset: float, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """The float32 image (offset + uniform noise; the same noise at every offset) and the template
    cut from it at TEMPLATE_AT."""
    rng = np.random.default_rng(seed)
    image = (offset + rng.uniform(-NOISE, NOISE, IMAGE)).astype(np.float32)
    y, x = TEMPLATE_AT
    return image, image[y:y + TEMPLATE[0], x:x + TEMPLATE[1]].copy()


def _sig(x: float, digits: int = 4) -> float:
    """x rounded to `digits` significant digits: a rerun's last-bit noise leaves the file as it is."""
    return float(f"{x:.{digits - 1}e}")


def compare(out, ref: np.ndarray) -> dict:
    """One implementation's valid-window output against the float64 reference: the largest
    absolute error over the whole output, the peak's value and place, and whether the place is the
    template's."""
    out = np.asarray(out, dtype=np.float64)
    if out.shape != ref.shape:
        raise ValueError(f"output shape {out.shape}, the reference's {ref.shape}")
    finite = np.isfinite(out)
    rec = {"nonfinite": int(out.size - finite.sum())}
    if not finite.any():
        return {**rec, "max_abs_error": None, "peak_value": None, "peak_at": None, "peak_right": False}
    err = np.abs(np.where(finite, out, 0.0) - ref)
    at = np.unravel_index(int(np.argmax(np.where(finite, out, -np.inf))), out.shape)
    rec.update(max_abs_error=None if rec["nonfinite"] else _sig(float(err.max())),
               peak_value=round(float(out[at]), 6), peak_at=[int(at[0]), int(at[1])],
               peak_right=tuple(int(a) for a in at) == TEMPLATE_AT)
    return rec


def dumps(data: dict) -> str:
    """The results file's text: keys sorted, one indentation, a final newline (the same numbers give
    the same bytes)."""
    return json.dumps(data, sort_keys=True, indent=1, allow_nan=False) + "\n"


def results_file(results_root: Path, slug: str) -> Path:
    return Path(results_root) / slug / SUBDIR / f"{NAME}.json"


def results_files(results_root: Path) -> list[Path]:
    """Every GPU's results file under results_root (quick-run folders included: none is written)."""
    root = Path(results_root)
    return sorted(root.glob(f"*/{SUBDIR}/{NAME}.json")) if root.is_dir() else []


# --- the figure ---------------------------------------------------------------------------------

STYLE = {  # label, colour, marker, line style; hollow markers mean the peak is at the wrong place
    "xcorr auto": ("xcorr, algorithm=auto", "C3", "D", "-"),
    "xcorr fft-fused": ("xcorr, fft-fused", "C1", "s", "-"),
    "xcorr overlap-wise": ("xcorr, overlap-wise", "0.35", "x", ":"),
    "opencv": ("OpenCV matchTemplate TM_CCOEFF_NORMED", "C0", "o", "--"),
    "torch-conv2d": ("PyTorch conv2d (peer route)", "olive", "v", "-."),
    "torch-fft": ("PyTorch FFT (peer route)", "teal", "^", "-."),
}
FLOOR = 1e-9  # errors below it (e.g. exactly 0) are drawn at it: a log axis has no 0


def figure(data: dict, out_dir: Path) -> list[Path]:
    """plots/<gpu>/zncc_offsets.png: the largest absolute error against float64 per offset, one
    line per implementation, hollow markers where the peak is at the wrong place."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    offsets = [float(o) for o in data["offsets"]]
    names = [n for n in STYLE if n in data["implementations"]]
    names += sorted(n for n in data["implementations"] if n not in STYLE)
    for name in names:
        impl = data["implementations"][name]
        label, color, marker, ls = STYLE.get(name, (name, "k", "*", "-"))
        runs = impl.get("by_offset")
        if not runs:
            continue
        xs, ys, right = [], [], []
        for o in offsets:
            r = runs.get(offset_key(o))
            if not r or r.get("max_abs_error") is None:
                continue
            xs.append(max(o, 1.0))
            ys.append(max(r["max_abs_error"], FLOOR))
            right.append(bool(r.get("peak_right")))
        ax.plot(xs, ys, ls=ls, color=color, lw=1.4, label=label)
        for x, y, ok in zip(xs, ys, right):
            ax.plot([x], [y], ls="none", marker=marker, ms=7, mew=1.5, color=color,
                    mfc=color if ok else "white")
    ax.axhline(TOLERANCE, color="k", ls="--", lw=1)
    ax.text(1.0, TOLERANCE * 1.4, "xcorr's contract: 1e-4", fontsize=8, va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([max(o, 1.0) for o in offsets])
    ax.set_xticklabels([f"{o:g}" for o in offsets])
    ax.minorticks_off()
    ax.set_xlabel("offset added to every pixel (noise: uniform in [-1, 1])")
    ax.set_ylabel("largest |zncc - float64 zncc| over the output")
    ax.set_title(f"Normalized cross-correlation of offset images on {data.get('gpu', {}).get('name', '?')}\n"
                 f"{IMAGE[0]} x {IMAGE[1]} float32 image, {TEMPLATE[0]} x {TEMPLATE[1]} template cut from it, "
                 "valid window", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], ls="none", marker="o", color="0.3", mfc="0.3"),
                Line2D([], [], ls="none", marker="o", color="0.3", mfc="white")]
    labels += ["filled: the peak at the template's place", "hollow: the peak at a wrong place"]
    ax.legend(handles, labels, fontsize=7.5, loc="upper left", framealpha=0.9)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    files = paths.save_figure(fig, out_dir, NAME, dpi=130)
    plt.close(fig)
    return files


def offset_key(offset: float) -> str:
    """The key of an offset in the results file: '0', '10', '1000', '30000'."""
    return f"{float(offset):g}" if float(offset) < 1e5 else repr(float(offset))
