// The reduction kernels (kernels.cuh): peaks of each map of a chunk, and the running maximum over
// the rights. They read maps that a variant has just written to device scratch (usually still in
// L2 for the small maps of PIV and matching; streamed for the large ones), so that no map leaves
// the GPU; the contract is docs/CONVENTIONS.md, "Reductions".
//
// Peaks (exact greedy suppression at the cost of about one pass over each map):
//   1. tile_max: one warp per tile (kernels.cuh, Tiles) of every map, a grid over all of them:
//      the tile's largest value and its flat index (NaN skipped; ties to the smaller index), each
//      lane with several loads in flight (the one pass over the maps that costs DRAM bandwidth).
//      Where the variant's store took them as it wrote the maps (Instance::set_tile_sink), as
//      peak_key keys, there is no such pass: select decodes the keys and clears them.
//   2. select: one block per map, k rounds. A round takes the best of the map's tile maxima,
//      writes the peak's value and shift, marks the square of shifts within min_distance in a
//      byte mask and recomputes the maxima of only the tiles whose maximum that square took, a
//      warp a tile, all of them at once (a tile inside it becomes empty). The invariant: each
//      tile's maximum is over its values that no taken peak suppresses, so the best of the tile
//      maxima is the greedy rule's next peak. Each thread holds the best of the tiles it owns, so
//      a round's best is one reduction in shared memory and a round costs its barriers and one read
//      of the touched tiles (from DRAM where the maps are large), not a scan of every tile. The
//      sub-pixel fits come after the rounds, a thread a peak, from the untouched map (a fit's
//      neighbours may lie in an earlier peak's square). With min_distance 0 the square is the peak
//      alone. Last, the block clears the squares it marked, so that the
//      mask is all 0 again for the next chunk without a memset.
//   At k = 1 on maps of at most kPeak1Tiles tiles (PIV's windows, short lag ranges) select's block
//   a map is replaced by peak1_kernel, a thread a map: the best of its tile maxima, then the record.
//   tile_max and peak1 are programmatic dependent launches (each launch overlaps the kernel before).
// Maximum over the rights: one thread per shift and left, looping over the chunk's rights in
// order (a strict > keeps the smallest index among ties), reading each right's map coalesced a few
// rights ahead, and keeping value, index and the double sums in registers until the one store.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "common/launch.cuh"
#include "common/pdl.cuh"
#include "lib/reduce/kernels.cuh"
#include "lib/reduce/peak.cuh"
#include "xcorr/cuda_check.hpp"

namespace xcorr::reduce {

Tiles tiles_of(int h, int w) {
    Tiles g;
    g.h = h, g.w = w;
    if (h == 1) {
        g.th = 1, g.tw = w < 1024 ? w : 1024;
    } else {
        g.tw = w < 128 ? w : 128;
        g.th = 1024 / g.tw;
        if (g.th > h) g.th = h;
    }
    g.ny = (h + g.th - 1) / g.th, g.nx = (w + g.tw - 1) / g.tw;
    return g;
}

namespace {

constexpr int kBlock = 256;

// The best value of one tile, rows [y0, y1) x columns [x0, x1) of `map`, NaN skipped and, with
// kMasked, every value whose mask byte is set; every lane of the warp calls it and gets the answer.
// 8 kCols loads (and mask loads) a lane are issued before any is compared: a large map is streamed
// from DRAM, and one load in flight per lane leaves the memory system idle most of the time
// (tile_max: kCols 1, many warps an SM); select's rescans are latency-bound, a few warps each
// waiting for its tile, so they take a whole tile of 8 x 128 at once (kCols 4). The order in
// which values are compared does not matter (better() takes the largest value, the smallest index
// among ties), so a lane takes 8 rows of kCols columns 32 apart at a time; where the tile's values
// are one run in memory (a signal's one row, or whole rows of a map narrower than a tile: PIV's
// 17 x 17) it takes 8 kCols of them 32 apart, so that no lane idles past a short row; the warp's
// loads of one slot are one coalesced segment. Slots past
// the tile read nothing and hold NaN, which is never a peak. (`mk` is not __restrict__: select
// writes the mask through another pointer in the same kernel, so its loads must not take the
// read-only path.)
template <bool kMasked, int kCols>
__device__ Cand tile_best(const float* __restrict__ map, const unsigned char* mk, int w, int y0, int y1, int x0,
                          int x1) {
    constexpr int kRows = 8, kSlots = kRows * kCols;
    const int lane = threadIdx.x & 31;
    Cand c = none();
    const auto batch = [&](auto at_of) {  // at_of(slot): the flat index, or -1 past the tile
        float v[kSlots];
        bool off[kSlots];
        int at[kSlots];
#pragma unroll
        for (int j = 0; j < kSlots; ++j) {
            at[j] = at_of(j);
            v[j] = at[j] >= 0 ? __ldg(map + at[j]) : NAN;
            off[j] = kMasked && at[j] >= 0 && mk[at[j]];
        }
#pragma unroll
        for (int j = 0; j < kSlots; ++j)
            if (v[j] == v[j] && !off[j]) c = better(c, Cand{v[j], at[j]});
    };
    if (y1 - y0 == 1 || (x0 == 0 && x1 == w)) {  // one run of the map's values: read it flat
        const int f1 = (y1 - 1) * w + x1;
        for (int f = y0 * w + x0 + lane; f < f1; f += 32 * kSlots)
            batch([&](int j) { return f + 32 * j < f1 ? f + 32 * j : -1; });
    } else {
        for (int x = x0 + lane; x < x1; x += 32 * kCols)
            for (int y = y0; y < y1; y += kRows)
                batch([&](int j) {
                    const int xx = x + 32 * (j / kRows), yy = y + j % kRows;
                    return xx < x1 && yy < y1 ? yy * w + xx : -1;
                });
    }
    return warp_best(c);
}

__global__ void tile_max_kernel(const float* __restrict__ maps, int count, Tiles g, float* __restrict__ tile_value,
                                int* __restrict__ tile_index) {
    const int lane = threadIdx.x & 31;
    const int64_t t = int64_t(blockIdx.x) * (kBlock / 32) + (threadIdx.x >> 5);
    const int tiles = g.count();
    pdl_wait();  // the maps are written
    if (t >= int64_t(count) * tiles) return;  // whole warps leave together
    const int64_t q = t / tiles;
    const int ti = int(t - q * tiles), ty = ti / g.nx, tx = ti - ty * g.nx;
    const float* map = maps + q * int64_t(g.h) * g.w;
    const int y0 = ty * g.th, x0 = tx * g.tw;
    const Cand c = tile_best<false, 1>(map, nullptr, g.w, y0, min(g.h, y0 + g.th), x0, min(g.w, x0 + g.tw));
    if (lane == 0) tile_value[t] = c.v, tile_index[t] = c.i;
}

// k = 1 where a map is a few tiles (PIV's 17 x 17 windows are one, 33 x 33 two, short lag ranges):
// the record straight from the best of the map's tile maxima (tile_max's, or the keys the
// variant's store took), a thread a map, in place of select's block a map. The fit is double
// precision (the gaussian's three logarithms an axis), so it is worth a lane of its own: done by one
// lane of a warp a map, it costs the whole warp's instruction slots for each map. Keys are left 0
// for the next chunk, as select leaves them.
constexpr int kPeak1Tiles = 16;

__global__ void __launch_bounds__(kBlock) peak1_kernel(const float* __restrict__ maps, int count, Tiles g, int dy0,
                                                       int dx0, int subpixel, const float* __restrict__ tile_value,
                                                       const int* __restrict__ tile_index,
                                                       unsigned long long* __restrict__ tile_key, float* value,
                                                       int32_t* shift, float* sub) {
    const int64_t q = int64_t(blockIdx.x) * kBlock + threadIdx.x;
    pdl_wait();  // the tile maxima (and, through the kernel before them, the maps) are written
    if (q >= count) return;
    const int tiles = g.count();
    Cand c = none();
    for (int t = 0; t < tiles; ++t) {
        const int64_t i = q * tiles + t;
        if (tile_key) {
            c = better(c, peak_of_key(tile_key[i]));
            tile_key[i] = 0;
        } else {
            c = better(c, Cand{tile_value[i], tile_index[i]});
        }
    }
    if (c.i == INT_MAX) {  // no value of the map is a number
        write_absent(value + q, shift + 2 * q, sub + 2 * q, 0);
        return;
    }
    const float* map = maps + q * int64_t(g.h) * g.w;
    write_peak(value + q, shift + 2 * q, sub + 2 * q, 0, c, g.h, g.w, dy0, dx0, subpixel,
               [&](int y, int x) { return __ldg(map + y * g.w + x); });
}

struct Square {
    int y0, y1, x0, x1;  // inclusive
};
__device__ __forceinline__ Square square_of(const Tiles& g, int i, int r) {
    const int y = i / g.w, x = i - (i / g.w) * g.w;
    return Square{max(0, y - r), min(g.h - 1, y + r), max(0, x - r), min(g.w - 1, x + r)};
}
__device__ void set_square(unsigned char* mask, const Tiles& g, Square s, unsigned char v) {
    const int sw = s.x1 - s.x0 + 1, n = (s.y1 - s.y0 + 1) * sw;
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        const int yy = s.y0 + e / sw;
        mask[yy * g.w + s.x0 + (e - (e / sw) * sw)] = v;
    }
}

__global__ void __launch_bounds__(kBlock) select_kernel(const float* __restrict__ maps, Tiles g, int dy0, int dx0,
                                                        int k, int min_distance, int subpixel,
                                                        float* __restrict__ tile_value, int* __restrict__ tile_index,
                                                        unsigned long long* __restrict__ tile_key,
                                                        unsigned char* __restrict__ mask, float* value,
                                                        int32_t* shift, float* sub) {
    __shared__ Cand sh[32];
    const int64_t q = blockIdx.x;
    const int64_t n = int64_t(g.h) * g.w;
    const float* map = maps + q * n;
    unsigned char* mk = mask ? mask + q * n : nullptr;
    const int tiles = g.count();
    float* tv = tile_value + q * tiles;
    int* tix = tile_index + q * tiles;
    float* val = value + q * k;
    int32_t* sft = shift + q * k * 2;
    float* spx = sub + q * k * 2;
    // Each thread keeps the best of the tiles it owns (t = threadIdx.x + j blockDim.x), so that a
    // round's best is a reduction in shared memory, and only the owners of a tile that the round
    // changed read the tile maxima again.
    const auto own_best = [&]() {
        Cand c = none();
        for (int t = threadIdx.x; t < tiles; t += blockDim.x) c = better(c, Cand{tv[t], tix[t]});
        return c;
    };
    Cand mine = none();
    if (tile_key) {  // the tile maxima from the variant's store: decoded, the keys 0 for the next chunk
        unsigned long long* key = tile_key + q * tiles;
        for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
            const Cand c = peak_of_key(key[t]);
            tv[t] = c.v, tix[t] = c.i, key[t] = 0;
            mine = better(mine, c);
        }
        __syncthreads();  // the rescans below read other threads' tiles
    } else {
        mine = own_best();
    }
    const int lane = threadIdx.x & 31;
    int taken = 0;
    for (int round = 0; round < k; ++round) {
        const Cand c = block_best(mine, sh);
        if (c.i == INT_MAX) break;  // every value taken, suppressed or NaN: the rest are absent
        if (threadIdx.x == 0) write_shift(val, sft, round, c, g.w, dy0, dx0);
        taken = round + 1;
        if (round + 1 == k) break;  // nothing to suppress after the last peak
        const Square s = square_of(g, c.i, min_distance);
        set_square(mk, g, s, 1);
        __syncthreads();
        // The tiles the square touches, a warp each (several at once: a round's latency is one
        // tile's, not the sum of them all). A tile whose maximum lies outside the square keeps it
        // (suppression only removes values), and an empty tile stays empty: only the tiles whose
        // maximum the square took are read again, among them the peak's own.
        const int ty0 = s.y0 / g.th, ty1 = s.y1 / g.th, tx0 = s.x0 / g.tw, tx1 = s.x1 / g.tw, ntx = tx1 - tx0 + 1;
        const int touched = (ty1 - ty0 + 1) * ntx;
        for (int u = threadIdx.x >> 5; u < touched; u += blockDim.x >> 5) {
            const int ty = ty0 + u / ntx, tx = tx0 + u % ntx, ti = ty * g.nx + tx;
            const int mi = tix[ti], my = mi / g.w, mx = mi - my * g.w;
            if (mi == INT_MAX || my < s.y0 || my > s.y1 || mx < s.x0 || mx > s.x1) continue;
            const int y0 = ty * g.th, y1 = min(g.h, y0 + g.th), x0 = tx * g.tw, x1 = min(g.w, x0 + g.tw);
            Cand b = none();  // a tile wholly inside the square becomes empty without a read
            if (y0 < s.y0 || y1 - 1 > s.y1 || x0 < s.x0 || x1 - 1 > s.x1) b = tile_best<true, 4>(map, mk, g.w, y0, y1, x0, x1);
            __syncwarp();  // every lane has read tix[ti] (a tile inside the square takes no shuffle)
            if (lane == 0) tv[ti] = b.v, tix[ti] = b.i;
        }
        __syncthreads();
        // The owners of the touched tiles take their best again (the others' stands).
        bool stale = false;
        for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
            const int ty = t / g.nx, tx = t - ty * g.nx;
            stale |= ty >= ty0 && ty <= ty1 && tx >= tx0 && tx <= tx1;
        }
        if (stale) mine = own_best();
    }
    // The peaks' sub-pixel fits, a thread a peak: a fit reads the map, which suppression leaves as
    // it is (its neighbours may lie in an earlier peak's square), so none waits in the rounds.
    __syncthreads();  // thread 0's values and shifts are visible to the block
    for (int a = threadIdx.x; a < k; a += blockDim.x) {
        if (a >= taken) {
            write_absent(val, sft, spx, a);
            continue;
        }
        const Cand c{val[a], (sft[2 * a] - dy0) * g.w + (sft[2 * a + 1] - dx0)};
        write_fit(spx, a, c, g.h, g.w, dy0, dx0, subpixel, [&](int y, int x) { return map[y * g.w + x]; });
    }
    // Clear the squares marked (every peak but the last taken one, which marked nothing if it
    // was the k-th; the earlier ones all did).
    if (!mk) return;
    const int marked = taken < k ? taken : k - 1;
    for (int a = 0; a < marked; ++a) {
        const int i = (sft[2 * a] - dy0) * g.w + (sft[2 * a + 1] - dx0);
        set_square(mk, g, square_of(g, i, min_distance), 0);
    }
}

__global__ void fold_max_kernel(const float* __restrict__ maps, int64_t n, int lefts, int rights, int64_t si,
                                int64_t sj, int32_t first, bool fresh, float* value, int32_t* index, double* sum,
                                double* sumsq) {
    const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n) return;
    for (int i = blockIdx.y; i < lefts; i += gridDim.y) {
        const int64_t o = int64_t(i) * n + e;
        float cur = NAN;
        int32_t idx = -1;
        double s = 0, s2 = 0;
        if (!fresh) {
            cur = value[o], idx = index[o];
            if (sum) s = sum[o], s2 = sumsq[o];
        }
        const float* m = maps + int64_t(i) * si * n + e;
        auto fold = [&](float v, int j) {
            if (v == v && (idx < 0 || v > cur)) cur = v, idx = first + j;
            s += v, s2 += double(v) * v;
        };
        // kRights loads in flight before they are folded, in the rights' order (the ties' rule and
        // the sums' rounding are those of one right at a time)
        constexpr int kRights = 4;
        int j = 0;
        for (; j + kRights <= rights; j += kRights) {
            float v[kRights];
#pragma unroll
            for (int u = 0; u < kRights; ++u) v[u] = __ldg(m + int64_t(j + u) * sj * n);
#pragma unroll
            for (int u = 0; u < kRights; ++u) fold(v[u], j + u);
        }
        for (; j < rights; ++j) fold(__ldg(m + int64_t(j) * sj * n), j);
        value[o] = cur, index[o] = idx;
        if (sum) sum[o] = s, sumsq[o] = s2;
    }
}

}  // namespace

void launch_peaks(const float* maps, int count, const Tiles& g, int dy0, int dx0, const Reduction& r,
                  float* tile_value, int* tile_index, unsigned long long* tile_key, unsigned char* mask, float* value,
                  int32_t* shift, float* subpixel, cudaStream_t stream) {
    if (count <= 0) return;
    if (!tile_key) {
        const int64_t warps = int64_t(count) * g.count();
        launch_dependent(tile_max_kernel, dim3(unsigned((warps + kBlock / 32 - 1) / (kBlock / 32))), dim3(kBlock), 0,
                         stream, maps, count, g, tile_value, tile_index);
    }
    if (r.k == 1 && g.count() <= kPeak1Tiles) {
        launch_dependent(peak1_kernel, dim3(unsigned((count + kBlock - 1) / kBlock)), dim3(kBlock), 0, stream, maps,
                         count, g, dy0, dx0, int(r.subpixel), tile_value, tile_index, tile_key, value, shift,
                         subpixel);
        return;
    }
    // A map of a few tiles and values (PIV's 17 x 17 at k > 1) is one warp's work: a block of 256 threads
    // would idle 224 of them through every round.
    const int block = (g.count() <= 32 && int64_t(g.h) * g.w <= 4096) ? 32 : kBlock;
    select_kernel<<<unsigned(count), block, 0, stream>>>(maps, g, dy0, dx0, r.k, r.min_distance, int(r.subpixel),
                                                          tile_value, tile_index, tile_key, r.k > 1 ? mask : nullptr, value,
                                                          shift, subpixel);
    XC_CHECK_LAUNCH();
}

void launch_fold_max(const float* maps, int64_t n, int lefts, int rights, int64_t si, int64_t sj, int32_t first,
                     bool fresh, const ReducedOutputs& out, cudaStream_t stream) {
    if (n <= 0 || lefts <= 0) return;
    const dim3 grid(unsigned((n + kBlock - 1) / kBlock), unsigned(lefts < 65535 ? lefts : 65535));
    fold_max_kernel<<<grid, kBlock, 0, stream>>>(maps, n, lefts, rights, si, sj, first, fresh, out.value, out.index,
                                                 out.sum, out.sumsq);
    XC_CHECK_LAUNCH();
}

}  // namespace xcorr::reduce
