// The plan (plan.hpp): a problem resolved and checked once, the variant chosen (by name or by
// "auto"), its instance made, then executed as often as the caller likes.
#include "xcorr/plan.hpp"

#include <cstdint>
#include <utility>

#include "xcorr/auto.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/gpu.hpp"
#include "xcorr/normalize.hpp"
#include "xcorr/registry.hpp"
#include "lib/reduce/reducer.hpp"

namespace xcorr {

bool precision_admits(const std::string& precision, const Variant& v) {
    return precision == "tf32" || v.tolerance <= kFp32Tolerance;
}

void check_precision(const std::string& precision) {
    if (precision != "fp32" && precision != "tf32")
        throw UsageError("unknown precision '" + precision +
                         "' (known: fp32: error within 1e-5 of float64, the default; tf32: single-pass TF32 "
                         "tensor cores allowed too, 2e-3)");
}

Problem problem_of(const PlanSpec& s) {
    const Normalize normalize = parse_normalize(s.normalize);
    check_precision(s.precision);
    Problem p{s.form, s.hL, s.wL, s.hR, s.wR, s.nL, s.nR};
    p.normalize = normalize;
    p.check();
    // The full window stays unset, as the tools have always passed it to the variants.
    if (s.window.kind != WindowKind::Full) {
        p.window = s.window.resolve(p);
        p.check();
    }
    return p;
}

PlanSpec spec_of(const Problem& p, const std::string& algorithm, const Params& params, const std::string& precision) {
    PlanSpec s;
    s.form = p.form;
    s.nL = p.nL, s.nR = p.nR;
    s.hL = p.hL, s.wL = p.wL, s.hR = p.hR, s.wR = p.wR;
    if (p.window) s.window = WindowRequest{WindowKind::Shifts, *p.window};
    s.normalize = normalize_name(p.normalize);
    s.precision = precision;
    s.algorithm = algorithm;
    s.params = params;
    return s;
}

std::string normalization_note(Normalize n) {
    switch (n) {
        case Normalize::Zncc:
            return "normalized (zncc): this algorithm's raw correlation of the mean-shifted inputs, then the zncc "
                   "epilogue (per-matrix means, summed-area tables of X' and X'^2 in double, the coefficient per "
                   "shift; 0 on constant overlaps)";
        case Normalize::ZeroLag:
            return "normalized (zero-lag): this algorithm's raw correlation of the mean-shifted inputs, then the "
                   "zero-lag epilogue (the raw sum restored in double from summed-area tables, divided by C(0, 0) of "
                   "its pair, computed in double; 0 where C(0, 0) = 0)";
        default: return "";
    }
}

// Why a named variant cannot compute `p` under `precision`, or "" when it can.
std::string refusal(const Variant& v, const Problem& p, const std::string& precision, const WindowRequest& w) {
    if (!v.supports(p.form)) return v.name + " does not support form " + form_name(p.form);
    if (!v.supports_window(p)) return v.window_refusal(p, w);
    if (std::string why = v.shape_refusal(p); !why.empty()) return why;
    if (!precision_admits(precision, v))
        return v.name + " is " + v.precision + " (error bound " + std::to_string(v.tolerance) +
               "), outside precision='" + precision + "' (1e-5); ask for precision='tf32' to allow it";
    return "";
}

struct Plan::Impl {
    Problem problem;
    const Variant* variant = nullptr;
    Params params;
    std::unique_ptr<Instance> instance;
    size_t workspace = 0;
    std::string reason;
    int device = 0;
    bool pageable_ok = false;  // the device reads pageable host memory (HMM, ATS): cudaDevAttrPageableMemoryAccess
    const void* checked[3] = {nullptr, nullptr, nullptr};  // the pointers execute() last found readable
    Reduction reduce;
    std::unique_ptr<reduce::Reducer> reducer;  // a reduced plan: the chunks' plans and the kernels
    const void* checked_out[4] = {};  // the reduced outputs execute() last found readable
};

namespace {
// A pointer the GPU cannot read (pageable host memory, on a device that does not read it) is
// refused here: the kernel would fault and leave the CUDA context unusable for the whole process.
// Device, managed and page-locked (mapped) memory pass; so does pageable memory where the device
// reads it. Pointers are checked when they differ from the last call's, so a loop over the same
// buffers pays three comparisons.
void check_readable(const void* p, const char* what, bool pageable_ok) {
    cudaPointerAttributes a{};
    XC_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
    if (a.type == cudaMemoryTypeUnregistered && !pageable_ok)
        throw UsageError(std::string("Plan::execute: ") + what +
                         " is pageable host memory, which this GPU cannot read: pass device memory (cudaMalloc), "
                         "managed or page-locked memory");
}

// check_readable for each of the n pointers that differs from the one `seen` holds for its slot
// (null ones, outputs a call does not write, are skipped), then remembered there.
void check_new_pointers(const void* const* given, const char* const* names, int n, const void** seen,
                        bool pageable_ok) {
    for (int i = 0; i < n; ++i)
        if (given[i] && given[i] != seen[i]) {
            check_readable(given[i], names[i], pageable_ok);
            seen[i] = given[i];
        }
}

void check_device(int device) {
    int current = 0;
    XC_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device)
        throw UsageError("Plan::execute: the plan was built on device " + std::to_string(device) + " but device " +
                         std::to_string(current) + " is current");
}
}  // namespace

Plan::Plan(const PlanSpec& spec) : impl_(std::make_unique<Impl>()) {
    check_environment();  // a bad switch is refused here, not at the first launch that reads it
    Impl& im = *impl_;
    // make() with the device memory it allocates counted (device_buffer.hpp, Instance::external_device_bytes).
    auto make_instance = [&im] {
        const int64_t before = device_buffer_bytes();
        // A normalized problem: the variant's raw instance inside a Normalizer (normalize.hpp).
        im.instance = xcorr::make_instance(*im.variant, im.problem, im.params);
        if (!im.instance) throw CudaError(im.variant->name + ": make() returned no instance");
        const int64_t held = device_buffer_bytes() - before;
        im.workspace = size_t(held > 0 ? held : 0) + im.instance->external_device_bytes();
    };
    im.problem = problem_of(spec);
    im.reduce = spec.reduce;
    im.reduce.check(im.problem);
    if (spec.algorithm == "reference")
        throw UsageError("the reference is the float64 CPU loop (reference_cpu, reference.hpp; the reductions' in "
                         "reduce.hpp), not a GPU plan: name a variant (xcorr list) or auto");
    // The plan's GPU: its ordinal, and whether it reads pageable host memory (check_readable).
    auto attach = [&im] {
        const GpuInfo gpu = require_current_gpu();
        im.device = gpu.device;
        int pageable = 0;
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, im.device));
        im.pageable_ok = pageable != 0;
        return gpu;
    };
    if (im.reduce.kind != ReductionKind::Map) {
        // The chunks' own plans are built (and checked) inside; this plan answers for the largest.
        attach();
        im.reducer = std::make_unique<reduce::Reducer>(spec, im.problem);
        const Plan& main = im.reducer->main_plan();
        im.variant = &main.variant();
        im.params = main.params();
        im.workspace = im.reducer->workspace_bytes();
        im.reason = im.reducer->explain();
        return;
    }
    const bool is_auto = spec.algorithm == "auto";
    if (is_auto && !spec.params.empty())
        throw UsageError("auto sets its own parameters: give no parameters with algorithm auto, or name the algorithm");
    if (!is_auto) {
        // Everything a name can get wrong is refused before the GPU is needed.
        im.variant = &find_variant(spec.algorithm);
        const std::string why = refusal(*im.variant, im.problem, spec.precision, spec.window);
        if (!why.empty()) throw UsageError(why);
        im.params = im.variant->resolve(spec.params);
    }
    const GpuInfo gpu = attach();
    const int cc = gpu.cc_major * 10 + gpu.cc_minor;
    if (!is_auto) {
        if (std::string why = im.variant->gpu_refusal(cc); !why.empty()) throw UsageError(why);
        im.reason = "asked for by name";
        make_instance();
        return;
    }
    const std::vector<AutoChoice> candidates = auto_candidates(im.problem, spec.precision, gpu.name);
    if (candidates.empty())
        throw UsageError("no algorithm of this build computes " + im.problem.describe() + " with precision " +
                         spec.precision);
    // A variant may refuse a problem in make() (a size its kernel cannot take): the next one is tried.
    std::string refused;
    for (const AutoChoice& c : candidates) {
        try {
            im.variant = &find_variant(c.algorithm);
            // A variant that does not run on this GPU (Variant::gpu_refusal) is never picked.
            if (std::string why = im.variant->gpu_refusal(cc); !why.empty()) throw UsageError(why);
            im.params = im.variant->resolve(c.params);
            make_instance();
            im.reason = c.reason + (refused.empty() ? "" : " (refused before it: " + refused + ")");
            return;
        } catch (const UsageError& e) {
            refused += (refused.empty() ? "" : "; ") + c.algorithm + ": " + e.what();
        }
    }
    throw UsageError("auto: every candidate refused " + im.problem.describe() + ": " + refused);
}

Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

void Plan::execute(const float* left, const float* right, const ReducedOutputs& out, cudaStream_t stream,
                   bool accumulate, int64_t first_right) {
    Impl& im = *impl_;
    if (!im.reducer)
        throw UsageError("Plan::execute: this plan writes maps (its spec has no reduction): pass an output array");
    const bool peaks = im.reduce.kind == ReductionKind::Peaks;
    // The outputs this reduction writes, by slot (a plan has one kind, so a slot is always one array).
    const void* given[4] = {out.value, peaks ? (const void*)out.shift : out.index,
                            peaks ? (const void*)out.subpixel : out.sum, peaks ? nullptr : out.sumsq};
    const char* const names[4] = {"value", peaks ? "shift" : "index", peaks ? "subpixel" : "sum", "sumsq"};
    if (!left || !right || !given[0] || !given[1] || (peaks && !given[2]))
        throw UsageError("Plan::execute: a null device pointer");
    if (!peaks && im.reduce.stats && (!out.sum || !out.sumsq))
        throw UsageError("Plan::execute: a maximum over the rights with stats needs the sum and sumsq arrays");
    if (!peaks && !im.reduce.stats && (out.sum || out.sumsq))
        throw UsageError("Plan::execute: sum and sumsq were given to a plan without stats");
    if (peaks && (accumulate || first_right != 0))
        throw UsageError("Plan::execute: accumulate and first_right belong to a maximum over the rights");
    if (first_right < 0 || first_right + rights_per_left(im.problem) > INT32_MAX)
        throw UsageError("Plan::execute: first_right must be at least 0, with every index within int32");
    check_device(im.device);
    const void* ins[2] = {left, right};
    static const char* const in_names[2] = {"left", "right"};
    check_new_pointers(ins, in_names, 2, im.checked, im.pageable_ok);
    check_new_pointers(given, names, 4, im.checked_out, im.pageable_ok);
    im.reducer->execute(left, right, out, stream, accumulate, first_right);
}

const Reduction& Plan::reduction() const { return impl_->reduce; }

int64_t Plan::reduced_elems() const {
    const Problem& p = impl_->problem;
    switch (impl_->reduce.kind) {
        case ReductionKind::Peaks: return p.out_count() * impl_->reduce.k;
        case ReductionKind::MaxOverRights: return reduced_lefts(p) * p.out_h() * p.out_w();
        default: return p.out_elems();
    }
}

void Plan::execute(const float* left, const float* right, float* out, cudaStream_t stream) {
    if (!left || !right || !out) throw UsageError("Plan::execute: a null device pointer");
    if (impl_->reducer)
        throw UsageError(std::string("Plan::execute: this plan reduces (") + impl_->reduce.describe() +
                         "): pass its ReducedOutputs, not a map");
    check_device(impl_->device);
    const void* given[3] = {left, right, out};
    static const char* const names[3] = {"left", "right", "out"};
    check_new_pointers(given, names, 3, impl_->checked, impl_->pageable_ok);
    impl_->instance->run(left, right, out, stream);
    if (impl_->instance->has_finish()) impl_->instance->finish(out, stream);
}

const Problem& Plan::problem() const { return impl_->problem; }
const std::string& Plan::algorithm() const { return impl_->variant->name; }
const Params& Plan::params() const { return impl_->params; }
const Variant& Plan::variant() const { return *impl_->variant; }
size_t Plan::workspace_bytes() const { return impl_->workspace; }
std::string Plan::explain() const {
    std::string note = normalization_note(impl_->problem.normalize);
    if (impl_->instance && impl_->instance->normalizes_in_store())
        note += "; the coefficient written in " + impl_->variant->name +
                "'s own store from the template epilogue's terms (no pass over the output)";
    return note.empty() ? impl_->reason : impl_->reason + "; " + note;
}
int Plan::device() const { return impl_->device; }
Instance& Plan::instance() {
    if (!impl_->instance)
        throw UsageError("a reduced plan runs several plans and its kernels: time Plan::execute, not an instance");
    return *impl_->instance;
}

}  // namespace xcorr
