// The fast path of the normalized outputs (CONVENTIONS.md, "Normalization"): the raw correlation
// of any variant, with the steps before and after it that turn its sums into zncc coefficients or
// zero-lag ratios. Composes with every algorithm and window, because the variant only ever sees a
// plain (raw) problem.
//
// The crop. Steps 1-3 and 4 below run on the part of each matrix that the window touches
// (normalize_crop.hpp: touched_crop), e.g. 39 x 37 of a 256 x 256 frame for a 23 x 21 template
// within ±16: the crops are cut out of the inputs by the prepass itself, and the variant computes
// the crops' correlation over the window translated by (rR0 - rL0, cR0 - cL0), which holds the same
// sums. Where the variant does not compute that translated window (Variant::supports_problem) or
// refuses the cropped problem in make(), the crops are the whole matrices, as they are anyway when
// the window touches everything (full, valid, same). A window that overlaps nowhere: the output is
// set to 0 and nothing else runs.
// zncc. Pearson's coefficient is unchanged when a constant is added to either matrix, so:
//   1. the mean m and variance of every crop of both stacks, in double (deterministic two-level reduction; any
//      constant keeps the formulas below exact, the crop's own mean keeps the shifted data smallest);
//   2. shifted float32 copies L' = L - m, R' = R - m of the crops (workspace), fused with the row pass of
//      3. summed-area tables of (X', X'^2) in double, (h+1) x (w+1) per crop (row scan, column scan);
//   1-3 run as one kernel per stack whose crop's table fits in shared memory (about 4900 elements:
//   one block per crop, everything on chip), else as four kernels; both give the same bits (the same
//   sums in the same order: normalize.cu, tests/test_normalize_fused.py), deterministic run to run;
//   rows of more than 8192 columns (1-D signals) take a segmented row pass instead of one warp per
//   row: segments of 2048 columns scanned at once, then their carries, compensated (a fixed
//   order too);
//   rows of 512 columns or more of a crop past the fused and strip prepasses take a chunked order
//   (each lane adds 8 consecutive columns in registers, one warp scan per 256 columns), tall tables
//   of few columns a banded column pass (more, shorter column segments, in two kernels), many
//   narrow tables the strip prepass (row and column passes in one kernel, the rows in lane runs:
//   up to 6 consecutive columns a lane, one warp scan a row of up to 192; also taken by crops that
//   fit the fused prepass only at three blocks per SM or fewer, and by the other stack, of few
//   matrices, riding along in its launch); crops that fit the fused prepass keep its order on the
//   four-kernel path; prepass_of below says which path a problem takes (`xcorr explain --json`
//   prints it);
//   where the epilogue reads few of a table's columns (a window of a few shifts on large crops:
//   normalize_crop.hpp, read_columns) and the crop takes the four kernels, the tables keep only
//   those columns, every row (the same sums, so the same bits; normalize.cu: sampled_table);
//   4. the variant's raw correlation C' of L' with R' (the caller runs it: raw_left/raw_right);
//   5. an epilogue per output element: n, ΣL', ΣL'², ΣR', ΣR'² of the overlap (in crop coordinates) from the tables and
//      (n·C' - ΣL'·ΣR') / sqrt((n·ΣL'² - ΣL'²)(n·ΣR'² - ΣR'²)), 0 where n = 0 or a part is constant:
//      its variance at most 1e-6 of its crop's (the crop's variance from the mean pass, pivoted on
//      the crop's first element, so no offset cancels it) or its factor within the tables' rounding
//      of 0 (an exactly constant overlap, zero padding: normalize.cu, zncc_factor).
//      Where the two tables of an output are small and read many times (normalize.cu:
//      use_staged_epilogue), one block per output stages them in shared memory first (same bits);
//      a left table of the fused prepass is then built there from the shifted copy rather than
//      written by the prepass and read back (Prepass::rebuild_left: a fixed order of its own for
//      narrow crops, the prepass's for wider ones). Where every shift keeps the right inside
//      the left and the outputs per left are many, a variant may write the template epilogue's
//      values in its own store instead (store_norm.hpp: Normalizer::fuse_store;
//      tensor-hankel's zncc), and the epilogue's pass is skipped.
//   Why shifted data: on images of 1000 + noise the naive n·ΣX² - (ΣX)² in float32 cancels every
//   digit, and C itself is 1e6·n large with the information in its 7th digit; on L', R' the raw
//   correlation carries the fluctuations at full float32 precision and the moments in double have
//   nothing left to cancel (tests/test_normalize.py shows both).
//   Small overlaps (n <= kDirectOverlap) take C' from a direct double sum over L', R' instead of
//   the variant's output: the coefficient divides by about n·σ², so an algorithm whose absolute
//   error is spread evenly over the output (FFT) would be amplified most exactly there.
// zero-lag. Steps 1-4 as for zncc, plus C(0, 0) of every pair in double from the inputs themselves
// (a two-level reduction over the overlap at shift (0, 0), whether or not the window holds it,
// split over rows and, for pairs of few long rows, column chunks); the
// epilogue restores the raw sum C = C' + mR·ΣL' + mL·ΣR' + n·mL·mR in double and divides it by
// C(0, 0) (0 where C(0, 0) = 0). Why not the variant's C directly: on images of 1000 + noise a
// float32 sum of n terms of ~1e6 loses ~n·2^-24 of itself in the long sequential sums of
// overlap-wise or register-tiled without split-K (1.1e-5 at 512 x 512, past the contract's 1e-5),
// and a TF32 variant 1e-3; C' carries only the fluctuations, so the ratio keeps nearly the
// precision of the double moments.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>

#include "xcorr/core.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/normalize_crop.hpp"
#include "xcorr/registry.hpp"
#include "xcorr/store_norm.hpp"

namespace xcorr {

// Overlaps of at most this many elements get their zncc numerator from a direct sum (above).
inline constexpr int kDirectOverlap = 64;

// How the Normalizer prepares a problem (normalize.cu decides it in one place, prepass_of; the
// Normalizer runs it, `xcorr explain --json` reports it).
struct StackPrepass {
    bool fused = false;        // the fused prepass (every stack's crop fits it), else the four-kernel path
    int partials = 1;          // partial sums of the two-level mean (four-kernel path)
    int row_segments = 0;      // segments per row of the segmented row pass; 0: one warp per row
    bool chunked_rows = false; // the rows take the chunked order (long rows past the fused and strip prepasses)
    int col_bands = 1;         // row bands of the column pass; 1: col_scan_kernel (or the fused kernel's)
    bool strip = false;        // row and column passes in one kernel (strip_prepass_kernel: many narrow tables)
    TableColumns cols;         // the table's columns: all of them, or those the epilogue reads
    bool sampled(int cw) const { return !(cols == all_columns(cw)); }
};
struct Prepass {
    StackPrepass left, right;
    bool staged_epilogue = false;  // one block per output reads its two tables from shared memory
    bool template_epilogue = false;  // the right wholly inside the left at every shift: its terms per output
    // The staged epilogue builds each left table in shared memory from the shifted copy (narrow
    // crops in an order of its own, wider ones with the fused prepass's table code, so its bits),
    // and the prepass neither finishes nor writes the left
    // tables: a crop's table is 4x its floats (double2 against float), and zncc_frames wrote and
    // read back 24 MB of them for 1000 crops of 39 x 37. Where staged_epilogue and left.fused.
    bool rebuild_left = false;
    int c00_parts = 0;             // zero-lag: first-level blocks per pair of C(0, 0); 0 otherwise
};
// The prepass of normalized problem p on crop (not empty: UsageError otherwise).
Prepass prepass_of(const Problem& p, const NormalizeCrop& crop);

class Normalizer {
public:
    // p.normalize must not be None (UsageError). `crop`: touched_crop(p) or whole_crop(p), and the
    // caller's variant computes crop.raw(p) (unless crop.empty()). Allocates the whole workspace on
    // the current device (UsageError when it does not fit); none for an empty crop.
    Normalizer(const Problem& p, const NormalizeCrop& crop);

    // The stacks the raw correlation must read: the shifted copies.
    const float* raw_left(const float* left) const { return lshift_.size() ? lshift_.get() : left; }
    const float* raw_right(const float* right) const { return rshift_.size() ? rshift_.get() : right; }

    // Before the raw run: means, shifted copies and summed-area tables; C(0, 0) of every pair
    // (zero-lag). Enqueued on `stream`, no host synchronisation.
    void prepare(const float* left, const float* right, cudaStream_t stream);
    // After the raw run, in place on `out` (the raw output of p.raw()): the normalized output.
    void finish(float* out, cudaStream_t stream);
    // The whole normalized computation: prepare, raw(raw_left, raw_right, out), finish; for an
    // empty crop only out = 0 (raw is not called).
    void apply(const float* left, const float* right, float* out, cudaStream_t stream,
               const std::function<void(const float*, const float*, float*)>& raw);

    const Problem& problem() const { return p_; }
    const NormalizeCrop& crop() const { return crop_; }
    size_t workspace_bytes() const;

    // The normalization in the raw variant's store (xcorr/store_norm.hpp), where the template
    // epilogue would run and the outputs per left are many (kStoreNormMinRights; else the per-left
    // terms, 16 bytes an element, outweigh the output they spare re-reading), unless
    // XCORR_NO_STORE_NORM=1 (the epilogue, for comparisons): store_norm_possible() says so;
    // fuse_store() allocates the terms and returns what the store reads: apply() then computes the
    // terms after the tables and finish() writes nothing.
    bool store_norm_possible() const;
    const StoreNorm& fuse_store();
    bool store_fused() const { return store_fused_; }

private:
    // apply()'s step before the raw run where the store is fused: the terms (store_terms_kernel).
    void store_terms(cudaStream_t stream);
    void epilogue(float* out, cudaStream_t stream, bool terms);  // finish() and store_terms()
    Problem p_;
    NormalizeCrop crop_;
    Prepass prepass_;                 // prepass_of(p_, crop_): every choice of path, per stack
    size_t fused_smem_ = 0;           // its dynamic shared memory (the larger fused crop's)
    bool sampled_ = false;            // either stack's table keeps only some columns
    DeviceBuffer<float> lshift_, rshift_;  // shifted crops, count x crop h x crop w
    DeviceBuffer<double> partial_;    // partial sums (double2: Σx, Σ(x - x0)²) of the two-level mean and
                                      // variance: nL x the left's partials, then nR x the right's (a fused
                                      // stack has none); then the segmented row pass's scratch
                                      // (normalize.cu: seg_scratch_offset)
    DeviceBuffer<double> mean_;       // nL + nR means of the crops, lefts first, then their nL + nR variances
    double* lvar() const { return mean_.get() + p_.nL + p_.nR; }
    double* rvar() const { return lvar() + p_.nL; }
    DeviceBuffer<double2> lsat_, rsat_;  // (Σx', Σx'²) tables, (h+1) x cols.width() per crop
    size_t strip_smem_ = 0;           // the strip prepass's dynamic shared memory (the wider strip stack's)
    DeviceBuffer<double2> col_total_;  // banded column pass: segment totals, lefts then rights
    DeviceBuffer<double> c00_;        // zero-lag: C(0, 0) per output
    StoreNorm store_norm_;            // fuse_store: what the raw variant's store reads
    DeviceBuffer<double2> lterm_, kterm_;  // its terms (lefts x elements, outputs)
    bool store_fused_ = false;        // the raw variant writes the normalized values
    DeviceBuffer<double> c00_partial_;  // zero-lag: its partial sums, prepass_.c00_parts per output
};

// variant.make(p, params) for a plain problem; for a normalized one the variant's instance of
// the cropped raw problem (touched_crop(p).raw(p), else p.raw(): above) inside a Normalizer, as one
// Instance whose run() is the whole normalized computation (a variant's untimed finish() included:
// the normalization needs the finished raw output); no variant instance where the crop is empty.
std::unique_ptr<Instance> make_instance(const Variant& variant, const Problem& p, const Params& params);

}  // namespace xcorr
