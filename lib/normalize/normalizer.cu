// The normalized outputs' fast path (normalize.hpp explains the method): the kernels before and
// after a variant's raw correlation, and the Instance that puts them around it.
#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/device.cuh"
#include "xcorr/crop.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/normalize.hpp"
#include "xcorr/store_norm.hpp"
#include "xcorr/reference_element.hpp"

#include "normalize/internal.cuh"
#include "normalize/tables.cuh"
#include "normalize/prepass.cuh"
#include "normalize/epilogue.cuh"

namespace xcorr {

namespace {

// C(0, 0)'s partial sums per pair (c00_partial_kernel): about 16 products per thread, at most
// kMaxC00Parts blocks per pair (a 2048 x 2048 pair: 1024 blocks of 2 rows, about 8 per SM of the
// H200: 64 left half of it idle, and 256 of 8 rows a quarter), and at most 16 Mi partials in all
// (many small pairs need no more than one each). Split over the rows first (as many row parts as
// rows allow), then over column chunks: a 1 x 2^20 pair takes 256 chunks of 4096 columns (a row
// split alone gave it one block).
struct C00Split {
    int row_parts = 1, col_parts = 1;
    int parts() const { return row_parts * col_parts; }
};
C00Split c00_split(const Problem& p) {
    const int64_t rows = std::min(p.hL, p.hR), cols = std::min(p.wL, p.wR), count = p.out_count();
    int64_t want = std::clamp<int64_t>(rows * cols / (kThreads * 16), 1, kMaxC00Parts);
    want = std::max<int64_t>(1, std::min<int64_t>(want, (int64_t(16) << 20) / count));
    C00Split s;
    s.row_parts = int(std::min(rows, want));
    s.col_parts = int(std::clamp<int64_t>(want / s.row_parts, 1, std::max<int64_t>(cols, 1)));
    return s;
}

// The segmented row pass's scratch (segment totals, then carries: double2 per row and segment of
// each segmented stack, lefts first) lives in partial_ after the partial sums, at an even offset in
// doubles (double2 alignment): the offset and the double2 entries.
size_t seg_scratch_offset(const Problem& p, bool lfused, bool rfused, int lpartials, int rpartials) {
    const size_t n = (lfused ? 0 : size_t(p.nL) * lpartials) + (rfused ? 0 : size_t(p.nR) * rpartials);
    return 2 * n;  // a double2 of partial sums each
}
size_t seg_scratch_entries(const Problem& p, const NormalizeCrop& c, bool lfused, bool rfused) {
    return size_t(p.nL) * c.left.h() * segs_for(c.left.w(), lfused) +
           size_t(p.nR) * c.right.h() * segs_for(c.right.w(), rfused);
}

// The staged epilogue (epilogue_kernel<, true>): dynamic shared memory for the two tables, the
// limit on it, and when it pays: the tables fit; every output reads its tables' entries at least
// twice over on average (8 per element against the cells staged), else staging would move more
// bytes than it saves (a window of a few shifts on large crops); and outputs enough to fill the
// GPU with one block per output (fewer run on fewer SMs than the unstaged kernel's blocks).
constexpr size_t kStagedEpilogueBytes = 64 * 1024;
constexpr int64_t kStagedMinOutputs = 256;
size_t staged_epilogue_bytes(const NormalizeCrop& c) {
    return table_bytes(c.left.h(), c.left.w()) + table_bytes(c.right.h(), c.right.w());
}
// Whether the staged epilogue stages each output's raw values too (EpilogueArgs::stage_out): outputs
// of at most kStagedOutBytes (zncc_frames' 33 x 33: 4.3 KB). Copied with the crop, the loads are
// in flight together, where each element's own load, late in its iteration, was the staged
// kernel's longest wait (17% of its stall samples on zncc_frames' 23 x 21 template).
constexpr size_t kStagedOutBytes = 16 * 1024;
bool stage_outputs(const Problem& p) { return size_t(p.out_h()) * p.out_w() * sizeof(float) <= kStagedOutBytes; }
// Its dynamic shared memory: the two tables, then the two shifted crops as floats, then (stage_outputs)
// an output's raw values.
size_t staged_smem_bytes(const Problem& p, const NormalizeCrop& c) {
    const size_t out = stage_outputs(p) ? size_t(p.out_h()) * p.out_w() : 0;
    return staged_epilogue_bytes(c) +
           (size_t(c.left.h()) * c.left.w() + size_t(c.right.h()) * c.right.w() + out) * sizeof(float);
}
bool use_staged_epilogue(const Problem& p, const NormalizeCrop& c) {
    const size_t bytes = staged_epilogue_bytes(c);
    const int64_t cells = int64_t(bytes / sizeof(double2)), per = int64_t(p.out_h()) * p.out_w();
    return bytes <= kStagedEpilogueBytes && 8 * per >= 2 * cells && p.out_count() >= kStagedMinOutputs;
}

// The template epilogue (template_epilogue_kernel) where the window keeps the right wholly inside
// the left at every shift (0 <= dy, dy + hR <= hL, and so for the columns): template matching's
// valid window, matched filtering. Not for n-to-mn (outputs of one left are not consecutive there)
// nor where n <= kDirectOverlap (epilogue_kernel sums those overlaps directly); the staged epilogue
// keeps the problems it takes.
// Outputs per left from which a variant's store takes the normalization (Normalizer::store_norm_possible):
// its per-left terms are 16 bytes an element against 4 per output element it spares re-reading
// and re-writing, so from 8 outputs per left they cost at most a quarter of what they save.
constexpr int64_t kStoreNormMinRights = 8;
// The lefts the template epilogue's outputs are grouped by: nL for n-to-m (output k = l·nR + q),
// 1 for the forms it takes with one left (one-to-one, one-to-many).
int template_lefts(const Problem& p) { return p.form == Form::NToM ? p.nL : 1; }
bool use_template_epilogue(const Problem& p) {
    const Window w = p.shifts();
    return p.form != Form::NToMn && w.dy0 >= 0 && w.dy1 <= p.hL - p.hR && w.dx0 >= 0 && w.dx1 <= p.wL - p.wR &&
           int64_t(p.hR) * p.wR > kDirectOverlap;
}

// Whether a stack's tables keep only the columns the epilogue reads (read_columns): where that
// leaves out at least an eighth of them, and the stack takes row_scan_kernel (the fused prepass
// keeps whole tables in shared memory, the segmented row pass whole rows of 1-D signals). The
// tables of the four-kernel path cross DRAM three times (row pass out, column pass in and out) at
// 16 bytes per cell, four times the input: zncc_frames' 156 x 116 template within ±16 reads 50 of
// the 133 columns of each 172 x 132 crop, 368 KB of table per frame otherwise (1000 frames: ~1.1
// GB of traffic, most of the 475 us its ZNCC cost beyond the raw correlation). Seed 002's ±64 on
// 2048 x 2048: 130 of 2049 columns, 4.3 MB of tables per input instead of 67 MB. Sampling costs
// only a column lookup per store and read: the staged epilogue, which needs whole tables, never
// applies where the four-kernel path runs (the stack past the fused prepass has a table of more
// than 4/5 of kFusedSmemBytes, past kStagedEpilogueBytes alone). Only a stack whose whole tables
// come to kSampledMinBytes or more: below that the traffic saved is a few microseconds, while
// one sampled stack puts every output element through the sampled epilogue's column lookups
// (zncc_match's 16 x 16 template, a 4.6 KB table, made the epilogue of a 4096 x 4096 image's valid
// window the sampled one: more registers, half the occupancy).
constexpr size_t kSampledMinBytes = 1024 * 1024;
bool sampled_table(const TableColumns& read, int ch, int cw, int count, bool fused) {
    return !fused && segs_for(cw, fused) == 0 && size_t(count) * table_bytes(ch, cw) >= kSampledMinBytes &&
           8 * int64_t(read.width()) <= 7 * (int64_t(cw) + 1);
}
static_assert(4 * kFusedSmemBytes > 5 * kStagedEpilogueBytes,
              "a crop past the fused prepass (table + floats, floats < table / 4) has a table past the staged epilogue's limit");

// The Instance of a normalized problem: the variant's instance of the (cropped) raw problem inside
// a Normalizer; no raw instance where the crop is empty (the output is 0).
class NormalizedInstance final : public Instance {
public:
    NormalizedInstance(std::unique_ptr<Instance> raw, Normalizer norm) : raw_(std::move(raw)), norm_(std::move(norm)) {
        if (raw_ && norm_.store_norm_possible() && raw_->takes_store_norm(norm_.problem().normalize))
            raw_->set_store_norm(norm_.fuse_store());
    }
    bool normalizes_in_store() const override { return norm_.store_fused(); }
    // Tile maxima from the raw instance's store only where that store writes the normalized values
    // (the epilogue, which would rewrite the map after it, does not run).
    bool takes_tile_max(const TileSink& s) const override {
        return raw_ && norm_.store_fused() && raw_->takes_tile_max(s);
    }
    void set_tile_sink(const TileSink& s) override {
        if (!takes_tile_max(s)) throw std::logic_error("set_tile_sink where takes_tile_max is false");
        raw_->set_tile_sink(s);
    }
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

Prepass prepass_of(const Problem& p, const NormalizeCrop& crop) {
    if (crop.empty()) throw UsageError("prepass_of: the crop is empty (the output is 0: nothing is prepared)");
    const Region &cl = crop.left, &cr = crop.right;
    Prepass pp;
    // The fused prepass where both stacks' crops fit it; where one stack needs the four-kernel path,
    // the other rides along in those launches (a stack per blockIdx.z) rather than paying a fused
    // launch of its own, a few blocks' latency for a stack of a few matrices (zncc_frames' 53 x 54
    // template: 15 us on one block, after the frames' 85 x 86 crops took the four kernels). The two
    // paths give the same bits (tests/test_normalize_fused.py).
    const TableColumnsPair read = read_columns(p, crop);
    auto stack = [&](const Region& c, const TableColumns& reads, int count, bool fused, bool rides) {
        StackPrepass s;
        s.fused = fused;
        s.partials = partials_for(int64_t(c.h()) * c.w());
        s.row_segments = segs_for(c.w(), fused);
        s.cols = sampled_table(reads, c.h(), c.w(), count, fused) ? reads : all_columns(c.w());
        s.strip = strip_prepass(c.h(), c.w(), count, s.cols.width(), fused, rides);
        s.chunked_rows = chunked_rows(c.h(), c.w(), s.strip);
        // One-row crops skip the column pass (prepare), and the strip prepass has its own: no bands.
        s.col_bands = fused || s.strip || c.h() == 1 ? 1 : col_bands_for(c.h(), c.w(), count, s.cols.width());
        return s;
    };
    // A stack of crops past kStripOverFusedBytes that the strip prepass takes when not fused.
    auto strip_over_fused = [&](const Region& c, const TableColumns& reads, int count) {
        return fused_smem_bytes(c.h(), c.w()) > kStripOverFusedBytes && stack(c, reads, count, false, false).strip;
    };
    const bool fused = fits_fused(cl.h(), cl.w()) && fits_fused(cr.h(), cr.w()) &&
                       !strip_over_fused(cl, read.left, p.nL) && !strip_over_fused(cr, read.right, p.nR);
    pp.left = stack(cl, read.left, p.nL, fused, false);
    pp.right = stack(cr, read.right, p.nR, fused, false);
    // A stack of too few matrices for a strip launch of its own rides along in the other's:
    // zncc_frames' one template otherwise took partial sums' and means' launches with the frames,
    // then three small grids of its own (row pass, column totals and scan: 15 us at 156 x 116).
    // Only crops of at most the other stack's size: a block walks its matrix alone, so a larger one
    // would outlast the launch it rides in.
    auto elems = [](const Region& c) { return int64_t(c.h()) * c.w(); };
    if (pp.left.strip != pp.right.strip) {
        if (pp.right.strip && elems(cl) <= elems(cr)) pp.left = stack(cl, read.left, p.nL, fused, true);
        else if (pp.left.strip && elems(cr) <= elems(cl)) pp.right = stack(cr, read.right, p.nR, fused, true);
    }
    pp.staged_epilogue = !pp.left.sampled(cl.w()) && !pp.right.sampled(cr.w()) && use_staged_epilogue(p, crop);
    pp.template_epilogue = !pp.staged_epilogue && use_template_epilogue(p);
    pp.rebuild_left = pp.staged_epilogue && pp.left.fused;
    pp.c00_parts = p.normalize == Normalize::ZeroLag ? c00_split(p).parts() : 0;
    return pp;
}

Normalizer::Normalizer(const Problem& p, const NormalizeCrop& crop) : p_(p), crop_(crop) {
    if (p.normalize == Normalize::None) throw UsageError("Normalizer: the problem is not normalized (normalize none)");
    p.check();
    if (crop.empty()) return;  // the output is 0: nothing to prepare
    const Region &cl = crop.left, &cr = crop.right;
    prepass_ = prepass_of(p, crop);
    const StackPrepass &L = prepass_.left, &R = prepass_.right;
    if (p.normalize == Normalize::ZeroLag) {
        const int64_t count = p.out_count();
        c00_ = DeviceBuffer<double>(size_t(count));
        c00_partial_ = DeviceBuffer<double>(size_t(count) * prepass_.c00_parts);
    }
    fused_smem_ = std::max(L.fused ? fused_smem_bytes(cl.h(), cl.w()) : 0,
                           R.fused ? fused_smem_bytes(cr.h(), cr.w()) : 0);
    if (fused_smem_ > 48 * 1024)  // past the default limit of dynamic shared memory: opt in (per device)
        raise_dynamic_smem_limit(fused_prepass_kernel, size_t(fused_smem_));
    sampled_ = L.sampled(cl.w()) || R.sampled(cr.w());
    if (prepass_.staged_epilogue && staged_smem_bytes(p, crop) > 48 * 1024) {
        const int bytes = int(staged_smem_bytes(p, crop));
        raise_dynamic_smem_limit(epilogue_kernel<Normalize::Zncc, true>, size_t(bytes));
        raise_dynamic_smem_limit(epilogue_kernel<Normalize::ZeroLag, true>, size_t(bytes));
    }
    lshift_ = DeviceBuffer<float>(size_t(p.nL) * cl.h() * cl.w());
    rshift_ = DeviceBuffer<float>(size_t(p.nR) * cr.h() * cr.w());
    partial_ = DeviceBuffer<double>(seg_scratch_offset(p, L.fused, R.fused, L.partials, R.partials) +
                                    2 * seg_scratch_entries(p, crop, L.fused, R.fused));
    mean_ = DeviceBuffer<double>(2 * (size_t(p.nL) + p.nR));  // the means, then the variances
    if (!prepass_.rebuild_left) lsat_ = DeviceBuffer<double2>(size_t(p.nL) * (cl.h() + 1) * L.cols.width());
    rsat_ = DeviceBuffer<double2>(size_t(p.nR) * (cr.h() + 1) * R.cols.width());
    strip_smem_ = std::max(L.strip ? strip_smem_bytes(L.cols.width()) : 0,
                           R.strip ? strip_smem_bytes(R.cols.width()) : 0);
    if (strip_smem_ > 48 * 1024)  // past the default limit of dynamic shared memory: opt in
        for (auto kernel : {strip_prepass_kernel<false>, strip_prepass_kernel<true>})
            raise_dynamic_smem_limit(kernel, size_t(strip_smem_));
    const size_t ltotals = L.col_bands > 1 ? size_t(p.nL) * L.col_bands * kColSegments * L.cols.width() : 0;
    const size_t rtotals = R.col_bands > 1 ? size_t(p.nR) * R.col_bands * kColSegments * R.cols.width() : 0;
    col_total_ = DeviceBuffer<double2>(ltotals + rtotals);
}

size_t Normalizer::workspace_bytes() const {
    return lshift_.bytes() + rshift_.bytes() + partial_.bytes() + mean_.bytes() + lsat_.bytes() + rsat_.bytes() +
           col_total_.bytes() + c00_.bytes() + c00_partial_.bytes() + lterm_.bytes() + kterm_.bytes();
}

void Normalizer::prepare(const float* left, const float* right, cudaStream_t stream) {
    if (crop_.empty()) return;
    const StackPrepass &L = prepass_.left, &R = prepass_.right;
    if (p_.normalize == Normalize::ZeroLag) {
        // C(0, 0) from the whole inputs: shift (0, 0) need not be in the window, nor its overlap in the crops.
        const int64_t count = p_.out_count();
        const C00Split split = c00_split(p_);
        c00_partial_kernel<<<dim3(split.parts(), unsigned(std::min<int64_t>(count, kMaxGridY))), kThreads, 0, stream>>>(
            left, right, p_.hL, p_.wL, p_.hR, p_.wR, pair_map(p_), count, split.row_parts, split.col_parts,
            c00_partial_.get());
        XC_CHECK_LAUNCH();
        c00_final_kernel<<<grid_stride_blocks(count, kThreads / kWarp), kThreads, 0, stream>>>(
            c00_partial_.get(), count, prepass_.c00_parts, c00_.get());
        XC_CHECK_LAUNCH();
    }
    const Region &cl = crop_.left, &cr = crop_.right;
    double2* const lpartial = reinterpret_cast<double2*>(partial_.get());  // (Σx, Σ(x - x0)²) pairs
    double2* const rpartial = lpartial + (L.fused ? 0 : int64_t(p_.nL) * L.partials);
    const StackRef l{left, lshift_.get(), lsat_.get(), lpartial, mean_.get(), lvar(), p_.nL, p_.hL, p_.wL,
                     cl.r0, cl.c0, cl.h(), cl.w(), L.partials, L.cols, L.col_bands};
    const StackRef r{right, rshift_.get(), rsat_.get(), rpartial, mean_.get() + p_.nL, rvar(), p_.nR, p_.hR, p_.wR,
                     cr.r0, cr.c0, cr.h(), cr.w(), R.partials, R.cols, R.col_bands};
    // Each stack in one of the two paths; in the other its count is 0 (it does nothing there).
    Stacks fused{l, r}, split{l, r};
    (L.fused ? split.left : fused.left).count = 0;
    (R.fused ? split.right : fused.right).count = 0;
    if (L.fused || R.fused) {
        const int64_t total = int64_t(fused.left.count) + fused.right.count;
        fused_prepass_kernel<<<grid_stride_blocks(total, 1), kThreads, fused_smem_, stream>>>(fused);
        XC_CHECK_LAUNCH();
    }
    if (L.fused && R.fused) return;
    const int most = std::max(split.left.count, split.right.count);
    const int gy = std::min(most, kMaxGridY);
    const int64_t slices = std::max(int64_t(split.left.count) * L.partials, int64_t(split.right.count) * R.partials);
    partial_sums_kernel<<<dim3(unsigned(std::min<int64_t>(slices, kMaxPartialBlocks)), 1, 2), kThreads, 0, stream>>>(split);
    XC_CHECK_LAUNCH();
    means_kernel<<<dim3(grid_stride_blocks(most, kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(split);
    XC_CHECK_LAUNCH();
    // The strip prepass's stacks: row and column passes in one kernel; the passes below skip them.
    Stacks rest = split, strips = split;
    if (prepass_.left.strip) rest.left.count = 0;
    else strips.left.count = 0;
    if (prepass_.right.strip) rest.right.count = 0;
    else strips.right.count = 0;
    if (const int64_t matrices = int64_t(strips.left.count) + strips.right.count) {
        auto strip = sampled_ ? strip_prepass_kernel<true> : strip_prepass_kernel<false>;
        strip<<<grid_stride_blocks(matrices, 1), kThreads, strip_smem_, stream>>>(strips);
        XC_CHECK_LAUNCH();
    }
    // The row pass: row_scan_kernel for rows up to kSegRow columns, the segmented pass for longer
    // ones (per stack; the other stack's count is 0 in each).
    const int lsegs = prepass_.left.row_segments, rsegs = prepass_.right.row_segments;
    Stacks rowwise = rest, segmented = rest;
    (lsegs ? rowwise.left : segmented.left).count = 0;
    (rsegs ? rowwise.right : segmented.right).count = 0;
    // One launch per kind of row among the stacks: chunked (chunked_rows), else scan_span's, batched
    // where the crops are long (one kernel each way: a run-time choice inside one kernel gave the
    // short crops the batched code's registers and halved their occupancy).
    for (const bool chunk : {false, true}) {
        Stacks part = rowwise;
        if (prepass_.left.chunked_rows != chunk) part.left.count = 0;
        if (prepass_.right.chunked_rows != chunk) part.right.count = 0;
        const int64_t prows = std::max(int64_t(part.left.count) * cl.h(), int64_t(part.right.count) * cr.h());
        if (!prows) continue;
        const bool long_rows = std::max(part.left.count ? cl.w() : 0, part.right.count ? cr.w() : 0) >= kLongRow;
        auto row_scan = chunk ? (sampled_ ? row_scan_kernel<1, true, true> : row_scan_kernel<1, false, true>)
                      : sampled_ ? (long_rows ? row_scan_kernel<kRowStrips, true> : row_scan_kernel<1, true>)
                                 : (long_rows ? row_scan_kernel<kRowStrips, false> : row_scan_kernel<1, false>);
        row_scan<<<dim3(grid_stride_blocks(prows, kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(part);
        XC_CHECK_LAUNCH();
    }
    if (lsegs || rsegs) {
        double2* const lseg = reinterpret_cast<double2*>(
            partial_.get() + seg_scratch_offset(p_, L.fused, R.fused, L.partials, R.partials));
        const SegScratch scratch{lseg, lseg + int64_t(segmented.left.count) * cl.h() * lsegs};
        const int64_t lrows = int64_t(segmented.left.count) * cl.h(), rrows = int64_t(segmented.right.count) * cr.h();
        const int64_t segs = std::max(lrows * lsegs, rrows * rsegs);
        const int64_t adds = std::max(lrows * std::max(lsegs - 1, 0), rrows * std::max(rsegs - 1, 0));
        seg_scan_kernel<<<dim3(grid_stride_blocks(segs, kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(segmented, scratch);
        XC_CHECK_LAUNCH();
        seg_carry_kernel<<<dim3(grid_stride_blocks(std::max(lrows, rrows), kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(
            segmented, scratch);
        XC_CHECK_LAUNCH();
        seg_add_kernel<<<dim3(grid_stride_blocks(adds, 1), 1, 2), kThreads, 0, stream>>>(segmented, scratch);
        XC_CHECK_LAUNCH();
    }
    // The column pass, but not of one-row crops: there it would write table (1, c) = +0 + table
    // (1, c), the same bits (no row entry is -0: each is a sum with a carry that starts at +0, and
    // round-to-nearest gives -0 only for -0 + -0), and a 1-D signal of 8.64 M samples would cost
    // 270 k blocks of which one warp in 8 has a row to add.
    Stacks colwise = rest;
    if (cl.h() == 1) colwise.left.count = 0;
    if (cr.h() == 1) colwise.right.count = 0;
    // A stack of one band takes col_scan_kernel, one of more the banded pair (the other's count 0 in each).
    Stacks plain = colwise, banded = colwise;
    (L.col_bands > 1 ? plain.left : banded.left).count = 0;
    (R.col_bands > 1 ? plain.right : banded.right).count = 0;
    auto width = [](const Stacks& s) { return std::max(s.left.count ? s.left.cols.width() : 0,
                                                       s.right.count ? s.right.cols.width() : 0); };
    if (plain.left.count || plain.right.count) {
        const bool long_cols = std::max(plain.left.count ? cl.h() : 0, plain.right.count ? cr.h() : 0) >= kLongColumn;
        auto col_scan = long_cols ? col_scan_kernel<kColBatch> : col_scan_kernel<1>;
        col_scan<<<dim3(ceil_div(width(plain), kWarp), gy, 2), kThreads, 0, stream>>>(plain);
        XC_CHECK_LAUNCH();
    }
    if (banded.left.count || banded.right.count) {
        const size_t ltotals = size_t(banded.left.count) * L.col_bands * kColSegments * L.cols.width();
        const ColScratch scratch{col_total_.get(), col_total_.get() + ltotals};
        const int64_t slices =
            std::max(int64_t(banded.left.count) * L.col_bands, int64_t(banded.right.count) * R.col_bands);
        const dim3 grid(ceil_div(width(banded), kWarp), unsigned(std::min<int64_t>(slices, kMaxGridY)), 2);
        col_totals_kernel<kColBatch><<<grid, kThreads, 0, stream>>>(banded, scratch);
        XC_CHECK_LAUNCH();
        col_band_scan_kernel<kColBatch><<<grid, kThreads, 0, stream>>>(banded, scratch);
        XC_CHECK_LAUNCH();
    }
}

void Normalizer::finish(float* out, cudaStream_t stream) { epilogue(out, stream, false); }
void Normalizer::store_terms(cudaStream_t stream) { epilogue(nullptr, stream, true); }

// The epilogue over `out`, or (terms) the StoreNorm terms of a variant that stores the template
// epilogue's values itself: the same arguments either way.
void Normalizer::epilogue(float* out, cudaStream_t stream, bool terms) {
    const int64_t total = p_.out_elems();
    if (!total) return;
    if (crop_.empty()) {
        XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(total) * sizeof(float), stream));  // 0.0f is all zero bits
        return;
    }
    const Region &cl = crop_.left, &cr = crop_.right;
    const StackPrepass &L = prepass_.left, &R = prepass_.right;
    EpilogueArgs a{};
    a.out = out;
    a.lsat = lsat_.get(), a.rsat = rsat_.get();
    a.lmean = mean_.get(), a.rmean = mean_.get() + p_.nL, a.c00 = c00_.get();
    a.lvar = lvar(), a.rvar = rvar();
    a.ls = lshift_.get(), a.rs = rshift_.get();
    a.hL = p_.hL, a.wL = p_.wL, a.hR = p_.hR, a.wR = p_.wR;
    a.lr0 = cl.r0, a.lc0 = cl.c0, a.lh = cl.h(), a.lw = cl.w();
    a.rr0 = cr.r0, a.rc0 = cr.c0, a.rh = cr.h(), a.rw = cr.w();
    a.lcols = L.cols, a.rcols = R.cols;
    a.ldepth = L.row_segments ? kSegRowDepth : INT_MAX, a.rdepth = R.row_segments ? kSegRowDepth : INT_MAX;
    a.win = p_.shifts();
    a.out_w = FastDiv(unsigned(p_.out_w()));
    a.pairs = pair_map(p_);
    a.count = p_.out_count();
    a.rebuild_left = prepass_.rebuild_left;
    a.stage_out = prepass_.staged_epilogue && stage_outputs(p_);
    const int64_t per = int64_t(p_.out_h()) * p_.out_w();
    const bool zl = p_.normalize == Normalize::ZeroLag;
    // The unstaged epilogues' blockIdx.y: the elements of an output, kThreads a block.
    const unsigned elem_blocks = unsigned(std::min<int64_t>(ceil_div(per, int64_t(kThreads)), kMaxGridY));
    if (terms) {  // fuse_store: the template epilogue's problems only
        auto kernel = sampled_ ? (zl ? store_terms_kernel<Normalize::ZeroLag, true> : store_terms_kernel<Normalize::Zncc, true>)
                               : (zl ? store_terms_kernel<Normalize::ZeroLag, false>
                                     : store_terms_kernel<Normalize::Zncc, false>);
        const int lefts = template_lefts(p_), rights = int(a.count / lefts);
        const int64_t items = int64_t(lefts) * per + a.count;
        kernel<<<grid_stride_blocks(items, kThreads), kThreads, 0, stream>>>(a, lefts, rights, lterm_.get(), kterm_.get());
    } else if (prepass_.staged_epilogue) {
        // At most 65535 blocks, as before the outputs moved to x: a block of several outputs keeps
        // the staged right table across those with the same right.
        auto epilogue = zl ? epilogue_kernel<Normalize::ZeroLag, true> : epilogue_kernel<Normalize::Zncc, true>;
        const unsigned gx = unsigned(std::min<int64_t>(a.count, kMaxGridY));
        epilogue<<<dim3(gx, 1), kThreads, staged_smem_bytes(p_, crop_), stream>>>(a);
    } else if (prepass_.template_epilogue) {
        auto epilogue = sampled_ ? (zl ? template_epilogue_kernel<Normalize::ZeroLag, true>
                                       : template_epilogue_kernel<Normalize::Zncc, true>)
                                 : (zl ? template_epilogue_kernel<Normalize::ZeroLag, false>
                                       : template_epilogue_kernel<Normalize::Zncc, false>);
        const int lefts = template_lefts(p_), rights = int(a.count / lefts);
        const int groups_per_left = ceil_div(rights, kTemplateGroup);
        const int64_t groups = int64_t(lefts) * groups_per_left;
        const unsigned gx = unsigned(std::min<int64_t>(groups, kMaxGridX));
        epilogue<<<dim3(gx, elem_blocks), kThreads, 0, stream>>>(a, rights, groups_per_left, groups);
    } else {
        auto epilogue = sampled_ ? (zl ? epilogue_kernel<Normalize::ZeroLag, false, true>
                                       : epilogue_kernel<Normalize::Zncc, false, true>)
                                 : (zl ? epilogue_kernel<Normalize::ZeroLag, false> : epilogue_kernel<Normalize::Zncc, false>);
        const unsigned gx = unsigned(std::min<int64_t>(a.count, kMaxGridX));
        epilogue<<<dim3(gx, elem_blocks), kThreads, 0, stream>>>(a);
    }
    XC_CHECK_LAUNCH();
}

bool Normalizer::store_norm_possible() const {
    if (crop_.empty() || !prepass_.template_epilogue || env_on("XCORR_NO_STORE_NORM")) return false;
    const int lefts = template_lefts(p_);
    return p_.out_count() / lefts >= kStoreNormMinRights;
}

const StoreNorm& Normalizer::fuse_store() {
    if (!store_norm_possible()) throw std::logic_error("Normalizer::fuse_store: not offered for this problem");
    const int lefts = template_lefts(p_);
    const int64_t per = int64_t(p_.out_h()) * p_.out_w();
    lterm_ = DeviceBuffer<double2>(size_t(lefts) * per);
    kterm_ = DeviceBuffer<double2>(size_t(p_.out_count()));
    store_norm_.mode = p_.normalize;
    store_norm_.lterm = lterm_.get(), store_norm_.kterm = kterm_.get();
    store_norm_.lmean = mean_.get(), store_norm_.rmean = mean_.get() + p_.nL;
    store_norm_.per = per;
    store_norm_.n = double(p_.hR) * p_.wR;
    store_fused_ = true;
    return store_norm_;
}

void Normalizer::apply(const float* left, const float* right, float* out, cudaStream_t stream,
                       const std::function<void(const float*, const float*, float*)>& raw) {
    if (!crop_.empty()) {
        prepare(left, right, stream);
        if (store_fused_) store_terms(stream);
        raw(raw_left(left), raw_right(right), out);
    }
    if (!store_fused_) finish(out, stream);
}

std::unique_ptr<Instance> make_instance(const Variant& variant, const Problem& p, const Params& params) {
    // The one place every instance is made: a shape the variant is not built for never reaches make().
    if (std::string why = variant.shape_refusal(p); !why.empty()) throw UsageError(why);
    if (p.normalize == Normalize::None) return make_raw_instance(variant, p, params);
    const NormalizeCrop touched = touched_crop(p);
    if (touched.empty()) return std::make_unique<NormalizedInstance>(nullptr, Normalizer(p, touched));
    // The cropped raw problem where the variant computes its (translated) window; else the whole
    // inputs, as before the crop.
    if (!touched.whole(p))
        if (std::unique_ptr<Instance> inst = make_on_crops(variant, touched.raw(p), params))
            return std::make_unique<NormalizedInstance>(std::move(inst), Normalizer(p, touched));
    std::unique_ptr<Instance> raw = variant.make(p.raw(), params);
    if (!raw) throw CudaError(variant.name + ": make() returned no instance");
    return std::make_unique<NormalizedInstance>(std::move(raw), Normalizer(p, whole_crop(p)));
}

}  // namespace xcorr
