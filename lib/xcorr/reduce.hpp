// Reductions: the answer a user reads from the maps, without the maps (docs/CONVENTIONS.md,
// "Reductions: peaks and maxima").
//   peaks            per output matrix (per pair), the k largest values of its windowed (and, if
//                    asked, normalized) output, greedy min_distance suppression, integer shifts and a
//                    three-point sub-pixel fit along each axis;
//   max over rights  per left and per shift, the largest value over that left's rights and the
//                    index of the right that gives it (and, with stats, the sum and the sum of squares
//                    over the rights: the per-position statistics of 2-D template matching's z-scores).
// A plan whose spec carries a Reduction (PlanSpec::reduce) computes the maps of a bounded chunk of
// pairs at a time into a device scratch area and reduces them on the device: its memory does not
// grow with the number of pairs or rights, and no map reaches the caller.
//
// This header also holds the float64 reference of both reductions (a map in, the answer out), which
// xcorr run --algorithm reference, xcorr_validate and the tests use; and the checks of a GPU
// answer against a reference map, which are the contract's "correct when" clauses written out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xcorr/core.hpp"

namespace xcorr {

// The sub-pixel fit along each axis through a peak c0 and its neighbours c- and c+:
// parabolic  d = (c- - c+) / (2 (c- - 2 c0 + c+));
// gaussian   the same on ln c where all three are positive, else parabolic;
// d = 0 on the window's edge, where the denominator is 0 or the result is not finite; |d| <= 0.5.
enum class Subpixel : int { None = 0, Parabolic = 1, Gaussian = 2 };
const char* subpixel_name(Subpixel s);               // "none", "parabolic", "gaussian"
Subpixel parse_subpixel(const std::string& name);    // throws UsageError listing the known names

enum class ReductionKind : int { Map = 0, Peaks = 1, MaxOverRights = 2 };
const char* reduction_name(ReductionKind k);         // "map", "peaks", "max-over-rights"

struct Reduction {
    ReductionKind kind = ReductionKind::Map;
    // peaks
    int k = 1;                   // >= 1; more than the window holds is allowed (the rest absent)
    int min_distance = 0;        // >= 0, Chebyshev distance in shifts
    Subpixel subpixel = Subpixel::Parabolic;
    // max over rights
    bool stats = false;          // also the sum and the sum of squares over the rights
    // Device scratch for the maps of one chunk, in bytes; 0: the library's rule (at most 1 GiB and a
    // quarter of the free device memory, at least one chunk's worth).
    int64_t scratch_bytes = 0;

    // UsageError for k < 1, min_distance < 0, or a maximum over the rights of a form that has no
    // rights to reduce over (one-to-one).
    void check(const Problem& p) const;
    std::string describe() const;  // "peaks k=5 min-distance 15 gaussian", "max-over-rights stats"
};

// What a reduced plan writes (device, managed or page-locked memory; row-major):
//   peaks            value    [out_count][k]        float  (NaN where absent)
//                    shift    [out_count][k][2]     int32  (dy, dx); (0, 0) where absent
//                    subpixel [out_count][k][2]     float  shift + the fit's offsets; NaN where absent
//   max over rights  value    [lefts][out_h][out_w] float  (NaN where every right's value is NaN)
//                    index    [lefts][out_h][out_w] int32  the right (within the left's rights; -1: none)
//                    sum      [lefts][out_h][out_w] double (stats only)
//                    sumsq    [lefts][out_h][out_w] double (stats only)
// "lefts" (reduced_lefts): 1 for one-to-many, nL for n-to-mn and n-to-m. The right index counts a
// left's rights in order: right j of one-to-many and n-to-m, group j (right i + nL*j) of n-to-mn.
struct ReducedOutputs {
    float* value = nullptr;
    int32_t* shift = nullptr;
    float* subpixel = nullptr;
    int32_t* index = nullptr;
    double* sum = nullptr;
    double* sumsq = nullptr;
};

// The number of lefts a maximum over the rights is kept for, and how many rights each has.
int64_t reduced_lefts(const Problem& p);
int64_t rights_per_left(const Problem& p);

// --- the float64 reference -------------------------------------------------------------------------
// One peak: its value, its flat index in the window's map (row-major; -1 when absent) and its
// shift with the sub-pixel offsets added.
struct Peak {
    double value;
    int64_t index;
    double sub_dy, sub_dx;
};
// The peaks of one map of h x w values (shift (dy0 + i, dx0 + j) at element (i, j)), exactly as the
// contract orders and suppresses them; NaN values are never taken. Returns r.k entries, the absent
// ones with value NaN and index -1.
std::vector<Peak> reference_peaks(const double* map, int h, int w, int dy0, int dx0, const Reduction& r);
// The fit's offset along one axis from three values (the contract's formula; 0 on an edge is the
// caller's business).
double subpixel_offset(double cm, double c0, double cp, Subpixel s);

// The maximum over the rights of the reference maps `maps` (the plan's out_count maps of n values
// each, as reference_cpu writes them): value and index per left and element, and, when sum is not
// null, the sums (NaN-propagating). Ties go to the smallest right index; NaN values are skipped.
void reference_max_over_rights(const Problem& p, const double* maps, double* value, int32_t* index, double* sum,
                               double* sumsq);

// --- checking an answer against the reference maps (the contract's "correct when") ----------------
// Each failure is one line in `failures` (at most `max_lines` of them kept); returns the number of
// failed checks. `bound` is the map's accuracy bound as an absolute error (the caller turns a
// relative bound into one: bound x the largest |value| of the map).
struct PeakCheck {
    int64_t failed = 0;
    std::vector<std::string> failures;
};
// One map's peaks (value, shift, subpixel as a reduced plan writes them for this map) against its
// float64 reference map. `coverage` false skips the clause that nothing outside the taken peaks
// exceeds the k-th (and that no peak is missing): for inputs holding NaN, whose NaN a direct
// variant keeps to the shifts that overlap it and an FFT spreads over the whole map, so that which
// values are left to take is the algorithm's; every returned peak is still checked.
void check_peaks(const double* ref_map, int h, int w, int dy0, int dx0, const Reduction& r, const float* value,
                 const int32_t* shift, const float* subpixel, double bound, PeakCheck& out, const std::string& what,
                 int max_lines = 8, bool coverage = true);
// One left's maximum over its rights against the reference maps of its rights (maps[j] the map of
// right j, n values each). `coverage` false (inputs holding NaN, as for check_peaks: a variant's
// maps may hold a NaN at more shifts than the reference's) checks only that each value returned
// is the indexed right's reference value there (or NaN with index -1), not that it is the largest,
// nor the sums.
void check_max_over_rights(const std::vector<const double*>& maps, int64_t n, const float* value, const int32_t* index,
                           const double* sum, const double* sumsq, double bound, PeakCheck& out,
                           const std::string& what, int max_lines = 8, bool coverage = true);

}  // namespace xcorr
