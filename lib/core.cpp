#include "xcorr/core.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace xcorr {

const char* form_name(Form f) {
    switch (f) {
        case Form::OneToOne: return "one-to-one";
        case Form::OneToMany: return "one-to-many";
        case Form::NToMn: return "n-to-mn";
        case Form::NToM: return "n-to-m";
    }
    return "?";
}

Form parse_form(const std::string& name) {
    for (Form f : kAllForms)
        if (name == form_name(f)) return f;
    throw UsageError("unknown form '" + name + "' (expected one-to-one, one-to-many, n-to-mn or n-to-m)");
}

const char* normalize_name(Normalize n) {
    switch (n) {
        case Normalize::None: return "none";
        case Normalize::Zncc: return "zncc";
        case Normalize::ZeroLag: return "zero-lag";
    }
    return "?";
}

Normalize parse_normalize(const std::string& name) {
    for (Normalize n : kAllNormalizations)
        if (name == normalize_name(n)) return n;
    throw UsageError("unknown normalization '" + name + "' (expected none, zncc or zero-lag)");
}

int64_t Problem::out_count() const {
    switch (form) {
        case Form::OneToOne: return 1;
        case Form::OneToMany: return nR;
        case Form::NToMn: return nR;
        case Form::NToM: return int64_t(nL) * nR;
    }
    return 0;
}

namespace {

// Sum over shifts s in [s0, s1] of one dimension's overlap length (left extent m, right n). Only
// the shifts in [-(n - 1), m - 1] overlap, so the loop takes at most m + n - 1 steps.
int64_t overlap_total(int s0, int s1, int m, int n) {
    int64_t total = 0;
    for (int s = std::max(s0, 1 - n), last = std::min(s1, m - 1); s <= last; ++s) {
        const Span span = overlap_span(s, m, n);
        total += span.end - span.begin;
    }
    return total;
}

// Far beyond any matrix (an output holds at most 2^30 elements), and keeps m - shift in an int.
constexpr int kMaxShift = (1 << 30) - 1;

// Splits text at its first `sep` into a and b; false, leaving them, when there is none.
bool split_at(const std::string& text, char sep, std::string& a, std::string& b) {
    const auto at = text.find(sep);
    if (at == std::string::npos) return false;
    a = text.substr(0, at);
    b = text.substr(at + 1);
    return true;
}

// The valid window, where one exists: the shifts between 0 and the size difference, of either
// sign (the left inside the right gives negative shifts).
std::optional<Window> valid_shifts(const Problem& p) {
    const int dh = p.hL - p.hR, dw = p.wL - p.wR;
    if ((dh < 0 && dw > 0) || (dh > 0 && dw < 0)) return std::nullopt;
    return Window{std::min(0, dh), std::max(0, dh), std::min(0, dw), std::max(0, dw)};
}

}  // namespace

double Window::fmas(int hL, int wL, int hR, int wR) const {
    return double(overlap_total(dy0, dy1, hL, hR)) * double(overlap_total(dx0, dx1, wL, wR));
}

void Window::check() const {
    if (dy0 > dy1 || dx0 > dx1)
        throw UsageError("empty window " + text() + ": the first shift of a range comes after its last");
    for (int s : {dy0, dy1, dx0, dx1})
        if (s < -kMaxShift || s > kMaxShift) throw UsageError("window " + text() + ": a shift is 2^30 or more away from 0");
}

std::string Window::text() const {
    return std::to_string(dy0) + ":" + std::to_string(dy1) + "," + std::to_string(dx0) + ":" + std::to_string(dx1);
}

const char* window_kind_name(WindowKind k) {
    switch (k) {
        case WindowKind::Full: return "full";
        case WindowKind::Valid: return "valid";
        case WindowKind::Same: return "same";
        case WindowKind::MaxShift: return "max-shift";
        case WindowKind::Shifts: return "shifts";
    }
    return "?";
}

Window Problem::shifts() const { return window ? *window : full_window(*this); }

bool Problem::full() const { return shifts() == full_window(*this); }

Window full_window(const Problem& p) { return Window{-(p.hR - 1), p.hL - 1, -(p.wR - 1), p.wL - 1}; }

Window valid_window(const Problem& p) {
    if (auto w = valid_shifts(p)) return *w;
    throw UsageError("no valid window: neither matrix is at least as large as the other in both dimensions (left " +
                     std::to_string(p.hL) + "x" + std::to_string(p.wL) + ", right " + std::to_string(p.hR) + "x" +
                     std::to_string(p.wR) + ")");
}

Window same_window(const Problem& p) {
    // scipy's mode='same' takes the hL x wL block of the full output that starts at row hR / 2
    // (column wR / 2), i.e. at shift hR / 2 - (hR - 1) = -((hR - 1) / 2): centred, and for an even
    // right one shift towards the positive side (tests/test_windows.py checks it against scipy).
    const int dy0 = -((p.hR - 1) / 2), dx0 = -((p.wR - 1) / 2);
    return Window{dy0, dy0 + p.hL - 1, dx0, dx0 + p.wL - 1};
}

Window WindowRequest::resolve(const Problem& p) const {
    switch (kind) {
        case WindowKind::Full: return full_window(p);
        case WindowKind::Valid: return valid_window(p);
        case WindowKind::Same: return same_window(p);
        case WindowKind::MaxShift:
        case WindowKind::Shifts: return given;
    }
    return full_window(p);
}

std::string WindowRequest::describe() const {
    if (lags) {
        if (kind == WindowKind::MaxShift) return "max-lag " + std::to_string(given.dx1);
        if (kind == WindowKind::Shifts) return "lags " + std::to_string(given.dx0) + ":" + std::to_string(given.dx1);
    }
    switch (kind) {
        case WindowKind::MaxShift: return "max-shift " + std::to_string(given.dy1) + "," + std::to_string(given.dx1);
        case WindowKind::Shifts: return "shifts " + given.text();
        default: return window_kind_name(kind);
    }
}

namespace {
// "--shifts DY0:DY1,DX0:DX1" for an option, "shifts=DY0:DY1,DX0:DX1" for a case key.
std::string spelled(const std::string& name, const char* value) {
    return name + (!name.empty() && name.back() == '=' ? "" : " ") + value;
}
}  // namespace

WindowRequest parse_mode(const std::string& text, const std::string& name) {
    for (WindowKind k : {WindowKind::Full, WindowKind::Valid, WindowKind::Same})
        if (text == window_kind_name(k)) return WindowRequest{k, {}};
    throw UsageError(name + " takes full, valid or same, got '" + text + "'");
}

WindowRequest parse_max_shift(const std::string& text, const std::string& name) {
    std::string sy = text, sx = text;  // no comma: SX = SY
    split_at(text, ',', sy, sx);
    const auto shift = [&](const std::string& t) { return int(parse_integer(spelled(name, "SY[,SX]"), t, 0, kMaxShift)); };
    const int y = shift(sy), x = shift(sx);
    return WindowRequest{WindowKind::MaxShift, Window{-y, y, -x, x}};
}

WindowRequest parse_shifts(const std::string& text, const std::string& name) {
    std::string dy, dx, dy0, dy1, dx0, dx1;
    if (!split_at(text, ',', dy, dx) || !split_at(dy, ':', dy0, dy1) || !split_at(dx, ':', dx0, dx1))
        throw UsageError(name + " takes DY0:DY1,DX0:DX1 (integers, e.g. -4:4,0:7), got '" + text + "'");
    const auto shift = [&](const std::string& t) {
        return int(parse_integer(spelled(name, "DY0:DY1,DX0:DX1"), t, -kMaxShift, kMaxShift));
    };
    const Window w{shift(dy0), shift(dy1), shift(dx0), shift(dx1)};
    w.check();
    return WindowRequest{WindowKind::Shifts, w};
}

WindowRequest parse_max_lag(const std::string& text, const std::string& name) {
    const int s = int(parse_integer(spelled(name, "S"), text, 0, kMaxShift));
    return WindowRequest{WindowKind::MaxShift, Window{0, 0, -s, s}, true};
}

WindowRequest parse_lags(const std::string& text, const std::string& name) {
    std::string d0, d1;
    if (!split_at(text, ':', d0, d1))
        throw UsageError(name + " takes D0:D1 (integers, e.g. -4:7), got '" + text + "'");
    const auto lag = [&](const std::string& t) { return int(parse_integer(spelled(name, "D0:D1"), t, -kMaxShift, kMaxShift)); };
    const Window w{0, 0, lag(d0), lag(d1)};
    if (w.dx0 > w.dx1) throw UsageError(name + " " + text + ": an empty range (D0 comes after D1)");
    return WindowRequest{WindowKind::Shifts, w, true};
}

WindowRequest signal_same(int n, int m) {
    // scipy.signal.correlate centres 'same' at (n + m - 1 - n) / 2 of the full output, i.e. lag
    // -(m / 2); scipy.signal.correlate2d (same_window) at lag -((m - 1) / 2). Equal for odd m.
    if (m % 2) return WindowRequest{WindowKind::Same, {}, true};
    return WindowRequest{WindowKind::Shifts, Window{0, 0, -(m / 2), -(m / 2) + n - 1}, true};
}

bool window_is(WindowKind k, const Problem& p) {
    const Window w = p.shifts();
    switch (k) {
        case WindowKind::Full: return w == full_window(p);
        case WindowKind::Valid: return w == valid_shifts(p);
        case WindowKind::Same: return w == same_window(p);
        case WindowKind::MaxShift: return w.dy0 == -w.dy1 && w.dx0 == -w.dx1;
        case WindowKind::Shifts: return true;
    }
    return false;
}

void Problem::check() const {
    if (hL <= 0 || wL <= 0 || hR <= 0 || wR <= 0)
        throw UsageError("empty matrix: left is " + std::to_string(hL) + "x" + std::to_string(wL) +
                         ", right is " + std::to_string(hR) + "x" + std::to_string(wR));
    if (nL <= 0 || nR <= 0) throw UsageError("empty stack: no left or no right matrix");
    // Output sizes are held in int: keep every single matrix comfortably inside that range.
    if ((int64_t(hL) + hR - 1) * (int64_t(wL) + wR - 1) > (int64_t(1) << 30))
        throw UsageError("matrix too large: one output matrix would exceed 2^30 elements");
    if (window) {
        window->check();
        if (window->out_elems() > (int64_t(1) << 30))
            throw UsageError("window " + window->text() + " too large: one output matrix would exceed 2^30 elements");
    }
    // The whole output's element count is an int64 product (out_elems): keep it far from overflow
    // (2^50 floats are 4 PiB; n-to-m counts of 2^22 x 2^22 with a 2^20 window wrapped it to 0).
    const int64_t per_output = window ? window->out_elems() : (int64_t(hL) + hR - 1) * (int64_t(wL) + wR - 1);
    if (double(out_count()) * double(per_output) > double(int64_t(1) << 50))
        throw UsageError("output too large: the stack of outputs would exceed 2^50 elements");
    const std::string counts = " (left stack has " + std::to_string(nL) + ", right stack " + std::to_string(nR) + ")";
    switch (form) {
        case Form::OneToOne:
            if (nL != 1 || nR != 1) throw UsageError("one-to-one takes exactly one left and one right matrix" + counts);
            break;
        case Form::OneToMany:
            if (nL != 1) throw UsageError("one-to-many takes exactly one left matrix" + counts);
            break;
        case Form::NToMn:
            if (nR % nL != 0)
                throw UsageError("n-to-mn needs a right count that is a multiple of the left count" + counts);
            break;
        case Form::NToM: break;
    }
}

std::string Problem::describe() const {
    std::ostringstream s;
    s << form_name(form) << " " << nL << "x[" << hL << "x" << wL << "] * " << nR << "x[" << hR << "x" << wR << "]";
    if (!full()) s << " shifts " << shifts().text();
    if (normalize != Normalize::None) s << " normalize " << normalize_name(normalize);
    return s.str();
}

// What each is for (docs/cli.md, "Environment switches"): a test knob forces a path that a test
// needs (FFT_MAX_CHUNK, FFT_PLAN_BATCH_LIMIT, FFT_PAIR_GROUPS, FFT_MERGE_ROWS, NO_STORE_NORM,
// NO_FUSED_PEAKS, NO_FUSED_TILES); a diagnostic shows or bypasses a mechanism (NO_GRAPH, NO_PDL, BATCH_TRACE). A
// switch kept only to compare two code paths goes once measured, with the losing path, its numbers
// kept in the topic's note (as the batch's six and tensor-wgmma's k-split were).
const std::vector<EnvSetting>& env_settings() {
    static const std::vector<EnvSetting> table{
        {"XCORR_FFT_MAX_CHUNK", 1, int64_t(1) << 30,
         "fft, fft-fused: at most N right matrices a chunk (fft-segmented: N lag pieces)"},
        {"XCORR_FFT_PLAN_BATCH_LIMIT", 1, int64_t(1) << 40,
         "cuFFT plans of more than N transforms fail, as on a GPU short of memory"},
        {"XCORR_FFT_PAIR_GROUPS", 0, 1, "fft-fused's staged n-to-m pair pass in groups of lefts (1) or left-major (0)"},
        {"XCORR_FFT_MERGE_ROWS", 0, 1,
         "fft-fused: the first chunk's right rows in the lefts' row launch (1) or a launch of their own (0)"},
        {"XCORR_NO_STORE_NORM", 0, 1, "1: ZNCC through the template epilogue, never in the variant's store"},
        {"XCORR_NO_PDL", 0, 1, "1: dependent kernels as ordinary launches, not programmatic dependent ones"},
        {"XCORR_NO_GRAPH", 0, 1, "1: repeated calls launch their kernels directly, never replay a CUDA graph"},
        {"XCORR_NO_FUSED_PEAKS", 0, 1, "1: k = 1 peaks through the map in scratch, never in a variant's own pass"},
        {"XCORR_NO_FUSED_TILES", 0, 1,
         "1: peaks' tile maxima by a pass over the maps in scratch, never in a variant's store"},
        {"XCORR_BATCH_TRACE", 0, 1, "1: each device's batch pipeline prints its steps' times to stderr (a timeline)"},
    };
    return table;
}

namespace {
const EnvSetting& env_setting(const char* name) {
    for (const EnvSetting& e : env_settings())
        if (std::strcmp(e.name, name) == 0) return e;
    throw std::logic_error(std::string("env_setting: '") + name + "' is not in env_settings()");
}
}  // namespace

int64_t env_integer(const char* name, int64_t unset) {
    const EnvSetting& e = env_setting(name);
    const char* v = std::getenv(name);
    if (!v || !*v) return unset;
    return parse_integer(name, v, e.lo, e.hi);
}

int env_switch(const char* name) {
    if (!env_setting(name).is_switch()) throw std::logic_error(std::string("env_switch: '") + name + "' is not a switch");
    return int(env_integer(name, -1));
}

void check_environment() {
    for (const EnvSetting& e : env_settings()) env_integer(e.name, 0);
}

std::vector<std::pair<std::string, std::string>> environment_entries() {
    std::vector<std::pair<std::string, std::string>> set;
    for (const EnvSetting& e : env_settings()) {
        const char* v = std::getenv(e.name);
        if (v && *v) set.emplace_back(e.name, v);
    }
    return set;
}

int fft_max_chunk_from_env() { return int(env_integer("XCORR_FFT_MAX_CHUNK", 0)); }

int param_int(const Params& params, const std::string& name) {
    auto it = params.find(name);
    if (it == params.end()) throw UsageError("missing parameter '" + name + "'");
    return int(parse_integer("parameter '" + name + "'", it->second, INT32_MIN, INT32_MAX));
}

int64_t parse_integer(const std::string& what, const std::string& text, int64_t lo, int64_t hi) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    // strtoll skips leading blanks and takes a sign: only a plain optional '-' and digits pass.
    const bool digits = !text.empty() && text.find_first_not_of("-0123456789") == std::string::npos;
    if (!digits || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        throw UsageError(what + ": not an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ": '" +
                         text + "'");
    return v;
}

double parse_positive(const std::string& what, const std::string& text, bool zero_ok) {
    char* end = nullptr;
    const bool blank = text.empty() || std::isspace(static_cast<unsigned char>(text[0]));
    const double x = blank ? NAN : std::strtod(text.c_str(), &end);
    if (blank || *end != '\0' || !std::isfinite(x) || x < 0 || (x == 0 && !zero_ok))
        throw UsageError(what + " needs a " + (zero_ok ? "finite number >= 0" : "positive number") + ", got '" + text + "'");
    return x;
}

void OptionSeen::mark(const std::string& flag) {
    if (std::find(seen.begin(), seen.end(), flag) != seen.end()) throw UsageError(flag + " is given twice");
    seen.push_back(flag);
}

bool option_is(const std::string& a, const std::string& flag) { return a == flag || a.rfind(flag + "=", 0) == 0; }

bool OptionSeen::once(const std::string& a, const char* flag) {
    if (!option_is(a, flag)) return false;
    mark(flag);
    return true;
}

std::string option_value(int argc, char** argv, int& i, const std::string& flag) {
    const std::string a = argv[i];
    if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
    if (i + 1 >= argc) throw UsageError(flag + " needs a value");
    return argv[++i];
}

}  // namespace xcorr
