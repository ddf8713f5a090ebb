#include "xcorr/registry.hpp"

#include <algorithm>

#include "xcorr/gpu.hpp"

namespace xcorr {
namespace {
std::vector<Variant>& storage() {
    static std::vector<Variant> v;  // constructed on first use: safe from any static initialiser
    return v;
}
std::string join(const std::vector<std::string>& items) {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
    return s;
}
}  // namespace

int register_variant(Variant v) {
    auto& all = storage();
    for (const auto& e : all)
        if (e.name == v.name) throw std::logic_error("variant registered twice: " + v.name);
    all.push_back(std::move(v));
    std::sort(all.begin(), all.end(), [](const Variant& a, const Variant& b) { return a.name < b.name; });
    return int(all.size());
}

const std::vector<Variant>& variants() { return storage(); }

const Variant& find_variant(const std::string& name) {
    std::vector<std::string> names;
    for (const auto& v : storage()) {
        if (v.name == name) return v;
        names.push_back(v.name);
    }
    throw UsageError("unknown algorithm '" + name + "' (known: reference, " + join(names) + ")");
}

std::string Variant::gpu_refusal(int cc) const {
    auto text = [](int c) { return std::to_string(c / 10) + "." + std::to_string(c % 10); };
    const std::string here = " (this GPU: " + text(cc) + ")";
    if (arch_cc && cc != arch_cc)
        return name + ": its kernel is built for compute capability " + text(arch_cc) + " only (sm_" +
               std::to_string(arch_cc) + "a)" + here;
    if (arch_cc && !sass_for(arch_cc))
        return name + ": this binary holds no sm_" + std::to_string(arch_cc) + "a code (built for " + built_archs() +
               "); rebuild with -Dgpu_arch=" + text(arch_cc);
    if (cc < min_cc) return name + ": needs compute capability " + text(min_cc) + " or newer" + here;
    if (!runs_binary(cc))
        return name + ": this binary holds no code for compute capability " + text(cc) + " (built for " +
               built_archs() + (built_ptx().empty() ? "" : ", PTX " + built_ptx()) + ")";
    return "";
}

bool Variant::supports(Form f) const { return std::find(forms.begin(), forms.end(), f) != forms.end(); }

bool Variant::supports_window(const Problem& p) const {
    return std::any_of(windows.begin(), windows.end(), [&](WindowKind k) { return window_is(k, p); });
}

std::string Variant::windows_text(const char* separator) const {
    std::string s;
    for (WindowKind k : windows) s += (s.empty() ? "" : separator) + std::string(window_kind_name(k));
    return s;
}

std::string Variant::window_refusal(const Problem& p, const WindowRequest& asked) const {
    const Window w = p.shifts();
    const std::string extent = WindowRequest{WindowKind::Shifts, w, asked.lags && w.dy0 == 0 && w.dy1 == 0}.describe();
    const std::string text = asked.describe();
    return name + " does not compute the " + text + " window" + (text == extent ? "" : " (" + extent + ")") +
           " of this problem, only: " + windows_text();
}

AxisFit fit_axis(int s0, int s1, int hl, int hr) {
    AxisFit f;
    f.lo = std::max(s0, -(hr - 1));
    f.hi = std::min(s1, hl - 1);
    if (f.lo > f.hi) return f;  // no shift of the window overlaps: the output is all zeros
    f.l0 = std::max(0, f.lo);
    f.ln = std::min(hl, f.hi + hr) - f.l0;
    f.r0 = std::max(0, -f.hi);
    f.rn = std::min(hr, hl - f.lo) - f.r0;
    // max(ln - lo', hi' + rn) for the cropped parts' shifts lo' = lo + r0 - l0, hi' = hi + r0 - l0.
    f.need = std::max(f.l0 + f.ln - f.r0 - f.lo, f.hi + f.r0 + f.rn - f.l0);
    return f;
}

// 0 where no shift overlaps (one rule for every copy, where copies had said 0 or 1): the output is all
// zeros, which fft writes without making any transform (50_fft.cu: fy_.empty()), so the window needs
// no points and max_transform never refuses it; auto's work_units counts such a problem as one unit.
int transform_need(int s0, int s1, int hl, int hr) {
    const AxisFit f = fit_axis(s0, s1, hl, hr);
    return f.empty() ? 0 : f.need;
}

std::string Variant::shape_refusal(const Problem& p) const {
    if (signals_only && (p.hL != 1 || p.hR != 1))
        return name + " computes one-dimensional signals only (1 x n matrices), not " + p.describe();
    const int64_t shifts = p.out_h() * p.out_w();
    if (max_shifts > 0 && shifts > max_shifts)
        return name + ": " + p.describe() + " has " + std::to_string(shifts) + " shifts per pair (at most " +
               std::to_string(max_shifts) + ": it is meant for small windows)";
    return transform_refusal(p);
}

std::string Variant::transform_refusal(const Problem& p) const {
    if (max_transform == 0) return "";
    const Window w = p.shifts();
    const int need = std::max(transform_need(w.dy0, w.dy1, p.hL, p.hR), transform_need(w.dx0, w.dx1, p.wL, p.wR));
    if (need <= max_transform) return "";
    return name + ": " + p.describe() +
           (p.full() ? " has a " + std::to_string(p.out_h()) + " x " + std::to_string(p.out_w()) + " output; it"
                     : std::string()) +
           " needs a transform of " + std::to_string(need) + " points (the shifts with overlap, unaliased), at most " +
           std::to_string(max_transform) + " here: use fft";
}

bool Variant::supports_problem(const Problem& p) const {
    return supports(p.form) && supports_window(p) && shape_refusal(p).empty();
}

Params Variant::resolve(const Params& given) const {
    Params out;
    for (const auto& [key, value] : given) {
        auto spec = std::find_if(params.begin(), params.end(), [&](const ParamSpec& s) { return s.name == key; });
        if (spec == params.end()) {
            std::vector<std::string> names;
            for (const auto& s : params) names.push_back(s.name);
            throw UsageError("unknown parameter '" + key + "' for " + name +
                             (names.empty() ? " (it takes none)" : " (it takes: " + join(names) + ")"));
        }
        if (std::find(spec->values.begin(), spec->values.end(), value) == spec->values.end())
            throw UsageError("parameter " + key + "=" + value + " is not available for " + name +
                             " (instantiated values: " + join(spec->values) + ")");
        out[key] = value;
    }
    for (const auto& s : params)
        if (!out.count(s.name)) out[s.name] = s.values.front();
    return out;
}

}  // namespace xcorr
