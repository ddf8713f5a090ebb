// xcorr_bench: Google Benchmark registration generated from the variant registry.
//
//   xcorr_bench [--case "SPEC"]... [--cases FILE] [--min-time SECONDS] [--batch N] [--cold] [--launch-floor]
//               [--seed N] [--check-tolerance X] [Google Benchmark flags, e.g. --benchmark_repetitions=10
//               --benchmark_out=out.json --benchmark_out_format=json --benchmark_filter=RE]
//
// A case SPEC is space-separated key=value: variant=, form=, size= (sets hL, wL, hR, wR) or
// hL= wL= hR= wR=, nL= nR= (stack counts as in CONVENTIONS.md), batch=, and variant parameters.
// At most one window key chooses the shifts computed (CONVENTIONS.md, "Output windows"; default
// the full output): window=full|valid|same, max_shift=SY[,SX] (dy in -SY..SY, dx in -SX..SX) or
// shifts=DY0:DY1,DX0:DX1 (inclusive), as xcorr run's --mode, --max-shift, --shifts. A window the
// variant does not declare (xcorr list) is refused, like every bad case, before the GPU is needed.
// A window that is the full output's rectangle (valid with a 1 x 1 right, say) is the full case.
// normalize=none|zncc|zero-lag (CONVENTIONS.md, "Normalization"; default none): the variant's raw
// correlation inside the normalization's fast path (xcorr/normalize.hpp); the timed call is then
// the whole normalized computation (means, shifted copies, summed-area tables, the raw run with
// the variant's finish(), the epilogue; zero-lag: C(0, 0), the raw run, the division).
// reduce=peaks with k= (default 1), min_distance= (default 0) and subpixel= (default parabolic), or
// reduce=max-over-rights with stats=0|1 (default 0) (CONVENTIONS.md, "Reductions: peaks and maxima"):
// a plan with that PlanSpec::reduce, timed whole (its execute: chunks of maps in device scratch and
// their reduction; no map written). Its check before timing runs the same plan on the check's
// inputs and holds the answer to reduce.hpp's checks (check_peaks, check_max_over_rights) against
// the float64 maps where those cost at most 1e10 multiply-adds and 2^24 elements; beyond, against
// the variant's own unreduced map of the same inputs (itself checked at the sampled outputs as a
// map case is) with twice the bound. The counters gain k, min_distance, stats and check_failed.
// Without cases, a smoke set runs: every variant x every form it supports, defaults, 32 x 32 (a
// signals-only variant 1 x 1024 against 1 x 32, a variant limited in shifts within ±1).
//
// Timing protocol (the paper's): one Google Benchmark iteration is a batch of back-to-back calls
// of the variant's timed step between one pair of CUDA events on one stream; the iteration's time
// divided by the batch is reported as the time per call (manual time). --min-time is the GPU time
// each repetition runs for (paper: 0.1 s). The batch grows as the problem shrinks, so that a
// microsecond kernel is not dominated by event and launch gaps, and is recorded as a counter; it
// shrinks where one call, timed after the check, shows it would outlast --min-time (timed_batch).
// Variants whose work is far below the definition's FMA count (fft: pilot_batch in the registry)
// get the batch from a pilot instead: 3 timed calls after a warm-up, then enough calls for
// kMinIterationSeconds (about the heuristic's 3e9 FMAs at the H200's FP32 peak).
// With --cold the L2 cache is flushed before every iteration and the batch is 1.
// --launch-floor adds "launch-floor/empty-kernel": an empty kernel timed the same way, the floor
// under every tiny problem (launch throughput, not arithmetic).
//
// Every case's output (its window's) is checked once, before it is timed (after the warm-up, in
// the first repetition, on the case's own buffers and instance, output poisoned with NaN, finish()
// applied when the variant has one): on inputs uniform in [-1, 1) from seeds N + 2 and N + 3, against
// the float64 reference at every output element where that costs at most 1e10 multiply-adds, else
// at 65536 sampled outputs (harness/check.hpp: every matrix's corners and edges, seeded random
// positions; seed N + 4). Relative error ||out - ref|| / ||ref|| over the compared outputs above
// the variant's tolerance, or any non-finite output, fails the case: it is skipped with the error
// "validation failed: ...", never timed. --check-tolerance X replaces every variant's tolerance
// with X (tests). Then the inputs are refilled with [0, 1) from seeds N, N + 1 and timed.
// A normalized case is checked on 1000 + [-8, 8) (zncc: the cancellation case) or 4 + [-1, 1)
// (zero-lag: C(0, 0) away from 0) instead; zncc by the largest absolute error against
// max(1e-4, the variant's tolerance) (CONVENTIONS.md, "Accuracy for normalized outputs"), zero-lag
// by the relative error against the variant's tolerance (reference.hpp, bound_for).
//
// Name:     <variant>/<form>/hL:../wL:../hR:../wR:../nL:../nR:..[/shifts:DY0:DY1,DX0:DX1][/norm:<mode>]
//           [/<param>:<value>...] (the shifts segment only for a window other than the full output,
//           the norm segment only for a normalization other than none: plain names are unchanged)
// Counters: hL wL hR wR nL nR batch fmas FLOPS cold check_err check_samples enqueue_time [finish_time]
//           case_seconds
//           [dy0 dy1 dx0 dx1: a windowed case only; fmas, and the batch, are then the window's];
//           label: family, timed, precision. enqueue_time: the host's seconds per call spent
//           issuing the timed calls (steady clock around the batch's loop, between the two event
//           records), beside the GPU's time per call: near it, the host's launching bounds the
//           case (while the GPU runs behind, the host returns from a launch at once, until the
//           driver's launch queue is full); far below it, the GPU does. The timing thread's CPU
//           time (cpu_time) cannot tell: it spins in the wait for the stop event. case_seconds:
//           the wall seconds from the case's first entry to the end of this repetition (its
//           buffers, inputs, plan, warm-up, check and timing; the last repetition's is the case's
//           whole), what the runner's cost model (xcsuite/cost.py) estimates.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/context.hpp"
#include "harness/reduce_check.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/gpu.hpp"
#include "xcorr/plan.hpp"
#include "xcorr/reduce.hpp"
#include "xcorr/registry.hpp"

using namespace xcorr;

namespace {

// --help prints this, then Google Benchmark's own options (its --help, which exits).
const char* kUsage =
    "usage: xcorr_bench [--case SPEC]... [--cases FILE] [--min-time SECONDS] [--batch N] [--cold]\n"
    "                   [--launch-floor] [--seed N] [--check-tolerance X] [Google Benchmark options]\n"
    "  --case SPEC      a case: space-separated key=value, variant= form= size= (or hL= wL= hR= wR=)\n"
    "                   nL= nR= batch= and the variant's parameters; without cases, every variant x\n"
    "                   form at 32 x 32. At most one window key (default: the full output):\n"
    "                     window=full|valid|same     as scipy.signal.correlate2d's mode\n"
    "                     max_shift=SY[,SX]          dy in -SY..SY, dx in -SX..SX (SX = SY if left out)\n"
    "                     shifts=DY0:DY1,DX0:DX1     dy in DY0..DY1, dx in DX0..DX1 (inclusive)\n"
    "                   only a window the variant computes (`xcorr list`); a windowed case's name\n"
    "                   holds /shifts:DY0:DY1,DX0:DX1 and its counters dy0 dy1 dx0 dx1\n"
    "                   normalize=none|zncc|zero-lag: the normalized output (CONVENTIONS.md), timed\n"
    "                   whole; the name gains /norm:zncc (or /norm:zero-lag)\n"
    "                   reduce=peaks [k=K] [min_distance=R] [subpixel=parabolic|gaussian|none] or\n"
    "                   reduce=max-over-rights [stats=0|1]: the reduced plan's execute is timed (no map\n"
    "                   is written), its answer checked first against the float64 maps (reduce.hpp);\n"
    "                   the name gains /reduce:peaks/k:K/min_distance:R/subpixel:S (/reduce:max-over-rights/stats:0|1)\n"
    "  --cases FILE     one SPEC per line (# starts a comment)\n"
    "  --min-time S     GPU time per repetition in seconds (default 0.1)\n"
    "  --batch N        calls per timed iteration (default: from the problem size, fewer where one\n"
    "                   call is slow enough that they would outlast --min-time)\n"
    "  --cold           flush the L2 cache before every iteration (batch 1)\n"
    "  --launch-floor   also time an empty kernel, the floor under every tiny problem\n"
    "  --seed N         seed of the generated inputs (default 42)\n"
    "  --check-tolerance X  hold every case's check before timing to relative error X instead of\n"
    "                   its variant's bound (tests)\n"
    "Google Benchmark's options:\n";

struct Options {
    double min_time = 0.1;
    int batch = 0;  // 0: from the problem size
    bool cold = false;
    uint64_t seed = 42;
    double check_tolerance = 0;  // 0: each variant's own
};

// The check's inputs are signed [-1, 1), not the timed [0, 1): a lost or flipped sign is off by
// O(1), and with no DC term for an error to hide under, a term missing from every sum is
// ~1/sqrt(overlap) of the output's norm instead of ~1/overlap (2e-3 against 5e-6 at 512 x 512:
// above every bound, where [0, 1) would pass it). Rounding errors stay comparable: a float32
// FFT's relative error is 1.3-2x that on [0, 1) (numpy, 16 to 256), a direct sum's ~1.2x.
constexpr InputRange kCheckRange = kSignedRange;

// The outcome of a case's check, made once per case (the first repetition) and reused by the rest.
struct CheckResult {
    Comparison cmp;
    size_t samples;
    double tolerance;
    bool ok;
    std::string message;  // the error of a failed check
};

struct Case {
    const Variant* variant;
    Problem problem;
    Params params;
    int batch;
    bool batch_given;  // batch= in the case or --batch: no pilot
    Reduction reduce = {};
    bool reduced() const { return reduce.kind != ReductionKind::Map; }
    mutable std::optional<CheckResult> check = {};
    // The calls per timed iteration, settled in the case's first entry (timed_batch).
    mutable std::optional<int> timed = {};
    // The case's first entry (its first repetition, or Google Benchmark's first run of it): the
    // start of what case_seconds counts.
    mutable std::optional<std::chrono::steady_clock::time_point> began = {};
    double seconds_so_far() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - *began).count();
    }
};

// A case's window key (window=, max_shift=, shifts=), parsed as xcorr run's option of the same
// meaning, its messages naming the key.
WindowRequest parse_window_key(const std::string& key, const std::string& value) {
    if (key == "window") return parse_mode(value, "window=");
    if (key == "max_shift") return parse_max_shift(value, "max_shift=");
    return parse_shifts(value, "shifts=");
}

// A case line's keys as given: the problem's, the window's, the reduction's and the variant's
// parameters, before any is checked against the variant.
struct CaseKeys {
    std::string variant_name, form_text, window_key;
    std::optional<WindowRequest> window;
    Params given;
    Problem p;
    int batch = 0;
    bool batch_given = false;
    std::optional<std::string> reduce_text, k_text, distance_text, subpixel_text, stats_text;
};

CaseKeys read_case_keys(const std::string& spec, const Options& opt) {
    CaseKeys c;
    c.batch = opt.batch;
    c.batch_given = opt.batch > 0;
    Problem& p = c.p;
    std::istringstream in(spec);
    std::string tok;
    auto to_int = [&](const std::string& k, const std::string& v) {
        return int(parse_integer("case '" + spec + "': " + k, v, INT32_MIN + 1, INT32_MAX));
    };
    std::set<std::string> keys;
    while (in >> tok) {
        auto eq = tok.find('=');
        if (eq == std::string::npos || eq == 0) throw UsageError("case '" + spec + "': expected key=value, got " + tok);
        const std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
        const bool window_key_given = k == "window" || k == "max_shift" || k == "shifts";  // refused below, named
        if (!window_key_given && !keys.insert(k).second)
            throw UsageError("case '" + spec + "': " + k + "= is given twice");  // not last-wins
        if (k == "variant") c.variant_name = v;
        else if (k == "form") c.form_text = v;
        else if (k == "size") p.hL = p.wL = p.hR = p.wR = to_int(k, v);
        else if (k == "hL") p.hL = to_int(k, v);
        else if (k == "wL") p.wL = to_int(k, v);
        else if (k == "hR") p.hR = to_int(k, v);
        else if (k == "wR") p.wR = to_int(k, v);
        else if (k == "nL") p.nL = to_int(k, v);
        else if (k == "nR") p.nR = to_int(k, v);
        else if (k == "batch")
            c.batch = int(parse_integer("case '" + spec + "': batch", v, 1, 1 << 20)), c.batch_given = true;
        else if (k == "reduce") c.reduce_text = v;
        else if (k == "k") c.k_text = v;
        else if (k == "min_distance") c.distance_text = v;
        else if (k == "subpixel") c.subpixel_text = v;
        else if (k == "stats") c.stats_text = v;
        else if (k == "normalize") {
            try {
                p.normalize = parse_normalize(v);
            } catch (const UsageError& e) {
                throw UsageError("case '" + spec + "': normalize=: " + e.what());
            }
        }
        else if (window_key_given) {
            if (c.window)
                throw UsageError("case '" + spec + "': " + c.window_key + "= and " + k +
                                 "= both choose the window: give one of window=, max_shift=, shifts=");
            c.window_key = k;
            try {
                c.window = parse_window_key(k, v);
            } catch (const UsageError& e) {
                throw UsageError("case '" + spec + "': " + e.what());
            }
        } else c.given[k] = v;
    }
    if (c.variant_name.empty() || c.form_text.empty()) throw UsageError("case '" + spec + "': needs variant= and form=");
    return c;
}

// The reduction's keys, each only with its reduction (not yet checked against the problem).
Reduction reduction_of(const std::string& spec, const CaseKeys& c) {
    Reduction reduce;
    if (c.reduce_text) {
        if (*c.reduce_text == "peaks") reduce.kind = ReductionKind::Peaks;
        else if (*c.reduce_text == "max-over-rights") reduce.kind = ReductionKind::MaxOverRights;
        else if (*c.reduce_text != "map")
            throw UsageError("case '" + spec + "': reduce= takes map, peaks or max-over-rights, got '" + *c.reduce_text +
                             "'");
    }
    if (reduce.kind != ReductionKind::Peaks && (c.k_text || c.distance_text || c.subpixel_text))
        throw UsageError("case '" + spec + "': " + (c.k_text ? "k=" : c.distance_text ? "min_distance=" : "subpixel=") +
                         " applies to reduce=peaks");
    if (reduce.kind != ReductionKind::MaxOverRights && c.stats_text)
        throw UsageError("case '" + spec + "': stats= applies to reduce=max-over-rights");
    if (c.k_text) reduce.k = int(parse_integer("case '" + spec + "': k=", *c.k_text, 1, INT32_MAX));
    if (c.distance_text)
        reduce.min_distance = int(parse_integer("case '" + spec + "': min_distance=", *c.distance_text, 0, INT32_MAX));
    if (c.subpixel_text) {
        try {
            reduce.subpixel = parse_subpixel(*c.subpixel_text);
        } catch (const UsageError& e) {
            throw UsageError("case '" + spec + "': subpixel=: " + e.what());
        }
    }
    if (c.stats_text) {
        if (*c.stats_text != "0" && *c.stats_text != "1")
            throw UsageError("case '" + spec + "': stats= takes 0 or 1, got '" + *c.stats_text + "'");
        reduce.stats = *c.stats_text == "1";
    }
    return reduce;
}

Case parse_case(const std::string& spec, const Options& opt) {
    CaseKeys c = read_case_keys(spec, opt);
    Reduction reduce = reduction_of(spec, c);
    Problem& p = c.p;
    const Variant& v = find_variant(c.variant_name);
    p.form = parse_form(c.form_text);
    if (!v.supports(p.form)) throw UsageError("case '" + spec + "': " + v.name + " does not support " + c.form_text);
    p.check();
    if (c.window) {
        try {
            p.window = c.window->resolve(p);
            p.check();
        } catch (const UsageError& e) {
            throw UsageError("case '" + spec + "': " + e.what());
        }
        // The full output's rectangle, however named, is the full case: same problem, same name.
        if (p.full()) p.window.reset();
    }
    if (!v.supports_window(p))
        throw UsageError("case '" + spec + "': " + v.window_refusal(p, c.window ? *c.window : WindowRequest{}));
    if (std::string why = v.shape_refusal(p); !why.empty()) throw UsageError("case '" + spec + "': " + why);
    Params params = v.resolve(c.given);
    try {
        reduce.check(p);
    } catch (const UsageError& e) {
        throw UsageError("case '" + spec + "': " + e.what());
    }
    int batch = c.batch;
    if (opt.cold) batch = 1;
    if (batch <= 0) {
        // Enough calls per event pair that one iteration takes well over the event/launch gaps even
        // at peak speed (~3e9 multiply-adds per batch; the window's: none at all for a window wholly
        // beyond the full range, which gets the cap), capped by the variant.
        batch = int(std::clamp(std::ceil(3e9 / p.fmas()), 1.0, 256.0));
    }
    batch = std::min(batch, v.max_batch);
    return Case{&v, p, params, batch, c.batch_given, reduce};
}

std::vector<Case> smoke_cases(const Options& opt) {
    std::vector<Case> out;
    const std::pair<int, int> counts[] = {{1, 1}, {1, 4}, {2, 4}, {2, 2}};
    for (const auto& v : variants())
        for (Form f : v.forms) {
            const auto [nL, nR] = counts[int(f)];
            std::ostringstream s;
            s << "variant=" << v.name << " form=" << form_name(f) << " nL=" << nL << " nR=" << nR;
            // The shapes a variant is built for (Variant::signals_only, max_shifts): a signal of 1024
            // samples against 32, or the 32 x 32 pair's shifts within ±1; else 32 x 32, full output.
            if (v.signals_only) s << " hL=1 wL=1024 hR=1 wR=32";
            else s << " size=32";
            if (v.max_shifts > 0) s << " max_shift=1";
            out.push_back(parse_case(s.str(), opt));
        }
    return out;
}

std::string bench_name(const Case& c) {
    const Problem& p = c.problem;
    std::ostringstream s;
    s << c.variant->name << '/' << form_name(p.form) << "/hL:" << p.hL << "/wL:" << p.wL << "/hR:" << p.hR
      << "/wR:" << p.wR << "/nL:" << p.nL << "/nR:" << p.nR;
    if (p.window) s << "/shifts:" << p.window->text();  // parse_case leaves it unset for the full output
    if (p.normalize != Normalize::None) s << "/norm:" << normalize_name(p.normalize);
    if (c.reduce.kind == ReductionKind::Peaks)
        s << "/reduce:peaks/k:" << c.reduce.k << "/min_distance:" << c.reduce.min_distance
          << "/subpixel:" << subpixel_name(c.reduce.subpixel);
    if (c.reduce.kind == ReductionKind::MaxOverRights) s << "/reduce:max-over-rights/stats:" << (c.reduce.stats ? 1 : 0);
    for (const auto& [k, v] : c.params) s << '/' << k << ':' << v;  // std::map: sorted by name
    return s.str();
}

// A stream and a pair of CUDA events owned together. Every timed region of this binary is the same:
// record start, enqueue `calls` back-to-back calls of `work`, record stop, wait; seconds per call.
class BatchTimer {
public:
    BatchTimer() {
        try {
            XC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
            XC_CUDA_CHECK(cudaEventCreate(&start_));
            XC_CUDA_CHECK(cudaEventCreate(&stop_));
        } catch (...) {
            release();
            throw;
        }
    }
    ~BatchTimer() { release(); }
    BatchTimer(const BatchTimer&) = delete;
    BatchTimer& operator=(const BatchTimer&) = delete;

    cudaStream_t stream() const { return stream_; }

    template <typename Work>
    double seconds_per_call(int calls, Work&& work) {
        XC_CUDA_CHECK(cudaEventRecord(start_, stream_));
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) work();
        enqueue_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        enqueue_calls_ += calls;
        XC_CUDA_CHECK(cudaEventRecord(stop_, stream_));
        XC_CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0;
        XC_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        return double(ms) * 1e-3 / calls;
    }

    // The host's seconds per call spent issuing the calls timed since the last reset.
    void reset_enqueue() { enqueue_s_ = 0, enqueue_calls_ = 0; }
    double enqueue_seconds_per_call() const { return enqueue_calls_ ? enqueue_s_ / double(enqueue_calls_) : 0.0; }

private:
    void release() {
        if (stop_) cudaEventDestroy(stop_);
        if (start_) cudaEventDestroy(start_);
        if (stream_) cudaStreamDestroy(stream_);
    }
    cudaStream_t stream_ = nullptr;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    double enqueue_s_ = 0;
    int64_t enqueue_calls_ = 0;
};

// The benchmark loop of the variants and the launch floor: each iteration runs `before` untimed
// (the L2 flush of cold runs), then `batch` timed calls of `work`; the manual time is the time per
// call. Returns the sum of the per-call times, for the GPU-time FLOP rate.
template <typename Before, typename Work>
double timed_loop(benchmark::State& st, BatchTimer& timer, int batch, Before&& before, Work&& work) {
    double total_per_call = 0;
    timer.reset_enqueue();
    for (auto _ : st) {
        try {
            before();
            const double per_call = timer.seconds_per_call(batch, work);
            total_per_call += per_call;
            st.SetIterationTime(per_call);
        } catch (const std::exception& e) {
            st.SkipWithError(e.what());
            break;  // Google Benchmark requires leaving the loop after SkipWithError
        }
    }
    return total_per_call;
}

// The calls per timed iteration (see the header): `c.batch`, unless one call, timed once per case
// after its warm-up and check, shows that `c.batch` calls would outlast a repetition's --min-time;
// then just enough calls for --min-time. The FMA heuristic assumes a call near peak speed, and a
// latency-bound one far below it (overlap-wise with a few shifts of a large image: a few threads,
// each summing the whole overlap) would otherwise run up to 256 times the protocol's GPU time per
// repetition. The cap applies only where a call takes over min_time / c.batch, the per-call time
// registered as Google Benchmark's MinTime, so its first iteration already exceeds it: each
// repetition is then one iteration of about --min-time, and the time per call is still an event
// pair's time over >= --min-time of back-to-back calls. Given batches (batch=, --batch) are kept.
template <typename Work>
int timed_batch(const Case& c, const Options& opt, BatchTimer& timer, Work&& work) {
    if (!c.timed) {
        int calls = c.batch;
        if (calls > 1 && !c.batch_given) {
            const double t = timer.seconds_per_call(1, work);
            if (t * calls > opt.min_time) calls = int(std::clamp(std::ceil(opt.min_time / t), 1.0, double(calls)));
        }
        c.timed = calls;
    }
    return *c.timed;
}

// The inputs of a case (filled from the seed on `stream`) and its output buffer (none for a
// reduced case: its outputs are a DeviceReduced).
struct CaseBuffers {
    DeviceBuffer<float> left, right, out;
    CaseBuffers(const Problem& p, const Options& opt, cudaStream_t stream, bool maps = true) {
        const int64_t out_elems = maps ? p.out_elems() : 0;
        require_free_memory(sizeof(float) * size_t(p.left_elems() + p.right_elems() + out_elems), "this case");
        left = DeviceBuffer<float>(size_t(p.left_elems()));
        right = DeviceBuffer<float>(size_t(p.right_elems()));
        out = DeviceBuffer<float>(size_t(out_elems));
        fill_inputs(p, left.get(), right.get(), opt.seed, kUnitRange, stream);
    }
};

// The check of the header: runs `inst` on signed inputs in `buf`, compares, then restores the
// timed inputs in `buf`.
CheckResult check_case(const Case& c, const Options& opt, Instance& inst, CaseBuffers& buf, cudaStream_t stream) {
    const Problem& p = c.problem;
    const InputRange range = p.normalize == Normalize::None   ? kCheckRange
                             : p.normalize == Normalize::Zncc ? kLargeMeanRange
                                                              : kOffsetRange;
    fill_inputs(p, buf.left.get(), buf.right.get(), opt.seed + 2, range, stream);
    const Reference ref = check_reference(p, buf.left.get(), buf.right.get(), opt.seed + 4, stream);
    const Comparison cmp = run_and_compare(inst, buf.left.get(), buf.right.get(), buf.out.get(), ref, stream);
    fill_inputs(p, buf.left.get(), buf.right.get(), opt.seed, kUnitRange, stream);
    XC_CUDA_CHECK(cudaStreamSynchronize(stream));
    CheckResult r{cmp, ref.values.size(),
                  opt.check_tolerance > 0 ? opt.check_tolerance : bound_for(c.variant->tolerance, p.normalize), false, ""};
    r.ok = passes(cmp, r.tolerance, p.normalize);
    const double err = error_of(cmp, p.normalize);
    if (!r.ok) {
        char text[256];
        const std::string what = ref.full() ? "all " + std::to_string(r.samples) + " outputs"
                                            : std::to_string(r.samples) + " sampled outputs";
        if (cmp.nonfinite)
            std::snprintf(text, sizeof text, "validation failed: %zu non-finite of %s (err=%.3e over the rest, tol=%.3e)",
                          cmp.nonfinite, what.c_str(), err, r.tolerance);
        else
            std::snprintf(text, sizeof text, "validation failed: err=%.3e > tol=%.3e (%s), %s", err, r.tolerance,
                          what.c_str(), error_name(p.normalize));
        r.message = text;
    }
    return r;
}

// The spec of a case: its problem, variant and parameters, and its reduction.
PlanSpec case_spec(const Case& c) {
    PlanSpec spec = spec_of(c.problem, c.variant->name, c.params);
    spec.reduce = c.reduce;
    return spec;
}

// The check of a reduced case (see the header): `plan` on the check's inputs into poisoned
// outputs, its answer against the float64 maps (or, for a case too large for them, the variant's
// own map, itself checked at sampled outputs); then the timed inputs restored.
CheckResult check_reduced_case(const Case& c, const Options& opt, Plan& plan, const DeviceReduced& out,
                               CaseBuffers& buf, cudaStream_t stream) {
    const Problem& p = c.problem;
    const Reduction& r = c.reduce;
    const InputRange range = p.normalize == Normalize::None   ? kCheckRange
                             : p.normalize == Normalize::Zncc ? kLargeMeanRange
                                                              : kOffsetRange;
    fill_inputs(p, buf.left.get(), buf.right.get(), opt.seed + 2, range, stream);
    double tolerance = opt.check_tolerance > 0 ? opt.check_tolerance : bound_for(c.variant->tolerance, p.normalize);
    const bool absolute = absolute_error_for(p.normalize);
    std::vector<double> maps;
    Comparison cmp{0, 0, 0};
    size_t samples = 0;
    std::string against;
    if (p.fmas() <= kFullCheckFmas && p.out_elems() <= kFullCheckElems) {
        maps = full_reference(p, buf.left.get(), buf.right.get(), stream).values;
        samples = maps.size();
        against = "the float64 maps (" + std::to_string(samples) + " elements)";
    } else {
        // The variant's own map, checked as a map case is, then the answer against it (2x the bound:
        // both are within it of the float64 values).
        Plan map_plan(spec_of(p, c.variant->name, c.params));
        require_free_memory(sizeof(float) * size_t(p.out_elems()), "this case's check (its unreduced map)");
        require_host_memory(sizeof(double) * size_t(p.out_elems()), "this case's check (its unreduced map)");
        DeviceBuffer<float> dmap(size_t(p.out_elems()));
        const Reference ref = check_reference(p, buf.left.get(), buf.right.get(), opt.seed + 4, stream);
        cmp = run_and_compare(map_plan.instance(), buf.left.get(), buf.right.get(), dmap.get(), ref, stream);
        samples = ref.values.size();
        if (!passes(cmp, tolerance, p.normalize)) {
            fill_inputs(p, buf.left.get(), buf.right.get(), opt.seed, kUnitRange, stream);
            XC_CUDA_CHECK(cudaStreamSynchronize(stream));
            char text[256];
            std::snprintf(text, sizeof text, "validation failed: the unreduced map the answer is checked against: err=%.3e > tol=%.3e (%zu sampled outputs)",
                          error_of(cmp, p.normalize), tolerance, samples);
            return CheckResult{cmp, samples, tolerance, false, text};
        }
        std::vector<float> host(size_t(p.out_elems()));
        XC_CUDA_CHECK(cudaMemcpy(host.data(), dmap.get(), dmap.bytes(), cudaMemcpyDeviceToHost));
        maps.assign(host.begin(), host.end());
        tolerance *= 2;
        against = "the variant's own map (checked at " + std::to_string(samples) + " sampled outputs), bound doubled";
    }
    out.poison(stream);
    plan.execute(buf.left.get(), buf.right.get(), out.outputs(), stream);
    HostReduced got(p, r);
    out.copy_to(got, 0, stream);  // synchronises
    const PeakCheck pc = check_answer(p, r, maps.data(), got, tolerance, absolute, 1);
    fill_inputs(p, buf.left.get(), buf.right.get(), opt.seed, kUnitRange, stream);
    XC_CUDA_CHECK(cudaStreamSynchronize(stream));
    cmp.nonfinite = size_t(pc.failed);  // the failed checks, reported as check_failed
    CheckResult result{cmp, samples, tolerance, pc.failed == 0, ""};
    if (pc.failed)
        result.message = "validation failed: " + std::to_string(pc.failed) + " failed checks of the " +
                         reduction_name(r.kind) + " against " + against + " (bound " + std::to_string(tolerance) +
                         (absolute ? " absolute" : " relative") + ")" +
                         (pc.failures.empty() ? "" : ": " + pc.failures.front());
    return result;
}

// A reduced case: the plan's execute with ReducedOutputs, timed whole (see the header).
void run_reduced_case(benchmark::State& st, const Case& c, const Options& opt, const GpuInfo& gpu) {
    const Problem& p = c.problem;
    if (!c.began) c.began = std::chrono::steady_clock::now();
    try {
        BatchTimer timer;
        const cudaStream_t stream = timer.stream();
        CaseBuffers buf(p, opt, stream, false);
        std::unique_ptr<L2Flusher> flusher;
        if (opt.cold) flusher = std::make_unique<L2Flusher>(gpu.l2_bytes);
        Plan plan(case_spec(c));
        require_free_memory(reduced_bytes(p, c.reduce), "this case's reduced outputs");
        DeviceReduced out(p, c.reduce);
        const ReducedOutputs outputs = out.outputs();
        const float *dl = buf.left.get(), *dr = buf.right.get();
        plan.execute(dl, dr, outputs, stream);  // warm-up
        XC_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (!c.check) c.check = check_reduced_case(c, opt, plan, out, buf, stream);
        if (!c.check->ok) {
            st.SkipWithError(c.check->message.c_str());
            return;
        }
        const auto call = [&] { plan.execute(dl, dr, outputs, stream); };
        const int batch = timed_batch(c, opt, timer, call);
        const double total_per_call =
            timed_loop(st, timer, batch, [&] { if (flusher) flusher->flush(stream); }, call);
        st.counters["hL"] = p.hL, st.counters["wL"] = p.wL, st.counters["hR"] = p.hR, st.counters["wR"] = p.wR;
        st.counters["nL"] = p.nL, st.counters["nR"] = p.nR;
        st.counters["batch"] = batch;
        st.counters["enqueue_time"] = timer.enqueue_seconds_per_call();
        st.counters["cold"] = opt.cold ? 1 : 0;
        st.counters["fmas"] = p.fmas();
        if (p.window) {
            const Window w = *p.window;
            st.counters["dy0"] = w.dy0, st.counters["dy1"] = w.dy1, st.counters["dx0"] = w.dx0, st.counters["dx1"] = w.dx1;
        }
        if (c.reduce.kind == ReductionKind::Peaks)
            st.counters["k"] = c.reduce.k, st.counters["min_distance"] = c.reduce.min_distance;
        else
            st.counters["stats"] = c.reduce.stats ? 1 : 0;
        // The sampled error of the unreduced map where the answer was checked against it, else 0.
        st.counters["check_err"] = error_of(c.check->cmp, p.normalize);
        st.counters["check_samples"] = double(c.check->samples);
        st.counters["check_failed"] = double(c.check->cmp.nonfinite);
        st.counters["case_seconds"] = c.seconds_so_far();
        if (total_per_call > 0) st.counters["FLOPS"] = 2.0 * p.fmas() * double(st.iterations()) / total_per_call;
        // The route as the plan explains it, its own clause (up to the chunk plan's explanation after
        // ": "): maps in device scratch chunk by chunk, or taken in the variant's own pass, no map
        // written; ';' would end the label's field
        std::string route = plan.explain();
        route = route.substr(0, route.find(": "));
        std::replace(route.begin(), route.end(), ';', ',');
        const std::string timed = std::string("the reduced plan's execute (") + c.reduce.describe() + "): " + route +
                                  (p.normalize == Normalize::None ? "" : std::string(", normalized ") + normalize_name(p.normalize));
        st.SetLabel("family=" + c.variant->family + ";timed=" + timed + ";precision=" + c.variant->precision);
    } catch (const std::exception& e) {
        st.SkipWithError(e.what());
    }
}

void run_case(benchmark::State& st, const Case& c, const Options& opt, const GpuInfo& gpu) {
    if (c.reduced()) return run_reduced_case(st, c, opt, gpu);
    const Problem& p = c.problem;
    if (!c.began) c.began = std::chrono::steady_clock::now();
    try {
        BatchTimer timer;
        const cudaStream_t stream = timer.stream();
        CaseBuffers buf(p, opt, stream);
        float *dl = buf.left.get(), *dr = buf.right.get(), *dout = buf.out.get();
        std::unique_ptr<L2Flusher> flusher;
        if (opt.cold) flusher = std::make_unique<L2Flusher>(gpu.l2_bytes);

        Plan plan(spec_of(p, c.variant->name, c.params));
        Instance* inst = &plan.instance();
        // Warm-up: module load, first touch, lazy initialisation stay out of the numbers.
        inst->run(dl, dr, dout, stream);
        if (inst->has_finish()) inst->finish(dout, stream);
        XC_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (!c.check) c.check = check_case(c, opt, *inst, buf, stream);
        if (!c.check->ok) {
            st.SkipWithError(c.check->message.c_str());  // before the loop: nothing is timed
            return;
        }

        const auto call = [&] { inst->run(dl, dr, dout, stream); };
        const int batch = timed_batch(c, opt, timer, call);
        const double total_per_call =
            timed_loop(st, timer, batch, [&] { if (flusher) flusher->flush(stream); }, call);
        st.counters["hL"] = p.hL, st.counters["wL"] = p.wL, st.counters["hR"] = p.hR, st.counters["wR"] = p.wR;
        st.counters["nL"] = p.nL, st.counters["nR"] = p.nR;
        st.counters["batch"] = batch;
        st.counters["enqueue_time"] = timer.enqueue_seconds_per_call();  // before finish_time's calls
        st.counters["cold"] = opt.cold ? 1 : 0;
        st.counters["fmas"] = p.fmas();  // the window's
        if (p.window) {
            const Window w = *p.window;
            st.counters["dy0"] = w.dy0, st.counters["dy1"] = w.dy1, st.counters["dx0"] = w.dx0, st.counters["dx1"] = w.dx1;
        }
        st.counters["check_err"] = error_of(c.check->cmp, p.normalize);  // absolute for a normalized case
        st.counters["check_samples"] = double(c.check->samples);
        // Google Benchmark's own rate counters divide by CPU time; the rate here is per GPU time.
        if (total_per_call > 0) st.counters["FLOPS"] = 2.0 * p.fmas() * double(st.iterations()) / total_per_call;
        if (inst->has_finish()) {
            // The untimed post-processing, timed on its own so that it is reported, not hidden.
            st.counters["finish_time"] = timer.seconds_per_call(10, [&] { inst->finish(dout, stream); });
        }
        st.counters["case_seconds"] = c.seconds_so_far();
        const std::string timed =
            p.normalize == Normalize::None
                ? c.variant->timed
                : std::string("normalize ") + normalize_name(p.normalize) + ": the whole normalized computation around " +
                      c.variant->timed + " (its finish included)";
        st.SetLabel("family=" + c.variant->family + ";timed=" + timed + ";precision=" + c.variant->precision);
    } catch (const std::exception& e) {
        st.SkipWithError(e.what());
    }
}

constexpr double kMinIterationSeconds = 1e-4;

// The batch of a pilot_batch variant (see the header). Errors leave the batch as it is: the
// benchmark itself then reports them.
int pilot_batch(const Case& c, const Options& opt) {
    try {
        BatchTimer timer;
        const cudaStream_t stream = timer.stream();
        CaseBuffers buf(c.problem, opt, stream, !c.reduced());
        Plan plan(case_spec(c));
        std::optional<DeviceReduced> reduced;
        if (c.reduced()) reduced.emplace(c.problem, c.reduce);
        Instance* inst = c.reduced() ? nullptr : &plan.instance();
        const auto call = [&] {
            if (reduced) plan.execute(buf.left.get(), buf.right.get(), reduced->outputs(), stream);
            else inst->run(buf.left.get(), buf.right.get(), buf.out.get(), stream);
        };
        call();  // warm-up
        XC_CUDA_CHECK(cudaStreamSynchronize(stream));
        const double t = timer.seconds_per_call(3, call);
        const double want = t > 0 ? std::ceil(kMinIterationSeconds / t) : double(c.batch);
        return int(std::clamp(want, double(c.batch), double(std::max(c.batch, std::min(256, c.variant->max_batch)))));
    } catch (const std::exception&) {
        cudaGetLastError();
        return c.batch;
    }
}

void run_launch_floor(benchmark::State& st, int batch) {
    try {
        BatchTimer timer;
        launch_empty_kernel(timer.stream());
        XC_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
        timed_loop(st, timer, batch, [] {}, [&] { launch_empty_kernel(timer.stream()); });
        st.counters["batch"] = batch;
        st.counters["enqueue_time"] = timer.enqueue_seconds_per_call();
        st.SetLabel("family=floor;timed=empty kernel launch;precision=none");
    } catch (const std::exception& e) {
        st.SkipWithError(e.what());
    }
}

// The command line: the options (Options), the cases' lines, and what goes on to Google Benchmark.
struct CommandLine {
    Options opt;
    std::vector<std::string> specs;
    std::vector<char*> rest;  // argv[0] and Google Benchmark's options
    bool list_only = false, launch_floor = false;
};

// The case lines of a --cases file (# starts a comment); UsageError where it holds none.
std::vector<std::string> read_cases_file(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw UsageError("cannot read cases file " + path);
    std::vector<std::string> specs;
    for (std::string line; std::getline(f, line);) {
        line = line.substr(0, line.find('#'));
        if (line.find_first_not_of(" \t\r") != std::string::npos) specs.push_back(line);
    }
    // A folder, an unreadable or an empty file ran the smoke set instead.
    if (f.bad() || specs.empty()) throw UsageError("cases file " + path + " holds no case");
    return specs;
}

CommandLine parse_command_line(int argc, char** argv) {
    CommandLine cl;
    Options& opt = cl.opt;
    cl.rest.push_back(argv[0]);
    OptionSeen seen;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const std::string& flag) { return option_value(argc, argv, i, flag); };
        auto is = [&](const char* flag) { return seen.once(a, flag); };  // a one-value option: once
        if (option_is(a, "--case")) cl.specs.push_back(value("--case"));  // repeatable
        else if (option_is(a, "--cases")) {  // repeatable: the files' cases add up
            for (std::string& s : read_cases_file(value("--cases"))) cl.specs.push_back(std::move(s));
        } else if (is("--min-time")) {
            opt.min_time = parse_positive("--min-time", value("--min-time"));
            // Google Benchmark aborts on a MinTime that min_time / batch rounds to 0.
            if (opt.min_time < 1e-6 || opt.min_time > 3600) throw UsageError("--min-time must be from 1e-6 to 3600 seconds");
        }
        else if (is("--batch")) opt.batch = int(parse_integer("--batch", value("--batch"), 1, 1 << 20));
        else if (is("--seed")) opt.seed = uint64_t(parse_integer("--seed", value("--seed"), 0, INT64_MAX));
        else if (is("--check-tolerance")) opt.check_tolerance = parse_positive("--check-tolerance", value("--check-tolerance"));
        else if (a == "--cold") opt.cold = true;
        else if (a == "--launch-floor") cl.launch_floor = true;
        else if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            std::fflush(stdout);
            cl.rest.push_back(const_cast<char*>("--help"));
        } else {
            // Listing skips the GPU: only where Google Benchmark surely lists (=false ran the cases
            // on no GPU, and exited 0 with every case an error).
            if (a.rfind("--benchmark_list_tests", 0) == 0) {
                if (a != "--benchmark_list_tests" && a != "--benchmark_list_tests=true")
                    throw UsageError(a + ": give --benchmark_list_tests alone to list the cases");
                cl.list_only = true;
            }
            cl.rest.push_back(argv[i]);
        }
    }
    if (!(opt.min_time > 0)) throw UsageError("--min-time must be positive");
    return cl;
}

// The run's context in the JSON: the GPU's and the build's (context_entries), the protocol's.
void add_context(const GpuInfo& gpu, const Options& opt) {
    for (const auto& [k, v] : context_entries(gpu)) benchmark::AddCustomContext(k, v);
    benchmark::AddCustomContext("xcorr_min_time_s", std::to_string(opt.min_time));
    benchmark::AddCustomContext("xcorr_cold", opt.cold ? "1" : "0");
    benchmark::AddCustomContext(
        "xcorr_check", std::string("inputs uniform ") + kCheckRange.name + " seeds " + std::to_string(opt.seed + 2) +
                           ", " + std::to_string(opt.seed + 3) + "; full float64 reference up to " +
                           std::to_string(int64_t(kFullCheckFmas)) + " FMAs, else " +
                           std::to_string(kCheckSamples) + " sampled outputs (seed " +
                           std::to_string(opt.seed + 4) + ")");
    if (opt.check_tolerance > 0) {
        char tol[32];
        std::snprintf(tol, sizeof tol, "%.6e", opt.check_tolerance);
        benchmark::AddCustomContext("xcorr_check_tolerance", tol);
    }
}

// Registers every case (and the launch floor) with Google Benchmark; `cases`, `opt` and `gpu` must
// outlive the run.
void register_cases(const std::vector<Case>& cases, const Options& opt, const GpuInfo& gpu, bool launch_floor) {
    for (const Case& c : cases) {
        benchmark::RegisterBenchmark(bench_name(c).c_str(),
                                     [&c, &opt, &gpu](benchmark::State& st) { run_case(st, c, opt, gpu); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(opt.min_time / c.batch);  // manual time is per call: GPU time = min_time
    }
    if (launch_floor)
        benchmark::RegisterBenchmark("launch-floor/empty-kernel", [](benchmark::State& st) { run_launch_floor(st, 256); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(opt.min_time / 256);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        check_environment();
        CommandLine cl = parse_command_line(argc, argv);
        const Options& opt = cl.opt;
        std::vector<Case> cases;
        if (cl.specs.empty() && !cl.launch_floor) cases = smoke_cases(opt);
        for (const auto& s : cl.specs) cases.push_back(parse_case(s, opt));

        int rest_argc = int(cl.rest.size());
        benchmark::Initialize(&rest_argc, cl.rest.data());
        if (benchmark::ReportUnrecognizedArguments(rest_argc, cl.rest.data())) return 2;

        static GpuInfo gpu;
        if (!cl.list_only) {
            gpu = require_gpu();
            add_context(gpu, opt);
        }
        if (!cl.list_only && !opt.cold)
            for (Case& c : cases)
                if (c.variant->pilot_batch && !c.batch_given) c.batch = pilot_batch(c, opt);
        static std::vector<Case> registered;
        registered = cases;
        register_cases(registered, opt, gpu, cl.launch_floor);
        const size_t ran = benchmark::RunSpecifiedBenchmarks();
        benchmark::Shutdown();
        if (ran == 0) throw UsageError("no case matches --benchmark_filter: nothing measured");
        return 0;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "xcorr_bench: error: %s\n", e.what());
        return 2;
    } catch (const NoGpuError& e) {
        std::fprintf(stderr, "xcorr_bench: no GPU: %s\n", e.what());
        return 3;
    } catch (const std::bad_alloc&) {
        // Cases too large for the host memory the process may use: bad input (a case that runs
        // out while measured is that case's error, reported by Google Benchmark).
        std::fprintf(stderr, "xcorr_bench: error: not enough host memory for the cases given: an allocation failed "
                             "(%s)\n", host_memory_left().c_str());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xcorr_bench: failed: %s\n", e.what());
        return 1;
    }
}
