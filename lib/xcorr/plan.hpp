// The library's public C++ API: a plan is built once from a problem (form, counts, sizes, window,
// normalization, precision policy, algorithm name or "auto", parameters) and executed many times on
// device pointers and a CUDA stream. Everything it needs on the device is allocated when the plan
// is built, so workspace_bytes() is known before the first execute().
//
//   xcorr::PlanSpec s;
//   s.form = xcorr::Form::OneToMany;  s.nR = 32;  s.hL = s.wL = 256;  s.hR = s.wR = 64;
//   s.window = xcorr::parse_mode("valid");
//   xcorr::Plan plan(s);                 // "auto": chooses from this GPU's measured tables
//   plan.execute(d_left, d_right, d_out, stream);   // as often as needed; no host synchronisation
//
// The inputs and the output are float32 stacks laid out as in CONVENTIONS.md (row-major matrices,
// one after another; output k is the pair the form maps it to; each output matrix out_h() x
// out_w()). Errors are the exceptions of core.hpp: UsageError (bad spec, unsupported problem,
// too large for the GPU), NoGpuError, CudaError.
//
// The C API over this (xcorr.h) is for other languages; the tools (xcorr, xcorr_bench,
// xcorr_validate) and the Python package go through this same class.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xcorr/auto_choice.hpp"
#include "xcorr/core.hpp"
#include "xcorr/reduce.hpp"

namespace xcorr {

struct Variant;
class Instance;

// What a plan computes and how it may compute it.
struct PlanSpec {
    Form form = Form::OneToOne;
    int nL = 1, nR = 1;  // matrices in the left and the right stack
    int hL = 0, wL = 0, hR = 0, wR = 0;
    WindowRequest window;  // default: the full output (parse_mode, parse_max_shift, parse_shifts)
    // "none" (plain cross-correlation), "zncc" (per shift, Pearson's coefficient of the overlapping
    // parts) or "zero-lag" (C / C(0, 0)): CONVENTIONS.md, "Normalization". A normalized plan runs
    // the algorithm's raw correlation inside the normalization's fast path (normalize.hpp) and
    // holds its workspace; anything else is a UsageError naming what exists.
    std::string normalize = "none";
    // "fp32": only algorithms whose error bound is FP32-class (1e-5 relative to float64: the FP32
    // kernels, 3xTF32, FFT); "tf32": single-pass TF32 tensor cores allowed too (2e-3).
    std::string precision = "fp32";
    // A variant name (`xcorr list`) or "auto" (auto.hpp: the measured tables of this GPU, else a
    // cost model).
    std::string algorithm = "auto";
    // Tuning parameters of a named algorithm (unset ones take their defaults); with "auto" they
    // must be empty (auto sets its own).
    Params params;
    // What the caller gets (reduce.hpp): the maps (the default), or per pair its peaks, or per left
    // the maximum over its rights. A reduced plan computes the maps of a chunk of pairs at a time
    // into device scratch with the algorithm above ("auto": chosen for the chunk's problem) and
    // reduces them there; it is executed with ReducedOutputs instead of a map.
    Reduction reduce;
};

class Plan {
public:
    // Builds the plan on the current CUDA device: resolves the window, chooses the algorithm,
    // allocates the workspace and creates whatever the algorithm prepares once (cuFFT plans,
    // tables). Throws UsageError (a bad spec, or an environment switch out of its range:
    // check_environment(), core.hpp), NoGpuError or CudaError.
    explicit Plan(const PlanSpec& spec);
    ~Plan();
    Plan(Plan&&) noexcept;
    Plan& operator=(Plan&&) noexcept;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;

    // Enqueues the whole computation on `stream`: every output element is written. No host
    // synchronisation; the pointers are device (or managed, or page-locked) memory of the plan's
    // device: pageable host memory is a UsageError where the GPU cannot read it (checked when a
    // pointer differs from the last call's). A plan may be executed on any stream, but not
    // concurrently with itself (its workspace is one).
    void execute(const float* left, const float* right, float* out, cudaStream_t stream = nullptr);
    // The same for a reduced plan (spec.reduce not the map): the arrays of reduce.hpp's table. For a
    // maximum over the rights, `accumulate` continues the running maxima (and sums) already in `out`
    // from an earlier call over other rights, whose indices this call's rights continue from
    // `first_right` on: templates streamed through in batches give the answer of one call.
    void execute(const float* left, const float* right, const ReducedOutputs& out, cudaStream_t stream = nullptr,
                 bool accumulate = false, int64_t first_right = 0);
    const Reduction& reduction() const;
    // The element counts of each reduced output: peaks: value out_count*k, shift and subpixel twice
    // that; max over rights: reduced_lefts*out_h*out_w for each.
    int64_t reduced_elems() const;

    const Problem& problem() const;       // sizes, counts and the resolved window
    const std::string& algorithm() const; // the variant that runs
    const Params& params() const;         // its parameters, defaults filled in
    const Variant& variant() const;
    // Device memory the plan holds (allocated when it was built), in bytes: its variant's
    // DeviceBuffers and the work areas of the cuFFT plans it holds (a cached cuFFT plan shared with
    // other plans of the same transform sizes is counted by each). Not counted: what cuFFT keeps
    // besides its work area, CUDA graph executables, and fft+plan's cuFFT plans, which it creates
    // and destroys inside every execute().
    size_t workspace_bytes() const;
    // Why this algorithm: the auto choice's reason, or "asked for by name"; for a normalized
    // problem followed by "; " and normalization_note().
    std::string explain() const;
    int device() const;  // the CUDA device it was built on

    int64_t out_h() const { return problem().out_h(); }
    int64_t out_w() const { return problem().out_w(); }
    int64_t out_count() const { return problem().out_count(); }

    // The instance itself, for the tools that time run() and finish() apart (xcorr_bench).
    Instance& instance();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The problem a spec describes (window resolved, checked): no GPU needed.
Problem problem_of(const PlanSpec& spec);

// What a normalized plan runs around its algorithm's raw correlation (normalize.hpp), in one
// sentence for explanations ("" for Normalize::None). auto chooses the raw correlation exactly as
// for the unnormalized problem; this says that the normalization's epilogue follows it.
std::string normalization_note(Normalize n);

// The spec of an already resolved problem (its window, if set, as the rectangle it is) run by a
// named variant with `params`, under precision "tf32" unless told (every variant admitted): how
// xcorr_bench and xcorr_validate build their plans.
PlanSpec spec_of(const Problem& p, const std::string& algorithm, const Params& params,
                 const std::string& precision = "tf32");

}  // namespace xcorr
