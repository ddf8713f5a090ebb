#!/usr/bin/env python3
"""Ambient-noise interferometry (seismology, 1-D signals): every pair of stations' traces
cross-correlated within a lag window (correlate1d, form n-to-m, max_lag=): 64 stations, one hour
at 40 Hz (144000 samples each), lags within +-60 s (+-2400 samples), as the signal experiments size it. The
traces here share one noise source that reaches station i after a delay d_i, plus local noise, so
the correlation of stations i and j peaks at lag d_i - d_j: the check.

With several GPUs, devices="all" splits the 4096 pairs across them (run_batch; one call either way),
into a result in page-locked memory (xcorr.empty_pinned) that the GPUs write directly.
Beside it, what users write today: scipy.signal.correlate per pair (method="fft") on the CPU, and
the batched FFT in PyTorch (rfft of every trace once, all pairwise products, irfft, lag crop).

    python examples/ambient_noise.py           # 64 stations x 144000 samples (a GPU)
    python examples/ambient_noise.py --small   # 8 stations x 3000 samples: runs anywhere
"""
import argparse

import numpy as np
from scipy.signal import correlate

import xcorr
from _common import timed, torch_or_none, xcorr_setup


def traces(rng, stations, n, max_delay, noise):
    """(stations, n) float32 traces and each station's delay (samples) of the common source."""
    source = rng.standard_normal(n + 2 * max_delay)
    delays = rng.integers(-max_delay, max_delay + 1, stations)
    out = np.stack([source[max_delay - d:max_delay - d + n] for d in delays])  # station i: source(t - d_i)
    out += noise * rng.standard_normal(out.shape)
    return out.astype(np.float32), delays


def peak_lags(cc, max_lag):
    """The lag of each pair's maximum; cc is (pairs, 2 * max_lag + 1) over lags -max_lag..max_lag."""
    return np.asarray(cc).argmax(axis=-1) - max_lag


def torch_pairs(torch, x, max_lag):
    """All pairs within +-max_lag by one batched FFT: C_ij[d] = sum_t x_i[t + d] x_j[t]."""
    s, n = x.shape
    m = 1 << (2 * n - 1).bit_length()  # no wrap-around for any lag
    F = torch.fft.rfft(x, n=m)
    cc = torch.fft.irfft(F[:, None, :] * F[None, :, :].conj(), n=m)  # (i, j, lag mod m)
    idx = torch.arange(-max_lag, max_lag + 1, device=x.device) % m
    return cc[..., idx].reshape(s * s, -1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a small problem (quick on the CPU reference)")
    ap.add_argument("--reference", action="store_true", help="force algorithm='reference'")
    args = ap.parse_args()
    stations, n, max_lag = (8, 3000, 120) if args.small else (64, 144000, 2400)
    rng = np.random.default_rng(3)
    x, delays = traces(rng, stations, n, max_delay=max_lag // 2, noise=2.0)
    expected = (delays[:, None] - delays[None, :]).reshape(-1)  # pair (i, j), left-major

    algorithm, lib = xcorr_setup(args.reference)
    if algorithm == "reference":
        run = lambda: xcorr.correlate1d(x, x, form="n-to-m", max_lag=max_lag, algorithm="reference")  # noqa: E731
        where = "xcorr: reference, the float64 CPU reference"
    else:
        # Host arrays in, host result out: the batch split across every GPU of the host. The result
        # lives in page-locked memory, allocated once: the GPUs write it directly (no host copy),
        # which is how a loop over hours of data would run.
        result = xcorr.empty_pinned((stations, stations, 2 * max_lag + 1))
        run = lambda: xcorr.correlate1d(x, x, form="n-to-m", max_lag=max_lag, devices="all", out=result)  # noqa: E731
        where = "xcorr: auto on every GPU of this host (devices='all', out= page-locked)"
    cc, tm = timed(run, repeat=1 if algorithm == "reference" else 3)
    cc = np.asarray(cc).reshape(stations * stations, -1)
    print(f"{stations} stations x {n} samples, all {stations * stations} pairs, lags within +-{max_lag}; "
          f"{where}")
    print(f"xcorr correlate1d     {tm * 1e3:9.2f} ms   pairs peaking at the true lag: "
          f"{np.mean(peak_lags(cc, max_lag) == expected):.1%}")

    pairs = [(i, j) for i in range(stations) for j in range(stations)]
    few = pairs if args.small else pairs[:64]  # scipy is slow: a sample of pairs on the full problem
    ref, tm = timed(lambda: np.stack([correlate(x[i], x[j], method="fft")[n - 1 - max_lag:n + max_lag]
                                      for i, j in few]), repeat=1)
    k = [i * stations + j for i, j in few]
    scale = np.abs(ref).max()
    timing = "" if len(few) == len(pairs) else f", extrapolated from {len(few)}"
    print(f"scipy.signal.correlate {tm * 1e3 * len(pairs) / len(few):8.2f} ms   (all {len(pairs)} pairs{timing}) "
          f"max |difference| {np.abs(ref - cc[k]).max() / scale:.1e} of the largest")
    found_torch = torch_or_none("torch.fft pairs")
    if found_torch is None:
        return
    torch, dev = found_torch
    X = torch.as_tensor(x, device=dev)
    if dev == "cuda" or args.small:
        t_cc, tm = timed(lambda: torch_pairs(torch, X, max_lag))
        t_cc = t_cc.cpu().numpy()
        print(f"torch.fft ({dev})      {tm * 1e3:9.2f} ms   same peaks: "
              f"{np.mean(peak_lags(t_cc, max_lag) == peak_lags(cc, max_lag)):.1%}, max |difference| "
              f"{np.abs(t_cc - cc).max() / scale:.1e} of the largest")


if __name__ == "__main__":
    main()
