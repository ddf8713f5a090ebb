// The normalized outputs' fast path (normalize.hpp explains the method): the kernels before and
// after a variant's raw correlation, and the Instance that puts them around it.
#include <algorithm>
#include <cmath>
#include <string>

#include "common/device.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/normalize.hpp"
#include "xcorr/reference_element.hpp"

namespace xcorr {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;  // gridDim.y and .z limit: kernels stride over the matrices beyond it
constexpr int kMaxPartials = 64;  // blocks per matrix of the mean reduction
constexpr int kColSegments = 8;   // row segments per column in col_scan_kernel (blockDim.y)

// One stack as the preparing kernels see it; blockIdx.z picks the left (0) or the right (1) stack.
// Everything but x is over the crop of each matrix: rows r0 .. r0 + ch - 1, columns c0 .. c0 + cw - 1.
struct StackRef {
    const float* x;    // count x h x w inputs
    float* xs;         // count x ch x cw shifted copies x - mean of the crops
    double2* sat;      // count x (ch+1) x (cw+1) tables of (Σx', Σx'²)
    double* partial;   // count x partials partial sums of the crops
    double* mean;      // count means of the crops
    int count, h, w;   // the inputs' sizes
    int r0, c0, ch, cw;  // the crop
    // Row r of matrix m's crop, in the inputs.
    __device__ __forceinline__ const float* crop_row(int64_t m, int r) const {
        return x + (m * h + r0 + r) * int64_t(w) + c0;
    }
};
struct Stacks {
    StackRef left, right;
    // blockIdx.z's stack. A select, not st.s[blockIdx.z]: indexing a parameter array at run time
    // copies it to local memory.
    __device__ __forceinline__ StackRef pick() const { return blockIdx.z ? right : left; }
};

// Sum of v over the block, valid in thread 0. Called by every thread of a block of kThreads.
__device__ double block_sum(double v) {
    __shared__ double warp_sums[kThreads / kWarp];
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    __syncthreads();  // warp_sums is reused by consecutive calls
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    double total = 0;
    if (threadIdx.x == 0)
        for (int i = 0; i < kThreads / kWarp; ++i) total += warp_sums[i];
    return total;
}

// Mean, first level. Algorithm: block b of matrix m sums the b-th of `partials` equal slices of
// the crop (row-major element order) in double, in a fixed order (no atomics: the means, hence the
// outputs, are the same on every run). A crop of whole rows is contiguous in the input; otherwise
// element i is at crop row i / cw, column i % cw (32-bit: ch·cw <= 2^30 by Problem::check).
// Mapping: grid (partials, min(count, 65535), 2 stacks), kThreads threads; blockIdx.y strides over
// the matrices. Writes partial[m * partials + b]. Resources: 256 bytes of shared memory.
__global__ void partial_sums_kernel(Stacks st, int partials) {
    const StackRef s = st.pick();
    const int64_t elems = int64_t(s.ch) * s.cw;
    const int64_t begin = elems * blockIdx.x / partials, end = elems * (blockIdx.x + 1) / partials;
    for (int m = blockIdx.y; m < s.count; m += gridDim.y) {
        const float* x = s.crop_row(m, 0);
        double v = 0;
        if (s.cw == s.w) {
            for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) v += double(x[i]);
        } else {
            for (int i = int(begin) + threadIdx.x; i < int(end); i += kThreads) {
                const int r = i / s.cw;
                v += double(x[int64_t(r) * s.w + (i - r * s.cw)]);
            }
        }
        v = block_sum(v);
        if (threadIdx.x == 0) s.partial[int64_t(m) * partials + blockIdx.x] = v;
    }
}

// Mean, second level: thread m adds its matrix's partials in order and divides by ch·cw.
// Mapping: grid (ceil(count / 256), 1, 2 stacks), kThreads threads.
__global__ void means_kernel(Stacks st, int partials) {
    const StackRef s = st.pick();
    const int64_t m = blockIdx.x * int64_t(kThreads) + threadIdx.x;
    if (m >= s.count) return;
    double v = 0;
    for (int b = 0; b < partials; ++b) v += s.partial[m * partials + b];
    s.mean[m] = v / (double(s.ch) * s.cw);
}

// Shifted copy and row pass of the tables. Algorithm: one warp per row r of matrix m's crop: each
// lane takes one column of a 32-column strip, x' = float(x - mean) (written to xs: the raw
// correlation reads it, so the tables must hold exactly these float values), then an inclusive
// warp scan of (x', x'²) in double plus the carry of the strips before gives table row r + 1,
// columns 1..cw; column 0 is 0, and the warp of row 0 also writes table row 0 (all 0). Invariant
// after it: table (r + 1, c + 1) = Σ over columns <= c of crop row r. Mapping: warps stride over
// count·ch rows; kThreads threads, grid (blocks, 1, 2 stacks). Resources: registers only.
__global__ void row_scan_kernel(Stacks st) {
    const StackRef s = st.pick();
    const int lane = threadIdx.x % kWarp;
    const int64_t rows = int64_t(s.count) * s.ch, w1 = s.cw + 1;
    const int64_t warps = int64_t(gridDim.x) * (kThreads / kWarp);
    for (int64_t g = (blockIdx.x * int64_t(kThreads) + threadIdx.x) / kWarp; g < rows; g += warps) {
        const int64_t m = g / s.ch;
        const int r = int(g % s.ch);
        const double mean = s.mean[m];
        const float* x = s.crop_row(m, r);
        float* xs = s.xs + g * s.cw;
        double2* table = s.sat + m * (s.ch + 1) * w1;
        if (r == 0)
            for (int c = lane; c <= s.cw; c += kWarp) table[c] = make_double2(0, 0);
        double2* row = table + (r + 1) * w1;
        if (lane == 0) row[0] = make_double2(0, 0);
        double carry_a = 0, carry_q = 0;
        for (int c0 = 0; c0 < s.cw; c0 += kWarp) {
            const int c = c0 + lane;
            const float v = c < s.cw ? float(double(x[c]) - mean) : 0.0f;
            if (c < s.cw) xs[c] = v;
            double a = v, q = double(v) * double(v);
#pragma unroll
            for (int o = 1; o < kWarp; o <<= 1) {
                const double pa = __shfl_up_sync(kFullMask, a, o), pq = __shfl_up_sync(kFullMask, q, o);
                if (lane >= o) {
                    a += pa;
                    q += pq;
                }
            }
            a += carry_a;
            q += carry_q;
            if (c < s.cw) row[c + 1] = make_double2(a, q);
            carry_a = __shfl_sync(kFullMask, a, kWarp - 1);
            carry_q = __shfl_sync(kFullMask, q, kWarp - 1);
        }
    }
}

// Column pass of the tables (over the crops: h, w below are ch, cw). Algorithm: after the row
// pass, table (r, c) holds row sums; adding them down each column makes table (r, c) = Σ over
// rows < r, columns < c (the summed-area table). Each column's rows 1..h are cut into
// kColSegments segments: pass 1 sums each segment, the segment totals before it (shared memory)
// give each segment its start, pass 2 writes the running sums. Mapping: block (32 columns,
// kColSegments segments), grid (ceil((w+1) / 32), min(count, 65535), 2 stacks), blockIdx.y
// striding over the matrices; a warp reads 32 adjacent columns of one row (coalesced).
// Resources: 32 x 8 x 16 bytes of shared memory.
__global__ void col_scan_kernel(Stacks st) {
    const StackRef s = st.pick();
    __shared__ double2 seg_total[kColSegments][kWarp];
    const int w1 = s.cw + 1;
    const int c = blockIdx.x * kWarp + threadIdx.x;
    const int seg = (s.ch + kColSegments - 1) / kColSegments;
    const int r0 = 1 + threadIdx.y * seg, r1 = min(s.ch + 1, r0 + seg);
    for (int m = blockIdx.y; m < s.count; m += gridDim.y) {
        double2* table = s.sat + int64_t(m) * (s.ch + 1) * w1;
        double2 acc = make_double2(0, 0);
        if (c < w1)
            for (int r = r0; r < r1; ++r) {
                const double2 v = table[int64_t(r) * w1 + c];
                acc.x += v.x;
                acc.y += v.y;
            }
        __syncthreads();  // seg_total is reused by the next matrix
        seg_total[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        double2 run = make_double2(0, 0);
        for (int i = 0; i < int(threadIdx.y); ++i) {
            run.x += seg_total[i][threadIdx.x].x;
            run.y += seg_total[i][threadIdx.x].y;
        }
        if (c < w1)
            for (int r = r0; r < r1; ++r) {
                double2& v = table[int64_t(r) * w1 + c];
                run.x += v.x;
                run.y += v.y;
                v = run;
            }
    }
}

// (Σx', Σx'²) over rows [r0, r1), columns [c0, c1) of one matrix's table (row stride w1).
// Through the read-only cache (__ldg): the epilogue writes `out` in place, so the compiler cannot
// prove by itself that the tables do not alias it.
__device__ __forceinline__ double2 box_sum(const double2* t, int64_t w1, int r0, int r1, int c0, int c1) {
    const double2 a = __ldg(t + r1 * w1 + c1), b = __ldg(t + r0 * w1 + c1), c = __ldg(t + r1 * w1 + c0),
                  d = __ldg(t + r0 * w1 + c0);
    return make_double2(a.x - b.x - c.x + d.x, a.y - b.y - c.y + d.y);
}

// What the epilogue reads: the tables, means and shifted copies of the crops (count x h x w of
// each crop: lh x lw for the lefts, rh x rw for the rights), the crops' origins in the inputs, the
// inputs' sizes (the overlaps), C(0, 0) per output (zero-lag).
struct EpilogueArgs {
    float* out;
    const double2 *lsat, *rsat;
    const double *lmean, *rmean, *c00;
    const float *ls, *rs;
    int hL, wL, hR, wR;
    int lr0, lc0, lh, lw, rr0, rc0, rh, rw;
    Window win;
    PairMap pairs;
    int64_t count;  // output matrices
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
// In place: each thread reads and writes only its own element. Mapping: blockIdx.y strides over the
// outputs (l, q and the table bases uniform per block), threads of blockIdx.x stride over the
// elements of one output in 32-bit arithmetic (oh·ow <= 2^30 by Problem::check; a 64-bit division
// per element was most of the old one-dimensional mapping's index cost). Resources: registers
// only; reads 8 double2 of the tables per element.
template <Normalize kMode>
__global__ void epilogue_kernel(const EpilogueArgs a) {
    const int ow = int(a.win.out_w()), per = int(a.win.out_h()) * ow;
    const int64_t lw1 = a.lw + 1, rw1 = a.rw + 1;
    const int ty = a.rr0 - a.lr0, tx = a.rc0 - a.lc0;  // shift on the crops = shift + (ty, tx)
    for (int64_t k = blockIdx.y; k < a.count; k += gridDim.y) {
        const int64_t l = a.pairs.left_of(k), q = a.pairs.right_of(k);
        const double2* lsat = a.lsat + l * (a.lh + 1) * lw1;
        const double2* rsat = a.rsat + q * (a.rh + 1) * rw1;
        const double ml = a.lmean[l], mr = a.rmean[q];
        float* out = a.out + k * per;
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < per; j += gridDim.x * blockDim.x) {
            const int y = j / ow;
            const int dy = a.win.dy0 + y, dx = a.win.dx0 + (j - y * ow);
            const Span rows = overlap_span(dy, a.hL, a.hR), cols = overlap_span(dx, a.wL, a.wR);
            const int nr = rows.end - rows.begin, nc = cols.end - cols.begin;
            if (nr == 0 || nc == 0) {
                out[j] = 0.0f;
                continue;
            }
            const double n = double(nr) * nc;
            const double2 sl = box_sum(lsat, lw1, rows.begin + dy - a.lr0, rows.end + dy - a.lr0,
                                       cols.begin + dx - a.lc0, cols.end + dx - a.lc0);
            const double2 sr = box_sum(rsat, rw1, rows.begin - a.rr0, rows.end - a.rr0, cols.begin - a.rc0,
                                       cols.end - a.rc0);
            double c = 0;
            if (int64_t(nr) * nc <= kDirectOverlap) {
                c = raw_at(a.ls + l * a.lh * a.lw, a.rs + q * a.rh * a.rw, a.lh, a.lw, a.rh, a.rw, dy + ty, dx + tx);
            } else {
                c = double(out[j]);
            }
            double v = 0;
            if constexpr (kMode == Normalize::ZeroLag) {
                const double d = a.c00[k];
                if (d != 0) v = (c + mr * sl.x + ml * sr.x + n * ml * mr) / d;
            } else {
                const double fl = n * sl.y - sl.x * sl.x, fr = n * sr.y - sr.x * sr.x;
                const double ql = sl.y + 2 * ml * sl.x + n * ml * ml, qr = sr.y + 2 * mr * sr.x + n * mr * mr;
                if (fl > kConstantOverlap * n * ql && fr > kConstantOverlap * n * qr)
                    v = fmin(1.0, fmax(-1.0, (n * c - sl.x * sr.x) / sqrt(fl * fr)));
            }
            out[j] = float(v);
        }
    }
}

// zero-lag, C(0, 0) of every output's pair: the sum over r < min(hL, hR), c < min(wL, wR) of
// L[r][c]·R[r][c] in double (the overlap at shift (0, 0); the same terms as raw_at), in two levels
// so that one pair's millions of products are spread over the GPU (one block per pair took 8.9 ms
// for a 2048 x 2048 pair on the H200) and the sum is the same on every run (no atomics).
// First level: block b of pair k sums rows b, b + parts, ... (a row's columns over the threads: no
// 64-bit division per element) and writes partial[k * parts + b]. Mapping: grid (parts, min(count,
// 65535)), blockIdx.y striding over the pairs; block_sum. Resources: 256 bytes of shared memory.
__global__ void c00_partial_kernel(const float* __restrict__ left, const float* __restrict__ right, int hL, int wL,
                                   int hR, int wR, PairMap pairs, int64_t count, int parts,
                                   double* __restrict__ partial) {
    const int h = min(hL, hR), w = min(wL, wR);
    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const float* L = left + int64_t(pairs.left_of(k)) * hL * wL;
        const float* R = right + int64_t(pairs.right_of(k)) * hR * wR;
        double v = 0;
        for (int r = blockIdx.x; r < h; r += parts)
            for (int c = threadIdx.x; c < w; c += kThreads)
                v += double(L[int64_t(r) * wL + c]) * double(R[int64_t(r) * wR + c]);
        v = block_sum(v);
        if (threadIdx.x == 0) partial[k * parts + blockIdx.x] = v;
    }
}

// Second level: thread k adds pair k's partials in order. Mapping: one thread per pair, grid-stride.
__global__ void c00_final_kernel(const double* __restrict__ partial, int64_t count, int parts,
                                 double* __restrict__ c00) {
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < count; k += int64_t(gridDim.x) * blockDim.x) {
        double v = 0;
        for (int b = 0; b < parts; ++b) v += partial[k * parts + b];
        c00[k] = v;
    }
}

int blocks_for(int64_t n, int threads) { return int(std::min<int64_t>((n + threads - 1) / threads, 65536)); }

// The Instance of a normalized problem: the variant's instance of the (cropped) raw problem inside
// a Normalizer; no raw instance where the crop is empty (the output is 0).
class NormalizedInstance final : public Instance {
public:
    NormalizedInstance(std::unique_ptr<Instance> raw, Normalizer norm) : raw_(std::move(raw)), norm_(std::move(norm)) {}
    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        norm_.apply(left, right, out, stream, [&](const float* l, const float* r, float* o) {
            raw_->run(l, r, o, stream);
            if (raw_->has_finish()) raw_->finish(o, stream);
        });
    }

private:
    std::unique_ptr<Instance> raw_;
    Normalizer norm_;
};

}  // namespace

Normalizer::Normalizer(const Problem& p, const NormalizeCrop& crop) : p_(p), crop_(crop) {
    if (p.normalize == Normalize::None) throw UsageError("Normalizer: the problem is not normalized (normalize none)");
    p.check();
    if (crop.empty()) return;  // the output is 0: nothing to prepare
    const Region &cl = crop.left, &cr = crop.right;
    if (p.normalize == Normalize::ZeroLag) {
        // C(0, 0)'s partial sums: about 16 rows' worth of work per block, at most kMaxPartials blocks
        // per pair, and at most 16 Mi partials in all (many small pairs need no more than one each).
        const int64_t rows = std::min(p.hL, p.hR), cols = std::min(p.wL, p.wR), count = p.out_count();
        c00_parts_ = int(std::clamp<int64_t>(std::min(rows, rows * cols / (kThreads * 16)), 1, kMaxPartials));
        c00_parts_ = int(std::max<int64_t>(1, std::min<int64_t>(c00_parts_, (int64_t(16) << 20) / count)));
        c00_ = DeviceBuffer<double>(size_t(count));
        c00_partial_ = DeviceBuffer<double>(size_t(count) * c00_parts_);
    }
    const int64_t most = std::max(int64_t(cl.h()) * cl.w(), int64_t(cr.h()) * cr.w());
    partials_ = int(std::clamp<int64_t>(most / (kThreads * 16), 1, kMaxPartials));
    lshift_ = DeviceBuffer<float>(size_t(p.nL) * cl.h() * cl.w());
    rshift_ = DeviceBuffer<float>(size_t(p.nR) * cr.h() * cr.w());
    partial_ = DeviceBuffer<double>(size_t(p.nL + int64_t(p.nR)) * partials_);
    mean_ = DeviceBuffer<double>(size_t(p.nL) + p.nR);
    lsat_ = DeviceBuffer<double2>(size_t(p.nL) * (cl.h() + 1) * (cl.w() + 1));
    rsat_ = DeviceBuffer<double2>(size_t(p.nR) * (cr.h() + 1) * (cr.w() + 1));
}

size_t Normalizer::workspace_bytes() const {
    return lshift_.bytes() + rshift_.bytes() + partial_.bytes() + mean_.bytes() + lsat_.bytes() + rsat_.bytes() +
           c00_.bytes() + c00_partial_.bytes();
}

void Normalizer::prepare(const float* left, const float* right, cudaStream_t stream) {
    if (crop_.empty()) return;
    if (p_.normalize == Normalize::ZeroLag) {
        // C(0, 0) from the whole inputs: shift (0, 0) need not be in the window, nor its overlap in the crops.
        const int64_t count = p_.out_count();
        c00_partial_kernel<<<dim3(c00_parts_, unsigned(std::min<int64_t>(count, kMaxGridY))), kThreads, 0, stream>>>(
            left, right, p_.hL, p_.wL, p_.hR, p_.wR, pair_map(p_), count, c00_parts_, c00_partial_.get());
        XC_CHECK_LAUNCH();
        c00_final_kernel<<<blocks_for(count, kThreads), kThreads, 0, stream>>>(c00_partial_.get(), count, c00_parts_,
                                                                             c00_.get());
        XC_CHECK_LAUNCH();
    }
    const Region &cl = crop_.left, &cr = crop_.right;
    Stacks st{};
    st.left = StackRef{left, lshift_.get(), lsat_.get(), partial_.get(), mean_.get(), p_.nL, p_.hL, p_.wL,
                       cl.r0, cl.c0, cl.h(), cl.w()};
    st.right = StackRef{right, rshift_.get(), rsat_.get(), partial_.get() + int64_t(p_.nL) * partials_,
                        mean_.get() + p_.nL, p_.nR, p_.hR, p_.wR, cr.r0, cr.c0, cr.h(), cr.w()};
    const int most = std::max(p_.nL, p_.nR);
    const int gy = std::min(most, kMaxGridY);
    partial_sums_kernel<<<dim3(partials_, gy, 2), kThreads, 0, stream>>>(st, partials_);
    XC_CHECK_LAUNCH();
    means_kernel<<<dim3(ceil_div(most, kThreads), 1, 2), kThreads, 0, stream>>>(st, partials_);
    XC_CHECK_LAUNCH();
    const int64_t rows = std::max(int64_t(p_.nL) * cl.h(), int64_t(p_.nR) * cr.h());
    row_scan_kernel<<<dim3(blocks_for(rows, kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(st);
    XC_CHECK_LAUNCH();
    const int cols = std::max(cl.w(), cr.w()) + 1;
    col_scan_kernel<<<dim3(ceil_div(cols, kWarp), gy, 2), dim3(kWarp, kColSegments), 0, stream>>>(st);
    XC_CHECK_LAUNCH();
}

void Normalizer::finish(float* out, cudaStream_t stream) {
    const int64_t total = p_.out_elems();
    if (!total) return;
    if (crop_.empty()) {
        XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(total) * sizeof(float), stream));  // 0.0f is all zero bits
        return;
    }
    const Region &cl = crop_.left, &cr = crop_.right;
    EpilogueArgs a{};
    a.out = out;
    a.lsat = lsat_.get(), a.rsat = rsat_.get();
    a.lmean = mean_.get(), a.rmean = mean_.get() + p_.nL, a.c00 = c00_.get();
    a.ls = lshift_.get(), a.rs = rshift_.get();
    a.hL = p_.hL, a.wL = p_.wL, a.hR = p_.hR, a.wR = p_.wR;
    a.lr0 = cl.r0, a.lc0 = cl.c0, a.lh = cl.h(), a.lw = cl.w();
    a.rr0 = cr.r0, a.rc0 = cr.c0, a.rh = cr.h(), a.rw = cr.w();
    a.win = p_.shifts();
    a.pairs = pair_map(p_);
    a.count = p_.out_count();
    const int64_t per = int64_t(p_.out_h()) * p_.out_w();
    const dim3 grid(blocks_for(per, kThreads), unsigned(std::min<int64_t>(a.count, kMaxGridY)));
    auto epilogue = p_.normalize == Normalize::ZeroLag ? epilogue_kernel<Normalize::ZeroLag>
                                                       : epilogue_kernel<Normalize::Zncc>;
    epilogue<<<grid, kThreads, 0, stream>>>(a);
    XC_CHECK_LAUNCH();
}

void Normalizer::apply(const float* left, const float* right, float* out, cudaStream_t stream,
                       const std::function<void(const float*, const float*, float*)>& raw) {
    if (!crop_.empty()) {
        prepare(left, right, stream);
        raw(raw_left(left), raw_right(right), out);
    }
    finish(out, stream);
}

std::unique_ptr<Instance> make_instance(const Variant& variant, const Problem& p, const Params& params) {
    // The one place every instance is made: a shape the variant is not built for never reaches make().
    if (std::string why = variant.shape_refusal(p); !why.empty()) throw UsageError(why);
    if (p.normalize == Normalize::None) return variant.make(p, params);
    const NormalizeCrop touched = touched_crop(p);
    if (touched.empty()) return std::make_unique<NormalizedInstance>(nullptr, Normalizer(p, touched));
    if (!touched.whole(p)) {
        // The cropped raw problem where the variant computes its (translated) window; else the whole
        // inputs, as before the crop. A refusal in make() (a size its kernel cannot take) falls back
        // too: the uncropped problem is what the variant was asked for.
        const Problem raw = touched.raw(p);
        bool supported = false;
        try {
            raw.check();
            supported = variant.supports_problem(raw);
        } catch (const UsageError&) {
        }
        if (supported) {
            std::unique_ptr<Instance> inst;
            try {
                inst = variant.make(raw, params);
            } catch (const UsageError&) {
            }
            if (inst) return std::make_unique<NormalizedInstance>(std::move(inst), Normalizer(p, touched));
        }
    }
    std::unique_ptr<Instance> raw = variant.make(p.raw(), params);
    if (!raw) throw CudaError(variant.name + ": make() returned no instance");
    return std::make_unique<NormalizedInstance>(std::move(raw), Normalizer(p, whole_crop(p)));
}

}  // namespace xcorr
