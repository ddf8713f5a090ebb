// The normalization in a variant's own store (normalize.hpp: the fast path's steps 1-5 with step 5
// moved into the raw kernel), where every shift of the window keeps the right wholly inside the
// left (the template epilogue's problems: template matching's valid window, matched filtering).
// There each overlap is the whole right, so an output element needs only
//   per left l and output element e: ΣL' of the overlap and zncc's 1 / sqrt(fL) (0 where L' is
//                                     constant there), from the left's summed-area table;
//   per output k (pair l, q):         ΣR' and zncc's 1 / sqrt(fR) (0 where R' is constant), or
//                                     zero-lag's 1 / C(0, 0) (0 where C(0, 0) = 0);
//   per matrix:                       the means mL, mR (the shifts of the data),
// which the Normalizer computes before the raw run (normalize.cu: store_terms_kernel) with the
// template epilogue's own code, and template_value() below is that epilogue's formula: a variant
// that stores template_value(...) of its float result writes the bits the epilogue would have
// written, without the epilogue's pass over the output (matched filtering: 10.4 GB read and written
// again). Which variants do: Instance::takes_store_norm (registry.hpp).
#pragma once

#include <cmath>
#include <cstdint>

#include <vector_types.h>  // double2

#include "xcorr/core.hpp"

namespace xcorr {

// The template epilogue's value of one output element from the raw C' (in double) and its terms:
// zncc (n·C' - ΣL'·ΣR')·(1/sqrt(fL))·(1/sqrt(fR)) clamped to [-1, 1], 0 where either factor's scale
// is 0; zero-lag (C' + mR·ΣL' + mL·ΣR' + n·mL·mR)·(1/C(0, 0)). Double throughout (the contract's
// bounds are far above its rounding).
template <Normalize kMode>
XC_HD_INLINE double template_value(double c, double sl, double lscale, double rsum, double rscale, double ml,
                                   double mr, double n) {
    if constexpr (kMode == Normalize::ZeroLag) {
        return (c + mr * sl + ml * rsum + n * ml * mr) * rscale;
    } else {
        const double scale = lscale * rscale;
        return scale != 0 ? fmin(1.0, fmax(-1.0, (n * c - sl * rsum) * scale)) : 0.0;
    }
}

// What a variant's store reads (device pointers owned by the Normalizer, valid while the
// normalized instance lives). Output k of pair (l, q) at element e (row-major in the window).
struct StoreNorm {
    Normalize mode = Normalize::None;
    const double2* lterm = nullptr;  // [l][e]: (ΣL', 1/sqrt(fL) or 0; zero-lag: 0)
    const double2* kterm = nullptr;  // [k]: (ΣR', 1/sqrt(fR) or 0; zero-lag: 1/C(0, 0) or 0)
    const double* lmean = nullptr;   // [l]
    const double* rmean = nullptr;   // [q]
    int64_t per = 0;                 // output elements per output matrix
    double n = 0;                    // every overlap's size: hR·wR

    // The value of element e of output k (pair l, q) whose raw sum is c; kt = kterm[k], ml, mr the
    // means (a caller hoists what its elements share).
    template <Normalize kMode>
    XC_HD_INLINE float value(float c, int64_t l, int64_t e, double2 kt, double ml, double mr) const {
        const double2 lt = lterm[l * per + e];
        return float(template_value<kMode>(double(c), lt.x, lt.y, kt.x, kt.y, ml, mr, n));
    }
};

}  // namespace xcorr
