// The normalization's epilogues after the raw correlation: the staged rebuild of tables, the box
// sums, zncc_factor, the general and template epilogues and StoreNorm's terms. Part of
// normalizer.cu's translation unit (internal.cuh).
#pragma once

#include "normalize/internal.cuh"
#include "normalize/tables.cuh"

namespace xcorr {
namespace {

// One table row from one crop row of the shifted copy, by one thread: row[0] = 0 and
// row[c + 1] = (Σ x', Σ x'²) over columns <= c, added in column order from +0 (x'² by __dmul_rn,
// exact for a float; no contraction). The staged epilogue's rebuild of narrow crops (at most
// kSeqRowCols columns): a fixed order of its own, not scan_row's (tests/test_normalize_fused.py:
// seq_row). The loads are batched ahead of the dependent adds.
constexpr int kSeqRowCols = 64;
__device__ __forceinline__ void seq_row(const float* x, double2* row, int cw) {
    double a = 0, q = 0;
    row[0] = make_double2(0, 0);
    int c = 0;
    for (; c + 4 <= cw; c += 4) {
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = x[c + i];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const double d = v[i];
            a = __dadd_rn(a, d);
            q = __dadd_rn(q, __dmul_rn(d, d));
            row[c + i + 1] = make_double2(a, q);
        }
    }
    for (; c < cw; ++c) {
        const double d = x[c];
        a = __dadd_rn(a, d);
        q = __dadd_rn(q, __dmul_rn(d, d));
        row[c + 1] = make_double2(a, q);
    }
}

// The staged epilogue's copies into shared memory, by the whole block: several loads per thread in
// flight before their stores (one at a time, each thread waited on DRAM ~6 times per output for the
// left crop alone). kReadOnly: through the read-only cache (__ldg), for what the kernel never
// writes; not the raw outputs, which it overwrites.
template <class T, bool kReadOnly = true>
__device__ __forceinline__ void stage_copy(T* dst, const T* __restrict__ src, int n) {
    constexpr int kAhead = sizeof(T) <= 4 ? 4 : 2;  // 16 or 32 bytes a thread (64 registers at most)
    for (int i0 = threadIdx.x; i0 < n; i0 += kAhead * blockDim.x) {
        T v[kAhead];
#pragma unroll
        for (int u = 0; u < kAhead; ++u)
            if (const int i = i0 + u * blockDim.x; i < n) v[u] = kReadOnly ? __ldg(src + i) : src[i];
#pragma unroll
        for (int u = 0; u < kAhead; ++u)
            if (const int i = i0 + u * blockDim.x; i < n) dst[i] = v[u];
    }
}

// C' at shift (dy, dx) of two crops (L' of lh x lw, R' of rh x rw) whose overlap has at most
// kDirectOverlap elements, by a whole warp: lane t takes the overlap's elements t and t + 32 in
// row-major order (each product of two floats exact in double), then a butterfly over the lanes
// (__shfl_xor_sync: a + b and b + a are the same double, so every lane ends with the same total).
// A fixed order of its own (raw_at's sequential sum in one thread kept its block waiting on up to
// 64 dependent loads, a quarter of the staged epilogue's instructions on zncc_frames).
static_assert(kDirectOverlap <= 2 * kWarp, "warp_direct_sum: two elements per lane");
__device__ __forceinline__ double warp_direct_sum(const float* L, const float* R, int lh, int lw, int rh, int rw,
                                                  int dy, int dx, int lane) {
    const Span rows = overlap_span(dy, lh, rh), cols = overlap_span(dx, lw, rw);
    const int nc = cols.end - cols.begin, n = (rows.end - rows.begin) * nc;
    // t / nc as ⌊(t + 1/2)·(1/nc)⌋ in float: exact for t < 2·32 (the quotient is at least 1/(2·nc)
    // from an integer, the rounding error under 1e-5), where an integer division took ~25
    // instructions per element.
    const float rnc = 1.0f / float(nc);
    double s = 0;
    for (int t = lane; t < n; t += kWarp) {
        const int dr = int((float(t) + 0.5f) * rnc);
        const int r = rows.begin + dr, c = cols.begin + t - dr * nc;
        s = __dadd_rn(s, __dmul_rn(double(L[int64_t(r + dy) * lw + c + dx]), double(R[int64_t(r) * rw + c])));
    }
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) s = __dadd_rn(s, __shfl_xor_sync(kFullMask, s, o));
    return s;
}

// (Σx', Σx'²) over rows [r0, r1), columns [c0, c1) of one matrix's table (row stride w1), and
// `corner`, the Σx'² entry of the box's far corner (r1, c1): the largest of the four entries read
// (Σx'² over rows < r1, columns < c1), which bounds their rounding (zncc_factor).
// From global memory through the read-only cache (__ldg): the epilogue writes `out` in place, so
// the compiler cannot prove by itself that the tables do not alias it; kShared: a table staged in
// shared memory (plain loads). The same four entries and the same arithmetic either way.
// Row 0 of a table is zero (the sums over no row), and where a box starts there (every box of a
// one-row crop) its two entries of that row are read at cell (0, 0), one address for the whole
// warp, instead of a line per warp each: half the table traffic of one-dimensional signals. (A
// select of zero in place of the loads cost the sampled instantiation spills at 64 registers.)
template <bool kShared>
__device__ __forceinline__ double2 box_sum(const double2* t, int64_t w1, int r0, int r1, int c0, int c1,
                                           double& corner) {
    auto ld = [](const double2* p) {
        if constexpr (kShared) return *p;
        else return __ldg(p);
    };
    const double2* t0 = t + r0 * w1;
    const double2* t1 = t + r1 * w1;
    const bool row0 = r0 == 0;
    const double2 a = ld(t1 + c1), b = ld(t0 + (row0 ? 0 : c1)), c = ld(t1 + c0), d = ld(t0 + (row0 ? 0 : c0));
    corner = a.y;
    return make_double2(a.x - b.x - c.x + d.x, a.y - b.y - c.y + d.y);
}

// The .y of a table entry, loaded where it is used (see the staged epilogue's corner).
__device__ __forceinline__ double reload_y(const double2* p) { return reinterpret_cast<const volatile double2*>(p)->y; }

// zncc's factor of one side of an overlap of n elements from its shifted sums s = (ΣX', ΣX'²),
// X' = X - m: f = n·ΣX'² - (ΣX')² (n² times the part's variance; the shift leaves it unchanged), and
// whether X varies there. The one spelling of that test on the GPU; two conditions:
// - the contract's constant-part test: the part's variance f / n² above kConstantOverlap times the
//   variance `var` of its crop (crop_variance; the crop is the whole matrix unless the window
//   touches less of it: docs/CONVENTIONS.md says what that reading changes), i.e. f > 1e-6·n²·var.
//   Relative to the spread, never to the magnitude: 1000 + noise varies as noise does;
// - f above the rounding of the tables it comes from. An exactly constant overlap (zeros: X' = -m,
//   the same float everywhere) has f = 0 and ΣX² = n·X², but both come out of the box sums as
//   rounding noise of the table's far larger entries, and the first test alone let about half of
//   such overlaps through with a noise coefficient up to ±1 (zero-padded data). A table
//   entry at (r, c) is a sum of r·c terms, each row's by the row pass, then the rows' by the column
//   pass: any such tree rounds by at most (r + c)·u·Σ|terms|, u = 2^-53 (first order); a segmented
//   row's entry (rows past kSegRow columns) by at most (r + kSegRowDepth)·u·Σ|terms|, its carry
//   being compensated (seg_carry_kernel), so the caller passes c1 capped at that depth. The box's
//   four entries and three additions: at most e2 = k·corner for ΣX'² (its terms are squares, so
//   Σ|terms| is the corner itself) and e1 = k·sqrt(r1·c1·corner) for ΣX' (Cauchy-Schwarz: Σ|x'| <=
//   sqrt(count·Σx'²)), k = 4(r1 + c1 + 3)·u. f's error from them is at most n·e2 + 2|ΣX'|·e1 (+ e1²
//   and f's own rounding, within the factor 2 of kTableEps = 2u). So X varies only where f - n·e2 >
//   2|ΣX'|·e1, squared to need no root (g² > 4·ΣX'²·e1²: every term is a float's square times counts,
//   inside double's range for any float data). What it costs: an overlap of local standard
//   deviation s in a crop of P elements of global standard deviation S is called constant only
//   where s²·n <~ 3k·P·S², k·P ~ 1.5e-5 for a 2048 x 2048 crop and for a signal of 8.64e6 samples
//   (s below 1.7e-3 of S for n = 16, 2.7e-4 for n = 600): far below what the float32 raw correlation of
//   the shifted data resolves there. tests/xcorr_np.py's table_zncc_factor is the same test in NumPy.
struct ZnccFactor {
    double f;
    bool varies;
};
constexpr double kTableEps = 0x1p-52;  // 2u: the factor 2 covers f's own rounding and e1²
__device__ __forceinline__ ZnccFactor zncc_factor(double2 s, double corner, int r1, int c1, double n, double var) {
    const double f = n * s.y - s.x * s.x;
    const double k = kTableEps * (4.0 * (r1 + c1 + 3)), e2 = k * corner;
    const double g = f - n * e2;
    return {f, f > kConstantOverlap * n * n * var && g > 0 && g * g > 4 * (s.x * s.x) * k * (double(r1) * c1) * e2};
}

// What the epilogue reads: the tables, means and shifted copies of the crops (count x h x w of
// each crop: lh x lw for the lefts, rh x rw for the rights), the crops' origins in the inputs, the
// inputs' sizes (the overlaps), C(0, 0) per output (zero-lag).
struct EpilogueArgs {
    float* out;
    const double2 *lsat, *rsat;
    const double *lmean, *rmean, *c00;
    const double *lvar, *rvar;  // the crops' variances (zncc_factor)
    const float *ls, *rs;
    int hL, wL, hR, wR;
    int lr0, lc0, lh, lw, rr0, rc0, rh, rw;
    TableColumns lcols, rcols;  // the tables' columns (kSampled; all_columns otherwise)
    int ldepth, rdepth;  // zncc_factor's row-pass depth cap: kSegRowDepth for segmented rows, else INT_MAX
    Window win;
    FastDiv out_w;  // division by the output's width: element -> row
    PairMap pairs;
    int64_t count;  // output matrices
    bool rebuild_left;  // kStaged: each left table built in shared memory from ls (Prepass::rebuild_left)
    bool stage_out;     // kStaged: each output's raw values staged in shared memory first (stage_outputs)
};

// The epilogue of both normalizations. Algorithm: for output element (y, x) of output k, shift
// (dy, dx) = (dy0 + y, dx0 + x), pair (left l, right q): the overlap's rows and columns (of the
// inputs), its n and its (ΣL', ΣL'²), (ΣR', ΣR'²) from four table entries each, at the overlap's
// place in the crops (it lies inside both: normalize_crop.hpp); C' = the raw output (or a direct
// double sum over the crops L', R' at the translated shift when n <= kDirectOverlap); then, in
// double,
//   zncc: the coefficient (n·C' - ΣL'·ΣR') / sqrt(fL·fR), f = n·ΣX'² - (ΣX')², clamped to [-1, 1]
//     (Pearson's range; rounding can step past it), or 0 where n = 0 or a factor is at most
//     1e-6·n·ΣX² of the original data, ΣX² = ΣX'² + 2m·ΣX' + n·m² (the contract; exact for any m);
//   zero-lag: C = C' + mR·ΣL' + mL·ΣR' + n·mL·mR (the raw sum of the original data, since
//     X = X' + m), divided by C(0, 0) of the pair; 0 where n = 0 or C(0, 0) = 0.
// In place: each thread reads and writes only its own element. Mapping: blockIdx.x strides over the
// outputs (l, q and the table bases uniform per block), the warps of blockIdx.y stride over the
// elements of one output, 32 consecutive ones a warp, every lane in every iteration (the direct
// sums take the whole warp), in 32-bit arithmetic (oh·ow <= 2^30 by Problem::check; a 64-bit division
// per element was most of the old one-dimensional mapping's index cost). The output is the fast
// grid index so that the blocks in flight together cover one stretch of elements of many outputs:
// where outputs share a table (one-to-many: every template against one trace), that stretch of it
// is read from DRAM once and from L2 by the rest, instead of the whole table streaming once per
// output (matched filtering: 300 passes over a 276 MB table of an 8.64 M-sample trace when the
// elements were the fast index). Resources: registers only; reads 8 double2 of the tables per
// element.
// kStaged (use_staged_epilogue: small tables, many outputs, each table entry read several times):
// gridDim.y = 1, and the block first copies its output's two tables (left then right, coalesced
// double2) and its two shifted crops (floats) into dynamic shared memory, staged_smem_bytes, and
// reads them there: each table crosses L2 once per output instead of once per block of 256
// elements and per L1 miss (zncc_frames: 32 KB per output against ~55 KB), the 8 reads per element
// are shared-memory loads, and so are the direct sums' (n <= kDirectOverlap: up to 2 x 64 dependent
// global loads per element in a few threads had kept their whole block waiting). The copies of
// the right table and crop are skipped when the block's previous output had the same right (n-to-m
// with one template: once per block). With a.stage_out (stage_outputs: outputs of at most
// kStagedOutBytes) the output's raw values are copied too, after the crops, so that their loads
// are in flight with the crop's. With a.rebuild_left (Prepass::rebuild_left: the left crops
// take the fused prepass) the left table is not copied but built in place from the staged left
// crop: crops of at most kSeqRowCols columns one thread per row (seq_row) and then one thread per
// column (add_down), wider ones a warp per row (scan_row with mean 0, the fused prepass's own code
// and bits) and then scan_columns; from a quarter of the table's bytes (float against double2), and
// the prepass writes none. Static shared
// memory: 4 KB of scan_columns' segment totals. The same entries and the same source arithmetic
// as unstaged (each path deterministic; across the two the bits agree where the tables do, unless
// the compiler contracts the two instantiations' double expressions differently, which nothing
// here relies on).
// kSampled (sampled_table: a window of a few shifts on large crops): the tables keep only the
// columns the epilogue reads (lcols, rcols), and a crop column c is table column cols.at(c); the
// same entries' values, so the same bits as the whole tables give. Never staged.
// Launch bounds: at most 64 registers, four blocks of kThreads per SM. Unbounded, the sampled
// instantiation took 96 (two blocks per SM, a quarter of the warps): too few in flight to hide the
// eight dependent table reads per element, so the kernel waited on latency, not on DRAM. Blackwell's
// compiler (sm_100 and later) does not fit these instantiations in 64 without spilling, so there
// the bound is three blocks (80 registers), two for the staged one (whose shared memory allows no
// more than three anyway): fewer warps in flight rather than local-memory traffic, and a build for
// those GPUs passes the strict spill check.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kEpilogueMinBlocks = 3, kStagedEpilogueMinBlocks = 2;
#else
constexpr int kEpilogueMinBlocks = 4, kStagedEpilogueMinBlocks = 4;
#endif
template <Normalize kMode, bool kStaged, bool kSampled = false>
__global__ void __launch_bounds__(kThreads, kStaged ? kStagedEpilogueMinBlocks : kEpilogueMinBlocks)
    epilogue_kernel(const EpilogueArgs a) {
    static_assert(!(kStaged && kSampled), "the sampled tables are read from global memory");
    extern __shared__ double2 staged[];  // kStaged: the left table, then the right one
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int ow = int(a.win.out_w()), per = int(a.win.out_h()) * ow;
    const int64_t lw1 = kSampled ? a.lcols.width() : a.lw + 1, rw1 = kSampled ? a.rcols.width() : a.rw + 1;
    auto lcol = [&a](int c) { return kSampled ? a.lcols.at(c) : c; };
    auto rcol = [&a](int c) { return kSampled ? a.rcols.at(c) : c; };
    const int ty = a.rr0 - a.lr0, tx = a.rc0 - a.lc0;  // shift on the crops = shift + (ty, tx)
    // kStaged: the tables' cells (they fit in shared memory, so int); unused (0) otherwise.
    const int lcells = kStaged ? (a.lh + 1) * int(lw1) : 0, rcells = kStaged ? (a.rh + 1) * int(rw1) : 0;
    int staged_right = -1;  // the right whose table is in staged[lcells..]
    for (int64_t k = blockIdx.x; k < a.count; k += gridDim.x) {
        // int: PairMap's own type (a sign-extended int64 copy of one, kept across the element loop,
        // was the staged zncc instantiation's one spill at 64 registers)
        const int l = a.pairs.left_of(k), q = a.pairs.right_of(k);
        const double2* lsat = a.lsat + int64_t(l) * (a.lh + 1) * lw1;
        const double2* rsat = a.rsat + int64_t(q) * (a.rh + 1) * rw1;
        // The shifted crops (the direct sums read them): in global memory, or (kStaged) staged as
        // floats after the tables, where the rebuild reads the left one too.
        const float* lx = a.ls + int64_t(l) * a.lh * a.lw;
        const float* rx = a.rs + int64_t(q) * a.rh * a.rw;
        float* out = a.out + k * per;
        // C' is read from out, or (kStaged with a.stage_out) from its copy staged beside the crops,
        // at staged_raw floats into the dynamic shared memory: an offset, not a second generic
        // pointer beside out (that one spilled in the staged zncc instantiation on sm_75-sm_89).
        int staged_raw = -1;
        if constexpr (kStaged) {
            __shared__ double2 seg_total[kColSegments][kWarp];  // scan_columns' segment totals
            float* lx_sh = reinterpret_cast<float*>(staged + lcells + rcells);
            float* rx_sh = lx_sh + a.lh * a.lw;
            float* raw_sh = rx_sh + a.rh * a.rw;
            __syncthreads();  // the previous output's reads of staged[] are done (q, l: uniform per block)
            stage_copy(lx_sh, lx, a.lh * a.lw);
            if (a.stage_out) {
                stage_copy<float, false>(raw_sh, out, per);
                staged_raw = int(raw_sh - reinterpret_cast<float*>(staged));
            }
            if (!a.rebuild_left) stage_copy(staged, lsat, lcells);
            if (q != staged_right) {
                stage_copy(staged + lcells, rsat, rcells);
                stage_copy(rx_sh, rx, a.rh * a.rw);
            }
            staged_right = q;
            __syncthreads();
            if (a.rebuild_left) {
                // The left table from the staged shifted crop: row 0 zero, the row pass, the column
                // pass. Narrow crops (at most kSeqRowCols columns, zncc_frames' 39 x 37) take one
                // thread per row adding its columns in order, then one thread per column adding its
                // rows in order from +0 (add_down): a warp's shuffle scan per 32 columns was 28% of
                // this kernel's instructions and its longest waits, and scan_columns' segments with
                // their barriers 17%. Wider rows keep scan_row (mean 0: float(x' - 0) is x') and
                // scan_columns, the fused prepass's own code and bits. Fixed orders
                // (tests/test_normalize_fused.py models them).
                for (int c = threadIdx.x; c < lw1; c += blockDim.x) staged[c] = make_double2(0, 0);
                if (a.lw <= kSeqRowCols) {
                    for (int r = threadIdx.x; r < a.lh; r += blockDim.x)
                        seq_row(lx_sh + r * a.lw, staged + (r + 1) * lw1, a.lw);
                    __syncthreads();
                    for (int c = threadIdx.x; c < lw1; c += blockDim.x) {
                        double2 acc = make_double2(0, 0);
                        add_down<2, true>(staged, 1, a.lh + 1, int(lw1), c, acc);
                    }
                } else {
                    for (int r = warp; r < a.lh; r += kThreads / kWarp)
                        scan_row<1, false, false, false>(lx_sh + r * a.lw, nullptr, staged + (r + 1) * lw1, a.lw, 0.0,
                                                         lane);
                    __syncthreads();
                    for (int c0 = 0; c0 < lw1; c0 += kWarp)
                        scan_columns<1>(staged, a.lh, int(lw1), c0 + lane, warp, seg_total);
                }
                __syncthreads();
            }
            lsat = staged, rsat = staged + lcells;
            lx = lx_sh, rx = rx_sh;
        }
        const double ml = a.lmean[l], mr = a.rmean[q];
        // Warp-uniform: every lane runs every iteration (j past the end: `in` false), so that the
        // warp can take its small overlaps' direct sums together.
        for (int j0 = blockIdx.y * blockDim.x + warp * kWarp; j0 < per; j0 += gridDim.y * blockDim.x) {
            const int j = j0 + lane;
            const bool in = j < per;
            const int y = int(a.out_w.div(unsigned(in ? j : j0)));
            const int dy = a.win.dy0 + y, dx = a.win.dx0 + ((in ? j : j0) - y * ow);
            const Span rows = overlap_span(dy, a.hL, a.hR), cols = overlap_span(dx, a.wL, a.wR);
            const int nr = rows.end - rows.begin, nc = cols.end - cols.begin;
            const bool direct = in && nr > 0 && nc > 0 && int64_t(nr) * nc <= kDirectOverlap;
            double c = 0;
            for (unsigned m = __ballot_sync(kFullMask, direct); m; m &= m - 1) {
                const int src = __ffs(m) - 1;
                const double sum = warp_direct_sum(lx, rx, a.lh, a.lw, a.rh, a.rw, __shfl_sync(kFullMask, dy + ty, src),
                                                   __shfl_sync(kFullMask, dx + tx, src), lane);
                if (lane == src) c = sum;
            }
            if (!in) continue;
            if (nr == 0 || nc == 0) {
                out[j] = 0.0f;
                continue;
            }
            const double n = double(nr) * nc;
            const int lr = rows.begin + dy - a.lr0, lc = cols.begin + dx - a.lc0;
            const int rr = rows.begin - a.rr0, rc = cols.begin - a.rc0;
            // Each side's factor as soon as its box is read: one corner live at a time. The staged
            // zncc instantiation reads its corner again from shared memory where the factor takes
            // it (a volatile load, which the compiler neither merges with the box's nor hoists):
            // keeping the box's for it spilled at 64 registers on sm_75-sm_89.
            constexpr bool kReload = kStaged && kMode == Normalize::Zncc;
            double corner;
            const double2 sl = box_sum<kStaged>(lsat, lw1, lr, lr + nr, lcol(lc), lcol(lc + nc), corner);
            if constexpr (kReload) corner = reload_y(lsat + (lr + nr) * lw1 + lc + nc);
            const ZnccFactor fl = zncc_factor(sl, corner, lr + nr, min(lc + nc, a.ldepth), n, a.lvar[l]);
            const double2 sr = box_sum<kStaged>(rsat, rw1, rr, rr + nr, rcol(rc), rcol(rc + nc), corner);
            if constexpr (kReload) corner = reload_y(rsat + (rr + nr) * rw1 + rc + nc);
            if (!direct) {
                if (kStaged && staged_raw >= 0) c = double(reinterpret_cast<const float*>(staged)[staged_raw + j]);
                else c = double(out[j]);
            }
            float v = 0.0f;
            if constexpr (kMode == Normalize::ZeroLag) {
                const double d = a.c00[k];
                if (d != 0) v = float((c + mr * sl.x + ml * sr.x + n * ml * mr) / d);
            } else {
                const ZnccFactor fr = zncc_factor(sr, corner, rr + nr, min(rc + nc, a.rdepth), n, a.rvar[q]);
                // rsqrt (within 1 ulp) and a product rather than sqrt and a division: two fewer
                // double-precision iterations with their slow-path branches per element. Clamped
                // after the rounding to float (the same value: rounding is monotonic and +-1 are
                // floats), one instruction a side where double fmin/fmax took six.
                if (fl.varies && fr.varies)
                    v = fminf(1.0f, fmaxf(-1.0f, float((n * c - sl.x * sr.x) * rsqrt(fl.f * fr.f))));
            }
            out[j] = v;
        }
    }
}

// The template epilogue (use_template_epilogue): where every shift of the window keeps the right
// wholly inside the left (template matching's valid window, matched filtering), each overlap is the
// whole right, so the right's terms are one constant per output (ΣR', its factor, mR, C(0, 0))
// rather than four table reads and their arithmetic per element, and outputs with the same left
// share the left's box sum at each shift. Mapping: blockIdx.x strides over groups of up to
// kTemplateGroup consecutive outputs of one left (one-to-many: every output; n-to-m: the row of
// left l; k = l·rights + q), whose constants the block puts in shared memory first; the threads
// of blockIdx.y stride over the elements, each reading the left box once (four entries, as
// box_sum) and then the group's outputs at that element. The same formulas as epilogue_kernel, but
// zncc's root is rsqrt(fL)·rsqrt(fR) and zero-lag's division a product by 1 / C(0, 0) (each within
// a few ulp of double, far below the contract's 1e-4). Resources: 3·kTemplateGroup doubles of
// shared memory; at most 64 registers (launch bounds as epilogue_kernel's).
constexpr int kTemplateGroup = 8;

// The template epilogue's per-output terms of output k (right q): (ΣR', zncc's 1 / sqrt(fR), 0
// where R' is constant; zero-lag's 1 / C(0, 0), 0 where C(0, 0) = 0). n = rh·rw, the whole right.
template <Normalize kMode, bool kSampled>
__device__ __forceinline__ double2 template_right_terms(const EpilogueArgs& a, int64_t q, int64_t k, double n) {
    const int64_t rw1 = kSampled ? a.rcols.width() : a.rw + 1;
    const double2* rsat = a.rsat + q * (a.rh + 1) * rw1;
    double corner;
    const double2 sr = box_sum<false>(rsat, rw1, 0, a.rh, kSampled ? a.rcols.at(0) : 0, kSampled ? a.rcols.at(a.rw) : a.rw,
                                      corner);
    double scale = 0;
    if constexpr (kMode == Normalize::ZeroLag) {
        const double d = a.c00[k];
        if (d != 0) scale = 1.0 / d;
    } else {
        const ZnccFactor fr = zncc_factor(sr, corner, a.rh, min(a.rw, a.rdepth), n, a.rvar[q]);
        if (fr.varies) scale = rsqrt(fr.f);
    }
    return make_double2(sr.x, scale);
}

// Its per-element terms of left l (table lsat, its crop's variance lvar) at output element j: (ΣL'
// over the whole right's overlap, zncc's 1 / sqrt(fL), 0 where L' is constant there; zero-lag: 0).
template <Normalize kMode, bool kSampled>
__device__ __forceinline__ double2 template_left_terms(const EpilogueArgs& a, const double2* lsat, int j, double n,
                                                       double lvar) {
    const int64_t lw1 = kSampled ? a.lcols.width() : a.lw + 1;
    auto lcol = [&a](int c) { return kSampled ? a.lcols.at(c) : c; };
    const int y = int(a.out_w.div(unsigned(j)));
    const int lr = a.win.dy0 + y - a.lr0, lc = a.win.dx0 + (j - y * int(a.win.out_w())) - a.lc0;
    double corner;
    const double2 sl = box_sum<false>(lsat, lw1, lr, lr + a.rh, lcol(lc), lcol(lc + a.rw), corner);
    double lscale = 0;
    if constexpr (kMode == Normalize::Zncc) {
        const ZnccFactor fl = zncc_factor(sl, corner, lr + a.rh, min(lc + a.rw, a.ldepth), n, lvar);
        if (fl.varies) lscale = rsqrt(fl.f);
    }
    return make_double2(sl.x, lscale);
}

template <Normalize kMode, bool kSampled>
__global__ void __launch_bounds__(kThreads, kEpilogueMinBlocks) template_epilogue_kernel(const EpilogueArgs a, int rights,
                                                                        int groups_per_left, int64_t groups) {
    // Per output of the group: template_right_terms and mR.
    __shared__ double r_sum[kTemplateGroup], r_scale[kTemplateGroup], r_mean[kTemplateGroup];
    const int per = int(a.win.out_h()) * int(a.win.out_w());
    const int64_t lw1 = kSampled ? a.lcols.width() : a.lw + 1;
    const double n = double(a.rh) * a.rw;  // the right's crop is the whole right
    for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
        const int l = int(g / groups_per_left), q0 = int(g % groups_per_left) * kTemplateGroup;
        const int nq = min(kTemplateGroup, rights - q0);
        const int64_t k0 = int64_t(l) * rights + q0;
        __syncthreads();  // the previous group's reads of the constants are done
        if (int(threadIdx.x) < nq) {
            const int i = threadIdx.x, q = q0 + i;
            const double2 rt = template_right_terms<kMode, kSampled>(a, q, k0 + i, n);
            r_sum[i] = rt.x, r_scale[i] = rt.y, r_mean[i] = a.rmean[q];
        }
        __syncthreads();
        const double ml = a.lmean[l];
        const double2* lsat = a.lsat + int64_t(l) * (a.lh + 1) * lw1;
        float* out = a.out + k0 * per;
        for (int j = blockIdx.y * blockDim.x + threadIdx.x; j < per; j += gridDim.y * blockDim.x) {
            const double2 lt = template_left_terms<kMode, kSampled>(a, lsat, j, n, a.lvar[l]);
            // The group's raw values first, then the results: a load after a store to the same
            // buffer cannot move above it, and one load in flight per thread at a time left DRAM
            // mostly idle (matched filtering's epilogue took 3x its traffic's time that way).
            float raw[kTemplateGroup];
#pragma unroll
            for (int i = 0; i < kTemplateGroup; ++i) raw[i] = i < nq ? out[int64_t(i) * per + j] : 0.0f;
#pragma unroll
            for (int i = 0; i < kTemplateGroup; ++i) {
                if (i >= nq) break;
                out[int64_t(i) * per + j] = float(template_value<kMode>(double(raw[i]), lt.x, lt.y, r_sum[i],
                                                                        r_scale[i], ml, r_mean[i], n));
            }
        }
    }
}

// The terms of StoreNorm (xcorr/store_norm.hpp) for a variant that writes the template epilogue's
// values itself: lterm[l][j] = template_left_terms for every left and output element, kterm[k] =
// template_right_terms for every output (the same code, so the same doubles, as the epilogue).
// Mapping: a grid-stride loop over nL·per + count items (lefts' elements, then outputs).
// Resources: registers only.
template <Normalize kMode, bool kSampled>
__global__ void __launch_bounds__(kThreads) store_terms_kernel(const EpilogueArgs a, int lefts, int rights,
                                                               double2* lterm, double2* kterm) {
    const int per = int(a.win.out_h()) * int(a.win.out_w());
    const int64_t lw1 = kSampled ? a.lcols.width() : a.lw + 1;
    const double n = double(a.rh) * a.rw;
    const int64_t litems = int64_t(lefts) * per, items = litems + a.count;
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < items; t += int64_t(gridDim.x) * blockDim.x) {
        if (t < litems) {
            const int64_t l = t / per;
            lterm[t] = template_left_terms<kMode, kSampled>(a, a.lsat + l * (a.lh + 1) * lw1, int(t - l * per), n,
                                                            a.lvar[l]);
        } else {
            const int64_t k = t - litems;
            kterm[k] = template_right_terms<kMode, kSampled>(a, k % rights, k, n);
        }
    }
}

}  // namespace
}  // namespace xcorr
