// xcorr._xcorr: the Python binding of the plan API (xcorr/plan.hpp). Thin on purpose: shapes,
// forms, dtypes and the choice of output array are decided in Python (xcorr/_api.py); this file
// checks again what would otherwise crash (dtype, contiguity, sizes, device), moves host arrays to
// and from the GPU, and turns every C++ exception into a Python one.
//   UsageError -> ValueError, NoGpuError -> xcorr.NoGPUError, CudaError -> xcorr.CudaError (both
//   RuntimeError subclasses); anything else -> nanobind's default (RuntimeError, MemoryError).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "xcorr/auto.hpp"
#include "xcorr/batch.hpp"
#include "xcorr/core.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/gpu.hpp"
#include "xcorr/plan.hpp"
#include "xcorr/reference.hpp"
#include "xcorr/registry.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using InArray = nb::ndarray<nb::ro>;  // any DLPack or buffer-protocol array, read only
using OutArray = nb::ndarray<>;       // the output, written

cudaStream_t as_stream(uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

// The plan's device current for the duration of a call, the caller's restored afterwards
// (CuPy and PyTorch keep their own notion of the current device).
class DeviceGuard {
public:
    explicit DeviceGuard(int device) {
        XC_CUDA_CHECK(cudaGetDevice(&prev_));
        if (prev_ != device) XC_CUDA_CHECK(cudaSetDevice(device));
        else prev_ = -1;
    }
    ~DeviceGuard() {
        if (prev_ >= 0) cudaSetDevice(prev_);
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int prev_ = -1;
};

xcorr::WindowRequest window_request(const std::string& kind, const std::string& text) {
    if (kind == "mode") return xcorr::parse_mode(text, "mode");
    if (kind == "max_shift") return xcorr::parse_max_shift(text, "max_shift=");
    if (kind == "shifts") return xcorr::parse_shifts(text, "shifts=");
    throw xcorr::UsageError("unknown window kind '" + kind + "'");
}

xcorr::PlanSpec make_spec(const std::string& form, int nL, int nR, int hL, int wL, int hR, int wR,
                          const std::string& window_kind, const std::string& window_text,
                          const std::string& normalize, const std::string& precision,
                          const std::string& algorithm, const xcorr::Params& params, const std::string& reduce,
                          int k, int min_distance, const std::string& subpixel, bool stats) {
    xcorr::PlanSpec s;
    s.form = xcorr::parse_form(form);
    s.nL = nL, s.nR = nR, s.hL = hL, s.wL = wL, s.hR = hR, s.wR = wR;
    s.window = window_request(window_kind, window_text);
    s.normalize = normalize;
    s.precision = precision;
    s.algorithm = algorithm;
    s.params = params;
    // The reduction (reduce.hpp): "map" (the default), "peaks" or "max-over-rights". Its values
    // are checked against the problem when the plan is built (Reduction::check); the Python side
    // refuses the same earlier, without a GPU.
    if (reduce == "map") s.reduce.kind = xcorr::ReductionKind::Map;
    else if (reduce == "peaks") s.reduce.kind = xcorr::ReductionKind::Peaks;
    else if (reduce == "max-over-rights" || reduce == "max_over_rights") s.reduce.kind = xcorr::ReductionKind::MaxOverRights;
    else throw xcorr::UsageError("unknown reduction '" + reduce + "': map, peaks or max-over-rights");
    s.reduce.k = k;
    s.reduce.min_distance = min_distance;
    s.reduce.subpixel = xcorr::parse_subpixel(subpixel);
    s.reduce.stats = stats;
    return s;
}

// (dy0, dy1, dx0, dx1, out_count, description) of a spec's problem: no GPU needed.
nb::tuple resolve(const xcorr::PlanSpec& s) {
    // Every Python plan resolves its spec here, the reference's too (which never makes a C++ Plan):
    // a bad environment switch is refused for all of them alike, as the CLI's reference refuses it
    xcorr::check_environment();
    const xcorr::Problem p = xcorr::problem_of(s);
    const xcorr::Window w = p.shifts();
    return nb::make_tuple(w.dy0, w.dy1, w.dx0, w.dx1, p.out_count(), p.describe());
}

nb::dict choice_dict(const xcorr::AutoChoice& c) {
    nb::dict d;
    d["algorithm"] = c.algorithm;
    d["params"] = c.params;
    d["reason"] = c.reason;
    d["predicted_us"] = c.predicted_us >= 0 ? nb::cast(c.predicted_us) : nb::none();
    return d;
}

nb::list algorithm_list() {
    nb::list out;
    // Whether each runs on the current device (the plans' GPU) with this binary's architectures:
    // runs_here, and not_here saying why not (no GPU: the reason NoGPUError gives).
    std::string no_gpu;
    int cc = 0;
    try {
        xcorr::visible_gpu_count();
        int dev = 0, major = 0, minor = 0;
        XC_CUDA_CHECK(cudaGetDevice(&dev));
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        cc = major * 10 + minor;
    } catch (const xcorr::NoGpuError& e) {
        no_gpu = e.what();
    }
    for (const xcorr::Variant& v : xcorr::variants()) {
        nb::dict d;
        d["name"] = v.name;
        d["family"] = v.family;
        d["summary"] = v.summary;
        d["timed"] = v.timed;
        d["precision"] = v.precision;
        d["tolerance"] = v.tolerance;
        nb::list forms, windows;
        for (xcorr::Form f : v.forms) forms.append(xcorr::form_name(f));
        for (xcorr::WindowKind k : v.windows) windows.append(xcorr::window_kind_name(k));
        d["forms"] = forms;
        d["windows"] = windows;
        nb::dict params;
        for (const xcorr::ParamSpec& ps : v.params) {
            nb::dict p;
            p["values"] = ps.values;
            p["default"] = ps.values.at(0);
            p["help"] = ps.help;
            params[ps.name.c_str()] = p;
        }
        d["params"] = params;
        const std::string why = no_gpu.empty() ? v.gpu_refusal(cc) : no_gpu;
        d["runs_here"] = why.empty();
        d["not_here"] = why;
        out.append(d);
    }
    return out;
}

nb::dict gpu_info() {
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        cudaGetLastError();
        prev = -1;
    }
    const xcorr::GpuInfo g = xcorr::require_gpu();  // selects device 0
    if (prev > 0) XC_CUDA_CHECK(cudaSetDevice(prev));
    nb::dict d;
    d["device"] = g.device;
    d["name"] = g.name;
    d["compute_capability"] = nb::make_tuple(g.cc_major, g.cc_minor);
    d["sm_count"] = g.sm_count;
    d["sm_clock_mhz"] = g.sm_clock_mhz;
    d["memory_bytes"] = g.total_mem;
    d["l2_bytes"] = g.l2_bytes;
    d["driver_version"] = g.driver_version;
    d["runtime_version"] = g.runtime_version;
    d["cufft_version"] = g.cufft_version;
    d["built_archs"] = xcorr::built_archs();
    d["built_ptx"] = xcorr::built_ptx();
    d["version"] = XCORR_VERSION;
    return d;
}

// One array argument of execute(): where its data is and whether it must travel through a
// temporary device buffer (host memory).
struct Operand {
    const void* data = nullptr;
    bool host = false;
};

template <typename T>
const char* dtype_name() {
    if constexpr (std::is_same_v<T, float>) return "float32";
    else if constexpr (std::is_same_v<T, double>) return "float64";
    else return "int32";
}

template <typename A, typename T = float>
Operand operand(const A& a, const char* what, int64_t elems, int device) {
    if (a.dtype() != nb::dtype<T>())
        throw xcorr::UsageError(std::string(what) + " must be " + dtype_name<T>());
    if (int64_t(a.size()) != elems)
        throw xcorr::UsageError(std::string(what) + " has " + std::to_string(a.size()) + " elements, the plan needs " +
                                std::to_string(elems));
    // C-contiguous: the kernels index dense row-major stacks (size-1 dimensions may have any stride).
    int64_t expect = 1;
    for (size_t i = a.ndim(); i-- > 0;) {
        if (a.shape(i) != 1 && a.stride(i) != expect)
            throw xcorr::UsageError(std::string(what) + " is not C-contiguous");
        expect *= int64_t(a.shape(i));
    }
    const int32_t type = a.device_type();
    if (type == nb::device::cpu::value) return Operand{a.data(), true};
    if (type == nb::device::cuda::value || type == nb::device::cuda_managed::value) {
        if (a.device_id() != device)
            throw xcorr::UsageError(std::string(what) + " is on CUDA device " + std::to_string(a.device_id()) +
                                    ", the plan on device " + std::to_string(device));
        return Operand{a.data(), false};
    }
    throw xcorr::UsageError(std::string(what) + " is neither in host memory nor on a CUDA device (DLPack device type " +
                            std::to_string(type) + ")");
}

// An input's device pointer: a device array's own, or a host array's copy in `tmp` (sized for it),
// uploaded on `s` (device `dev`'s) before the call returns (copy_to_device: bounced where pageable).
const float* input_on_device(const Operand& op, xcorr::DeviceBuffer<float>& tmp, int dev, cudaStream_t s) {
    if (!op.host) return static_cast<const float*>(op.data);
    xcorr::copy_to_device(dev, tmp.get(), op.data, tmp.bytes(), s);
    return tmp.get();
}

// One output of a reduced call (OutArray or None): the device pointer the plan writes, and for a
// host array the temporary device buffer it travels through.
template <typename T>
struct Out {
    T* device = nullptr;           // what the plan writes (null: not asked for)
    T* host = nullptr;             // the caller's host array, or null
    int64_t elems = 0;
    std::unique_ptr<xcorr::DeviceBuffer<T>> buffer;

    // Allocates the temporary of a host array (GIL released), uploading what it holds first when
    // the call continues it.
    // The copies are copy_to_device / copy_to_host (batch.hpp) on device `dev`'s stream `s`.
    void stage(bool upload, int dev, cudaStream_t s) {
        if (!host) return;
        buffer = std::make_unique<xcorr::DeviceBuffer<T>>(size_t(elems));
        device = buffer->get();
        if (upload) xcorr::copy_to_device(dev, device, host, buffer->bytes(), s);
    }
    void unstage(int dev, cudaStream_t s) {
        if (host) xcorr::copy_to_host(dev, host, device, buffer->bytes(), s);
    }
};

template <typename T>
Out<T> out_operand(const OutArray& a, const char* what, int64_t elems, int device) {
    Out<T> o;
    if (!a.is_valid()) return o;
    const Operand op = operand<OutArray, T>(a, what, elems, device);
    T* p = static_cast<T*>(const_cast<void*>(op.data));
    o.elems = elems;
    if (op.host) o.host = p;
    else o.device = p;
    return o;
}

class PyPlan {
public:
    PyPlan(const xcorr::PlanSpec& spec, int device) {
        if (device < 0) {
            plan_ = std::make_unique<xcorr::Plan>(spec);
        } else {
            xcorr::visible_gpu_count();  // no GPU: NoGpuError with the reason, not a bare CUDA error later
            DeviceGuard guard(device);
            plan_ = std::make_unique<xcorr::Plan>(spec);
        }
        const xcorr::Problem& p = plan_->problem();
        left_ = p.left_elems();
        right_ = p.right_elems();
        out_ = p.out_elems();
    }

    // Zero-copy for device arrays; host arrays go through temporary device buffers, and then the
    // call waits for the result (it returns in the host array).
    void execute(const InArray& left, const InArray& right, const OutArray& out, uintptr_t stream) {
        const int dev = plan_->device();
        const Operand l = operand(left, "left", left_, dev), r = operand(right, "right", right_, dev),
                      o = operand(out, "out", out_, dev);
        const cudaStream_t s = as_stream(stream);
        nb::gil_scoped_release release;  // a host round trip can take long; device work is enqueued only
        DeviceGuard guard(dev);
        if (!l.host && !r.host && !o.host) {
            plan_->execute(static_cast<const float*>(l.data), static_cast<const float*>(r.data),
                           static_cast<float*>(const_cast<void*>(o.data)), s);
            return;
        }
        xcorr::DeviceBuffer<float> dl(l.host ? left_ : 0), dr(r.host ? right_ : 0), dout(o.host ? out_ : 0);
        const float* pl = input_on_device(l, dl, dev, s);
        const float* pr = input_on_device(r, dr, dev, s);
        float* po = static_cast<float*>(const_cast<void*>(o.data));
        plan_->execute(pl, pr, o.host ? dout.get() : po, s);
        if (o.host) xcorr::copy_to_host(dev, po, dout.get(), dout.bytes(), s);
        // The temporaries are freed on return and the host buffers are the caller's again.
        XC_CUDA_CHECK(cudaStreamSynchronize(s));
    }

    // A reduced plan's call (spec.reduce; reduce.hpp's table of outputs): peaks write value, shift
    // and subpixel; a maximum over the rights value and index, and with stats sum and sumsq. Every
    // output the plan writes must be given, the others None. Device arrays are written in place;
    // host arrays go through temporary device buffers (uploaded first where `accumulate` continues
    // what they hold) and the call then waits, as execute() does.
    void execute_reduced(const InArray& left, const InArray& right, const OutArray& value, const OutArray& shift,
                         const OutArray& subpixel, const OutArray& index, const OutArray& sum, const OutArray& sumsq,
                         uintptr_t stream, bool accumulate, int64_t first_right) {
        const xcorr::Reduction& r = plan_->reduction();
        if (r.kind == xcorr::ReductionKind::Map)
            throw xcorr::UsageError("execute_reduced: the plan computes maps (its spec has no reduction): use execute");
        const bool peaks = r.kind == xcorr::ReductionKind::Peaks;
        if (!peaks && (r.stats ? !(sum.is_valid() && sumsq.is_valid()) : (sum.is_valid() || sumsq.is_valid())))
            throw xcorr::UsageError(r.stats ? "execute_reduced: a maximum over the rights with stats writes sum and sumsq: "
                                              "give both"
                                            : "execute_reduced: sum and sumsq are written only with stats");
        if (peaks ? (!value.is_valid() || !shift.is_valid() || !subpixel.is_valid() || index.is_valid() ||
                     sum.is_valid() || sumsq.is_valid())
                  : (!value.is_valid() || !index.is_valid() || shift.is_valid() || subpixel.is_valid()))
            throw xcorr::UsageError(peaks ? "execute_reduced: peaks write value, shift and subpixel (index, sum and sumsq None)"
                                          : "execute_reduced: a maximum over the rights writes value and index (shift and "
                                            "subpixel None)");
        if (first_right < 0) throw xcorr::UsageError("execute_reduced: first_right must not be negative");
        if (accumulate && peaks) throw xcorr::UsageError("execute_reduced: accumulate continues a maximum over the rights, not peaks");
        const int dev = plan_->device();
        const int64_t n = plan_->reduced_elems();
        const Operand l = operand(left, "left", left_, dev), rr = operand(right, "right", right_, dev);
        Out<float> ov = out_operand<float>(value, "value", n, dev);
        Out<int32_t> os = out_operand<int32_t>(shift, "shift", 2 * n, dev);
        Out<float> op = out_operand<float>(subpixel, "subpixel", 2 * n, dev);
        Out<int32_t> oi = out_operand<int32_t>(index, "index", n, dev);
        Out<double> osum = out_operand<double>(sum, "sum", n, dev), osq = out_operand<double>(sumsq, "sumsq", n, dev);
        const cudaStream_t s = as_stream(stream);
        nb::gil_scoped_release release;
        DeviceGuard guard(dev);
        xcorr::DeviceBuffer<float> dl(l.host ? left_ : 0), dr(rr.host ? right_ : 0);
        const float* pl = input_on_device(l, dl, dev, s);
        const float* pr = input_on_device(rr, dr, dev, s);
        ov.stage(accumulate, dev, s), os.stage(false, dev, s), op.stage(false, dev, s), oi.stage(accumulate, dev, s);
        osum.stage(accumulate, dev, s), osq.stage(accumulate, dev, s);
        xcorr::ReducedOutputs out;
        out.value = ov.device, out.shift = os.device, out.subpixel = op.device, out.index = oi.device;
        out.sum = osum.device, out.sumsq = osq.device;
        plan_->execute(pl, pr, out, s, accumulate, first_right);
        const bool any_host = l.host || rr.host || ov.host || os.host || op.host || oi.host || osum.host || osq.host;
        ov.unstage(dev, s), os.unstage(dev, s), op.unstage(dev, s), oi.unstage(dev, s), osum.unstage(dev, s),
            osq.unstage(dev, s);
        if (any_host) XC_CUDA_CHECK(cudaStreamSynchronize(s));  // the temporaries are freed on return
    }

    // The same on raw device pointers (no DLPack): what a caller that manages its own memory uses,
    // and the floor scripts/dev/python-overhead compares the array call with.
    void execute_ptr(uintptr_t left, uintptr_t right, uintptr_t out, uintptr_t stream) {
        if (!left || !right || !out) throw xcorr::UsageError("execute_ptr: a null pointer");
        DeviceGuard guard(plan_->device());
        plan_->execute(reinterpret_cast<const float*>(left), reinterpret_cast<const float*>(right),
                       reinterpret_cast<float*>(out), as_stream(stream));
    }

    // A reduced plan's call on raw device pointers (0: an output it does not write): the fast path
    // of PyTorch and CuPy arrays, as execute_ptr is the maps'. Plan::execute checks which outputs
    // the reduction needs and that each pointer is readable by the GPU.
    void execute_reduced_ptr(uintptr_t left, uintptr_t right, uintptr_t value, uintptr_t shift, uintptr_t subpixel,
                             uintptr_t index, uintptr_t sum, uintptr_t sumsq, uintptr_t stream, bool accumulate,
                             int64_t first_right) {
        xcorr::ReducedOutputs o;
        o.value = reinterpret_cast<float*>(value);
        o.shift = reinterpret_cast<int32_t*>(shift);
        o.subpixel = reinterpret_cast<float*>(subpixel);
        o.index = reinterpret_cast<int32_t*>(index);
        o.sum = reinterpret_cast<double*>(sum);
        o.sumsq = reinterpret_cast<double*>(sumsq);
        DeviceGuard guard(plan_->device());
        plan_->execute(reinterpret_cast<const float*>(left), reinterpret_cast<const float*>(right), o,
                       as_stream(stream), accumulate, first_right);
    }

    // Milliseconds of `calls` back-to-back execute()s from C++ (CUDA events on `stream`): the
    // bare execute that the Python call's overhead is measured against.
    double time_execute_ptr(uintptr_t left, uintptr_t right, uintptr_t out, uintptr_t stream, int calls) {
        if (!left || !right || !out) throw xcorr::UsageError("time_execute_ptr: a null pointer");
        if (calls <= 0) throw xcorr::UsageError("time_execute_ptr: calls must be positive");
        nb::gil_scoped_release release;
        DeviceGuard guard(plan_->device());
        const cudaStream_t s = as_stream(stream);
        cudaEvent_t start = nullptr, stop = nullptr;
        XC_CUDA_CHECK(cudaEventCreate(&start));
        cudaError_t err = cudaEventCreate(&stop);
        float ms = 0;
        if (err == cudaSuccess) err = cudaEventRecord(start, s);
        for (int i = 0; err == cudaSuccess && i < calls; ++i)
            plan_->execute(reinterpret_cast<const float*>(left), reinterpret_cast<const float*>(right),
                           reinterpret_cast<float*>(out), s);
        if (err == cudaSuccess) err = cudaEventRecord(stop, s);
        if (err == cudaSuccess) err = cudaEventSynchronize(stop);
        if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, start, stop);
        cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
        XC_CUDA_CHECK(err);
        return ms;
    }

    // One device's part of max_over_rights(devices=): the maximum over a run of host rights,
    // streamed through this plan (a batch of its rights_per_left rights a call) and `last` (the
    // shorter last batch, or null), the left uploaded once, the running maps kept on the device
    // and the next batch's upload on a stream of its own overlapping the current batch's work, so
    // that the device memory is the left, the maps and two batches whatever the count of rights.
    // `rights` holds whole batches of this plan, then last's; the maps continue value/index/sum/
    // sumsq (host arrays) where `accumulate`, the rights numbered from first_right. The GIL is
    // released throughout: one Python thread per device runs these side by side.
    void max_over_rights_slice(PyPlan* last, const InArray& left, const InArray& rights, const OutArray& value,
                               const OutArray& index, const OutArray& sum, const OutArray& sumsq, bool accumulate,
                               int64_t first_right) {
        const xcorr::Reduction& r = plan_->reduction();
        if (r.kind != xcorr::ReductionKind::MaxOverRights)
            throw xcorr::UsageError("max_over_rights_slice: the plan is not a maximum over the rights");
        const int dev = plan_->device();
        const xcorr::Problem& p = plan_->problem();
        const int64_t per_call = xcorr::rights_per_left(p);
        const int64_t unit = p.right_elems() / per_call;  // a right's elements (n-to-mn: a group's)
        const int64_t n = plan_->reduced_elems();
        int64_t last_units = 0;
        if (last) {
            const xcorr::Problem& q = last->plan_->problem();
            last_units = xcorr::rights_per_left(q);
            if (last->plan_->device() != dev || last->plan_->reduction().kind != r.kind ||
                last->plan_->reduction().stats != r.stats || last->left_ != left_ || last->plan_->reduced_elems() != n ||
                q.right_elems() / last_units != unit)
                throw xcorr::UsageError("max_over_rights_slice: the last batch's plan differs from the batch's "
                                        "(device, left, maps or right size)");
        }
        const int64_t total = int64_t(rights.size());
        if (total < last_units * unit || (total - last_units * unit) % (per_call * unit) != 0)
            throw xcorr::UsageError("max_over_rights_slice: " + std::to_string(total) +
                                    " right elements are not whole batches of the plans");
        const int64_t full = (total - last_units * unit) / (per_call * unit);
        if (full + (last ? 1 : 0) == 0) throw xcorr::UsageError("max_over_rights_slice: no rights");
        if (first_right < 0 || first_right + full * per_call + last_units > INT32_MAX)
            throw xcorr::UsageError("max_over_rights_slice: first_right must be at least 0, with every index "
                                    "within int32");
        const Operand l = operand(left, "left", left_, dev);
        const Operand rr = operand(rights, "rights", total, dev);
        Out<float> ov = out_operand<float>(value, "value", n, dev);
        Out<int32_t> oi = out_operand<int32_t>(index, "index", n, dev);
        Out<double> osum = out_operand<double>(sum, "sum", n, dev), osq = out_operand<double>(sumsq, "sumsq", n, dev);
        if (!l.host || !rr.host || !ov.host || !oi.host || (r.stats && (!osum.host || !osq.host)) ||
            (!r.stats && (sum.is_valid() || sumsq.is_valid())))
            throw xcorr::UsageError("max_over_rights_slice: host arrays only: left, rights, value and index, and "
                                    "sum and sumsq with stats (only then)");
        // The calls: (plan, first element of its rights, rights per left).
        struct Call {
            xcorr::Plan* plan;
            int64_t offset, units;
        };
        std::vector<Call> calls;
        for (int64_t b = 0; b < full; ++b) calls.push_back(Call{plan_.get(), b * per_call * unit, per_call});
        if (last) calls.push_back(Call{last->plan_.get(), full * per_call * unit, last_units});
        const int64_t batch_elems = (full ? per_call : last_units) * unit;
        const float* host_rights = static_cast<const float*>(rr.data);

        nb::gil_scoped_release release;
        DeviceGuard guard(dev);
        // Every device buffer is freed inside the guard, on the plan's device.
        const size_t sums = r.stats ? size_t(n) : 0;
        xcorr::DeviceBuffer<float> dl{size_t(left_)}, rb0{size_t(batch_elems)},
            rb1{calls.size() > 1 ? size_t(batch_elems) : size_t(0)}, dv{size_t(n)};
        xcorr::DeviceBuffer<int32_t> di{size_t(n)};
        xcorr::DeviceBuffer<double> ds{sums}, dq{sums};
        float* rb[2] = {rb0.get(), rb1.get()};
        // Two pairs of events (a batch slot uploaded, a slot's work done), then the streams (work,
        // uploads), declared after the buffers: destroyed first, each after the work in it is done.
        xcorr::Event up[2], done[2];
        xcorr::Stream work, uploads;
        const cudaStream_t cs = work.s, us = uploads.s;
        xcorr::copy_to_device(dev, dl.get(), l.data, dl.bytes(), cs);
        // The running maps: the host arrays' (uploaded where the call continues them) on the device.
        // copy_to_host writes a fresh result's pages with several threads (its first touch).
        auto maps = [&](auto& o, auto& buffer, cudaMemcpyKind kind) {
            if (!o.host) return;
            o.device = buffer.get();
            if (kind == cudaMemcpyDeviceToHost)
                xcorr::copy_to_host(dev, o.host, o.device, buffer.bytes(), cs);
            else if (accumulate)
                xcorr::copy_to_device(dev, o.device, o.host, buffer.bytes(), cs);
        };
        maps(ov, dv, cudaMemcpyHostToDevice), maps(oi, di, cudaMemcpyHostToDevice);
        maps(osum, ds, cudaMemcpyHostToDevice), maps(osq, dq, cudaMemcpyHostToDevice);
        auto upload = [&](size_t i) {
            const int slot = int(i % 2);
            if (i >= 2) XC_CUDA_CHECK(cudaStreamWaitEvent(us, done[slot].e, 0));  // call i - 2 is done with it
            XC_CUDA_CHECK(cudaMemcpyAsync(rb[slot], host_rights + calls[i].offset,
                                          size_t(calls[i].units * unit) * sizeof(float), cudaMemcpyHostToDevice, us));
            XC_CUDA_CHECK(cudaEventRecord(up[slot].e, us));
        };
        xcorr::ReducedOutputs out;
        out.value = ov.device, out.index = oi.device, out.sum = osum.device, out.sumsq = osq.device;
        upload(0);
        int64_t first = first_right;
        for (size_t i = 0; i < calls.size(); ++i) {
            const int slot = int(i % 2);
            XC_CUDA_CHECK(cudaStreamWaitEvent(cs, up[slot].e, 0));
            calls[i].plan->execute(dl.get(), rb[slot], out, cs, accumulate || i > 0, first);
            XC_CUDA_CHECK(cudaEventRecord(done[slot].e, cs));
            first += calls[i].units;
            // Enqueued after call i, so that the host's wait for a pageable copy's staging (call
            // i - 1 done with the slot) overlaps call i on the GPU.
            if (i + 1 < calls.size()) upload(i + 1);
        }
        maps(ov, dv, cudaMemcpyDeviceToHost), maps(oi, di, cudaMemcpyDeviceToHost);
        maps(osum, ds, cudaMemcpyDeviceToHost), maps(osq, dq, cudaMemcpyDeviceToHost);
        XC_CUDA_CHECK(cudaStreamSynchronize(cs));
    }

    const xcorr::Plan& plan() const { return *plan_; }

private:
    std::unique_ptr<xcorr::Plan> plan_;
    int64_t left_ = 0, right_ = 0, out_ = 0;
};

// The spec's problem, its stacks' and output's element counts checked against the arrays' sizes.
xcorr::Problem checked_problem(const xcorr::PlanSpec& s, size_t left, size_t right, size_t out, const char* what) {
    const xcorr::Problem p = xcorr::problem_of(s);
    if (int64_t(left) != p.left_elems() || int64_t(right) != p.right_elems() || int64_t(out) != p.out_elems())
        throw xcorr::UsageError(std::string(what) + ": array sizes do not match the problem " + p.describe());
    return p;
}

}  // namespace

NB_MODULE(_xcorr, m) {
    m.doc() = "The C++ plan API of xcorr (use the package xcorr, not this module)";
    m.attr("__version__") = XCORR_VERSION;  // meson.build's (scripts/version)

    // RuntimeError subclasses, so that `except RuntimeError` still catches them.
    nb::exception<xcorr::NoGpuError>(m, "NoGPUError", PyExc_RuntimeError);
    nb::exception<xcorr::CudaError>(m, "CudaError", PyExc_RuntimeError);
    // A problem the GPU's memory does not hold (the library's UsageErrors that xcorr::out_of_memory
    // recognizes: "not enough GPU memory ...", most naming what the plan needs and what is free): a
    // MemoryError, as CuPy's own out-of-memory error is, and still a ValueError, as every UsageError.
    static PyObject* gpu_memory_error = PyErr_NewExceptionWithDoc(
        "xcorr._xcorr.GPUMemoryError",
        "The GPU's memory does not hold the problem (a MemoryError and a ValueError); nothing was written.",
        nb::make_tuple(nb::handle(PyExc_MemoryError), nb::handle(PyExc_ValueError)).ptr(), nullptr);
    if (!gpu_memory_error) throw nb::python_error();
    m.attr("GPUMemoryError") = nb::handle(gpu_memory_error);
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const xcorr::UsageError& e) {
            PyErr_SetString(xcorr::out_of_memory(e) ? gpu_memory_error : PyExc_ValueError, e.what());
        }
    });
    // The translation above without a GPU (tests/test_python_package.py): raises the UsageError
    // the library would throw with this text.
    m.def("_raise_usage_error", [](const std::string& text) { throw xcorr::UsageError(text); }, "text"_a);

    nb::class_<xcorr::PlanSpec>(m, "PlanSpec");
    m.def("spec", &make_spec, "form"_a, "nL"_a, "nR"_a, "hL"_a, "wL"_a, "hR"_a, "wR"_a, "window_kind"_a,
          "window_text"_a, "normalize"_a, "precision"_a, "algorithm"_a, "params"_a, "reduce"_a = "map", "k"_a = 1,
          "min_distance"_a = 0, "subpixel"_a = "parabolic", "stats"_a = false,
          "A checked PlanSpec (window text parsed as xcorr run parses it); reduce \"map\", \"peaks\" or "
          "\"max-over-rights\" with its k, min_distance, subpixel (\"none\", \"parabolic\", \"gaussian\") and stats.");
    m.def("resolve", &resolve, "spec"_a,
          "(dy0, dy1, dx0, dx1, out_count, description) of the spec's problem; no GPU needed.");
    // The library's counting rules, so that tests/test_rules.py holds their one Python mirror
    // (python/xcorr/_rules.py, also the build's: scripts/auto-tables-cpp) to them.
    m.def("transform_need", &xcorr::transform_need, "s0"_a, "s1"_a, "m"_a, "n"_a,
          "Points of one dimension of fft's transform for shifts s0..s1 (0 where none overlaps).");
    m.def("overlap_total", [](int s0, int s1, int len_l, int len_r) {
        return int64_t(xcorr::Window{s0, s1, 0, 0}.fmas(len_l, 1, len_r, 1));
    }, "s0"_a, "s1"_a, "m"_a, "n"_a, "Sum of one dimension's overlap lengths over shifts s0..s1 (Window::fmas).");
    m.def("work_units", [](const xcorr::PlanSpec& s, bool fft, int tile_dy, int tile_dx) {
        return xcorr::work_units(xcorr::problem_of(s), fft, tile_dy, tile_dx);
    }, "spec"_a, "fft"_a, "tile_dy"_a = 1, "tile_dx"_a = 1, "auto's cost-model work units of the spec's problem.");
    m.def("auto_candidates", [](const xcorr::PlanSpec& s, const std::string& gpu_name) {
        const xcorr::Problem p = xcorr::problem_of(s);
        nb::list out;
        for (const xcorr::AutoChoice& c : xcorr::auto_candidates(p, s.precision, gpu_name)) out.append(choice_dict(c));
        return out;
    }, "spec"_a, "gpu_name"_a, "auto's candidates for the spec's problem on the GPU named gpu_name, best first.");
    m.def("normalization_note", [](const std::string& name) { return xcorr::normalization_note(xcorr::parse_normalize(name)); },
          "name"_a, "What a plan normalized by `name` runs around its raw correlation (\"\" for none).");
    m.def("algorithms", &algorithm_list, "Every registered algorithm variant.");
    m.def("gpu_info", &gpu_info, "Device 0 as the harness sees it; raises NoGPUError without a usable GPU.");
    m.def("built_archs", &xcorr::built_archs);
    m.def("reference_cpu", [](const xcorr::PlanSpec& s, nb::ndarray<const float, nb::c_contig, nb::device::cpu> left,
                              nb::ndarray<const float, nb::c_contig, nb::device::cpu> right,
                              nb::ndarray<double, nb::c_contig, nb::device::cpu> out) {
        const xcorr::Problem p = checked_problem(s, left.size(), right.size(), out.size(), "reference_cpu");
        nb::gil_scoped_release release;
        xcorr::reference_cpu(p, left.data(), right.data(), out.data());
    }, "spec"_a, "left"_a, "right"_a, "out"_a, "The harness's float64 CPU reference (tests compare the NumPy one with it).");

    m.def("run_batch", [](const xcorr::PlanSpec& s, nb::ndarray<const float, nb::c_contig, nb::device::cpu> left,
                          nb::ndarray<const float, nb::c_contig, nb::device::cpu> right,
                          nb::ndarray<float, nb::c_contig, nb::device::cpu> out, const std::string& devices,
                          int64_t max_outputs, const std::string& split) {
        checked_problem(s, left.size(), right.size(), out.size(), "run_batch");
        xcorr::BatchOptions o;
        if (!devices.empty()) o.devices = xcorr::parse_devices(devices, true, "devices=");
        o.max_outputs = max_outputs;
        o.split = xcorr::parse_split(split);
        xcorr::BatchReport r;
        {
            nb::gil_scoped_release release;
            r = xcorr::run_batch(s, left.data(), right.data(), out.data(), o);
        }
        nb::list pieces, seconds;
        for (const xcorr::Piece& c : r.pieces)
            pieces.append(nb::make_tuple(o.devices.empty() ? -1 : o.devices[size_t(c.device)], c.out0,
                                         c.problem.out_count(), r.algorithms[size_t(c.device)]));
        for (size_t d = 0; d < r.seconds.size(); ++d) {
            nb::dict t;
            t["device"] = o.devices.empty() ? -1 : o.devices[d];
            t["start"] = r.seconds[d].start;
            t["setup"] = r.seconds[d].setup;
            t["pipeline"] = r.seconds[d].pipeline;
            t["teardown"] = r.seconds[d].teardown;
            t["finish"] = r.seconds[d].finish;
            t["direct"] = bool(r.direct[d]);
            t["reused"] = bool(r.reused[d]);
            t["split"] = xcorr::split_name(r.split[d]);
            seconds.append(t);
        }
        return nb::make_tuple(pieces, seconds);
    }, "spec"_a, "left"_a, "right"_a, "out"_a, "devices"_a, "max_outputs"_a, "split"_a = "auto",
       "The whole output from host stacks, split across `devices` (\"all\", \"0,1\"; \"\": the current one) in "
       "pieces of at most max_outputs matrices (0: what fits), n-to-m runs cut as `split` says (\"auto\", "
       "\"lefts\", \"blocks\"): ([(device, first output, outputs, algorithm) per "
       "piece], [{device, start, setup, pipeline, teardown, finish} seconds per device, with direct: whether the device downloaded "
       "straight into a page-locked out, reused: whether it reused what it kept from the last call, split: how its run was cut]).");
    m.def("empty_pinned", [](size_t count) {
        xcorr::visible_gpu_count();  // no GPU: NoGpuError with the reason, not a bare CUDA error later
        float* p = nullptr;
        XC_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p), std::max<size_t>(count, 1) * sizeof(float)));
        nb::capsule owner(p, [](void* q) noexcept { cudaFreeHost(q); });
        return nb::ndarray<nb::numpy, float, nb::ndim<1>>(p, {count}, owner);
    }, "count"_a, "A NumPy float32 array of `count` elements in page-locked host memory (cudaMallocHost).");
    m.def("release_batch_buffers", &xcorr::release_batch_buffers,
          "Frees the plans, device buffers and pinned host staging run_batch keeps between calls.");
    m.def("batch_buffer_bytes", &xcorr::batch_buffer_bytes, "Bytes of pinned host memory run_batch keeps now.");
    m.def("parse_devices", [](const std::string& text, const std::string& what) {
        return xcorr::parse_devices(text, true, what);
    }, "text"_a, "what"_a = "--gpus",
          "CUDA device indices of \"all\" or \"0,1\", checked against the devices visible (errors name `what`).");
    nb::class_<PyPlan>(m, "Plan")
        // GIL released: building a plan (cuFFT plans, workspace) takes long, and max_over_rights(devices=)
        // builds one per GPU from a thread each
        .def(nb::init<const xcorr::PlanSpec&, int>(), "spec"_a, "device"_a = -1, nb::call_guard<nb::gil_scoped_release>())
        .def("execute", &PyPlan::execute, "left"_a, "right"_a, "out"_a, "stream"_a = 0)
        .def("execute_reduced", &PyPlan::execute_reduced, "left"_a, "right"_a, "value"_a.none(), "shift"_a.none(),
             "subpixel"_a.none(), "index"_a.none(), "sum"_a.none(), "sumsq"_a.none(), "stream"_a = 0,
             "accumulate"_a = false, "first_right"_a = 0,
             "A reduced plan's call: the outputs of reduce.hpp's table that it writes (others None); host arrays are "
             "staged through device buffers (uploaded first with accumulate).")
        .def_prop_ro("reduced_elems", [](const PyPlan& p) { return p.plan().reduced_elems(); })
        .def("execute_ptr", &PyPlan::execute_ptr, "left"_a, "right"_a, "out"_a, "stream"_a = 0)
        .def("max_over_rights_slice", &PyPlan::max_over_rights_slice, "last"_a.none(), "left"_a, "rights"_a,
             "value"_a, "index"_a, "sum"_a.none(), "sumsq"_a.none(), "accumulate"_a, "first_right"_a,
             "One device's part of max_over_rights(devices=): host rights streamed through this plan's batches "
             "and `last`'s shorter one (or None), the running maps on the device, then written to the host "
             "arrays (continued where accumulate); GIL released.")
        .def("execute_reduced_ptr", &PyPlan::execute_reduced_ptr, "left"_a, "right"_a, "value"_a, "shift"_a,
             "subpixel"_a, "index"_a, "sum"_a, "sumsq"_a, "stream"_a, "accumulate"_a, "first_right"_a)
        .def("time_execute_ptr", &PyPlan::time_execute_ptr, "left"_a, "right"_a, "out"_a, "stream"_a, "calls"_a)
        .def_prop_ro("algorithm", [](const PyPlan& p) { return p.plan().algorithm(); })
        .def_prop_ro("params", [](const PyPlan& p) { return p.plan().params(); })
        .def_prop_ro("workspace_bytes", [](const PyPlan& p) { return p.plan().workspace_bytes(); })
        .def_prop_ro("device", [](const PyPlan& p) { return p.plan().device(); })
        .def_prop_ro("description", [](const PyPlan& p) { return p.plan().problem().describe(); })
        .def("explain", [](const PyPlan& p) { return p.plan().explain(); });
}
