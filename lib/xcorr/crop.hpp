// A raw windowed problem on the parts of the inputs its window touches (normalize_crop.hpp:
// touched_crop, NormalizeCrop::raw): for a variant whose cost follows the inputs' sizes rather than
// the window's (Variant::crop_windows: fft-fused's transform size), the harness copies those parts
// into stacks of their own before each run and hands the variant the cropped problem with the
// window translated. The outputs are the same numbers (the same products in the same overlaps:
// normalize_crop.hpp proves it); the copies are timed, as part of the call.
#pragma once

#include <memory>

#include "xcorr/normalize_crop.hpp"
#include "xcorr/registry.hpp"

namespace xcorr {

// variant.make(cropped, params) where the variant computes the cropped problem (its translated
// window, its shape rules, a size make() accepts), else nullptr: the caller falls back to the
// whole inputs, the problem the variant was asked for.
std::unique_ptr<Instance> make_on_crops(const Variant& variant, const Problem& cropped, const Params& params);

// The instance of a raw problem: for a variant with crop_windows whose window touches part of the
// inputs, the variant on those parts behind the copies (when it computes them); else variant.make.
std::unique_ptr<Instance> make_raw_instance(const Variant& variant, const Problem& p, const Params& params);

// Whether make_raw_instance would try the crop for p (host only: xcorr explain).
bool tries_raw_crop(const Variant& variant, const Problem& p);

}  // namespace xcorr
