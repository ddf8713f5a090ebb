#!/usr/bin/env python3
"""One image against many templates (the cryo-EM 2-D template search shape): a 4096 x 4096
micrograph against 1000 particle templates of 128 x 128 (form one-to-many, mode "same": each
template's score at every image position, centred). As cryo-EM tools do it, the templates are
normalised (zero mean, unit norm) and the micrograph whitened (zero mean, unit variance), so the
raw correlation is the score; the search keeps, per pixel, the best score over all templates and
which template gave it (the "maximum intensity projection"): xcorr.max_over_rights, fed the
templates in chunks, each call continuing the last one's maxima (out=, first_index=), so that no
map per template is ever written and the memory does not grow with the number of templates.

Beside it, what users write today: the same search with PyTorch's FFT (the micrograph's spectrum
once, each chunk's templates zero-padded to the micrograph and transformed, product, inverse,
shifted to the same centring), compared with xcorr's projection away from the border (the FFT's
correlation is circular there).

The micrograph holds particles: copies of some of the templates at random places, in noise. Both
searches must find every particle at its centre and name the right template.

The whole 2-D template matching workflow (rotations of one template, whitening, z-scores, detections
with their angles, a Slurm array over micrograph files) is examples/template_matching_2dtm.py.

    python examples/cryoem_search.py           # 4096 x 4096, 1000 templates of 128 x 128 (a GPU)
    python examples/cryoem_search.py --small   # 192 x 192, 24 templates of 21 x 21: runs anywhere
"""
import argparse

import numpy as np
from scipy.ndimage import gaussian_filter

import xcorr
from _common import timed, to_numpy, torch_or_none, xcorr_setup


def particle_templates(rng, count, t):
    """Smooth random blobs under a circular mask, zero mean and unit norm inside the mask."""
    yy, xx = np.mgrid[:t, :t] - (t - 1) / 2
    mask = (yy ** 2 + xx ** 2) <= (t / 2 - 1) ** 2
    out = np.empty((count, t, t), np.float32)
    for k in range(count):
        blob = gaussian_filter(rng.standard_normal((t, t)), sigma=t / 24) * mask
        blob[mask] -= blob[mask].mean()
        out[k] = blob / np.linalg.norm(blob)
    return out


def micrograph(rng, size, templates, particles, amplitude):
    """Noise with `particles` copies of random templates (top-left corners away from the border and
    from each other); returns the whitened image, the centres and the template of each."""
    count, t, _ = templates.shape
    image = rng.standard_normal((size, size))
    centres, which = [], []
    while len(centres) < particles:
        y, x = rng.integers(t, size - 2 * t, 2)
        if all(abs(y - cy + t // 2) > t or abs(x - cx + t // 2) > t for cy, cx in centres):
            k = int(rng.integers(count))
            image[y:y + t, x:x + t] += amplitude * templates[k]
            centres.append((y + t // 2, x + t // 2))  # "same": the score at (i, j) centres the template there
            which.append(k)
    image = (image - image.mean()) / image.std()
    return image.astype(np.float32), np.array(centres), np.array(which)


def search_xcorr(image, templates, chunk, algorithm):
    """The projection and the best template per pixel: max_over_rights over chunks of templates,
    each call folding its chunk into the previous result (the template index counted from
    first_index)."""
    best = None
    for k0 in range(0, len(templates), chunk):
        best = xcorr.max_over_rights(image, templates[k0:k0 + chunk], mode="same", algorithm=algorithm, out=best,
                                     first_index=k0)
    return best.value, best.index


def search_torch_fft(torch, image, templates, chunk):
    """The same projection as commonly written with torch.fft (circular correlation)."""
    H, W = image.shape
    t = templates.shape[-1]
    FI = torch.fft.rfft2(image)
    best = best_k = None
    for k0 in range(0, len(templates), chunk):
        FT = torch.fft.rfft2(templates[k0:k0 + chunk], s=(H, W))
        circ = torch.fft.irfft2(FI[None] * FT.conj(), s=(H, W))  # circ[y, x] = sum I[y + r, x + c] T[r, c]
        scores = torch.roll(circ, shifts=(t // 2, t // 2), dims=(1, 2))  # centred like mode "same"
        top, arg = scores.max(dim=0)
        if best is None:
            best, best_k = top, arg + k0
        else:
            better = top > best
            best, best_k = torch.where(better, top, best), torch.where(better, arg + k0, best_k)
    return best, best_k


def found(best, best_k, centres, which, t):
    """Share of particles whose neighbourhood's maximum sits at the centre with the right template."""
    ok = 0
    for (y, x), k in zip(centres, which):
        win = best[y - t // 2:y + t // 2 + 1, x - t // 2:x + t // 2 + 1]
        py, px = np.unravel_index(np.argmax(win), win.shape)
        ok += (py, px) == (t // 2, t // 2) and best_k[y, x] == k
    return ok / len(centres)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a small problem (quick on the CPU reference)")
    ap.add_argument("--reference", action="store_true", help="force algorithm='reference'")
    args = ap.parse_args()
    size, t, count, chunk, particles = (192, 21, 24, 8, 4) if args.small else (4096, 128, 1000, 50, 40)
    rng = np.random.default_rng(7)
    templates = particle_templates(rng, count, t)
    image, centres, which = micrograph(rng, size, templates, particles, amplitude=12.0)

    algorithm, lib = xcorr_setup(args.reference)
    img_x, tpl_x = ((lib.as_tensor(image, device="cuda"), lib.as_tensor(templates, device="cuda")) if lib
                    else (image, templates))
    (best, best_k), tm = timed(lambda: search_xcorr(img_x, tpl_x, chunk, algorithm), repeat=1 if
                               algorithm == "reference" else 3)
    best, best_k = to_numpy(best), to_numpy(best_k)
    print(f"{count} templates of {t}x{t} against a {size}x{size} micrograph, {chunk} per call; xcorr: "
          f"{xcorr.explain(img_x, tpl_x[:chunk], mode='same')['algorithm'] if algorithm != 'reference' else algorithm}")
    print(f"xcorr.max_over_rights {tm * 1e3:8.2f} ms   particles found with the right template: "
          f"{found(best, best_k, centres, which, t):.0%}")
    found_torch = torch_or_none("torch.fft search")
    if found_torch is None:
        return
    torch, dev = found_torch
    I, T = torch.as_tensor(image, device=dev), torch.as_tensor(templates, device=dev)
    (ref, ref_k), tm = timed(lambda: search_torch_fft(torch, I, T, chunk), repeat=1 if dev == "cpu" else 3)
    ref, ref_k = to_numpy(ref), to_numpy(ref_k)
    inner = (slice(t, size - t), slice(t, size - t))  # away from the border, where the FFT wraps around
    print(f"torch.fft ({dev})     {tm * 1e3:9.2f} ms   found: {found(ref, ref_k, centres, which, t):.0%}, "
          f"max |difference| of the projections inside: {np.abs(ref[inner] - best[inner]).max():.2e}")


if __name__ == "__main__":
    main()
