// Core vocabulary shared by the harness, the algorithms and the tools: forms, problem shapes,
// parameter sets and the error types that map onto the tools' exit codes.
// The contract these encode is docs/CONVENTIONS.md (summarised in docs/computed.md): the cross-correlation
// C(dy, dx) = sum_{r,c} L[r+dy][c+dx] * R[r][c] over a window of shifts (dy, dx), by default the full
// output C[y][x] with dy = y - (hR - 1), dx = x - (wR - 1), over stacks laid out as below.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// Functions callable from host and device code; plain host functions under a C++ compiler.
#if defined(__CUDACC__)
#define XC_HD __host__ __device__
#define XC_HD_INLINE __host__ __device__ __forceinline__
#else
#define XC_HD
#define XC_HD_INLINE inline
#endif

namespace xcorr {

// The four forms of the paper (section 2.2) and how output k maps to its input pair:
//   one-to-one   1 left, 1 right            out 0 = corr(L0, R0)
//   one-to-many  1 left, M rights           out k = corr(L0, Rk)
//   n-to-mn      N lefts, N*M rights        out k = corr(L[k mod N], Rk)   (M groups of N)
//   n-to-m       N lefts, M rights          out k = corr(L[k / M], R[k mod M])
enum class Form : int { OneToOne = 0, OneToMany = 1, NToMn = 2, NToM = 3 };

inline constexpr Form kAllForms[] = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM};

const char* form_name(Form f);                 // "one-to-one", ...
Form parse_form(const std::string& name);      // throws UsageError on an unknown name

// What an output element holds (CONVENTIONS.md, "Normalization"): the raw sum C(dy, dx); zncc, the
// Pearson coefficient of the two overlapping parts; zero-lag, C(dy, dx) / C(0, 0) (0 everywhere
// where C(0, 0) = 0).
enum class Normalize : int { None = 0, Zncc = 1, ZeroLag = 2 };

inline constexpr Normalize kAllNormalizations[] = {Normalize::None, Normalize::Zncc, Normalize::ZeroLag};

const char* normalize_name(Normalize n);            // "none", "zncc", "zero-lag"
Normalize parse_normalize(const std::string& name);  // throws UsageError listing the known names

// Bad usage or bad input: exit status 2 in the tools.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// No usable GPU, or the binary holds no code for the GPU found: exit status 3.
struct NoGpuError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// Any other failure of a CUDA or cuFFT call (out of memory is reported as a UsageError,
// because it is the size of the problem that the user chose).
struct CudaError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The range of right-matrix indices i in [0, n) for which i + shift is inside [0, m):
// max(0, -shift) <= i < min(n, m - shift), empty for a shift with no overlap. Used by the code
// that iterates over one overlap exactly (kernels, the GPU reference, Window::fmas).
struct Span {
    int begin, end;
};
XC_HD_INLINE Span overlap_span(int shift, int m, int n) {
    int b = shift < 0 ? -shift : 0;
    int e = m - shift < n ? m - shift : n;
    return Span{b, e > b ? e : b};
}

// n / d for a divisor d >= 1 fixed per launch and 0 <= n < 2^31, as a multiply-high, an add and a
// shift (Granlund and Montgomery, "Division by invariant integers using multiplication", 1994):
// m = floor(2^32·(2^s - d) / d) + 1 with s = ceil(log2 d) gives n / d = (umulhi(n, m) + n) >> s,
// exact for every n below 2^31 (where umulhi(n, m) + n < 2^32). A kernel that maps a flat element
// index to (row, column) pays this instead of an integer division (some twenty instructions) per
// element. Host and device compute the same thing; the static_assert below checks the host one at
// compile time on divisors and dividends at the edges.
struct FastDiv {
    unsigned m = 1;  // the divisor is not kept: div() needs only m and s
    int s = 0;
    constexpr FastDiv() = default;
    constexpr explicit FastDiv(unsigned d) {
        if (d == 0 || d > (1u << 31)) throw std::invalid_argument("FastDiv: the divisor must be in 1 .. 2^31");
        while ((uint64_t(1) << s) < d) ++s;
        m = unsigned((uint64_t(1) << 32) * ((uint64_t(1) << s) - d) / d + 1);
    }
    XC_HD_INLINE constexpr unsigned div(unsigned n) const {
#ifdef __CUDA_ARCH__
        return (__umulhi(n, m) + n) >> s;
#else
        return unsigned(((uint64_t(n) * m >> 32) + n) >> s);
#endif
    }
};
namespace detail {
constexpr bool fast_div_exact() {
    constexpr unsigned divisors[] = {1, 2, 3, 7, 33, 255, 256, 257, 641, 4801, 65537, 8639401, 46340 * 46340u,
                                     (1u << 30) + 1, (1u << 31) - 1, 1u << 31};
    for (unsigned d : divisors) {
        const FastDiv f(d);
        for (uint64_t base : {uint64_t(0), uint64_t(d) * 3, uint64_t(d) * 12345, (uint64_t(1) << 31) - 64})
            for (uint64_t n = base; n < base + 64 && n < (uint64_t(1) << 31); ++n)
                if (f.div(unsigned(n)) != n / d) return false;
        for (uint64_t q = 1; q < 64; ++q)  // each side of a multiple of d
            for (uint64_t n : {q * d - 1, q * d, q * d + 1})
                if (n < (uint64_t(1) << 31) && f.div(unsigned(n)) != n / d) return false;
    }
    return true;
}
#ifndef __CUDA_ARCH__  // the host path (the device one is the same arithmetic through __umulhi)
static_assert(fast_div_exact(), "FastDiv is n / d for every n below 2^31");
#endif
}  // namespace detail

struct Problem;

// Which shifts an output holds (CONVENTIONS.md, "Output windows"): the rectangle dy0..dy1,
// dx0..dx1, inclusive. Output element (i, j) is C at shift (dy0 + i, dx0 + j); a shift with no
// overlap gives 0. The named windows come from full_window, valid_window and same_window below,
// or from a WindowRequest.
struct Window {
    int dy0 = 0, dy1 = 0, dx0 = 0, dx1 = 0;

    // In 64 bits: an unchecked window may span more than an int (Problem::check refuses it).
    XC_HD int64_t out_h() const { return int64_t(dy1) - dy0 + 1; }
    XC_HD int64_t out_w() const { return int64_t(dx1) - dx0 + 1; }
    int64_t out_elems() const { return out_h() * out_w(); }
    // Multiply-adds of one pair's windowed output: the sum of the overlap areas over its shifts,
    // i.e. (sum of overlap rows over dy) x (sum of overlap columns over dx), in O(h + w). The full
    // window gives hL*wL*hR*wR (CONVENTIONS.md, "Cost").
    double fmas(int hL, int wL, int hR, int wR) const;
    // Throws UsageError when dy0 > dy1 or dx0 > dx1, or a shift is 2^30 or more away from 0.
    void check() const;
    std::string text() const;  // "dy0:dy1,dx0:dx1", as --shifts takes it
    bool operator==(const Window&) const = default;
};

// The named windows, and how the user names them (xcorr run --mode, --max-shift, --shifts).
enum class WindowKind : int { Full = 0, Valid = 1, Same = 2, MaxShift = 3, Shifts = 4 };
const char* window_kind_name(WindowKind k);  // "full", "valid", "same", "max-shift", "shifts"

// The shape of one problem: sizes of a left and a right matrix, the stack counts and the window.
struct Problem {
    Form form = Form::OneToOne;
    int hL = 0, wL = 0, hR = 0, wR = 0;
    int nL = 1, nR = 1;  // matrices in the left and the right stack (as in the files)
    std::optional<Window> window;  // unset: the full output
    // Variants compute the raw sums only: a normalized problem runs a variant on its raw() problem
    // inside a Normalizer (normalize.hpp), which the tools and the plan put around it.
    Normalize normalize = Normalize::None;

    // The shifts computed: `window`, or the full output's.
    Window shifts() const;
    bool full() const;  // shifts() is the full output's, however it was asked for
    // The output as computed, i.e. the window's; with the full window (the default, and the only
    // window a variant that declares no other ever gets: Variant::supports_window) the full output's.
    int out_h() const { return int(shifts().out_h()); }  // check() bounds it
    int out_w() const { return int(shifts().out_w()); }
    // Number of output matrices (see the table above).
    int64_t out_count() const;
    int64_t left_elems() const { return int64_t(nL) * hL * wL; }
    int64_t right_elems() const { return int64_t(nR) * hR * wR; }
    int64_t out_elems() const { return out_count() * int64_t(out_h()) * out_w(); }
    // Multiply-adds of the output (Window::fmas per pair).
    double fmas() const { return double(out_count()) * shifts().fmas(hL, wL, hR, wR); }

    // Throws UsageError when a size is not positive, the counts do not fit the form or the
    // window is malformed or too large.
    void check() const;
    // "n-to-m 3x[17x23] * 5x[9x31]", then " shifts 0:8,-3:5" unless full, " normalize zncc" unless none
    std::string describe() const;
    // The same problem without normalization: what the variant under a Normalizer computes.
    Problem raw() const {
        Problem p = *this;
        p.normalize = Normalize::None;
        return p;
    }
};

// The named windows of a problem's sizes. valid_window throws UsageError unless one matrix is at
// least as large as the other in both dimensions (scipy's mode='valid' refuses the same).
Window full_window(const Problem& p);
Window valid_window(const Problem& p);
Window same_window(const Problem& p);

// A window as the user names it, before the sizes are known: the parsers check the text, resolve()
// makes the rectangle for a problem's sizes.
struct WindowRequest {
    WindowKind kind = WindowKind::Full;
    Window given;  // MaxShift and Shifts: the rectangle itself
    bool lags = false;  // asked for in signals' terms (parse_max_lag, parse_lags, signal_same): named so
    Window resolve(const Problem& p) const;
    std::string describe() const;  // "valid", "max-shift 3,2", "shifts -1:4,0:0"; "max-lag 3", "lags -1:4"
};
// `name` is how the messages call what is parsed: xcorr run's option ("--shifts"), or a case key
// of xcorr_bench ending in '=' ("shifts=").
WindowRequest parse_mode(const std::string& text, const std::string& name = "--mode");  // "full", "valid" or "same"
WindowRequest parse_max_shift(const std::string& text, const std::string& name = "--max-shift");  // "SY[,SX]"; SX = SY if left out
WindowRequest parse_shifts(const std::string& text, const std::string& name = "--shifts");  // "DY0:DY1,DX0:DX1"
// The windows of signals (CONVENTIONS.md, "One-dimensional signals": h = 1, so dy is 0):
// "S" -> lags -S..S (MaxShift 0,S), "D0:D1" -> lags D0..D1 (Shifts 0:0,D0:D1).
WindowRequest parse_max_lag(const std::string& text, const std::string& name = "--max-lag");
WindowRequest parse_lags(const std::string& text, const std::string& name = "--lags");
// mode='same' of signals of lengths n (left) and m (right) as scipy.signal.correlate takes it: lags
// -(m/2) .. -(m/2) + n - 1. For an even m that is one lag below same_window's (scipy.signal.
// correlate2d's), so it comes as Shifts; for an odd m it is Same.
WindowRequest signal_same(int n, int m);
// Whether `p`'s shifts are the window of that kind for its sizes (MaxShift: symmetric about
// shift (0, 0); Shifts: any), e.g. valid_window(p) == full_window(p) when the right is 1 x 1.
bool window_is(WindowKind k, const Problem& p);

// The pairs of a stack as a stride table: N lefts, each with a one-to-many over M right slots;
// pair (i, j), i < N, j < M, correlates left i with right i*rsi + j*rsj into output i*osi + j*osj.
// Kernels that take pairs in groups along i and j (the multi-matrix and tiled kernels) index it so:
//   one-to-one   N = 1,  M = 1
//   one-to-many  N = 1,  M = nR:     right j,          output j
//   n-to-mn      N = nL, M = nR/nL:  right i + N*j,    output i + N*j
//   n-to-m       N = nL, M = nR:     right j,          output i*M + j
struct PairGrid {
    int N, M;
    int rsi, rsj, osi, osj;
    // Index of the right matrix and of the output of pair (i, j) in their stacks.
    XC_HD int64_t right(int i, int j) const { return int64_t(i) * rsi + int64_t(j) * rsj; }
    XC_HD int64_t output(int i, int j) const { return int64_t(i) * osi + int64_t(j) * osj; }
};

// The pair map of a problem, usable on host and device: which left and right matrix output k
// correlates (left_of, right_of; pair32 the same in 32-bit arithmetic), or, through grid(), the
// same pairs as a stride table.
struct PairMap {
    int form, nL, nR;
    XC_HD int left_of(int64_t k) const {
        switch (form) {
            case int(Form::NToMn): return int(k % nL);
            case int(Form::NToM): return int(k / nR);
            default: return 0;
        }
    }
    XC_HD int right_of(int64_t k) const {
        return form == int(Form::NToM) ? int(k % nR) : int(k);
    }
    // left_of and right_of in 32-bit arithmetic. A 64-bit division is a subroutine call in SASS
    // whose register saves ptxas reports as spills in register-heavy kernels. Valid for output
    // counts below 2^31: launchers check Problem::out_count() (fits_int32_count).
    struct Pair {
        int left, right;
    };
    XC_HD Pair pair32(int k) const {
        const unsigned uk = unsigned(k);
        if (form == int(Form::NToMn)) return Pair{int(uk % unsigned(nL)), k};
        if (form == int(Form::NToM)) {
            const unsigned q = uk / unsigned(nR);
            return Pair{int(q), int(uk - q * unsigned(nR))};
        }
        return Pair{0, k};
    }
    XC_HD PairGrid grid() const {
        switch (form) {
            case int(Form::OneToOne): return PairGrid{1, 1, 0, 1, 0, 1};
            case int(Form::NToMn): return PairGrid{nL, nR / nL, 1, nL, 1, nL};
            case int(Form::NToM): return PairGrid{nL, nR, 0, 1, nR, 1};
            default: return PairGrid{1, nR, 0, 1, 0, 1};
        }
    }
};
inline PairMap pair_map(const Problem& p) { return PairMap{int(p.form), p.nL, p.nR}; }

// Tuning parameters as given by the user, name -> value, always as text.
using Params = std::map<std::string, std::string>;

// Reads an integer parameter that the registry has already validated.
int param_int(const Params& params, const std::string& name);

// Numbers from the command line and the environment: the whole of `text` or a UsageError naming
// `what` (std::stoi and friends accept "12abc", throw exceptions that are not usage errors, and
// wrap out-of-range values).
// A decimal integer in [lo, hi]: "<what>: not an integer from lo to hi: 'text'".
int64_t parse_integer(const std::string& what, const std::string& text, int64_t lo, int64_t hi);
// The value of the command-line option `flag` at argv[i], given as "FLAG=VALUE" or "FLAG VALUE"
// (then i moves onto VALUE): "FLAG needs a value" (UsageError) when it is missing.
std::string option_value(int argc, char** argv, int& i, const std::string& flag);
// Whether argument `a` is option `flag`, as "FLAG" or "FLAG=VALUE".
bool option_is(const std::string& a, const std::string& flag);
// Matches an option "--flag VALUE" / "--flag=VALUE" of a command line (once); one that takes a
// single value is refused the second time (the last would silently win): "--flag is given twice".
// mark(flag) counts an option the caller matched itself (xcorr_validate's "--flag VALUE" only).
// xcorr, xcorr_bench and xcorr_validate alike.
struct OptionSeen {
    std::vector<std::string> seen;
    void mark(const std::string& flag);
    bool once(const std::string& a, const char* flag);
};
// A finite number above 0 (at least 0 with zero_ok): "<what> needs a positive number, got 'text'".
double parse_positive(const std::string& what, const std::string& text, bool zero_ok = false);

// The environment variables the library reads: test knobs and diagnostics, never needed for
// a correct result. Every one is an integer in [lo, hi] (a switch: 0 or 1); unset or empty means
// the library's own rule. One table, so that every reader parses alike, `xcorr help` lists them,
// check_environment() refuses a bad value before any work, and measurements record the ones set.
struct EnvSetting {
    const char* name;
    int64_t lo, hi;
    const char* effect;  // one line for `xcorr help`
    bool is_switch() const { return lo == 0 && hi == 1; }
};
const std::vector<EnvSetting>& env_settings();
// The value of env_settings()'s `name`, or `unset` when it is unset or empty. Throws UsageError
// ("<name>: not an integer from lo to hi: '<value>'") for anything else; std::logic_error for a
// name not in the table.
int64_t env_integer(const char* name, int64_t unset);
// A switch that forces one of a launcher's rules either way: 1 or 0 when set to it, -1 when unset.
int env_switch(const char* name);
// A switch that is on only when set to 1 (the diagnostics: XCORR_NO_GRAPH, XCORR_NO_PDL, ...).
inline bool env_on(const char* name) { return env_switch(name) == 1; }
// Parses every setting of the table: a bad value throws UsageError before any GPU work (xcorr,
// xcorr_validate and xcorr_bench at start, every Plan). (Other XCORR_ variables belong to the
// scripts: XCORR_BUILD, XCORR_GIT_REVISION, ...; the library does not read them.)
void check_environment();
// (name, value) of each setting that is set, for the provenance of a measurement.
std::vector<std::pair<std::string, std::string>> environment_entries();
// XCORR_FFT_MAX_CHUNK: the most right matrices the FFT variants (fft, fft-fused) process per
// chunk (fft-segmented: the most lag pieces), forcing their memory-bounded chunked path in tests;
// 0 when unset.
int fft_max_chunk_from_env();

}  // namespace xcorr

