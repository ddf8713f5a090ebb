// The float64 reference on the CPU: a direct transcription of the definition in CONVENTIONS.md,
// for all four forms. Obviously correct first, fast never; tests check it against
// scipy.signal.correlate2d, and the GPU reference (gpu.hpp) against it.
#pragma once

#include "xcorr/core.hpp"

namespace xcorr {

// left: nL x hL x wL, right: nR x hR x wR, out: out_count x out_h x out_w (all row-major).
void reference_cpu(const Problem& p, const float* left, const float* right, double* out);

}  // namespace xcorr
