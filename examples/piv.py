#!/usr/bin/env python3
"""PIV (particle image velocimetry): the displacement field between two images.

Each image is cut into interrogation windows; window k of the second image is correlated with
window k of the first over shifts |dy|, |dx| <= max_shift (form n-to-mn: pairwise, one plan for
every window), and the argmax of each correlation is that window's displacement; xcorr.peaks2d
gives the same displacements with a gaussian sub-pixel fit without writing the maps. Beside it,
what users write today: a scipy.signal.correlate2d loop and a batched PyTorch FFT.

    python examples/piv.py            # 1024 x 1024 images, 32 x 32 windows (a GPU)
    python examples/piv.py --small    # 128 x 128, runs anywhere (algorithm='reference' without a GPU)
"""
import argparse

import numpy as np

import xcorr
from _common import timed, to_numpy, xcorr_setup


def particle_images(size, rng, shift_field):
    """Two images of random particles; the second is the first moved by shift_field(y, x)."""
    n = size * size // 20
    y, x = rng.uniform(0, size, n), rng.uniform(0, size, n)
    yy, xx = np.mgrid[0:size, 0:size]

    def render(py, px):
        img = np.zeros((size, size))
        for cy, cx in zip(py, px):  # small Gaussian particles
            iy, ix = int(cy), int(cx)
            y0, y1, x0, x1 = max(iy - 2, 0), min(iy + 3, size), max(ix - 2, 0), min(ix + 3, size)
            img[y0:y1, x0:x1] += np.exp(-((yy[y0:y1, x0:x1] - cy) ** 2 + (xx[y0:y1, x0:x1] - cx) ** 2) / 1.5)
        return img

    dy, dx = shift_field(y, x)
    return render(y, x).astype(np.float32), render(y + dy, x + dx).astype(np.float32)


def windows(img, w):
    """(count, w, w) non-overlapping windows, row-major over the image."""
    n = img.shape[0] // w
    return np.ascontiguousarray(img[:n * w, :n * w].reshape(n, w, n, w).transpose(0, 2, 1, 3).reshape(-1, w, w))


def displacement(corr, s):
    """The shift (dy, dx) of each correlation's maximum; corr is (count, 2s+1, 2s+1)."""
    k = np.asarray(corr).reshape(len(corr), -1).argmax(axis=1)
    return np.stack([k // (2 * s + 1) - s, k % (2 * s + 1) - s], axis=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small images (quick on the CPU reference, which runs without a GPU)")
    ap.add_argument("--reference", action="store_true", help="force algorithm='reference'")
    args = ap.parse_args()
    size, w, s = (128, 16, 4) if args.small else (1024, 32, 8)
    rng = np.random.default_rng(0)
    field = lambda y, x: (3 * np.sin(2 * np.pi * x / size), 2 * np.cos(2 * np.pi * y / size))  # noqa: E731
    frame1, frame2 = particle_images(size, rng, field)
    # C(dy, dx) = sum frame2[r+dy][c+dx] * frame1[r][c]: the left is the second frame.
    left, right = windows(frame2, w), windows(frame1, w)
    print(f"{len(left)} windows of {w}x{w}, shifts up to {s}")

    algorithm, lib = xcorr_setup(args.reference)
    if lib is not None:
        left_x, right_x = lib.as_tensor(left, device="cuda"), lib.as_tensor(right, device="cuda")
    else:
        left_x, right_x = left, right
    plan = xcorr.Plan(left.shape, right.shape, form="n-to-mn", max_shift=s, algorithm=algorithm)
    print(f"xcorr: {plan.algorithm} ({plan.explain()})")
    corr, t = timed(lambda: plan(left_x, right_x))
    corr = to_numpy(corr)
    ours = displacement(corr, s)
    print(f"xcorr            {t * 1e3:9.2f} ms")
    # The answer without the maps: each window's peak and its gaussian sub-pixel position.
    peaks, t = timed(lambda: xcorr.peaks2d(left_x, right_x, form="n-to-mn", max_shift=s, subpixel="gaussian",
                                           algorithm=algorithm))
    sub = to_numpy(peaks.subpixel)[:, 0]
    print(f"xcorr.peaks2d    {t * 1e3:9.2f} ms   same displacements: "
          f"{np.mean((to_numpy(peaks.shift)[:, 0] == ours).all(1)):.1%}, with sub-pixel positions")

    try:
        import scipy.signal
        def scipy_way():  # noqa: E306
            full = [scipy.signal.correlate2d(a, b, "full") for a, b in zip(left, right)]
            return np.stack([f[w - 1 - s:w + s, w - 1 - s:w + s] for f in full])
        ref, t = timed(scipy_way, repeat=1)
        print(f"scipy loop       {t * 1e3:9.2f} ms   same displacements: {np.mean((displacement(ref, s) == ours).all(1)):.1%}")
    except ImportError:
        print("scipy loop       (scipy is not installed)")
    try:
        import torch
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        L, R = torch.as_tensor(left, device=dev), torch.as_tensor(right, device=dev)

        def torch_fft():  # circular correlation of zero-padded windows, then the +-s block
            n = 2 * w
            c = torch.fft.irfft2(torch.fft.rfft2(L, (n, n)) * torch.fft.rfft2(R, (n, n)).conj(), (n, n))
            c = torch.roll(c, shifts=(s, s), dims=(1, 2))[:, :2 * s + 1, :2 * s + 1]
            return c
        ref, t = timed(torch_fft)
        print(f"torch FFT ({dev}) {t * 1e3:9.2f} ms   same displacements: "
              f"{np.mean((displacement(ref.cpu().numpy(), s) == ours).all(1)):.1%}")
    except ImportError:
        print("torch FFT        (PyTorch is not installed)")
    true = np.stack(field(*(np.mgrid[0:size // w, 0:size // w] * w + w / 2)), axis=-1).reshape(-1, 2)
    print(f"mean |displacement - true field|: {np.abs(ours - true).mean():.2f} px (integer peaks), "
          f"{np.abs(sub - true).mean():.2f} px (peaks2d's gaussian fit)")


if __name__ == "__main__":
    main()
