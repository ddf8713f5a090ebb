#!/usr/bin/env python3
"""2-D template matching (2DTM) as cryo-EM users run it (cisTEM's match_template, Leopard-EM): where
copies of one particle lie in a micrograph and at which in-plane angle, found by correlating the
micrograph with every rotation of the particle's template and scoring each pixel by how far its
best rotation stands above the other rotations there.

1. A synthetic micrograph: an asymmetric template (detail without symmetry, so that its rotations differ), copies of
   it planted at known positions and in-plane angles in Gaussian noise, faint enough that no pixel
   shows them (--micrograph FILE.npy searches your own instead).
2. Whitening as cryo-EM tools do: the micrograph divided by its radially averaged amplitude
   spectrum and the template filtered the same way, then the micrograph scaled to zero mean and
   unit variance and each rotation of the template to zero mean and unit norm (inside a circular
   mask), so that a raw correlation value is a signal-to-noise ratio.
3. The search: xcorr.max_over_rights(image, rotations, mode="same", stats=True), the rotations
   made (scipy.ndimage.rotate) and correlated a batch at a time, each call continuing the last one's
   result (out=, first_index=): per pixel the maximum over the rotations (the "maximum intensity
   projection"), the rotation that gives it, and the sum and sum of squares over the rotations,
   with no map per rotation, so that memory does not grow with the number of rotations.
4. The scaled MIP (cisTEM's z-score): z = (max - mean) / std per pixel, mean and std over the
   rotations from the sum and sum of squares. Detections: local maxima of z above the threshold
   at which pure noise gives one false detection per micrograph (the number of pixels times
   rotations searched, Gaussian tail), at least --min-distance apart; each one's angle is its best
   rotation's.
5. On the synthetic micrograph it checks what a user looks for: every planted copy found within
   2 pixels and one angular step, nothing else above the threshold (exit status 1 otherwise).

    python examples/template_matching_2dtm.py           # 4096 x 4096, a 384 x 384 template, 360 rotations (a GPU)
    python examples/template_matching_2dtm.py --small   # 96 x 96, 41 x 41, 72 rotations: seconds on the CPU reference
    python examples/template_matching_2dtm.py --micrograph m.npy --template t.npy --out m.npz
    scripts/slurm-2dtm micrographs/*.npy --dir run1 -- --template t.npy   # a Slurm array, a task per micrograph

--out writes the detections (y, x, angle, z), the threshold, the angles searched, the scaled MIP and
each pixel's best angle (an .npz); examples/cryoem_search.py is the same search over many different
templates, beside PyTorch's FFT.
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import ndimage, special

import xcorr
from _common import to_numpy, xcorr_setup

# (y, x) centre, sigma and weight of each lobe of the particle, in units of the template's size.
# Micrograph size, template size, copies planted, angles searched, rotations per call.
DEFAULT, SMALL = (4096, 384, 12, "0:360:1", 40), (96, 41, 3, "0:360:5", 24)


def particle(t):
    """The template: a fixed random texture (detail of about t / 150 pixels, at least 0.7) in an
    annulus from 0.2 to 0.45 of the size, as a particle's projection is detail without symmetry.
    Its rotations by more than the detail over the radius (about an angular step) are nearly
    uncorrelated, which the z-score needs: (max - mean) / std over the rotations cannot exceed about
    sqrt(rotations / rotations alike), about 5.5 for 72 rotations and 10 for 360."""
    yy, xx = (np.mgrid[:t, :t] - (t - 1) / 2) / t
    r = np.hypot(yy, xx)
    envelope = np.clip((0.45 - r) / 0.05, 0, 1) * np.clip((r - 0.2) / 0.05, 0, 1)
    return ndimage.gaussian_filter(np.random.default_rng(1).standard_normal((t, t)), max(0.7, t / 150)) * envelope


def synthetic_micrograph(rng, size, template, copies, amplitude):
    """Noise with `copies` rotated copies of the template (unit norm times `amplitude`), each in a
    cell of its own of a grid of cells larger than the template, at a random place in it; returns
    the image and (y, x, angle) of each, (y, x) the "same" position where the template's centre
    lies ((t - 1) // 2 from the corner)."""
    t = template.shape[0]
    n = size // (t + 2)  # cells per side
    if n * n < copies:
        raise ValueError(f"{copies} copies of a {t}x{t} template do not fit a {size}x{size} micrograph")
    g = size // n
    image = rng.standard_normal((size, size))
    planted = []
    for k, cell in enumerate(rng.choice(n * n, copies, replace=False)):
        y0, x0 = (np.array(divmod(cell, n)) * g + rng.integers(0, g - t + 1, 2)).tolist()
        angle = (k + rng.random()) * 360 / copies  # spread over the whole circle
        copy = ndimage.rotate(template, angle, reshape=False, order=3)
        image[y0:y0 + t, x0:x0 + t] += amplitude * copy / np.linalg.norm(copy)
        planted.append((y0 + (t - 1) // 2, x0 + (t - 1) // 2, angle))
    return image.astype(np.float32), planted


def whitening(image):
    """The micrograph's whitening filter, a function of the spatial frequency (cycles/pixel): one
    over its radially averaged amplitude spectrum."""
    h, w = image.shape
    power = np.abs(np.fft.rfft2(image - image.mean())) ** 2
    r = np.hypot(*np.meshgrid(np.fft.fftfreq(h), np.fft.rfftfreq(w), indexing="ij"))
    bins = np.minimum((r * min(h, w)).astype(int), min(h, w) // 2)
    count = np.bincount(bins.ravel())
    amplitude = np.sqrt(np.bincount(bins.ravel(), power.ravel()) / np.maximum(count, 1))
    amplitude[count == 0] = amplitude[count > 0].mean()
    return lambda f: 1 / np.interp(f * min(h, w), np.arange(len(amplitude)), amplitude)


def filtered(x, filt):
    """x filtered by filt(spatial frequency)."""
    h, w = x.shape
    r = np.hypot(*np.meshgrid(np.fft.fftfreq(h), np.fft.rfftfreq(w), indexing="ij"))
    return np.fft.irfft2(np.fft.rfft2(x) * filt(r), s=x.shape)


def rotations(template, angles):
    """The template rotated by each angle (degrees; bilinear), inside a circular mask, each zero
    mean inside the mask and unit norm: (len(angles), t, t) float32."""
    t = template.shape[0]
    yy, xx = np.mgrid[:t, :t] - (t - 1) / 2
    mask = yy ** 2 + xx ** 2 <= ((t - 1) / 2) ** 2
    out = np.zeros((len(angles), t, t), np.float32)
    for k, a in enumerate(angles):
        r = ndimage.rotate(template, a, reshape=False, order=1)
        r = np.where(mask, r - r[mask].mean(), 0)
        out[k] = r / np.linalg.norm(r)
    return out


def search(image, template, angles, batch, algorithm, lib):
    """max_over_rights over the rotations, `batch` at a time, each call continuing the previous
    result; returns the result (NumPy) and the seconds spent rotating and searching."""
    best, t_rot, t_search = None, 0.0, 0.0
    img = lib.as_tensor(image, device="cuda") if lib else image
    for j in range(0, len(angles), batch):
        t0 = time.perf_counter()
        stack = rotations(template, angles[j:j + batch])
        t1 = time.perf_counter()
        stack = lib.as_tensor(stack, device="cuda") if lib else stack
        best = xcorr.max_over_rights(img, stack, mode="same", stats=True, algorithm=algorithm, out=best,
                                     first_index=j)
        if lib:
            lib.cuda.synchronize()
        t_rot, t_search = t_rot + t1 - t0, t_search + time.perf_counter() - t1
    return type(best)(*map(to_numpy, best)), t_rot, t_search


def scaled_mip(best, count):
    """cisTEM's scaled MIP: per pixel (max - mean) / std over the `count` rotations."""
    mean = best.sum / count
    std = np.sqrt(np.maximum(best.sumsq / count - mean ** 2, 1e-12))
    return ((best.value - mean) / std).astype(np.float32)


def detections(z, threshold, min_distance):
    """(y, x, z) of the local maxima of z above the threshold, each the largest within min_distance
    pixels (Chebyshev), strongest first."""
    peak = (z == ndimage.maximum_filter(z, size=2 * min_distance + 1, mode="constant", cval=-np.inf)) & (z > threshold)
    ys, xs = np.nonzero(peak)
    order = np.argsort(-z[ys, xs])
    return [(int(ys[i]), int(xs[i]), float(z[ys[i], xs[i]])) for i in order]


def angle_difference(a, b):
    return abs((a - b + 180) % 360 - 180)


def check(planted, found, step, tolerance=2):
    """Pairs each planted copy with the detection within `tolerance` pixels; prints the table and
    returns what went wrong (missed copies, wrong angles, false detections)."""
    problems, used = [], set()
    print(f"{'planted y':>9} {'x':>5} {'angle':>6} | {'found y':>7} {'x':>5} {'angle':>6} {'z':>6}")
    for y, x, a in planted:
        near = [i for i, d in enumerate(found) if max(abs(d[0] - y), abs(d[1] - x)) <= tolerance]
        if not near:
            print(f"{y:9d} {x:5d} {a:6.1f} | {'missed':>7}")
            problems.append(f"the copy at ({y}, {x}), {a:.1f} degrees, was not found")
            continue
        i = near[0]
        used.add(i)
        fy, fx, fa, fz = found[i]
        print(f"{y:9d} {x:5d} {a:6.1f} | {fy:7d} {fx:5d} {fa:6.1f} {fz:6.2f}")
        if angle_difference(fa, a) > step:
            problems.append(f"the copy at ({y}, {x}) was found at {fa:.1f} degrees, not {a:.1f}")
    for i, (fy, fx, fa, fz) in enumerate(found):
        if i not in used:
            print(f"{'-':>9} {'':5} {'':6} | {fy:7d} {fx:5d} {fa:6.1f} {fz:6.2f}  false")
            problems.append(f"a false detection at ({fy}, {fx}), z = {fz:.2f}")
    return problems


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n")[-2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="a small problem (seconds on the CPU reference)")
    ap.add_argument("--reference", action="store_true", help="force algorithm='reference' (float64, CPU)")
    ap.add_argument("--micrograph", type=Path, help="search this 2-D .npy instead of a synthetic micrograph")
    ap.add_argument("--template", type=Path, help="the particle's template, a square 2-D .npy (default: the "
                    "synthetic one of the chosen size)")
    ap.add_argument("--out", type=Path, help="write the detections and maps to this .npz")
    ap.add_argument("--save-micrograph", type=Path, metavar="FILE.npy",
                    help="write the synthetic micrograph (of --seed) to this .npy and stop")
    ap.add_argument("--angles", default=None, metavar="START:STOP:STEP",
                    help="in-plane angles searched, degrees (default 0:360:1, --small 0:360:5)")
    ap.add_argument("--batch", type=int, default=None, help="rotations per call (default 40, --small 24)")
    ap.add_argument("--min-distance", type=int, default=None, help="pixels between detections (default: half the template)")
    ap.add_argument("--threshold", type=float, default=None,
                    help="z above which a peak is a detection (default: one false detection per micrograph)")
    ap.add_argument("--seed", type=int, default=7, help="the synthetic micrograph's noise and copies")
    ap.add_argument("--amplitude", type=float, default=16.0, help="the planted copies' SNR (correlation with the noise's unit)")
    args = ap.parse_args(argv)
    size, t, copies, angles, batch = SMALL if args.small else DEFAULT
    try:
        start, stop, args.step = (float(v) for v in (args.angles or angles).split(":"))
        assert args.step > 0 and stop > start
    except (ValueError, AssertionError):
        ap.error(f"--angles {args.angles}: not START:STOP:STEP with STOP > START and STEP > 0")
    args.angles_searched = np.arange(start, stop, args.step)
    args.batch = args.batch or batch
    args.size, args.copies = size, copies
    for flag in ("micrograph", "template"):
        f = getattr(args, flag)
        if f is not None and not f.is_file():
            ap.error(f"--{flag} {f}: no such file")
    args.base = np.load(args.template).astype(np.float64) if args.template else particle(t)
    if args.base.ndim != 2 or args.base.shape[0] != args.base.shape[1]:
        ap.error(f"--template {args.template}: not a square 2-D array (shape {args.base.shape})")
    args.min_distance = args.min_distance or args.base.shape[0] // 2
    return args


def save(path, **arrays):
    """An .npz written whole or not at all (a task of a Slurm array killed halfway leaves no result)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    planted = None
    if args.micrograph is not None:
        raw = np.load(args.micrograph)
        if raw.ndim != 2:
            sys.exit(f"template_matching_2dtm: {args.micrograph}: not a 2-D array (shape {raw.shape})")
    else:
        raw, planted = synthetic_micrograph(np.random.default_rng(args.seed), args.size, args.base, args.copies,
                                            args.amplitude)
        if args.save_micrograph:
            np.save(args.save_micrograph, raw)
            print(f"wrote {args.save_micrograph}: {raw.shape[0]}x{raw.shape[1]}, {len(planted)} copies (y, x, angle): "
                  + ", ".join(f"({y}, {x}, {a:.1f})" for y, x, a in planted))
            return 0
    filt = whitening(raw)
    image = filtered(raw.astype(np.float64), filt)
    image = ((image - image.mean()) / image.std()).astype(np.float32)
    template = filtered(args.base, filt)

    algorithm, lib = xcorr_setup(args.reference)
    angles, t = args.angles_searched, template.shape[0]
    print(f"{len(angles)} rotations of a {t}x{t} template ({angles[0]:g} to {angles[-1]:g} degrees, "
          f"step {args.step:g}) against a {image.shape[0]}x{image.shape[1]} micrograph, {args.batch} per call; "
          f"xcorr: {algorithm}")
    best, t_rot, t_search = search(image, template, angles, args.batch, algorithm, lib)
    print(f"rotating (scipy, CPU) {t_rot:.2f} s; searching (xcorr.max_over_rights) {t_search:.2f} s: "
          f"{len(angles) / t_search:.0f} templates/s")
    z = scaled_mip(best, len(angles))
    # One false detection per micrograph: N tries of a unit Gaussian pass it once (cisTEM's choice).
    threshold = args.threshold if args.threshold is not None else float(np.sqrt(2) * special.erfcinv(2 / (z.size * len(angles))))
    found = [(y, x, float(angles[best.index[y, x]]), s) for y, x, s in detections(z, threshold, args.min_distance)]
    print(f"threshold z > {threshold:.2f}, detections at least {args.min_distance} px apart: {len(found)}")
    if args.out:
        save(args.out, y=np.array([d[0] for d in found], np.int32), x=np.array([d[1] for d in found], np.int32),
             angle=np.array([d[2] for d in found]), z=np.array([d[3] for d in found]), threshold=threshold,
             angles=angles, scaled_mip=z, best_angle=angles[best.index].astype(np.float32),
             micrograph=str(args.micrograph or f"synthetic, seed {args.seed}"))
        print(f"wrote {args.out}")
    if planted is None:
        print(f"{'y':>5} {'x':>5} {'angle':>6} {'z':>6}")
        for y, x, a, s in found:
            print(f"{y:5d} {x:5d} {a:6.1f} {s:6.2f}")
        return 0
    problems = check(planted, found, args.step)
    right = len(planted) - sum("copy" in p for p in problems)
    print(f"copies found at their position and angle: {right / len(planted):.0%}; false detections: "
          f"{sum('false' in p for p in problems)}")
    if problems:
        sys.exit("template_matching_2dtm: " + "; ".join(problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
