// The C API (xcorr.h) over Plan: every entry point catches everything, so no exception crosses
// into C, and turns it into a status and this thread's last error message.
#include "xcorr/xcorr.h"
#include "xcorr/batch.hpp"

#include <exception>
#include <new>
#include <string>

#include "xcorr/plan.hpp"
#include "xcorr/registry.hpp"

struct xcorr_plan {
    xcorr::Plan plan;
    std::string algorithm, explain;
};

namespace {

thread_local std::string last_error;

xcorr_status fail(xcorr_status s, const std::string& what) {
    last_error = what;
    return s;
}

// Runs f, mapping the library's exceptions onto statuses.
template <typename F>
xcorr_status guarded(F&& f) {
    try {
        f();
        return XCORR_OK;
    } catch (const xcorr::UsageError& e) {
        return fail(XCORR_ERROR_USAGE, e.what());
    } catch (const xcorr::NoGpuError& e) {
        return fail(XCORR_ERROR_NO_GPU, e.what());
    } catch (const xcorr::CudaError& e) {
        return fail(XCORR_ERROR_CUDA, e.what());
    } catch (const std::bad_alloc&) {
        return fail(XCORR_ERROR_USAGE, "out of host memory");
    } catch (const std::exception& e) {
        return fail(XCORR_ERROR_INTERNAL, e.what());
    } catch (...) {
        return fail(XCORR_ERROR_INTERNAL, "unknown error");
    }
}

xcorr::Params parse_params(const char* text) {
    xcorr::Params out;
    if (!text) return out;
    std::string s = text, item;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t comma = s.find(',', start);
        item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) {
            const size_t eq = item.find('=');
            if (eq == std::string::npos || eq == 0)
                throw xcorr::UsageError("params takes key=value,key=value, got '" + item + "'");
            out[item.substr(0, eq)] = item.substr(eq + 1);
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

xcorr::PlanSpec to_spec(const xcorr_spec& c) {
    xcorr::PlanSpec s;
    if (c.form < 0 || c.form > 3) throw xcorr::UsageError("form must be 0..3 (xcorr_form), got " + std::to_string(c.form));
    s.form = xcorr::Form(c.form);
    s.nL = c.n_left, s.nR = c.n_right;
    s.hL = c.h_left, s.wL = c.w_left, s.hR = c.h_right, s.wR = c.w_right;
    const int windows = (c.mode != nullptr) + (c.max_shift != nullptr) + (c.shifts != nullptr);
    if (windows > 1) throw xcorr::UsageError("mode, max_shift and shifts all choose the window: set at most one");
    if (c.mode) s.window = xcorr::parse_mode(c.mode, "mode");
    if (c.max_shift) s.window = xcorr::parse_max_shift(c.max_shift, "max_shift");
    if (c.shifts) s.window = xcorr::parse_shifts(c.shifts, "shifts");
    if (c.normalize) s.normalize = c.normalize;
    if (c.precision) s.precision = c.precision;
    if (c.algorithm) s.algorithm = c.algorithm;
    s.params = parse_params(c.params);
    const std::string reduce = c.reduce ? c.reduce : "map";
    if (reduce == "peaks") s.reduce.kind = xcorr::ReductionKind::Peaks;
    else if (reduce == "max-over-rights") s.reduce.kind = xcorr::ReductionKind::MaxOverRights;
    else if (reduce != "map")
        throw xcorr::UsageError("unknown reduce '" + reduce + "' (known: map, peaks, max-over-rights)");
    s.reduce.k = c.k;
    s.reduce.min_distance = c.min_distance;
    if (c.subpixel) s.reduce.subpixel = xcorr::parse_subpixel(c.subpixel);
    if (c.stats != 0 && c.stats != 1) throw xcorr::UsageError("stats must be 0 or 1");
    s.reduce.stats = c.stats != 0;
    return s;
}

}  // namespace

extern "C" {

void xcorr_spec_init(xcorr_spec* spec) {
    if (!spec) return;
    *spec = xcorr_spec{};
    spec->form = XCORR_ONE_TO_ONE;
    spec->n_left = spec->n_right = 1;
    spec->k = 1;
}

xcorr_status xcorr_plan_create(const xcorr_spec* spec, xcorr_plan** plan) {
    if (!plan) return fail(XCORR_ERROR_USAGE, "xcorr_plan_create: plan is NULL");
    *plan = nullptr;
    if (!spec) return fail(XCORR_ERROR_USAGE, "xcorr_plan_create: spec is NULL");
    return guarded([&] {
        xcorr::Plan p(to_spec(*spec));
        std::string algorithm = p.algorithm(), explain = p.explain();
        *plan = new xcorr_plan{std::move(p), std::move(algorithm), std::move(explain)};
    });
}

xcorr_status xcorr_plan_execute(xcorr_plan* plan, const float* left, const float* right, float* out, void* stream) {
    if (!plan) return fail(XCORR_ERROR_USAGE, "xcorr_plan_execute: plan is NULL");
    return guarded([&] { plan->plan.execute(left, right, out, static_cast<cudaStream_t>(stream)); });
}

xcorr_status xcorr_plan_execute_peaks(xcorr_plan* plan, const float* left, const float* right, float* value,
                                      int32_t* shift, float* subpixel, void* stream) {
    if (!plan) return fail(XCORR_ERROR_USAGE, "xcorr_plan_execute_peaks: plan is NULL");
    return guarded([&] {
        if (plan->plan.reduction().kind != xcorr::ReductionKind::Peaks)
            throw xcorr::UsageError("xcorr_plan_execute_peaks: the plan's reduce is not peaks");
        xcorr::ReducedOutputs o;
        o.value = value, o.shift = shift, o.subpixel = subpixel;
        plan->plan.execute(left, right, o, static_cast<cudaStream_t>(stream));
    });
}

xcorr_status xcorr_plan_execute_max(xcorr_plan* plan, const float* left, const float* right, float* value,
                                    int32_t* index, double* sum, double* sumsq, int accumulate, int64_t first_right,
                                    void* stream) {
    if (!plan) return fail(XCORR_ERROR_USAGE, "xcorr_plan_execute_max: plan is NULL");
    return guarded([&] {
        if (plan->plan.reduction().kind != xcorr::ReductionKind::MaxOverRights)
            throw xcorr::UsageError("xcorr_plan_execute_max: the plan's reduce is not max-over-rights");
        xcorr::ReducedOutputs o;
        o.value = value, o.index = index, o.sum = sum, o.sumsq = sumsq;
        plan->plan.execute(left, right, o, static_cast<cudaStream_t>(stream), accumulate != 0, first_right);
    });
}

xcorr_status xcorr_plan_reduced_shape(const xcorr_plan* plan, int64_t* count, int64_t* elems) {
    if (!plan || !count || !elems) return fail(XCORR_ERROR_USAGE, "xcorr_plan_reduced_shape: NULL argument");
    const xcorr::Plan& p = plan->plan;
    *count = p.reduction().kind == xcorr::ReductionKind::MaxOverRights ? xcorr::reduced_lefts(p.problem())
                                                                         : p.out_count();
    *elems = p.reduced_elems();
    return XCORR_OK;
}

void xcorr_plan_destroy(xcorr_plan* plan) { delete plan; }

xcorr_status xcorr_run_batch(const xcorr_spec* spec, const float* left, const float* right, float* out,
                             const int* devices, int n_devices, int64_t max_outputs) {
    if (!spec || !left || !right || !out) return fail(XCORR_ERROR_USAGE, "xcorr_run_batch: NULL argument");
    if (n_devices < 0 || (n_devices > 0 && !devices))
        return fail(XCORR_ERROR_USAGE, "xcorr_run_batch: n_devices must be 0 or the length of devices");
    return guarded([&] {
        xcorr::BatchOptions o;
        o.devices.assign(devices, devices + n_devices);
        o.max_outputs = max_outputs;
        xcorr::run_batch(to_spec(*spec), left, right, out, o);
    });
}

void xcorr_release_batch_buffers(void) { xcorr::release_batch_buffers(); }

xcorr_status xcorr_plan_workspace_bytes(const xcorr_plan* plan, size_t* bytes) {
    if (!plan || !bytes) return fail(XCORR_ERROR_USAGE, "xcorr_plan_workspace_bytes: NULL argument");
    *bytes = plan->plan.workspace_bytes();
    return XCORR_OK;
}

xcorr_status xcorr_plan_out_shape(const xcorr_plan* plan, int64_t* count, int64_t* h, int64_t* w) {
    if (!plan || !count || !h || !w) return fail(XCORR_ERROR_USAGE, "xcorr_plan_out_shape: NULL argument");
    *count = plan->plan.out_count();
    *h = plan->plan.out_h();
    *w = plan->plan.out_w();
    return XCORR_OK;
}

const char* xcorr_plan_algorithm(const xcorr_plan* plan) { return plan ? plan->algorithm.c_str() : ""; }
const char* xcorr_plan_explain(const xcorr_plan* plan) { return plan ? plan->explain.c_str() : ""; }
const char* xcorr_last_error(void) { return last_error.c_str(); }

}  // extern "C"
