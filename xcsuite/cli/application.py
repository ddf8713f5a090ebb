"""The motivating application of the paper's section 5.6 on synthetic data: recovering a
deformation field from n-to-mn cross-correlations, as in electron-microscopy strain mapping.

A reference pattern (smooth random texture: Gaussian-filtered noise) holds 86 tiles of 96 x 96
(a 9 x 10 grid without its four corners). Each of K deformed patterns is made of the same tiles,
each shifted by a known sub-pixel displacement from a smooth field that grows from pattern to
pattern, plus noise. The 86 reference tiles (lefts) are correlated with the 86 x K deformed tiles
(rights, K groups of 86 in left order: the n-to-mn form, exactly the paper's 86 x (50 x 86) shape
for K = 50) by `xcorr run`, and every displacement is read off its correlation peak (refined to
sub-pixel by a parabola through the peak and its neighbours). The recovered field is compared
with the truth (the run fails if it does not match) and drawn like the paper's Fig. 24.

Convention (docs/CONVENTIONS.md): C[y][x] = sum L[r+dy][c+dx] R[r][c] with dy = y - (hR-1),
dx = x - (wR-1). A deformed tile with R[r][c] = L[r+a][c+b] peaks at (dy, dx) = (a, b).

    python -m xcsuite application [--algorithm NAME|reference|scipy] [--patterns K] [--build DIR]

Default: on a GPU, multi-matrix-right+grouped-overlap with K = 50 (the paper's shape); without
one, the float64 CPU reference of `xcorr run` with K = 1 (30 s), or, with no build either, scipy
(it says so); `scipy` needs no build.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from xcsuite import paths
from xcsuite.registry import NoGpu, by_name, gpu_info, load_registry

TILE = 96
GRID_ROWS, GRID_COLS = 9, 10
MARGIN = 24  # room for displacements at the border tiles
MAX_SHIFT = 6.0
MAX_ERROR_PX = 0.25  # every recovered displacement within this of the truth
MAX_RMS_PX = 0.1


def tile_grid() -> list[tuple[int, int]]:
    corners = {(0, 0), (0, GRID_COLS - 1), (GRID_ROWS - 1, 0), (GRID_ROWS - 1, GRID_COLS - 1)}
    cells = [(i, j) for i in range(GRID_ROWS) for j in range(GRID_COLS) if (i, j) not in corners]
    assert len(cells) == 86
    return cells


def make_pattern(rng: np.random.Generator) -> np.ndarray:
    h, w = GRID_ROWS * TILE + 2 * MARGIN, GRID_COLS * TILE + 2 * MARGIN
    from scipy import ndimage  # SciPy where it is used: its import (~2 s) is no refusal's to wait for

    p = ndimage.gaussian_filter(rng.standard_normal((h, w)), sigma=1.2)  # a speckle of ~3 px, like a DIC pattern
    return (p - p.mean()) / p.std()


def displacement_field(y: np.ndarray, x: np.ndarray, k: int, patterns: int) -> tuple[np.ndarray, np.ndarray]:
    """Smooth field (pixels) at positions (y, x), growing with the pattern index k."""
    h, w = GRID_ROWS * TILE, GRID_COLS * TILE
    s = (k + 1) / patterns
    dy = s * (0.55 * MAX_SHIFT * np.sin(np.pi * x / w) * np.cos(0.8 * np.pi * y / h) + 1.5 * (y / h - 0.5))
    dx = s * (0.45 * MAX_SHIFT * np.cos(np.pi * y / h) * np.sin(1.3 * np.pi * x / w + 0.4) - 1.0 * (x / w - 0.5))
    return dy, dx


def build(patterns: int, seed: int = 7, noise: float = 0.05):
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    ref = make_pattern(rng)
    cells = tile_grid()
    tops = np.array([MARGIN + i * TILE for i, _ in cells])
    lefts = np.array([MARGIN + j * TILE for _, j in cells])
    cy, cx = tops - MARGIN + TILE / 2, lefts - MARGIN + TILE / 2
    L = np.stack([ref[t:t + TILE, l:l + TILE] for t, l in zip(tops, lefts)])
    n = len(cells)
    R = np.empty((patterns * n, TILE, TILE))
    truth = np.empty((patterns * n, 2))
    rr, cc = np.mgrid[0:TILE, 0:TILE].astype(float)
    # The reference's cubic spline coefficients, once: what map_coordinates(ref, order=3,
    # mode="reflect") computes on every call (the same numbers, not once a tile).
    coeffs = ndimage.spline_filter(ref, order=3, output=np.float64, mode="reflect")
    for k in range(patterns):
        dy, dx = displacement_field(cy, cx, k, patterns)
        for t in range(n):
            coords = [tops[t] + rr + dy[t], lefts[t] + cc + dx[t]]
            tile = ndimage.map_coordinates(coeffs, coords, order=3, mode="reflect", prefilter=False)
            R[k * n + t] = tile + noise * rng.standard_normal(tile.shape)
            truth[k * n + t] = dy[t], dx[t]
    # zero-mean tiles: the raw sum would favour the zero shift, where the overlap is largest
    L -= L.mean(axis=(1, 2), keepdims=True)
    R -= R.mean(axis=(1, 2), keepdims=True)
    return ref, L.astype(np.float32), R.astype(np.float32), truth, (tops, lefts, cy, cx)


def correlate(L, R, algorithm: str, build_dir: Path) -> tuple[np.ndarray, float]:
    t0 = time.time()
    if algorithm == "scipy":
        from scipy import signal

        n = len(L)
        out = np.stack([signal.correlate(L[k % n].astype(np.float64), R[k].astype(np.float64), mode="full",
                                         method="fft") for k in range(len(R))])
        return out.astype(np.float32), time.time() - t0
    with tempfile.TemporaryDirectory(prefix="xcorr-app-") as tmp:
        lp, rp, op = Path(tmp) / "left.npy", Path(tmp) / "right.npy", Path(tmp) / "out.npy"
        np.save(lp, L)
        np.save(rp, R)
        cmd = [str(Path(build_dir) / "xcorr"), "run", "--algorithm", algorithm, "--form", "n-to-mn", str(lp), str(rp),
               "--out", str(op)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"application: {' '.join(cmd[:6])} failed ({r.returncode}): {r.stderr.strip()}")
        return np.load(op), time.time() - t0


def _refine(a: float, b: float, c: float) -> float:
    """Sub-pixel offset of a peak b between neighbours a and c: a Gaussian through the three
    (the correlation of a Gaussian-filtered texture is close to one), a parabola if any is <= 0."""
    if a > 0 and b > 0 and c > 0:
        a, b, c = np.log(a), np.log(b), np.log(c)
    den = a - 2 * b + c
    return 0.5 * (a - c) / den if den < 0 else 0.0


def peaks(C: np.ndarray) -> np.ndarray:
    """Sub-pixel peak positions as shifts (dy, dx) of L relative to R."""
    k, h, w = C.shape
    flat = C.reshape(k, -1).argmax(axis=1)
    y, x = np.unravel_index(flat, (h, w))
    out = np.empty((k, 2))
    for i in range(k):
        py, px = float(y[i]), float(x[i])
        if 0 < y[i] < h - 1:
            py += _refine(*(float(C[i, y[i] + d, x[i]]) for d in (-1, 0, 1)))
        if 0 < x[i] < w - 1:
            px += _refine(*(float(C[i, y[i], x[i] + d]) for d in (-1, 0, 1)))
        out[i] = py - (TILE - 1), px - (TILE - 1)  # hR = wR = TILE
    return out


def figure(ref, R, truth, found, geom, patterns, title, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    tops, lefts, cy, cx = geom
    n = len(tops)
    k = patterns - 1  # the most deformed pattern
    mosaic = np.full_like(ref, np.nan)
    for t in range(n):
        mosaic[tops[t]:tops[t] + TILE, lefts[t]:lefts[t] + TILE] = R[k * n + t]
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.6))
    axes[0].imshow(ref, cmap="gray")
    for t in range(n):
        axes[0].add_patch(Rectangle((lefts[t], tops[t]), TILE, TILE, fill=False, lw=0.4, color="y"))
    axes[0].set_title("(a) reference pattern, 86 tiles of 96 x 96", fontsize=9)
    axes[1].imshow(mosaic, cmap="gray")
    axes[1].set_title(f"(b) deformed pattern {k + 1} of {patterns} (tiles shifted, noise)", fontsize=9)
    d = found[k * n:(k + 1) * n]
    tr = truth[k * n:(k + 1) * n]
    mag = np.hypot(d[:, 0], d[:, 1])
    axes[2].imshow(np.zeros_like(ref), cmap="gray", vmin=-1, vmax=1, alpha=0.15)
    q = axes[2].quiver(lefts + TILE / 2, tops + TILE / 2, d[:, 1], -d[:, 0], mag, cmap="viridis", angles="xy",
                       scale_units="xy", scale=1 / 25, width=0.006)
    axes[2].quiver(lefts + TILE / 2, tops + TILE / 2, tr[:, 1], -tr[:, 0], color="r", angles="xy", scale_units="xy",
                   scale=1 / 25, width=0.002, alpha=0.9)
    axes[2].set_xlim(0, ref.shape[1])
    axes[2].set_ylim(ref.shape[0], 0)
    fig.colorbar(q, ax=axes[2], fraction=0.04, label="|displacement| [px]")
    axes[2].set_title("(c) recovered displacement (arrows x25; thin red: truth)", fontsize=9)
    err = np.hypot(*(found - truth).T)
    axes[3].hist(err, bins=40, color="C0")
    axes[3].set_xlabel("|recovered - true| [px]")
    axes[3].set_ylabel("tiles")
    axes[3].set_title(f"(d) error over all {len(err)} tiles: RMS {np.sqrt(np.mean(err ** 2)):.3f} px, "
                      f"max {err.max():.3f} px", fontsize=9)
    for ax in axes[:3]:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    files = paths.save_figure(fig, out_dir, "application", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algorithm", default=None, help="a variant, 'reference' (CPU float64) or 'scipy'")
    ap.add_argument("--patterns", type=int, default=None, help="deformed patterns K (paper: 50)")
    ap.add_argument("--build", default=str(paths.ROOT / "build"))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=None, help="plots folder (default: plots/<gpu or cpu>/)")
    args = ap.parse_args(argv)
    if args.patterns is not None and args.patterns < 1:  # 0 ran the default K, a negative K a traceback
        ap.error(f"--patterns must be at least 1, not {args.patterns}")
    if args.seed < 0:  # NumPy's generator takes none: it was a traceback
        ap.error(f"--seed must be 0 or more, not {args.seed}")
    if args.out and (why := paths.folder_problem(args.out)):  # found before the correlations, not after
        ap.error(f"--out is the plots folder: {why}")

    algorithm, slug, gpu_name = args.algorithm, None, None
    if algorithm not in (None, "scipy", "reference") and (Path(args.build) / "xcorr").exists():
        # The name before the GPU: a typo is bad usage on any machine (it said "needs a GPU", exit 3).
        reg = by_name(load_registry(args.build))
        if algorithm != "auto" and algorithm not in reg:
            ap.error(f"--algorithm {algorithm}: no such variant in {args.build} (xcorr list; or reference, scipy)")
        if algorithm != "auto" and ("n-to-mn" not in reg[algorithm]["forms"] or reg[algorithm].get("signals_only")):
            ap.error(f"--algorithm {algorithm} does not compute this application's n-to-mn matrices")
    if algorithm not in ("scipy", "reference"):
        try:
            ctx = gpu_info(args.build)
            gpu_name = ctx.get("xcorr_gpu_name")
            slug = paths.gpu_slug(gpu_name)
            if algorithm is None:
                reg = by_name(load_registry(args.build))
                algorithm = next((a for a in ("multi-matrix-right+grouped-overlap", "multi-matrix-tiled", "overlap-wise")
                                  if a in reg and "n-to-mn" in reg[a]["forms"]), "overlap-wise")
        except (NoGpu, FileNotFoundError, RuntimeError) as e:
            if algorithm is not None:
                print(f"application: {algorithm} needs a GPU: {e}", file=sys.stderr)
                return 3
            if (Path(args.build) / "xcorr").exists():
                print(f"application: no GPU ({e}); using the float64 CPU reference of xcorr on fewer patterns")
                algorithm = "reference"
            else:  # said plainly: the README's check is the reference, this is the fallback
                print(f"application: no GPU and no {Path(args.build) / 'xcorr'} (building it needs nvcc): using "
                      "scipy instead of the float64 CPU reference of xcorr")
                algorithm = "scipy"
    if algorithm == "reference" and not (Path(args.build) / "xcorr").exists():
        print(f"application: --algorithm reference needs {Path(args.build) / 'xcorr'}: build first", file=sys.stderr)
        return 2
    if slug is None:
        slug = f"cpu-{algorithm}"
    patterns = args.patterns if args.patterns is not None else (50 if algorithm != "reference" else 1)
    ref, L, R, truth, geom = build(patterns, args.seed)
    print(f"application: {len(L)} reference tiles x {patterns} deformed patterns = {len(R)} correlations of "
          f"{TILE}x{TILE} (n-to-mn) with {algorithm}")
    C, wall = correlate(L, R, algorithm, Path(args.build))
    assert C.shape == (len(R), 2 * TILE - 1, 2 * TILE - 1), C.shape
    found = peaks(C)
    err = found - truth
    mag = np.hypot(err[:, 0], err[:, 1])
    # What was recovered, the same every run (committed beside the figure); the wall time, which is
    # not, goes to application.timing.json beside it, which git ignores.
    stats = {"algorithm": algorithm, "gpu": gpu_name, "tiles": len(L), "patterns": patterns, "correlations": len(R),
             "rms_error_px": float(np.sqrt(np.mean(mag ** 2))),
             "mean_abs_error_px": float(np.mean(np.abs(err))), "max_error_px": float(mag.max()),
             "integer_peak_matches": float(np.mean(np.all(np.round(found) == np.round(truth), axis=1))),
             "max_true_shift_px": float(np.abs(truth).max())}
    ok = stats["max_error_px"] <= MAX_ERROR_PX and stats["rms_error_px"] <= MAX_RMS_PX
    stats["pass"] = bool(ok)
    print(f"application: recovered {len(R)} displacements (up to {stats['max_true_shift_px']:.2f} px): RMS error "
          f"{stats['rms_error_px']:.3f} px, max {stats['max_error_px']:.3f} px (bounds {MAX_RMS_PX}, {MAX_ERROR_PX}); "
          f"{wall:.1f} s including file I/O")
    out_dir = Path(args.out) if args.out else paths.plots_dir_for(Path(slug))
    title = (f"Synthetic strain mapping (paper's section 5.6 shape: 86 tiles x {patterns} patterns, 96 x 96), "
             f"{algorithm}" + (f" on {gpu_name}" if gpu_name else " (CPU)"))
    files = figure(ref, R, truth, found, geom, patterns, title, out_dir)
    paths.write_text_atomic(out_dir / "application.json", json.dumps(stats, indent=1) + "\n")
    paths.write_text_atomic(out_dir / "application.timing.json", json.dumps({"wall_s_including_io": round(wall, 3)}) + "\n")
    print(f"application: {files[0]} ({'matches the truth' if ok else 'DOES NOT MATCH the truth'})")
    return 0 if ok else 1

