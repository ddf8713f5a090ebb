// xcorr_validate: every registered variant x every form it supports x its parameter combinations
// x random odd and unequal sizes (1x1, 1xN, Nx1, odd, unequal left and right, up to 512 x 512),
// against the float64 reference, with the output poisoned (NaN) before every run and every run
// made at least twice (an error that moves between runs is a race). The later runs read copies of
// the inputs and write an output that start 4 bytes into their allocations: a variant must not
// assume 16-byte-aligned stacks (a caller may pass a sub-stack), and an instance that keeps state
// between calls (fft's captured graph, its padded slots; fft-fused's graph of a repeated call)
// must follow its caller's pointers; such a variant (Variant::replays_repeated_calls) runs each
// pointer set twice in a row, four runs in all, so that its repeated-call path is checked too.
//
// Inputs come from three distributions (harness/check.hpp): [0, 1) (the contract's), signed
// [-1, 1) and offset 4 + [-1, 1). Each shape x form case draws from one of them, rotating with the
// shape, so every form meets all three in every tier and the run costs no more than with one.
// Every variant is held to its own declared tolerance on all three.
//
//   xcorr_validate [--variant NAME]... [--form FORM]... [--quick] [--seed N] [--tolerance X]
//                  [--shape HLxWL,HRxWR]... [--params all|covering] [--windows only|also|none]
//                  [--normalize none|zncc|zero-lag|all] [--reductions also|only|none] [--shard K/N]
//
// --normalize runs every case (variants, windows and the reference checks) with that normalization
// (all: none, zncc and zero-lag, one after another; default none): the variant inside the
// normalization's fast path (xcorr/normalize.hpp), against the float64 reference of the normalized
// output (zncc: the largest absolute error, bound max(1e-4, the variant's tolerance); zero-lag: the
// relative error, bound the variant's tolerance, as C(0, 0) is exact). Normalized cases
// draw their inputs from 1000 + [-8, 8) too (the cancellation case); zero-lag ones only from the
// positive ranges ([0, 1), 4 + [-1, 1), 1000 + [-8, 8)), where C(0, 0) is far from 0 (a signed
// C(0, 0) near 0 turns any rounding into an unbounded ratio: not an error of the algorithm).
//
// --shape replaces the built-in shapes with the given ones (every form, the large tier's few
// matrices: 1-to-3, 2x4 n-to-mn (3x3 on every second shape: counts_for), 2x3 n-to-m);
// --params covering runs each instantiated value of every parameter once instead of every
// combination. Together they make the short runs that compute-sanitizer can afford
// (scripts/device-check -s).
// --shard K/N runs the checks numbered K modulo N of those selected (each variant x parameters on a
// case or one of its windows, each reduction case through a variant, each case's reference checks,
// numbered in the order they come): N processes of K = 1..N run every check once, so that a run too
// long for one process under compute-sanitizer's racecheck splits into shorter ones
// (scripts/sanitize). The "no case passed" guards need the whole run and are left out under it.
// --tolerance X replaces every variant's bound with X (tests use it to put the bound just
// below and just above a measured error).
// With zncc among the normalizations and the built-in shapes, the GPU references' matrix variances
// (zncc's constant-part test) are checked first against the CPU reference's loop on matrices of
// their own (lines "PASS  matrix-variance-gpu  ...").
// Where the CPU reference is quick, the GPU reference is checked against it on the full output and
// on four windows (valid where it exists, same, partly and wholly beyond the full range; the
// "window=" lines of reference-gpu), reference_gpu_at included.
// A variant that declares windows beyond the full output (xcorr list) is also run on windows of
// every case, each parameter combination: valid (where it exists), same, max-shift-2,3 (inside the
// full range for most shapes), max-shift-SY,SX (SY = max(hL, hR) + 1, SX = max(wL, wR) + 2: beyond
// every edge), partly-beyond and wholly-beyond (the rectangles of the reference checks; the second's
// output must be all 0) -- each only where the variant computes it (Variant::supports_window) --
// output poisoned, run as above, against the float64 reference of that window and held to the
// variant's tolerance: lines "PASS  <variant>  <case> shifts ..  window=<name>  <params>  ...".
// --windows only runs just the window checks (the variants' and the reference's), none just the
// full-output ones (default: also, both).
// Reductions (CONVENTIONS.md, "Reductions: peaks and maxima"; --reductions also, the default): every
// selected variant, with its default parameters, as the chunked algorithm of a reduced plan on the
// fixed cases of reduction_cases() -- peaks with k 1, 5 and beyond the window, min_distance 0 and 2,
// parabolic and gaussian fits; the maximum over the rights of one-to-many, n-to-m and n-to-mn, with
// and without stats -- over odd and unequal shapes and a signal, the full, valid and max-shift
// windows and windows inside the valid one (template matching's, whose zncc peaks fft-fused takes
// with the tile maxima from its store, its rows in pairs across the tiles'),
// every normalization, plans cut into chunks of a few maps, and inputs from the rotating ranges,
// constant inputs (maps of ties) and inputs holding NaN (unnormalized, no stats; their peaks and maxima checked without the
// clauses that nothing outside them exceeds the k-th and that each maximum is the largest,
// CONVENTIONS.md's reading: a transform spreads a NaN over its whole map, a tiled kernel over its
// tile's padding, so which values are left is the algorithm's). Outputs poisoned, run twice (the second time on misaligned
// copies and outputs one element into their buffers), each answer held to reduce.hpp's checks
// against reference_cpu's maps (bound: the variant's, relative to each map's largest value;
// absolute for zncc): lines "PASS  <variant>  <problem>  reduce=peaks k=5 min-distance 2 gaussian
// window=<name>  <params>  inputs=<name>  failed=0", the first failed checks below a FAIL. A plan
// the variant refuses for a case is a SKIP with its reason. --reductions only runs just these,
// none none of them.
// Prints one line per case (PASS / FAIL / SKIP) with the inputs' distribution and the error, and
// closes with "N passed, N failed, N skipped".
// Exit status: 0 all passed, 1 any failure, 2 bad usage, 3 no GPU.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/reduce_check.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/gpu.hpp"
#include "xcorr/plan.hpp"
#include "xcorr/reduce.hpp"
#include "xcorr/reference.hpp"
#include "xcorr/reference_element.hpp"
#include "xcorr/registry.hpp"

using namespace xcorr;

namespace {

struct Shape {
    int hL, wL, hR, wR;
};

// Tiers: small shapes run every parameter combination; medium ones the combinations if there are
// few, else a covering set; large ones the covering set only (every value of every parameter once).
const std::vector<Shape> kSmall = {
    {1, 1, 1, 1},   {1, 1, 4, 3},    {3, 5, 1, 1},    {1, 17, 1, 9},   {13, 1, 7, 1},   {5, 7, 3, 2},
    {16, 16, 16, 16}, {17, 23, 9, 31}, {31, 33, 31, 33}, {33, 7, 5, 40}, {24, 24, 40, 37},
};
// Signals (1 x n) in every tier: the kernels built for them (Variant::signals_only) see only these.
const std::vector<Shape> kMedium = {{64, 64, 64, 64},   {100, 61, 37, 80}, {129, 127, 120, 131},
                                    {96, 96, 96, 96},   {1, 1001, 1, 37},  {1, 300, 1, 517}};
const std::vector<Shape> kLarge = {{256, 256, 256, 256}, {200, 300, 190, 310}, {512, 512, 512, 512}, {1, 40013, 1, 257}};

// "37x53,29x41" -> {37, 53, 29, 41}: checked as a problem here, so that a size too large is bad
// usage (exit 2) before any GPU work (sscanf's %d took 4294967333 for 37).
Shape parse_shape(const std::string& text) {
    const std::string usage = "--shape '" + text + "': expected HLxWL,HRxWR with positive sizes, e.g. 37x53,29x41";
    const size_t comma = text.find(','), x1 = text.find('x'), x2 = text.find('x', comma + 1);
    if (comma == std::string::npos || x1 > comma || x2 == std::string::npos) throw UsageError(usage);
    int dims[4];
    const std::string parts[4] = {text.substr(0, x1), text.substr(x1 + 1, comma - x1 - 1),
                                  text.substr(comma + 1, x2 - comma - 1), text.substr(x2 + 1)};
    for (int i = 0; i < 4; ++i) {
        if (parts[i].empty() || parts[i].find_first_not_of("0123456789") != std::string::npos) throw UsageError(usage);
        dims[i] = int(parse_integer("--shape '" + text + "'", parts[i], 1, INT32_MAX));
    }
    const Shape s{dims[0], dims[1], dims[2], dims[3]};
    try {
        Problem{Form::OneToOne, s.hL, s.wL, s.hR, s.wR, 1, 1}.check();
    } catch (const UsageError& e) {
        throw UsageError("--shape '" + text + "': " + e.what());
    }
    return s;
}

// The inputs of the case of the shape numbered `shape` (over all tiers) in form `form`: for a
// fixed form, consecutive shapes rotate through the three, whichever forms are selected.
InputRange inputs_for(int shape, Form form, Normalize mode = Normalize::None) {
    static constexpr InputRange kRanges[] = {kUnitRange, kSignedRange, kOffsetRange};
    static constexpr InputRange kZncc[] = {kUnitRange, kSignedRange, kOffsetRange, kLargeMeanRange};
    static constexpr InputRange kZeroLag[] = {kUnitRange, kOffsetRange, kLargeMeanRange};
    switch (mode) {
        case Normalize::Zncc: return kZncc[(shape + int(form)) % 4];
        case Normalize::ZeroLag: return kZeroLag[(shape + int(form)) % 3];
        default: return kRanges[(shape + int(form)) % 3];
    }
}

struct Counts {
    int nL, nR;
};
// n-to-mn takes several rights a left on even shape numbers and one right a left on odd ones
// (PIV's window pairs, which fft-fused transforms in one kernel: paired_kernel).
Counts counts_for(Form f, bool large, int shape) {
    switch (f) {
        case Form::OneToOne: return {1, 1};
        case Form::OneToMany: return large ? Counts{1, 3} : Counts{1, 13};
        case Form::NToMn:
            if (shape % 2) return large ? Counts{3, 3} : Counts{5, 5};
            return large ? Counts{2, 4} : Counts{3, 15};
        case Form::NToM: return large ? Counts{2, 3} : Counts{3, 5};
    }
    return {1, 1};
}

std::vector<Params> all_combinations(const Variant& v) {
    std::vector<Params> out{Params{}};
    for (const auto& spec : v.params) {
        std::vector<Params> next;
        for (const auto& partial : out)
            for (const auto& value : spec.values) {
                Params p = partial;
                p[spec.name] = value;
                next.push_back(p);
            }
        out = std::move(next);
    }
    return out;
}

std::vector<Params> covering_set(const Variant& v) {
    Params base;
    for (const auto& spec : v.params) base[spec.name] = spec.values.front();
    std::vector<Params> out{base};
    for (const auto& spec : v.params)
        for (size_t i = 1; i < spec.values.size(); ++i) {
            Params p = base;
            p[spec.name] = spec.values[i];
            out.push_back(p);
        }
    return out;
}

std::string params_text(const Params& p) {
    std::string s;
    for (const auto& [k, v] : p) s += (s.empty() ? "" : ",") + k + "=" + v;
    return s.empty() ? "-" : s;
}

struct Tally {
    int passed = 0, failed = 0, skipped = 0;
};

// --shard K/N: take() says whether this process runs the next check (see the header).
struct Shard {
    long long k = 1, n = 1, next = 0;
    bool take() { return next++ % n == k - 1; }
    bool whole() const { return n == 1; }
};

Shard parse_shard(const std::string& text) {
    const size_t slash = text.find('/');
    const std::string usage = "--shard '" + text + "': expected K/N with 1 <= K <= N, e.g. 2/4";
    if (slash == std::string::npos) throw UsageError(usage);
    Shard s;
    s.k = parse_integer("--shard", text.substr(0, slash), 1, 1 << 20);
    s.n = parse_integer("--shard", text.substr(slash + 1), 1, 1 << 20);
    if (s.k > s.n) throw UsageError(usage);
    return s;
}

// Windows of a problem for the reference checks: valid (where it exists), same, one partly and one
// wholly beyond the full range of shifts (their outer elements must come out 0).
std::vector<std::pair<std::string, Window>> test_windows(const Problem& p) {
    std::vector<std::pair<std::string, Window>> out;
    try {
        out.emplace_back("valid", valid_window(p));
    } catch (const UsageError&) {  // neither matrix contains the other: no valid window
    }
    out.emplace_back("same", same_window(p));
    out.emplace_back("partly-beyond", Window{-(p.hR + 1), p.hL / 2, p.wL / 3 - 1, p.wL + 1});
    out.emplace_back("wholly-beyond", Window{p.hL, p.hL + 2, -(p.wR + 3), -p.wR});
    return out;
}

// Whether a variant computes some window besides the full output (xcorr_validate then runs it on
// variant_windows too).
bool has_windows(const Variant& v) {
    return std::any_of(v.windows.begin(), v.windows.end(), [](WindowKind k) { return k != WindowKind::Full; });
}

// What the "no case passed" guards count over: a variant, a form and a normalization, so that a
// variant refusing every zncc case of a form fails under --normalize all, where its plain cases
// used to pass for all three. "VARIANT FORM" or "VARIANT FORM normalize MODE".
std::string guard_key(const Variant& v, Form f, Normalize mode) {
    std::string key = v.name + " " + form_name(f);
    if (mode != Normalize::None) key += std::string(" normalize ") + normalize_name(mode);
    return key;
}

// The windows a variant that declares more than full is run on (see the header): test_windows'
// four and two max-shifts, one mostly inside the full range and one beyond every edge.
std::vector<std::pair<std::string, Window>> variant_windows(const Problem& p) {
    std::vector<std::pair<std::string, Window>> out = test_windows(p);
    const auto max_shift = [&](int sy, int sx) {
        out.emplace(out.end() - 2, "max-shift-" + std::to_string(sy) + "," + std::to_string(sx), Window{-sy, sy, -sx, sx});
    };
    max_shift(2, 3);
    max_shift(std::max(p.hL, p.hR) + 1, std::max(p.wL, p.wR) + 2);
    return out;
}

// Problem::fmas of a windowed problem counted the slow way: every shift's overlap, element by element.
double counted_fmas(const Problem& p) {
    const Window w = p.shifts();
    double total = 0;
    for (int dy = w.dy0; dy <= w.dy1; ++dy)
        for (int dx = w.dx0; dx <= w.dx1; ++dx)
            for (int r = 0; r < p.hR; ++r)
                for (int c = 0; c < p.wR; ++c) total += (r + dy >= 0 && r + dy < p.hL && c + dx >= 0 && c + dx < p.wL);
    return total * double(p.out_count());
}

// The windowed GPU references (reference_gpu, and reference_gpu_at at every position) against the
// windowed CPU reference on the same inputs, and Problem::fmas against counted_fmas. One line each.
void check_reference_windows(const Problem& full, const float* dl, const float* dr, const std::vector<float>& hl,
                             const std::vector<float>& hr, const char* inputs, cudaStream_t stream, Tally& tally) {
    for (const auto& [name, window] : test_windows(full)) {
        Problem p = full;
        p.window = window;
        p.check();
        std::vector<double> cpu(size_t(p.out_elems()));
        reference_cpu(p, hl.data(), hr.data(), cpu.data());
        std::vector<int64_t> every(cpu.size());
        std::iota(every.begin(), every.end(), int64_t(0));
        const Reference all = full_reference(p, dl, dr, stream), at = sampled_reference(p, dl, dr, every, stream);
        const Comparison c_all = compare_to_reference(all.values.data(), cpu.data(), cpu.size());
        const Comparison c_at = compare_to_reference(at.values.data(), cpu.data(), cpu.size());
        const double fmas = p.fmas(), counted = counted_fmas(p);
        const bool ok = passes(c_all, 1e-12) && passes(c_at, 1e-12) && fmas == counted;
        std::printf("%s  reference-gpu  %s  window=%s  vs reference-cpu  inputs=%s  err=%.2e  err_at=%.2e  fmas=%.0f%s\n",
                    ok ? "PASS" : "FAIL", p.describe().c_str(), name.c_str(), inputs, c_all.rel_error, c_at.rel_error,
                    fmas, fmas == counted ? "" : (" counted=" + std::to_string(counted)).c_str());
        ok ? ++tally.passed : ++tally.failed;
    }
}

// zncc's matrix variances as the GPU references compute them (matrix_variances_gpu, a block per
// matrix) against the CPU reference's sequential loop (matrix_variance), within 2n·2^-53 relative
// (twice the sequential sum's own worst rounding over n values; one value in n left out or taken
// twice moves the variance by about 1/n) and exactly 0 where that is 0: noise on large offsets of
// both signs, a constant matrix, NaN among the values and a matrix of NaN alone, a single value,
// shapes below, at and above the block's width, and a 2048 x 2048 image (a block alone over 4.2
// million values). One line each.
void check_matrix_variances(uint64_t seed, cudaStream_t stream, Tally& tally) {
    struct Stack {
        int n, h, w;
        std::function<float(int, int64_t, std::mt19937_64&)> value;  // matrix, element, rng
    };
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const auto noise = [](float offset, float amplitude) {
        return [=](int, int64_t, std::mt19937_64& rng) {
            return offset + amplitude * std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
        };
    };
    const std::vector<std::pair<Stack, Stack>> cases = {
        // lefts: noise on 1000, a constant, noise with two NaN; rights: NaN alone, noise on -3e4
        {{3, 37, 53, [&](int m, int64_t i, std::mt19937_64& rng) {
              if (m == 1) return 1000.5f;
              if (m == 2 && (i == 5 || i == 1000)) return nan;
              return noise(1000.0f, 8.0f)(m, i, rng);
          }},
         {2, 1, 7, [&](int m, int64_t i, std::mt19937_64& rng) { return m == 0 ? nan : noise(-3e4f, 1.0f)(m, i, rng); }}},
        {{4, 1, 1, noise(5.0f, 1.0f)}, {2, 16, 16, noise(0.0f, 1.0f)}},
        {{1, 257, 255, noise(-2.0f, 3.0f)}, {5, 1, 256, noise(1e3f, 1e-2f)}},
        {{1, 2048, 2048, noise(1000.0f, 8.0f)}, {1, 3, 333, noise(-7.0f, 2.0f)}},
    };
    std::mt19937_64 rng(seed);
    for (const auto& [ls, rs] : cases) {
        const int64_t le = int64_t(ls.h) * ls.w, re = int64_t(rs.h) * rs.w;
        std::vector<float> hl(size_t(ls.n * le)), hr(size_t(rs.n * re));
        for (int m = 0; m < ls.n; ++m)
            for (int64_t i = 0; i < le; ++i) hl[size_t(m * le + i)] = ls.value(m, i, rng);
        for (int m = 0; m < rs.n; ++m)
            for (int64_t i = 0; i < re; ++i) hr[size_t(m * re + i)] = rs.value(m, i, rng);
        DeviceBuffer<float> dl(hl.size()), dr(hr.size());
        DeviceBuffer<double> dvar(size_t(ls.n + rs.n));
        XC_CUDA_CHECK(cudaMemcpyAsync(dl.get(), hl.data(), dl.bytes(), cudaMemcpyHostToDevice, stream));
        XC_CUDA_CHECK(cudaMemcpyAsync(dr.get(), hr.data(), dr.bytes(), cudaMemcpyHostToDevice, stream));
        // Poisoned, so that a matrix the kernel skips shows as NaN.
        XC_CUDA_CHECK(cudaMemsetAsync(dvar.get(), 0xff, dvar.bytes(), stream));
        matrix_variances_gpu(dl.get(), ls.n, le, dr.get(), rs.n, re, dvar.get(), stream);
        std::vector<double> got(dvar.size());
        XC_CUDA_CHECK(cudaMemcpyAsync(got.data(), dvar.get(), dvar.bytes(), cudaMemcpyDeviceToHost, stream));
        XC_CUDA_CHECK(cudaStreamSynchronize(stream));
        double worst = 0;
        bool ok = true;
        for (int m = 0; m < ls.n + rs.n; ++m) {
            const double want = m < ls.n ? matrix_variance(hl.data() + m * le, le)
                                         : matrix_variance(hr.data() + (m - ls.n) * re, re);
            const double err = want == 0 ? std::fabs(got[size_t(m)]) : std::fabs(got[size_t(m)] - want) / want;
            const double bound = 2.0 * double(m < ls.n ? le : re) * 0x1p-53;
            ok &= want == 0 ? got[size_t(m)] == 0 : err <= bound;  // a NaN fails both
            worst = std::isnan(err) || err > worst ? err : worst;
        }
        std::printf("%s  matrix-variance-gpu  %d x %dx%d, %d x %dx%d  vs matrix_variance  rel_err=%.2e\n",
                    ok ? "PASS" : "FAIL", ls.n, ls.h, ls.w, rs.n, rs.h, rs.w, worst);
        ok ? ++tally.passed : ++tally.failed;
    }
}

enum class Verdict { Pass, Fail, Skip };

void count(Verdict v, Tally& tally) {
    switch (v) {
        case Verdict::Pass: ++tally.passed; break;
        case Verdict::Fail: ++tally.failed; break;
        case Verdict::Skip: ++tally.skipped; break;
    }
}

// Whether p is within the shapes v is built for: refused, if at all, only for the size of transform
// it needs (Variant::transform_refusal), not for its shape (signals_only, max_shifts).
bool declares_shape(const Variant& v, const Problem& p) {
    const std::string why = v.shape_refusal(p);
    return why.empty() || why == v.transform_refusal(p);
}

// The buffers of a case's runs: aligned inputs and output, then the misaligned copies.
struct Runs {
    const float *left, *right;
    float* out;
    const float *left_off, *right_off;
    float* out_off;
};

// Where a failing check's largest error is: its output, shift and the two values (a sampled check:
// the sample's number, the positions staying on the GPU).
std::string worst_element(const Problem& p, const Reference& ref, const Comparison& c) {
    char b[200];
    if (!ref.full()) {
        std::snprintf(b, sizeof b, "  worst: sample %zu, %.9g against %.9g", c.worst, c.worst_out, c.worst_ref);
        return b;
    }
    const OutputElement at = element_of(p, int64_t(c.worst));
    std::snprintf(b, sizeof b, "  worst: output %lld, shift (%d, %d), %.9g against %.9g", static_cast<long long>(at.k),
                  at.dy, at.dx, c.worst_out, c.worst_ref);
    return b;
}

// One variant x parameter combination on problem `p` (the full output, or the window named
// `window`): make, two or four runs against `ref` (poisoned output; the worst counts), one line.
Verdict check_variant(const Variant& v, const Params& params, const Problem& p, const char* window,
                      const Reference& ref, const Runs& runs, double tolerance, InputRange inputs,
                      cudaStream_t stream) {
    const std::string where = p.describe() + (window ? std::string("  window=") + window : std::string());
    std::optional<Plan> plan;
    try {
        plan.emplace(spec_of(p, v.name, params));
    } catch (const UsageError& e) {
        // A combination the variant refuses for this problem (not instantiated, or beyond a
        // documented limit): printed with the variant's reason. Not "out of memory", though: the
        // validator's problems are small (kilobytes to a few megabytes), so a plan refused for want
        // of GPU memory there is a workspace sized wrong, a failure, not a SKIP that would let a
        // variant pass with none of its cases run.
        if (out_of_memory(e)) {
            std::printf("FAIL  %s  %s  %s  %s\n", v.name.c_str(), where.c_str(), params_text(params).c_str(), e.what());
            return Verdict::Fail;
        }
        std::printf("SKIP  %s  %s  %s  %s\n", v.name.c_str(), where.c_str(), params_text(params).c_str(), e.what());
        return Verdict::Skip;
    }
    // The worst of the runs (a NaN error counts as the worse); absolute errors for a normalized
    // output. A variant that replays repeated calls (Variant::replays_repeated_calls) runs each set
    // of pointers twice in a row: for fft-fused (GraphReplay, algorithms/common/launch.cuh) the second
    // run of the first set is a capture, and the second set's pair a direct run and an updated
    // graph, each of which must follow the pointers it is given. Others run each set once.
    Comparison worst{0, 0, 0};
    const int per_set = v.replays_repeated_calls ? 2 : 1;
    for (int run = 0; run < 2 * per_set; ++run) {
        const bool off = run >= per_set;
        const Comparison cmp = run_and_compare(plan->instance(), off ? runs.left_off : runs.left, off ? runs.right_off : runs.right,
                                               off ? runs.out_off : runs.out, ref, stream);
        // A NaN, once seen, stays (a later finite error must not replace it)
        if (!std::isnan(worst.rel_error) && !(cmp.rel_error <= worst.rel_error)) worst.rel_error = cmp.rel_error;
        if (!std::isnan(worst.abs_error) && !(cmp.abs_error <= worst.abs_error)) {
            worst.abs_error = cmp.abs_error;
            worst.worst = cmp.worst, worst.worst_out = cmp.worst_out, worst.worst_ref = cmp.worst_ref;
        }
        worst.nonfinite = std::max(worst.nonfinite, cmp.nonfinite);
    }
    const bool ok = passes(worst, tolerance, p.normalize);
    std::printf("%s  %s  %s  %s  inputs=%s  err=%.2e%s%s\n", ok ? "PASS" : "FAIL", v.name.c_str(), where.c_str(),
                params_text(params).c_str(), inputs.name, error_of(worst, p.normalize),
                worst.nonfinite ? (" unwritten=" + std::to_string(worst.nonfinite)).c_str() : "",
                ok ? "" : worst_element(p, ref, worst).c_str());
    return ok ? Verdict::Pass : Verdict::Fail;
}

// --- reductions --------------------------------------------------------------------------------

enum class Fill { Ranges, Constant, Nan };

struct ReductionCase {
    Shape shape;
    Form form;
    Counts counts;
    const char* window;  // "full", "valid", "max-shift-SY,SX", "shifts-DY0:DY1,DX0:DX1"
    Normalize normalize;
    Reduction reduce;
    Fill fill;
    int chunk_maps = 0;  // the plan's scratch for this many maps (several chunks); 0: the library's rule
};

Reduction peaks_of(int k, int min_distance, Subpixel s) {
    Reduction r;
    r.kind = ReductionKind::Peaks, r.k = k, r.min_distance = min_distance, r.subpixel = s;
    return r;
}
Reduction max_of(bool stats) {
    Reduction r;
    r.kind = ReductionKind::MaxOverRights, r.stats = stats;
    return r;
}

// The fixed cases of the header: k = 200 is beyond every window it meets here.
std::vector<ReductionCase> reduction_cases() {
    const Shape a{13, 17, 5, 7}, b{31, 24, 9, 11}, sig{1, 301, 1, 37}, tie{12, 12, 5, 5};
    // Full outputs of 159 x 159 in a few pairs: fft-fused's staged path (at most 32 outputs at 192
    // take 256), whose k = 1 peaks its last pass takes itself (Instance::takes_peak1)
    const Shape st{97, 90, 63, 70};
    // Template matching on fft-fused's staged path (transform 256): zncc's coefficient and the peaks'
    // tile maxima in its store (kStoreNormMinRights = 8 templates or more an image), in chunks of 8
    // maps (the last one's 2 through the epilogue and the reduce kernels' tile pass); windows inside
    // the valid one (the raw problem on the image's crop, of 193 and 198 rows: transform 256 still),
    // one of them 93 wide (tiles of the whole width, 11 rows: row pairs that straddle two).
    const Shape tm{200, 190, 21, 17};
    const Shape piv{32, 32, 32, 32};  // PIV's window pairs, one right a left (fft-fused: paired_kernel at 48)
    const auto P = Subpixel::Parabolic, G = Subpixel::Gaussian;
    const auto none = Normalize::None, zncc = Normalize::Zncc, zl = Normalize::ZeroLag;
    return {
        {a, Form::OneToMany, {1, 4}, "full", none, peaks_of(1, 0, P), Fill::Ranges},
        {a, Form::OneToMany, {1, 4}, "valid", zncc, peaks_of(5, 2, G), Fill::Ranges},
        {a, Form::NToMn, {2, 4}, "max-shift-3,2", zl, peaks_of(200, 0, G), Fill::Ranges},
        {b, Form::OneToOne, {1, 1}, "valid", none, peaks_of(5, 2, P), Fill::Ranges},
        {b, Form::NToM, {2, 3}, "full", zncc, peaks_of(1, 2, G), Fill::Ranges},
        {b, Form::OneToMany, {1, 3}, "max-shift-4,6", none, peaks_of(200, 2, P), Fill::Ranges},
        {b, Form::OneToOne, {1, 1}, "full", zl, peaks_of(5, 0, G), Fill::Ranges},
        {sig, Form::OneToMany, {1, 3}, "valid", zncc, peaks_of(5, 0, P), Fill::Ranges},
        {sig, Form::NToM, {2, 2}, "full", none, peaks_of(1, 2, G), Fill::Ranges},
        {tie, Form::OneToOne, {1, 1}, "valid", none, peaks_of(5, 0, P), Fill::Constant},
        {tie, Form::OneToMany, {1, 2}, "full", none, peaks_of(5, 2, G), Fill::Constant},
        {a, Form::OneToMany, {1, 4}, "full", none, peaks_of(5, 0, P), Fill::Nan},
        {b, Form::NToMn, {2, 4}, "valid", none, peaks_of(5, 2, G), Fill::Nan},
        // k = 1 on maps of two tiles (the reduce kernels' peak1_kernel, a thread a map), some maps NaN
        {b, Form::OneToMany, {1, 3}, "full", none, peaks_of(1, 0, G), Fill::Nan},
        {a, Form::OneToMany, {1, 5}, "full", none, max_of(true), Fill::Ranges},
        {b, Form::NToM, {2, 3}, "valid", zncc, max_of(true), Fill::Ranges},
        {a, Form::NToMn, {2, 6}, "max-shift-3,2", zl, max_of(false), Fill::Ranges},
        {sig, Form::OneToMany, {1, 4}, "valid", none, max_of(true), Fill::Ranges},
        {tie, Form::OneToMany, {1, 3}, "full", none, max_of(true), Fill::Constant},
        {a, Form::NToM, {2, 3}, "full", none, max_of(false), Fill::Nan},
        // n-to-mn on the full output: the cases above are windowed, which the full-only variants
        // refuse, so without these their n-to-mn reductions ran nowhere
        {b, Form::NToMn, {2, 4}, "full", none, peaks_of(5, 1, P), Fill::Ranges},
        {piv, Form::NToMn, {6, 6}, "max-shift-8,8", none, peaks_of(1, 0, G), Fill::Ranges},
        // k > 1 over window pairs: tile maxima, then the selection, over a NaN-filled pair
        {piv, Form::NToMn, {5, 5}, "max-shift-8,8", none, peaks_of(3, 2, P), Fill::Nan},
        // zncc over window pairs: the normalized maps, their peaks from the reduce kernels
        {piv, Form::NToMn, {4, 4}, "max-shift-8,8", zncc, peaks_of(1, 0, G), Fill::Ranges},
        // window pairs whose transform is 64 (full 54 x 52): fft-fused's paired_kernel takes the peaks
        {Shape{30, 33, 25, 20}, Form::NToMn, {3, 3}, "full", none, peaks_of(1, 0, P), Fill::Ranges},
        {a, Form::NToMn, {2, 6}, "full", zncc, max_of(true), Fill::Ranges},
        {st, Form::NToM, {2, 3}, "full", none, peaks_of(1, 0, G), Fill::Ranges},
        {st, Form::OneToMany, {1, 3}, "full", none, peaks_of(1, 0, P), Fill::Nan},
        {tm, Form::OneToMany, {1, 18}, "valid", zncc, peaks_of(5, 3, G), Fill::Ranges, 8},
        {tm, Form::OneToMany, {1, 18}, "shifts-3:175,5:160", zncc, peaks_of(5, 3, P), Fill::Ranges, 8},
        {tm, Form::OneToMany, {1, 9}, "shifts-1:178,2:94", zncc, peaks_of(200, 0, P), Fill::Ranges},
    };
}

std::string reduction_text(const Reduction& r) {
    if (r.kind == ReductionKind::Peaks)
        return "reduce=peaks k=" + std::to_string(r.k) + " min-distance " + std::to_string(r.min_distance) + " " +
               subpixel_name(r.subpixel);
    return std::string("reduce=max-over-rights") + (r.stats ? " stats" : "");
}

Window reduction_window(const Problem& p, const std::string& name) {
    if (name == "full") return full_window(p);
    if (name == "valid") return valid_window(p);
    Window w;
    if (std::sscanf(name.c_str(), "shifts-%d:%d,%d:%d", &w.dy0, &w.dy1, &w.dx0, &w.dx1) == 4) return w;
    int sy = 0, sx = 0;
    std::sscanf(name.c_str(), "max-shift-%d,%d", &sy, &sx);
    return Window{-sy, sy, -sx, sx};
}

// Every selected variant on every reduction case of a selected form it supports; one line each.
void check_reductions(const std::set<std::string>& only_variants, const std::set<Form>& only_forms, uint64_t seed,
                      double tolerance_override, Shard& shard, cudaStream_t stream, Tally& tally) {
    const std::vector<ReductionCase> cases = reduction_cases();
    // Per variant and form: the full-output cases of a shape it declares (which it must compute:
    // every variant computes the full output) and the cases passed. A variant that refused all of
    // them would otherwise show only SKIP lines and pass.
    std::map<std::string, int> full_declared, passed;
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const ReductionCase& rc = cases[ci];
        if (!only_forms.empty() && !only_forms.count(rc.form)) continue;
        Problem p{rc.form, rc.shape.hL, rc.shape.wL, rc.shape.hR, rc.shape.wR, rc.counts.nL, rc.counts.nR};
        p.normalize = rc.normalize;
        p.window = reduction_window(p, rc.window);
        p.check();
        rc.reduce.check(p);
        // The inputs, on the host (for the reference) and the device, with misaligned copies.
        std::vector<float> hl(size_t(p.left_elems())), hr(size_t(p.right_elems()));
        DeviceBuffer<float> dl(hl.size()), dr(hr.size());
        InputRange inputs = inputs_for(int(ci), rc.form, rc.normalize);
        std::string inputs_name = inputs.name;
        if (rc.fill == Fill::Constant) {
            std::fill(hl.begin(), hl.end(), 1.0f), std::fill(hr.begin(), hr.end(), 1.0f);
            inputs_name = "constant";
        } else {
            fill_inputs(p, dl.get(), dr.get(), seed + 2 * ci, inputs, stream);
            XC_CUDA_CHECK(cudaMemcpyAsync(hl.data(), dl.get(), dl.bytes(), cudaMemcpyDeviceToHost, stream));
            XC_CUDA_CHECK(cudaMemcpyAsync(hr.data(), dr.get(), dr.bytes(), cudaMemcpyDeviceToHost, stream));
            XC_CUDA_CHECK(cudaStreamSynchronize(stream));
            if (rc.fill == Fill::Nan) {
                // One NaN inside the first left and one in the last right: maps partly and wholly NaN.
                hl[size_t(p.hL / 2) * p.wL + size_t(p.wL / 3)] = std::numeric_limits<float>::quiet_NaN();
                hr[hr.size() - 1 - size_t(p.hR * p.wR / 2)] = std::numeric_limits<float>::quiet_NaN();
                inputs_name = "nan";
            }
        }
        XC_CUDA_CHECK(cudaMemcpy(dl.get(), hl.data(), dl.bytes(), cudaMemcpyHostToDevice));
        XC_CUDA_CHECK(cudaMemcpy(dr.get(), hr.data(), dr.bytes(), cudaMemcpyHostToDevice));
        DeviceBuffer<float> dl_off(dl.size() + 1), dr_off(dr.size() + 1);
        XC_CUDA_CHECK(cudaMemcpy(dl_off.get() + 1, hl.data(), dl.bytes(), cudaMemcpyHostToDevice));
        XC_CUDA_CHECK(cudaMemcpy(dr_off.get() + 1, hr.data(), dr.bytes(), cudaMemcpyHostToDevice));
        // The plans run on `stream`, which does not wait for the default stream's copies: they must be in
        // device memory first (cudaMemcpy from pageable memory may return before its DMA ends: upload()).
        XC_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        std::vector<double> maps(size_t(p.out_elems()));
        reference_cpu(p, hl.data(), hr.data(), maps.data());
        const std::string where = p.describe() + "  " + reduction_text(rc.reduce) + "  window=" + rc.window;

        for (const auto& v : variants()) {
            if (!v.supports(rc.form) || (!only_variants.empty() && !only_variants.count(v.name))) continue;
            if (!shard.take()) continue;
            const std::string key = v.name + " " + form_name(rc.form);
            if (std::string(rc.window) == "full" && declares_shape(v, p)) ++full_declared[key];
            const Params params = covering_set(v).front();
            std::optional<Plan> plan;
            try {
                PlanSpec spec = spec_of(p, v.name, params);
                spec.reduce = rc.reduce;
                spec.reduce.scratch_bytes = int64_t(rc.chunk_maps) * p.out_h() * p.out_w() * int64_t(sizeof(float));
                plan.emplace(spec);
            } catch (const UsageError& e) {
                const bool oom = out_of_memory(e);  // a failure here as in check_variant
                std::printf("%s  %s  %s  %s  %s\n", oom ? "FAIL" : "SKIP", v.name.c_str(), where.c_str(),
                            params_text(params).c_str(), e.what());
                oom ? ++tally.failed : ++tally.skipped;
                continue;
            }
            const double bound = tolerance_override > 0 ? tolerance_override : bound_for(v.tolerance, p.normalize);
            DeviceReduced out(p, rc.reduce, 1);
            HostReduced got(p, rc.reduce);
            PeakCheck worst;
            for (int run = 0; run < 2; ++run) {
                const bool off = run == 1;
                // 0xff bytes (NaN, index and shift -1) in the first run, 0x7f (3.4e38, indices
                // far out of range) in the second: NaN with index -1 is a legal answer where inputs
                // hold NaN, so an output left unwritten is seen by the second poison there
                out.poison(stream, off ? 0x7f : 0xff);
                plan->execute(off ? dl_off.get() + 1 : dl.get(), off ? dr_off.get() + 1 : dr.get(), out.outputs(off),
                              stream);
                out.copy_to(got, off, stream);
                PeakCheck c = check_answer(p, rc.reduce, maps.data(), got, bound, absolute_error_for(p.normalize), 4,
                                           rc.fill != Fill::Nan);
                if (c.failed > worst.failed) worst = std::move(c);
            }
            const bool ok = worst.failed == 0;
            std::printf("%s  %s  %s  %s  inputs=%s  failed=%lld\n", ok ? "PASS" : "FAIL", v.name.c_str(), where.c_str(),
                        params_text(params).c_str(), inputs_name.c_str(), (long long)worst.failed);
            for (const std::string& line : worst.failures) std::printf("      %s\n", line.c_str());
            ok ? (++tally.passed, ++passed[key]) : ++tally.failed;
        }
        std::fflush(stdout);
    }
    for (const auto& [key, n] : full_declared)
        if (n && !passed[key] && shard.whole()) {
            std::printf("FAIL  %s  no reductions case passed (its %d full-output cases were refused or failed)\n",
                        key.c_str(), n);
            ++tally.failed;
        }
}

// The command line (see the header).
struct Options {
    std::set<std::string> only_variants;
    std::set<Form> only_forms;
    bool quick = false, covering_only = false;
    bool full_checks = true, window_checks = true;  // --windows also
    uint64_t seed = 12345;
    std::vector<Shape> given_shapes;
    double tolerance_override = 0;  // 0: each variant's own
    std::vector<Normalize> modes = {Normalize::None};
    bool reductions = true, only_reductions = false;  // --reductions also
    Shard shard;
    bool help = false;  // --help: the usage, nothing else

    bool selects(const Variant& v) const { return only_variants.empty() || only_variants.count(v.name); }
    bool selects(Form f) const { return only_forms.empty() || only_forms.count(f); }
};

const char* kUsage =
    "usage: xcorr_validate [--variant NAME]... [--form FORM]... [--quick] [--seed N] [--tolerance X]\n"
    "                      [--shape HLxWL,HRxWR]... [--params all|covering] [--windows only|also|none]\n"
    "                      [--normalize none|zncc|zero-lag|all] [--reductions also|only|none]\n"
    "                      [--shard K/N]\n"
    "  --variant NAME  only this variant (repeatable)\n"
    "  --form FORM     only this form (repeatable)\n"
    "  --quick         the small shapes only\n"
    "  --seed N        first input seed (default 12345)\n"
    "  --reductions R  also (default): after the maps, each variant's reduced plans (peaks:\n"
    "                  k 1, 5, beyond the window, min-distance 0 and 2, parabolic and gaussian;\n"
    "                  max over rights: one-to-many, n-to-m, n-to-mn, stats) on fixed cases\n"
    "                  (windows, normalizations, ties, NaN), by reduce.hpp's checks against\n"
    "                  the float64 maps; only: just those; none: none of them\n"
    "  --shard K/N     only the checks numbered K modulo N (N processes run each check once;\n"
    "                  the \"no case passed\" guards are left to a whole run)\n"
    "  --tolerance X   hold every variant to error X instead of its declared bound (relative;\n"
    "                  absolute for normalized outputs)\n"
    "  --normalize N   run every case normalized so (all: none, zncc, zero-lag in turn; default\n"
    "                  none); zncc outputs are held to absolute error max(1e-4, tolerance),\n"
    "                  zero-lag ones to the relative error of their variant\n"
    "  --shape S       only these shapes (repeatable; every form, few matrices), e.g. 37x53,29x41;\n"
    "                  a variant none of whose --shape cases it computes (outside what it\n"
    "                  declares, or every full output refused while its windows passed) is\n"
    "                  a SKIP with the reason, where the default shapes would fail it\n"
    "  --params P      all: every parameter combination on small shapes (default);\n"
    "                  covering: each instantiated value once (short runs, e.g. under\n"
    "                  compute-sanitizer)\n"
    "  --windows W     also: the full output and, for every variant that declares more windows\n"
    "                  (xcorr list), the windows it computes of valid, same, max-shift-2,3, a\n"
    "                  max-shift beyond the matrices, partly-beyond, wholly-beyond (default);\n"
    "                  only: just those windows (and the reference's windows); none: no\n"
    "                  variant on a window (the full output and the reference's windows)\n"
    "Inputs rotate over [0,1), [-1,1) and 4+[-1,1) by case. Exit status: 0 all passed,\n"
    "1 any failure, 2 bad usage, 3 no GPU.\n";

// The options up to the end or to --help (o.help; what follows it is not read); UsageError for a
// bad one.
Options parse_options(int argc, char** argv) {
    Options o;
    OptionSeen seen;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw UsageError(a + " needs a value");
            return argv[++i];
        };
        // --variant, --form and --shape add up; the one-value options are refused twice (the
        // last silently won)
        if (a == "--seed" || a == "--params" || a == "--windows" || a == "--normalize" || a == "--tolerance" ||
            a == "--reductions" || a == "--shard")
            seen.mark(a);
        if (a == "--variant") o.only_variants.insert(find_variant(next()).name);
        else if (a == "--form") o.only_forms.insert(parse_form(next()));
        else if (a == "--quick") o.quick = true;
        else if (a == "--seed") o.seed = uint64_t(parse_integer("--seed", next(), 0, INT64_MAX));
        else if (a == "--shape") o.given_shapes.push_back(parse_shape(next()));
        else if (a == "--params") {
            const std::string v = next();
            if (v != "all" && v != "covering") throw UsageError("--params: expected all or covering, got " + v);
            o.covering_only = v == "covering";
        } else if (a == "--windows") {
            const std::string v = next();
            if (v != "only" && v != "also" && v != "none")
                throw UsageError("--windows: expected only, also or none, got " + v);
            o.full_checks = v != "only";
            o.window_checks = v != "none";
        } else if (a == "--normalize") {
            const std::string v = next();
            o.modes = v == "all" ? std::vector<Normalize>(std::begin(kAllNormalizations), std::end(kAllNormalizations))
                                 : std::vector<Normalize>{parse_normalize(v)};
        } else if (a == "--reductions") {
            const std::string v = next();
            if (v != "only" && v != "also" && v != "none")
                throw UsageError("--reductions: expected only, also or none, got " + v);
            o.reductions = v != "none";
            o.only_reductions = v == "only";
        } else if (a == "--shard") o.shard = parse_shard(next());
        else if (a == "--tolerance") o.tolerance_override = parse_positive("--tolerance", next());
        else if (a == "--help" || a == "-h") {
            o.help = true;
            return o;
        } else throw UsageError("unknown argument " + a);
    }
    return o;
}

// A selection that validates nothing is bad usage, not "0 passed, 0 failed" and exit 0.
void check_selection(const Options& o) {
    const auto selection = [&](bool windows) {
        for (const auto& v : variants())
            if (o.selects(v) && (!windows || has_windows(v)))
                for (Form f : v.forms)
                    if (o.selects(f)) return true;
        return false;
    };
    if (!selection(false))
        throw UsageError("nothing to validate: no selected variant computes a selected form (xcorr list shows "
                         "each variant's forms)");
    if (o.only_reductions && (o.given_shapes.size() || !o.window_checks || !o.full_checks))
        throw UsageError("--reductions only runs the fixed reduction cases: give no --shape or --windows with it");
    if (!o.full_checks && !selection(true))
        throw UsageError("--windows only: no selected variant declares a window besides full in a selected "
                         "form (xcorr list --json shows each variant's windows)");
}

void print_run_header(const GpuInfo& gpu, const Options& o) {
    std::printf("# %s (cc %d.%d, %d SMs), seed %llu%s%s", gpu.name.c_str(), gpu.cc_major, gpu.cc_minor,
                gpu.sm_count, (unsigned long long)o.seed, o.quick ? ", quick" : "",
                o.full_checks ? (o.window_checks ? "" : ", full output only") : ", windows only");
    if (o.tolerance_override > 0) std::printf(", tolerance %.3e for every variant", o.tolerance_override);
    if (!o.shard.whole()) std::printf(", shard %lld/%lld (no \"no case passed\" guards)", o.shard.k, o.shard.n);
    std::printf("\n");
}

// What the closing guards (check_guards) count, per guard_key (variant, form, normalization).
struct Guards {
    std::map<std::string, int> passes, window_tries, window_passes;
    // Cases within the shapes a variant declares (Variant::shape_refusal: 1 x n signals, a shift
    // cap), and full cases that failed (not refused): with --shape, what decides SKIP over "no case
    // passed".
    std::map<std::string, int> declared, full_fails;
};

// A window of a case (variant_windows), its reference and an output buffer one element longer (the
// second run's misaligned output) made on first use.
struct WindowCase {
    std::string name;
    Problem problem;
    std::optional<Reference> reference = {};
    DeviceBuffer<float> out = {};
};

// One shape x form x normalization case: its inputs, their misaligned copies (one float into an
// allocation one longer), the full output's reference made on first use (a --shard may have no
// check of this case's full output; full_reference synchronises) and its windows.
struct MapCase {
    Problem p;
    InputRange inputs;
    DeviceBuffer<float> left, right, out, left_off, right_off, out_off;
    std::optional<Reference> reference = {};
    std::vector<WindowCase> windows = {};

    MapCase(const Problem& problem, InputRange range, bool full_checks, uint64_t seed, cudaStream_t stream)
        : p(problem), inputs(range), left(size_t(p.left_elems())), right(size_t(p.right_elems())),
          out(size_t(full_checks ? p.out_elems() : 0)), left_off(left.size() + 1), right_off(right.size() + 1),
          out_off(out.size() + 1) {
        fill_inputs(p, left.get(), right.get(), seed, inputs, stream);
        XC_CUDA_CHECK(cudaMemcpyAsync(left_off.get() + 1, left.get(), left.bytes(), cudaMemcpyDeviceToDevice, stream));
        XC_CUDA_CHECK(cudaMemcpyAsync(right_off.get() + 1, right.get(), right.bytes(), cudaMemcpyDeviceToDevice, stream));
        XC_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    const Reference& full_ref(cudaStream_t stream) {
        if (!reference) reference = full_reference(p, left.get(), right.get(), stream);
        return *reference;
    }
    // The runs' buffers: `output`, and `output_off` for the misaligned runs.
    Runs runs(float* output, float* output_off) const {
        return Runs{left.get(), right.get(), output, left_off.get() + 1, right_off.get() + 1, output_off};
    }
};

// The GPU reference must agree with the CPU one wherever the CPU one is quick: the full output
// (unless --windows only) and the reference's windows.
void check_gpu_reference(const Options& o, MapCase& c, cudaStream_t stream, Tally& tally) {
    const Problem& p = c.p;
    std::vector<float> hl(c.left.size()), hr(c.right.size());
    XC_CUDA_CHECK(cudaMemcpy(hl.data(), c.left.get(), c.left.bytes(), cudaMemcpyDeviceToHost));
    XC_CUDA_CHECK(cudaMemcpy(hr.data(), c.right.get(), c.right.bytes(), cudaMemcpyDeviceToHost));
    if (o.full_checks) {
        const std::vector<double>& ref = c.full_ref(stream).values;
        std::vector<double> cpu(ref.size());
        reference_cpu(p, hl.data(), hr.data(), cpu.data());
        const Comparison cmp = compare_to_reference(ref.data(), cpu.data(), cpu.size());
        const bool ok = passes(cmp, 1e-12);
        std::printf("%s  reference-gpu  %s  vs reference-cpu  inputs=%s  err=%.2e\n", ok ? "PASS" : "FAIL",
                    p.describe().c_str(), c.inputs.name, cmp.rel_error);
        ok ? ++tally.passed : ++tally.failed;
    }
    check_reference_windows(p, c.left.get(), c.right.get(), hl, hr, c.inputs.name, stream, tally);
}

// Variant `v` on case `c` of tier `tier`: each of its parameter combinations that the tier runs, on
// the full output and on every window of the case that it computes.
void check_variant_on_case(Options& o, const Variant& v, MapCase& c, int tier, cudaStream_t stream, Tally& tally,
                           Guards& g) {
    const Problem& p = c.p;
    const auto all = all_combinations(v);
    const bool everything = !o.covering_only && (tier == 0 ? !o.quick : (tier == 1 && all.size() <= 16));
    const auto combos = everything ? all : covering_set(v);
    const double tolerance = o.tolerance_override > 0 ? o.tolerance_override : bound_for(v.tolerance, p.normalize);
    const std::string key = guard_key(v, p.form, p.normalize);
    // A transform limit (max_transform) leaves the shape declared: its full output refused, its
    // windows may pass (the SKIP or FAIL of check_guards says which).
    if (declares_shape(v, p)) ++g.declared[key];
    for (const Params& params : combos) {
        if (o.full_checks && o.shard.take()) {
            const Verdict verdict = check_variant(v, params, p, nullptr, c.full_ref(stream),
                                                  c.runs(c.out.get(), c.out_off.get() + 1), tolerance, c.inputs, stream);
            count(verdict, tally);
            if (verdict == Verdict::Pass) ++g.passes[key];
            if (verdict == Verdict::Fail) ++g.full_fails[key];
        }
        if (!has_windows(v)) continue;
        for (WindowCase& w : c.windows) {
            if (!v.supports_problem(w.problem) || !o.shard.take()) continue;
            if (!w.reference) {
                w.reference = full_reference(w.problem, c.left.get(), c.right.get(), stream);
                w.out = DeviceBuffer<float>(size_t(w.problem.out_elems()) + 1);
            }
            const Verdict verdict = check_variant(v, params, w.problem, w.name.c_str(), *w.reference,
                                                  c.runs(w.out.get(), w.out.get() + 1), tolerance, c.inputs, stream);
            count(verdict, tally);
            ++g.window_tries[key];
            if (verdict == Verdict::Pass) ++g.window_passes[key];
        }
    }
}

// The shape `s` (numbered `shape_number` over all tiers, in tier `tier`) in one form and
// normalization: the reference's checks, then every selected variant. `case_seed` advances by 2 per
// case, run or not, so that each case keeps its inputs whatever is selected.
void check_map_case(Options& o, const Shape& s, int shape_number, int tier, Form form, Normalize mode,
                    uint64_t& case_seed, cudaStream_t stream, Tally& tally, Guards& g) {
    const Counts n = counts_for(form, tier == 2 || !o.given_shapes.empty(), shape_number);
    Problem p{form, s.hL, s.wL, s.hR, s.wR, n.nL, n.nR};
    p.normalize = mode;
    p.check();
    const auto selected = [&](const Variant& v) { return v.supports(form) && o.selects(v); };
    bool any = false, any_windows = false;
    for (const auto& v : variants()) {
        any |= selected(v);
        any_windows |= selected(v) && has_windows(v);
    }
    if (!any || (!o.full_checks && !any_windows)) {
        case_seed += 2;  // the seeds of --windows also, case for case
        return;
    }
    MapCase c(p, inputs_for(shape_number, form, mode), o.full_checks, case_seed + 1, stream);  // the seeds of before
    case_seed += 2;
    if (p.fmas() < 5e7 && o.shard.take()) check_gpu_reference(o, c, stream, tally);
    if (o.window_checks && any_windows)
        for (const auto& [name, window] : variant_windows(p)) {
            Problem pw = p;
            pw.window = window;
            pw.check();
            c.windows.push_back(WindowCase{name, pw});
        }
    for (const auto& v : variants())
        if (selected(v)) check_variant_on_case(o, v, c, tier, stream, tally, g);
    std::fflush(stdout);
}

// The output maps: every tier's shapes (or the --shape list) x form x normalization.
void check_map_cases(Options& o, cudaStream_t stream, Tally& tally, Guards& g) {
    std::vector<std::pair<const std::vector<Shape>*, int>> tiers = {{&kSmall, 0}, {&kMedium, 1}, {&kLarge, 2}};
    if (!o.given_shapes.empty()) tiers = {{&o.given_shapes, 0}};
    if (o.only_reductions) tiers.clear();
    // zncc's reference rests on the matrices' variances: checked first where zncc runs on the
    // built-in shapes (not in the short --shape runs of the sanitizers, a process per variant).
    if (o.given_shapes.empty() && !o.only_reductions && o.full_checks &&
        std::count(o.modes.begin(), o.modes.end(), Normalize::Zncc) && o.shard.take())
        check_matrix_variances(o.seed + 2000003, stream, tally);
    uint64_t case_seed = o.seed;
    int shape_number = -1;
    for (const auto& [shapes, tier] : tiers) {
        if (o.quick && tier > 0) break;
        for (const Shape& s : *shapes) {
            ++shape_number;
            for (Form form : kAllForms)
                for (Normalize mode : o.modes) {
                    if (!o.selects(form)) {
                        case_seed += 2;  // each case keeps its inputs whatever is selected
                        continue;
                    }
                    // 512 x 512 of the default tiers only one-to-one: the other forms multiply its
                    // reference cost. A --shape runs in every form asked for (dropped, it was a SKIP
                    // with a reason that was not the reason).
                    if (o.given_shapes.empty() && s.hL >= 512 && form != Form::OneToOne) continue;
                    check_map_case(o, s, shape_number, tier, form, mode, case_seed, stream, tally, g);
                }
        }
    }
}

// A variant that skipped every case of a form it declares has not been validated at all; nor its
// windows, when it computes some that the cases had but passed none of them.
void check_guards(const Options& o, Guards& g, Tally& tally) {
    if (o.only_reductions || !o.shard.whole()) return;  // a shard's passes are not the variant's
    for (const auto& v : variants()) {
        if (!o.selects(v)) continue;
        for (Form f : v.forms)
            for (Normalize mode : o.modes) {
                if (!o.selects(f)) continue;
                const std::string key = guard_key(v, f, mode);
                const char* what = key.c_str() + v.name.size() + 1;  // the form, and the mode under --normalize
                if (o.full_checks && !g.passes[key]) {
                    // Shapes given with --shape may all lie outside what the variant declares it
                    // computes (a 1-D kernel among 2-D shapes): not run, said so. The default
                    // tiers hold a case of every declared shape, so there it stays a failure.
                    if (!o.given_shapes.empty() && !g.declared[key]) {
                        const std::string declared =
                            v.signals_only     ? std::string("1 x n signals only")
                            : v.max_shifts > 0 ? "at most " + std::to_string(v.max_shifts) + " shifts per pair"
                                               : "transforms up to " + std::to_string(v.max_transform) + " points";
                        std::printf("SKIP  %s  %s  no --shape within the shapes it declares (%s)\n", v.name.c_str(),
                                    what, declared.c_str());
                        ++tally.skipped;
                        continue;
                    }
                    // Or every full output of the --shape list was refused at run time (fft-fused's
                    // transforms of at most 1024 a side) while its windows of them passed: validated
                    // there, said so. A full case that failed keeps the failure.
                    if (!o.given_shapes.empty() && !g.full_fails[key] && g.window_passes[key]) {
                        std::printf("SKIP  %s  %s  every full output of the --shape list refused (its SKIP lines say "
                                    "why); %d window cases passed\n",
                                    v.name.c_str(), what, g.window_passes[key]);
                        ++tally.skipped;
                        continue;
                    }
                    std::printf("FAIL  %s  %s  no case passed (every combination was rejected or failed)\n",
                                v.name.c_str(), what);
                    ++tally.failed;
                }
                if (g.window_tries[key] && !g.window_passes[key]) {
                    std::printf("FAIL  %s  %s  no window case passed (every window was rejected or failed)\n",
                                v.name.c_str(), what);
                    ++tally.failed;
                }
            }
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    try {
        check_environment();
        o = parse_options(argc, argv);
        if (o.help) {
            std::fputs(kUsage, stdout);
            return 0;
        }
        check_selection(o);
        print_run_header(require_gpu(), o);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "xcorr_validate: error: %s\n", e.what());
        return 2;
    } catch (const NoGpuError& e) {
        std::fprintf(stderr, "xcorr_validate: no GPU: %s\n", e.what());
        return 3;
    }

    Tally tally;
    try {
        cudaStream_t stream;
        XC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        Guards guards;
        check_map_cases(o, stream, tally, guards);
        // The reductions' cases, seeded apart from the maps' (whose seeds stay as they were).
        if (o.reductions)
            check_reductions(o.only_variants, o.only_forms, o.seed + 1000003, o.tolerance_override, o.shard, stream,
                             tally);
        check_guards(o, guards, tally);
        XC_CUDA_CHECK(cudaStreamDestroy(stream));
    } catch (const std::bad_alloc&) {
        // Cases too large for the host memory the process may use (--shape): bad input, not a
        // variant's failure.
        std::fprintf(stderr, "xcorr_validate: error: not enough host memory for the cases selected: an allocation "
                             "failed (%s); give smaller --shape\n", host_memory_left().c_str());
        return 2;
    } catch (const std::exception& e) {
        // A CUDA fault (illegal address, ...) leaves the context unusable: stop here, loudly.
        std::printf("FAIL  aborted: %s\n", e.what());
        ++tally.failed;
    }
    std::printf("%d passed, %d failed, %d skipped\n", tally.passed, tally.failed, tally.skipped);
    if (!tally.passed && !tally.failed) {  // every case skipped: nothing was validated
        std::fprintf(stderr, "xcorr_validate: error: nothing validated (%s)\n",
                     tally.skipped ? "every case was skipped; the SKIP lines say why"
                                   : "this --shard holds no check of the selection");
        return 2;
    }
    return tally.failed ? 1 : 0;
}
