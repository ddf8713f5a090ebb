"""The host link's floor under a multi-GPU batch: how fast the GPUs of this host can move a
batch's results into host memory, alone and all at once, with nothing else running, so that
scripts/batch-scaling can set each of its rows beside the floor that bounds it.

Measured with the CUDA runtime itself (ctypes; no PyTorch or CuPy), one host thread per GPU, each GPU
copying its share of `nbytes` from a device buffer into its own part of one host buffer:
- pinned:         cudaMemcpy device-to-host into page-locked memory (cudaMallocHost): the DMA
                  engines at the link's rate; what a page-locked out= gets at best.
- pageable:       the same into ordinary memory already written once: the driver stages it through
                  pinned buffers of its own, on the calling thread.
- pageable_fresh: into a fresh, never-touched array: the first-touch page faults on top.
- host_copy_T:    a pinned-to-pageable memcpy of `nbytes` on T host threads (the batch's own route for a
                  pageable out=: the GPUs download into pinned staging, host threads copy it out), for
                  T = 1, 2, 4, ...; with `fresh`, into a fresh array (its page faults spread over T).
- staged_T:       both halves of that route at once, as the batch overlaps them: the GPUs copying
                  into one page-locked buffer while T host threads copy another page-locked buffer
                  of the same size into pageable memory (staged_fresh_T: into a fresh array). The
                  DMA writes, the memcpy's reads and its writes all cross the host's memory, so this
                  is the staged route's floor, not the slower of its halves alone.
- pinned_pieces:  the pinned copy cut as the batch cuts it, pieces of ~64 MiB one after another per
                  GPU (PIECE_BYTES: the batch's default piece), each a cudaMemcpy of its own.
- pinned_blocks:  with `rows` (the lefts of an n-to-m batch), the same pieces as the batch's blocks
                  are (all of a GPU's lefts, a run of the rights): per piece one cudaMemcpy2D of
                  `rows` rows, each a run of the share's row at the row's pitch. These two say
                  whether cutting the copy, or its 2-D shape, costs against the one-call floor.
Each the best of `repeat` runs; seconds, and GB/s of the whole `nbytes`."""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
import time

import numpy as np

D2H = 2  # cudaMemcpyDeviceToHost


def cudart():
    """The CUDA runtime library through ctypes (the toolkit's, else the NVIDIA wheel's), or None."""
    names = [ctypes.util.find_library("cudart"), "libcudart.so"]
    names += sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so*"))
    for site in __import__("sys").path:
        names += sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "lib", "libcudart.so*")))
        names += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        vp, size, i32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        sig = {"cudaSetDevice": [i32], "cudaMalloc": [ctypes.POINTER(vp), size], "cudaFree": [vp],
               "cudaMallocHost": [ctypes.POINTER(vp), size], "cudaFreeHost": [vp],
               "cudaMemset": [vp, i32, size], "cudaMemcpy": [vp, vp, size, i32],
               "cudaMemcpy2D": [vp, size, vp, size, size, size, i32], "cudaDeviceSynchronize": []}
        for fn, args in sig.items():
            getattr(lib, fn).argtypes = args
            getattr(lib, fn).restype = i32
        return lib
    return None


def _check(status, what):
    if status != 0:
        raise RuntimeError(f"{what} failed: CUDA error {status}")


def concurrently(jobs):
    """Runs the callables at once, one thread each; the wall time from a common start to the last end."""
    start = threading.Barrier(len(jobs) + 1)
    errors = []

    def run(job):
        try:
            start.wait()
            job()
        except Exception as e:  # noqa: BLE001 - reported after the join
            errors.append(e)

    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return took


PIECE_BYTES = 64 << 20  # the batch's default output bytes per piece (lib/batch.cpp, kPieceOutputBytes)


def pieces_of(share: int, rows: int | None, piece_bytes: int = PIECE_BYTES) -> list[tuple[int, int, int, int, int]]:
    """One GPU's share cut into pieces as the batch cuts it: (dst offset, dst pitch, src offset,
    width, height) in bytes, copied in this order. rows None: contiguous pieces of piece_bytes
    (height 1). Else the share is `rows` rows of share // rows bytes (4-byte multiples), and each
    piece a run of columns of every row (a block), stored contiguously on the device, as a block
    piece's output is; the runs as equal as 4-byte columns allow."""
    if rows is None:
        return [(a, 0, a, min(piece_bytes, share - a), 1) for a in range(0, share, piece_bytes)]
    pitch = share // rows // 4 * 4
    if pitch == 0:
        raise ValueError(f"a share of {share} bytes has no 4-byte column in each of {rows} rows")
    n = max(1, -(-rows * pitch // piece_bytes))
    cols = pitch // 4
    edges = [cols * j // n * 4 for j in range(n + 1)]
    out, src = [], 0
    for a, b in zip(edges, edges[1:]):
        if b > a:
            out.append((a, pitch, src, b - a, rows))
            src += (b - a) * rows
    return out


def _device_copies(rt, devices, dev_bufs, base: int, share: int, k: int, rows: int | None = None,
                   piece_bytes: int | None = None):
    """Jobs: GPU i of the first k copies `share` bytes of its buffer to host address base + i·share,
    in pieces as pieces_of cuts it (piece_bytes None: the whole share in one cudaMemcpy)."""
    pieces = pieces_of(share, rows, piece_bytes or share)

    def job(i):
        def copy():
            _check(rt.cudaSetDevice(devices[i]), "cudaSetDevice")
            dst0, src0 = base + i * share, dev_bufs[i].value
            for dst, pitch, src, width, height in pieces:
                if height == 1:
                    _check(rt.cudaMemcpy(ctypes.c_void_p(dst0 + dst), ctypes.c_void_p(src0 + src), width, D2H),
                           "cudaMemcpy")
                else:
                    _check(rt.cudaMemcpy2D(ctypes.c_void_p(dst0 + dst), pitch, ctypes.c_void_p(src0 + src), width,
                                           width, height, D2H), "cudaMemcpy2D")
        return copy
    return [job(i) for i in range(k)]


def _host_copies(dst, src, t: int):
    """Jobs: t host threads' parts of copying src into dst (equal contiguous parts)."""
    bounds = [(int(p[0]), int(p[-1]) + 1) for p in np.array_split(np.arange(dst.size), t) if len(p)]
    return [lambda a=a, b=b: np.copyto(dst[a:b], src[a:b]) for a, b in bounds]


def measure(devices, nbytes: int, repeat: int = 3, threads=(1, 2, 4, 8, 16), rows: int | None = None) -> dict:
    """The floors above for moving `nbytes` of results off `devices` (every prefix: 1 GPU, 2, ...);
    `rows`: the batch's lefts (n-to-m), for pinned_blocks (each GPU's share holds rows // k of them)."""
    rt = cudart()
    if rt is None:
        raise RuntimeError("the CUDA runtime library (libcudart) was not found")
    nbytes = int(nbytes) // 4 * 4
    dev_bufs = []
    for d in devices:  # the largest share any run takes: the whole batch on one GPU
        _check(rt.cudaSetDevice(d), "cudaSetDevice")
        p = ctypes.c_void_p()
        _check(rt.cudaMalloc(ctypes.byref(p), nbytes), "cudaMalloc")
        _check(rt.cudaMemset(p, 0, nbytes), "cudaMemset")
        dev_bufs.append(p)
    pinned, staging = ctypes.c_void_p(), ctypes.c_void_p()
    _check(rt.cudaMallocHost(ctypes.byref(pinned), nbytes), "cudaMallocHost")
    _check(rt.cudaMallocHost(ctypes.byref(staging), nbytes), "cudaMallocHost")
    ctypes.memset(pinned, 0, nbytes)
    ctypes.memset(staging, 0, nbytes)
    touched = np.zeros(nbytes // 4, np.float32)
    out = {"bytes": nbytes, "repeat": repeat, "devices": list(devices), "copies": []}
    try:
        for k in range(1, len(devices) + 1):
            share = nbytes // k // 4 * 4
            for kind in ("pinned", "pageable", "pageable_fresh"):
                best = float("inf")
                for _ in range(repeat):
                    if kind == "pageable_fresh":
                        dst_arr = np.empty(nbytes // 4, np.float32)  # untouched: faults on first write
                        base = dst_arr.ctypes.data
                    elif kind == "pageable":
                        base = touched.ctypes.data
                    else:
                        base = pinned.value
                    best = min(best, concurrently(_device_copies(rt, devices, dev_bufs, base, share, k)))
                out["copies"].append({"gpus": k, "kind": kind, "seconds": best, "gb_per_s": k * share / best / 1e9})
            for kind, r in (("pinned_pieces", None), ("pinned_blocks", rows // k if rows and rows >= k else None)):
                if kind == "pinned_blocks" and r is None:
                    continue
                best = min(concurrently(_device_copies(rt, devices, dev_bufs, pinned.value, share, k, r, PIECE_BYTES))
                           for _ in range(repeat))
                out["copies"].append({"gpus": k, "kind": kind, "seconds": best, "gb_per_s": k * share / best / 1e9,
                                      **({"rows": r} if r else {}), "pieces": len(pieces_of(share, r, PIECE_BYTES))})
        src = np.ctypeslib.as_array((ctypes.c_float * (nbytes // 4)).from_address(pinned.value))
        for fresh in (False, True):
            for t in threads:
                best = float("inf")
                for _ in range(repeat):
                    dst = np.empty_like(touched) if fresh else touched
                    best = min(best, concurrently(_host_copies(dst, src, t)))
                out["copies"].append({"gpus": 0, "kind": f"host_copy{'_fresh' if fresh else ''}", "threads": t,
                                      "seconds": best, "gb_per_s": nbytes / best / 1e9})
        staged_src = np.ctypeslib.as_array((ctypes.c_float * (nbytes // 4)).from_address(staging.value))
        for k in range(1, len(devices) + 1):
            share = nbytes // k // 4 * 4
            for fresh in (False, True):
                for t in threads:
                    best = float("inf")
                    for _ in range(repeat):
                        dst = np.empty_like(touched) if fresh else touched
                        jobs = _device_copies(rt, devices, dev_bufs, pinned.value, share, k)
                        best = min(best, concurrently(jobs + _host_copies(dst, staged_src, t)))
                    out["copies"].append({"gpus": k, "kind": f"staged{'_fresh' if fresh else ''}", "threads": t,
                                          "seconds": best, "gb_per_s": nbytes / best / 1e9})
    finally:
        rt.cudaFreeHost(pinned)
        rt.cudaFreeHost(staging)
        for d, p in zip(devices, dev_bufs):
            rt.cudaSetDevice(d)
            rt.cudaFree(p)
    return out


def floor_of(ceilings: dict, gpus: int, kind: str, threads: int | None = None):
    """The seconds of one measured copy, or None."""
    for c in ceilings.get("copies", []):
        if c["gpus"] == gpus and c["kind"] == kind and (threads is None or c.get("threads") == threads):
            return c["seconds"]
    return None
