#!/usr/bin/env python3
"""Template matching: where each of many templates sits in one image (form one-to-many, the
valid window: one plan correlates the image with every template at once), scored by the
zero-normalized cross-correlation (normalize="zncc": per position, the Pearson coefficient of the
template and the image patch under it, in [-1, 1]). The image has a brightness ramp and the
templates are copies of patches with another gain, another offset and noise, as a camera sees
them: the raw correlation (normalize=None) favours the bright side of the image and misses most
of them, ZNCC finds them all. Beside it, what users write today: OpenCV's matchTemplate with
TM_CCOEFF_NORMED (the same score, on the CPU, one template at a time), and the textbook formula
in PyTorch (conv2d for the numerator, box sums by conv2d with ones for the denominator).

    python examples/template_matching.py           # 1024 x 1024 image, 64 templates of 31 x 31 (a GPU)
    python examples/template_matching.py --small   # 160 x 160, 8 templates of 15 x 15: runs anywhere
"""
import argparse

import numpy as np

import xcorr
from _common import timed, to_numpy, xcorr_setup


def peaks(scores):
    """(row, column) of each score map's maximum; scores is (count, h, w)."""
    s = np.asarray(scores)
    k = s.reshape(len(s), -1).argmax(axis=1)
    return np.stack([k // s.shape[2], k % s.shape[2]], axis=1)


def torch_zncc(torch, image, templates):
    """ZNCC of the valid window as often written in PyTorch: numerator conv2d(I, T - mean T), the
    image patches' sums and sums of squares by conv2d with ones, all in float32."""
    F = torch.nn.functional
    count, t, _ = templates.shape
    n = t * t
    I = image[None, None]
    T = templates - templates.mean(dim=(1, 2), keepdim=True)
    num = F.conv2d(I, T[:, None])[0]  # conv2d is a cross-correlation
    ones = torch.ones(1, 1, t, t, device=image.device)
    s, s2 = F.conv2d(I, ones)[0], F.conv2d(I * I, ones)[0]
    var_i = (s2 - s * s / n).clamp_min(0)  # n·σ² of each patch
    var_t = (T * T).sum(dim=(1, 2))[:, None, None]
    return num / torch.sqrt(var_i * var_t).clamp_min(1e-12)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a small image (quick on the CPU reference)")
    ap.add_argument("--reference", action="store_true", help="force algorithm='reference'")
    args = ap.parse_args()
    size, t, count = (160, 15, 8) if args.small else (1024, 31, 64)
    rng = np.random.default_rng(1)
    ramp = np.linspace(0, 12, size)[None, :]  # brighter to the right
    image = (rng.standard_normal((size, size)) + ramp).astype(np.float32)
    where = rng.integers(0, size - t + 1, (count, 2))
    gain, offset = rng.uniform(0.5, 2, (count, 1, 1)), rng.uniform(-5, 5, (count, 1, 1))
    templates = np.stack([image[y:y + t, x:x + t] for y, x in where]) * gain + offset
    templates = (templates + 0.3 * rng.standard_normal(templates.shape)).astype(np.float32)  # noisy copies

    algorithm, lib = xcorr_setup(args.reference)
    img_x, tpl_x = ((lib.as_tensor(image, device="cuda"), lib.as_tensor(templates, device="cuda")) if lib
                    else (image, templates))
    plan = xcorr.Plan(image.shape, templates.shape, mode="valid", normalize="zncc", algorithm=algorithm)
    print(f"{count} templates of {t}x{t} in a {size}x{size} image; xcorr: {plan.algorithm} ({plan.explain()})")
    scores, tm = timed(lambda: plan(img_x, tpl_x))
    scores = to_numpy(scores)

    def hit(s):
        return f"{np.mean((peaks(s) == where).all(1)):.1%}"
    print(f"xcorr zncc         {tm * 1e3:9.2f} ms   found at the true position: {hit(scores)}")
    raw_plan = xcorr.Plan(image.shape, templates.shape, mode="valid", algorithm=algorithm)
    raw, tm = timed(lambda: raw_plan(img_x, tpl_x))
    print(f"xcorr raw          {tm * 1e3:9.2f} ms   found at the true position: {hit(to_numpy(raw))} "
          f"(normalize=None: the bright side wins)")
    try:
        import cv2
        ref, tm = timed(lambda: np.stack([cv2.matchTemplate(image, k, cv2.TM_CCOEFF_NORMED) for k in templates]),
                        repeat=1)
        print(f"OpenCV TM_CCOEFF_NORMED {tm * 1e3:4.2f} ms   found: {hit(ref)}, "
              f"max |difference| {np.abs(ref - scores).max():.2e}")
    except ImportError:
        print("OpenCV matchTemplate (opencv-python is not installed)")
    try:
        import torch
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        I, T = torch.as_tensor(image, device=dev), torch.as_tensor(templates, device=dev)
        ref, tm = timed(lambda: torch_zncc(torch, I, T))
        ref = ref.cpu().numpy()
        print(f"torch formula ({dev}) {tm * 1e3:6.2f} ms   found: {hit(ref)}, "
              f"max |difference| {np.abs(ref - scores).max():.2e}")
    except ImportError:
        print("torch formula      (PyTorch is not installed)")


if __name__ == "__main__":
    main()
