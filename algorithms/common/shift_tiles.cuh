// Shared by the shared-memory tiled kernels (algorithms/21_multi_matrix_tiled.cu,
// 23_tensor_3xtf32.cu, 24_tensor_presplit.cu, 25_tensor_rowpair.cu, 26_tensor_wgmma.cu), device
// side: the pair geometry of a stack (and, from common/cp_async.cuh, the 4-byte asynchronous
// copies with zero fill), the union of the overlaps of a range of shifts, a pair group's slot table, the
// register-pipelined chunk loop, and the decoding of shift tiles and (shift tile, pair group) work
// items. The host side (the order of the shift tiles, the work-item schedule, the GroupTiled
// launcher) is algorithms/common/shift_tiles_launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "xcorr/core.hpp"

namespace xcorr {

// The pairs of the tiled kernels: the stack's pair grid (PairGrid, xcorr/core.hpp: N lefts, M
// rights per left) and the pair groups (blocks along i and j) that the kernel sets, `lefts` x
// `rights` pairs per block.
struct Pairs : PairGrid {
    int groupsI, groupsJ;
};
inline Pairs pairs_of(const Problem& p, int lefts, int rights) {
    const PairGrid G = pair_map(p).grid();
    return Pairs{G, ceil_div(G.N, lefts), ceil_div(G.M, rights)};
}

// Rows r of R for which some shift dy in [d0, d1] overlaps L: the union of the overlaps.
__device__ __forceinline__ Span union_span(int d0, int d1, int m, int n) {
    return Span{max(0, -d1), min(n, m - d0)};
}

// Pair group z of a kernel with a block per (left i0, rights j0 .. j0 + Slots - 1): its slot table,
// written by threads 0 .. Slots (blocks have more), then a barrier. rslot[s]: the element offset of
// right j0 + s in the right stack, -1 past the last right; lslot: that of the left.
struct PairGroup {
    int i0, j0;
};
template <int Slots>
__device__ __forceinline__ PairGroup fill_slots(const Pairs& P, int64_t z, int64_t lsize, int64_t rsize,
                                                int64_t (&rslot)[Slots], int64_t& lslot) {
    const PairGroup g{int(z / P.groupsJ), int(z % P.groupsJ) * Slots};
    const int tid = threadIdx.x;
    if (tid < Slots) {
        const int j = g.j0 + tid;
        rslot[tid] = j < P.M ? P.right(g.i0, j) * rsize : -1;
    } else if (tid == Slots) {
        lslot = int64_t(g.i0) * lsize;
    }
    __syncthreads();
    return g;
}

// The chunk loop of the presplit kernels (24, 25, 26), double-buffered through registers: chunk
// k + 1's global loads (fetch(k + 1, raw)) are issued before chunk k's MMAs (body(k, stage)) so
// that they are in flight during them, and split and stored into the other stage (commit(raw,
// stage)) after them; one barrier per chunk orders the stores before the next chunk's reads and
// the reads of chunk k before its stage is overwritten. Called by every thread of the block.
template <class Raw, class Stage, class Fetch, class Commit, class Body>
__device__ __forceinline__ void register_pipelined_chunks(int nchunks, Stage* stages, Fetch&& fetch, Commit&& commit,
                                                          Body&& body) {
    Raw raw;
    if (nchunks > 0) {
        fetch(0, raw);
        commit(raw, stages[0]);
    }
    __syncthreads();
    for (int k = 0; k < nchunks; ++k) {
        if (k + 1 < nchunks) fetch(k + 1, raw);  // in flight during the MMAs of chunk k
        body(k, stages[k & 1]);
        if (k + 1 < nchunks) commit(raw, stages[(k + 1) & 1]);
        __syncthreads();  // chunk k + 1 stored; everyone is done reading chunk k
    }
}

// A shift tile's column and row in the output's grid of tdy x tdx tiles: x = tx, y = ty (a pair,
// not a packed word, so neither is limited to 16 bits: 1-D outputs have millions of columns).
using ShiftTileIndex = uint2;

// A block's shift tile, decoded from its entry of the list of shift_tiles_by_work()
// (algorithms/common/shift_tiles_launch.cuh): first output row y0 and column x0, and the shift
// (dyb, dxb) = (y0 - (hR-1), x0 - (wR-1)) of its first element.
struct ShiftTile {
    int y0, x0, dyb, dxb;
};
__device__ __forceinline__ ShiftTile shift_tile(const ShiftTileIndex* __restrict__ order, int rank, int tdy, int tdx,
                                                int hR, int wR) {
    const ShiftTileIndex tile = order[rank];
    const int y0 = int(tile.y) * tdy, x0 = int(tile.x) * tdx;
    return ShiftTile{y0, x0, y0 - (hR - 1), x0 - (wR - 1)};
}
__device__ __forceinline__ ShiftTile shift_tile(const ShiftTileIndex* __restrict__ order, int tdy, int tdx, int hR,
                                                int wR) {
    return shift_tile(order, int(blockIdx.x), tdy, tdx, hR, wR);
}

// Work items (shift tile, pair group) of a kernel whose blocks stride over all of them, in the
// order that keeps the tail short without losing the L2: the pair groups go in windows of zwin
// whose inputs fit in half the L2, and inside a window tile-major, so every group's heaviest tile
// starts in the first waves and the lightest tiles of all groups form the tail. (A grid with the
// tiles on x and the groups on z starts the last groups' heaviest tiles late, and the SMs idle
// through a long tail: notes/25_tensor_rowpair.md.)
struct WorkItems {
    const ShiftTileIndex* order;  // shift tiles, heaviest first (shift_tiles_by_work)
    int ntiles;
    int64_t ngroups, zwin;
    Window shifts;  // the output's shifts (Problem::shifts()): tile (0, 0) starts at (dy0, dx0)
    int ksplit;     // slices of each item's K loop (GroupTiled's ksplit; 1: none)
};
// Item w: the rank of its shift tile in W.order, and its pair group in z.
__device__ __forceinline__ int work_item_rank(const WorkItems& W, int64_t w, int64_t& z) {
    const int64_t span = int64_t(W.ntiles) * W.zwin, win = w / span, in = w - win * span;
    const int64_t zc = min(W.zwin, W.ngroups - win * W.zwin);  // pair groups in this z window (the last is short)
    z = win * W.zwin + in % zc;
    return int(in / zc);
}
// Item w of the full output: its shift tile, and its pair group in z.
__device__ __forceinline__ ShiftTile work_item(const WorkItems& W, int64_t w, int tdy, int tdx, int hR, int wR,
                                               int64_t& z) {
    return shift_tile(W.order, work_item_rank(W, w, z), tdy, tdx, hR, wR);
}
// Item w of any window (W.shifts): its shift tile, (y0, x0) the window element of its first shift
// (dyb, dxb) = (dy0 + y0, dx0 + x0), and its pair group in z. For the full window this is
// work_item's tile; kernels keep work_item there, whose code is today's.
__device__ __forceinline__ ShiftTile window_work_item(const WorkItems& W, int64_t w, int tdy, int tdx, int64_t& z) {
    const ShiftTileIndex tile = W.order[work_item_rank(W, w, z)];
    const int y0 = int(tile.y) * tdy, x0 = int(tile.x) * tdx;
    return ShiftTile{y0, x0, W.shifts.dy0 + y0, W.shifts.dx0 + x0};
}

}  // namespace xcorr
