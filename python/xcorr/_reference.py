"""The float64 reference on the CPU in NumPy: the definition of docs/CONVENTIONS.md,
C(dy, dx) = sum_{r,c} L[r+dy][c+dx] * R[r][c], for every form and any window, as
harness/reference_cpu.cpp computes it (the tests check the two against each other and against
scipy.signal.correlate2d). Vectorised over the pairs and the shifts; it loops over the smaller
matrix's elements, so it is meant for tests and small examples, not for speed."""
import numpy as np


def pair_indices(form, nL, nR):
    """(left index, right index) of every output k, as CONVENTIONS.md's form table maps them."""
    if form == "n-to-m":
        k = np.arange(nL * nR)
        return k // nR, k % nR
    k = np.arange(nR)
    if form == "n-to-mn":
        return k % nL, k
    return np.zeros(nR, dtype=np.int64), k  # one-to-one, one-to-many


def correlate(form, left, right, window):
    """left (nL, hL, wL), right (nR, hR, wR), window (dy0, dy1, dx0, dx1) inclusive: the
    (out_count, dy1 - dy0 + 1, dx1 - dx0 + 1) float64 result."""
    left = np.asarray(left, dtype=np.float64)
    right = np.asarray(right, dtype=np.float64)
    li, ri = pair_indices(form, left.shape[0], right.shape[0])
    if left.shape[1] * left.shape[2] < right.shape[1] * right.shape[2]:
        # Loop over the smaller matrix: C_LR(dy, dx) = C_RL(-dy, -dx).
        dy0, dy1, dx0, dx1 = window
        return _pairs(right[ri], left[li], (-dy1, -dy0, -dx1, -dx0))[:, ::-1, ::-1].copy()
    return _pairs(left[li], right[ri], window)


def _pairs(lsel, rsel, window):
    """C of lsel[k] with rsel[k] for every k over the window (loops over rsel's elements)."""
    count, hL, wL = lsel.shape
    _, hR, wR = rsel.shape
    dy0, dy1, dx0, dx1 = window
    out = np.zeros((count, dy1 - dy0 + 1, dx1 - dx0 + 1))
    # Only shifts with an overlap contribute: dy in [-(hR-1), hL-1], dx in [-(wR-1), wL-1].
    ay0, ay1 = max(dy0, -(hR - 1)), min(dy1, hL - 1)
    ax0, ax1 = max(dx0, -(wR - 1)), min(dx1, wL - 1)
    if ay0 > ay1 or ax0 > ax1 or count == 0:
        return out
    ny, nx = ay1 - ay0 + 1, ax1 - ax0 + 1
    # The left padded with zeros so that L[r+dy][c+dx] exists for every (r, c) and kept shift:
    # padded row index = r + dy + (hR - 1).
    pad = np.zeros((count, hL + 2 * (hR - 1), wL + 2 * (wR - 1)))
    pad[:, hR - 1:hR - 1 + hL, wR - 1:wR - 1 + wL] = lsel
    acc = out[:, ay0 - dy0:ay0 - dy0 + ny, ax0 - dx0:ax0 - dx0 + nx]  # a view: written in place
    for r in range(hR):
        y = r + ay0 + hR - 1
        for c in range(wR):
            x = c + ax0 + wR - 1
            acc += rsel[:, r, c, None, None] * pad[:, y:y + ny, x:x + nx]
    return out
