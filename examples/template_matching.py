#!/usr/bin/env python3
"""Template matching: where each of many templates sits in one image (form one-to-many, the
valid window: one plan correlates the image with every template at once). Beside it, what users
write today: a scipy.signal.correlate2d loop and torch.nn.functional.conv2d (which is a
cross-correlation). Plain correlation favours bright regions; the normalized score (ZNCC,
normalize="zncc") comes with issue #21; here the image is zero-mean noise, where the raw peak
finds the template.

    python examples/template_matching.py           # 1024 x 1024 image, 64 templates of 31 x 31 (a GPU)
    python examples/template_matching.py --small   # 160 x 160, 8 templates of 15 x 15: runs anywhere
"""
import argparse

import numpy as np

import xcorr
from _common import timed, xcorr_setup


def peaks(scores):
    """(row, column) of each score map's maximum; scores is (count, h, w)."""
    s = np.asarray(scores)
    k = s.reshape(len(s), -1).argmax(axis=1)
    return np.stack([k // s.shape[2], k % s.shape[2]], axis=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a small image (quick on the CPU reference)")
    ap.add_argument("--reference", action="store_true", help="force algorithm='reference'")
    args = ap.parse_args()
    size, t, count = (160, 15, 8) if args.small else (1024, 31, 64)
    rng = np.random.default_rng(1)
    image = rng.standard_normal((size, size)).astype(np.float32)
    where = rng.integers(0, size - t + 1, (count, 2))
    templates = np.stack([image[y:y + t, x:x + t] for y, x in where])
    templates += 0.3 * rng.standard_normal(templates.shape).astype(np.float32)  # noisy copies

    algorithm, lib = xcorr_setup(args.reference)
    img_x, tpl_x = ((lib.as_tensor(image, device="cuda"), lib.as_tensor(templates, device="cuda")) if lib
                    else (image, templates))
    plan = xcorr.Plan(image.shape, templates.shape, mode="valid", algorithm=algorithm)
    print(f"{count} templates of {t}x{t} in a {size}x{size} image; xcorr: {plan.algorithm} ({plan.explain()})")
    scores, tm = timed(lambda: plan(img_x, tpl_x))
    scores = scores.cpu().numpy() if hasattr(scores, "cpu") else np.asarray(scores)
    found = peaks(scores)
    print(f"xcorr            {tm * 1e3:9.2f} ms   found at the true position: {np.mean((found == where).all(1)):.1%}")
    try:
        import scipy.signal
        ref, tm = timed(lambda: np.stack([scipy.signal.correlate2d(image, k, "valid") for k in templates]), repeat=1)
        print(f"scipy loop       {tm * 1e3:9.2f} ms   max |difference| {np.abs(ref - scores).max():.2e}")
    except ImportError:
        print("scipy loop       (scipy is not installed)")
    try:
        import torch
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        I, T = torch.as_tensor(image, device=dev)[None, None], torch.as_tensor(templates, device=dev)[:, None]
        ref, tm = timed(lambda: torch.nn.functional.conv2d(I, T)[0])
        print(f"torch conv2d ({dev}) {tm * 1e3:7.2f} ms   max |difference| {np.abs(ref.cpu().numpy() - scores).max():.2e}")
    except ImportError:
        print("torch conv2d     (PyTorch is not installed)")


if __name__ == "__main__":
    main()
