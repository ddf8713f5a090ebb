// xcorr: the command-line tool.
//   xcorr list [--json]
//   xcorr info
//   xcorr help, xcorr --help, xcorr COMMAND --help
//   xcorr run --algorithm NAME|auto --form FORM [--param KEY=VALUE ...] LEFT.npy RIGHT.npy --out OUT.npy
//             [--mode full|valid|same | --max-shift SY[,SX] | --shifts DY0:DY1,DX0:DX1]
//             [--precision fp32|tf32] [--normalize none|zncc|zero-lag] [--validate [--tolerance X]]
//   xcorr run ... --peaks K [--min-distance R] [--subpixel parabolic|gaussian|none] --out P.npz
//   xcorr run ... --max-over-rights [--stats] --out M.npz
//   xcorr run --dims 1 ... [--mode full|valid|same | --max-lag S | --lags D0:D1]   (1-D signals)
//   xcorr explain --form FORM --left [N:]HxW --right [M:]HxW [WINDOW] [--precision P] [--normalize MODE]
//                 [--gpu NAME] [--json]
//   xcorr explain --dims 1 --form FORM --left [N:]n --right [M:]m ...
// Exit status: 0 success; 1 validation failed or a CUDA failure; 2 bad usage or bad input
// (including a problem too large for GPU memory); 3 no usable GPU, or a GPU the binary was not
// built for. Every failure prints one line on stderr.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <sstream>

#include "harness/check.hpp"
#include "harness/context.hpp"
#include "xcorr/crop.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/gpu.hpp"
#include "xcorr/normalize.hpp"
#include "xcorr/normalize_crop.hpp"
#include "xcorr/npy.hpp"
#include "xcorr/npz.hpp"
#include "xcorr/plan.hpp"
#include "xcorr/auto.hpp"
#include "xcorr/batch.hpp"
#include "xcorr/reference.hpp"
#include "xcorr/reduce.hpp"
#include "harness/reduce_check.hpp"
#include "xcorr/registry.hpp"

using namespace xcorr;

namespace {

const char* kUsage =
    "usage:\n"
    "  xcorr list [--json]            every variant with its forms and parameters\n"
    "  xcorr info                     the GPU found and this build (JSON; without a usable GPU,\n"
    "                                 this build and the reason, and exit 3)\n"
    "  xcorr help                     this text (also --help after any command)\n"
    "  xcorr run --algorithm NAME --form FORM [--param KEY=VALUE ...] LEFT.npy RIGHT.npy\n"
    "            --out OUT.npy [WINDOW] [--precision fp32|tf32] [--normalize MODE]\n"
    "            [--validate [--tolerance X]] [--gpus all|I,J,...] [--chunk N] [--split auto|lefts|blocks]\n"
    "      FORM: one-to-one, one-to-many, n-to-mn, n-to-m; NAME: a variant from `xcorr list`,\n"
    "      `auto` (chosen from this GPU's measurements, else a cost model; the choice is printed\n"
    "      on stderr) or `reference` (float64 on the CPU; a run of more than a few seconds, or any on a\n"
    "      terminal, shows its progress on stderr). --precision: fp32 (default) allows only\n"
    "      algorithms within 1e-5 of float64, tf32 also single-pass TF32 tensor cores (2e-3).\n"
    "      --validate prints the relative error against the\n"
    "      float64 reference and fails (exit 1, no output written) above the variant's bound\n"
    "      (`xcorr list`; the reference's float32 output: 2^-24), or above X with --tolerance;\n"
    "      where NaN or Inf in an input make the output non-finite, it says so (exit 2).\n"
    "      WINDOW, the shifts (dy, dx) computed (at most one; default the full output):\n"
    "        --mode full|valid|same       as scipy.signal.correlate2d's mode\n"
    "        --max-shift SY[,SX]          dy in -SY..SY, dx in -SX..SX (SX = SY if left out)\n"
    "        --shifts DY0:DY1,DX0:DX1     dy in DY0..DY1, dx in DX0..DX1 (inclusive)\n"
    "      Output (i, j) is shift (first dy + i, first dx + j); a shift without overlap gives 0.\n"
    "      --out may be a FIFO (named pipe), written in place: where no reader has it open yet, xcorr\n"
    "      says on stderr that it waits for a reader, and writes once one opens it.\n"
    "      A variant computes only the windows `xcorr list` shows for it; the reference, all.\n"
    "      --normalize MODE (CONVENTIONS.md, \"Normalization\"; any algorithm, form and window):\n"
    "        none (default) the sums; zncc: per shift, Pearson's coefficient of the overlapping\n"
    "        parts (0 where the overlap is empty or constant); zero-lag: C(dy, dx) / C(0, 0)\n"
    "        (0 everywhere where C(0, 0) = 0). --validate holds zncc to its largest absolute\n"
    "        error, bound max(1e-4, the variant's), and zero-lag to the variant's relative bound.\n"
    "      --gpus all|I,J,...: split the batch across those GPUs (equal contiguous runs of\n"
    "      output matrices, one host thread and one plan per GPU and piece shape); --chunk N: at\n"
    "      most N output matrices per piece (default: about 64 MB of output a piece, fewer where\n"
    "      they do not fit, halved on out-of-memory), so a batch larger than a GPU's memory runs\n"
    "      piece by piece. Either one runs the batch from\n"
    "      host memory (the reference too, with --chunk: the same pieces on the CPU); --validate\n"
    "      then compares with the CPU reference. The pieces are printed on stderr. A --chunk below\n"
    "      one left's outputs (n-to-m: M) uploads the rights again for every piece: slow.\n"
    "      --split (n-to-m), where a GPU's whole lefts take more than one piece: lefts, pieces of\n"
    "      whole lefts with every right; blocks, blocks of all those lefts and a run of the rights\n"
    "      (each right's upload and spectrum once, the first piece waits for its run only: faster\n"
    "      where the host memory is page-locked); auto (default), blocks where the output or the\n"
    "      rights are page-locked host memory (the library's empty_pinned) or where the GPUs\n"
    "      divide the rights, else lefts. With blocks on several GPUs, an n-to-m batch whose rights\n"
    "      hold more data than its lefts is divided by rights: each GPU takes every left and its\n"
    "      run of the rights.\n"
    "      --dims 1: 1-D signals, each a 1 x n matrix (CONVENTIONS.md, \"One-dimensional\n"
    "      signals\"); output k equals scipy.signal.correlate(L, R, mode) of its pair, lag d = sum\n"
    "      over t of L[t + d] * R[t]. A file holds one signal (n) or a stack (count, n); the output\n"
    "      is always a stack (count, n_out), (1, n_out) for one pair, as 2-D outputs always are\n"
    "      (count, h, w). Forms, --normalize and --validate as in 2-D. WINDOW with --dims 1:\n"
    "        --mode full|valid|same       as scipy.signal.correlate's mode; same: LEFT's length,\n"
    "                                     lags -(m/2)..-(m/2)+n-1 (n, m: LEFT's, RIGHT's length;\n"
    "                                     for an even m one lag below 2-D same's centring)\n"
    "        --max-lag S                  lags -S..S\n"
    "        --lags D0:D1                 lags D0..D1 (inclusive; --shifts 0:0,D0:D1 is the same)\n"
    "      Reductions (CONVENTIONS.md, \"Reductions: peaks and maxima\"): the answer instead of\n"
    "      the maps, into an .npz (--out must end .npz; no --gpus or --chunk):\n"
    "        --peaks K [--min-distance R] [--subpixel parabolic|gaussian|none]\n"
    "            per output matrix its K largest values (K >= 1; beyond the window: NaN, shift 0),\n"
    "            greedy suppression within Chebyshev distance R >= 0 (default 0), and a three-point\n"
    "            fit (default parabolic): arrays value (count, K) float32, shift (count, K, 2)\n"
    "            int32 (dy, dx), subpixel (count, K, 2) float32; --dims 1: shift and subpixel\n"
    "            (count, K), the lags\n"
    "        --max-over-rights [--stats]   per left and shift the largest value over its rights\n"
    "            and the index of the right that gives it (not one-to-one): value (lefts, h, w)\n"
    "            float32, index int32; --stats also sum and sumsq float64 (--dims 1: (lefts, n))\n"
    "      --validate then checks the answer against the float64 reference maps (exit 1 if not).\n"
    "  xcorr explain --form FORM --left [N:]HxW --right [M:]HxW [WINDOW] [--precision fp32|tf32]\n"
    "                [--normalize MODE] [--gpu NAME] [--gpus I,J,...] [--chunk N] [--split S] [--json]\n"
    "  xcorr explain --dims 1 --form FORM --left [N:]n --right [M:]m [WINDOW] ...  (1-D signals)\n"
    "      What --algorithm auto runs for that problem (N lefts, M rights; default 1) and why, with\n"
    "      the candidates it would try next. No GPU needed: --gpu names the GPU whose measurements\n"
    "      to use (default: the GPU found, else none, i.e. the cost model; a name no table holds is\n"
    "      said on stderr, with the GPUs measured). --normalize: auto picks\n"
    "      the raw algorithm from that GPU's normalized measurements of the problem (else predicts it\n"
    "      from its nearest ones, raw ones counting farther), the normalization's epilogue runs after\n"
    "      it; also the part of each input the window touches, where the prepass and the raw\n"
    "      correlation run.\n"
    "      --gpus I,J,... and/or --chunk N: also the pieces `xcorr run` would split the batch into\n"
    "      (without --chunk, one piece per GPU's run here; run halves it where memory is short);\n"
    "      --split as in run. An n-to-m block's outputs are rows of its rights, one per left.\n"
    "      For auto's evaluation (scripts/auto-report): --leave-out leaves this problem's own\n"
    "      measurements out of the choice, --model-only uses the cost model alone.\n";

// kUsage, then the environment switches (env_settings(), core.hpp), from their one table.
void print_usage() {
    std::cout << kUsage
              << "environment (tests and A/B runs; unset or empty: the library's own rule; a bad value\n"
                 "exits 2 before any work; a measurement records those set in its context, xcorr_environment):\n";
    for (const EnvSetting& e : env_settings()) {
        const std::string range = e.is_switch() ? "0|1" : std::to_string(e.lo) + ".." + std::to_string(e.hi);
        std::cout << "  " << e.name << "=" << range << "\n      " << e.effect << "\n";
    }
    std::cout << std::flush;
}

// run and explain: --split without --gpus or --chunk.
const char* const kSplitNeedsBatch = "--split cuts a batch run with --gpus or --chunk: give one of them";

// The shortest text that reads back as the same double: a reported error can be given back
// as a --tolerance exactly.
std::string shortest(double x) {
    char buf[32];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, x).ptr);
}

// --validate: prints the error of `out` against the float64 reference (relative; absolute for a
// normalized output) and whether it is within `bound` (passes, the verdict of xcorr_validate and
// xcorr_bench too).
// `nonfinite_inputs` (nonfinite_note): where the inputs hold NaN or Inf, a failure is theirs, not
// the algorithm's: bad input (UsageError, exit 2) that says so.
bool validation_passes(const float* out, const double* ref, size_t n, double bound, Normalize mode,
                       const std::string& what, const std::string& out_path, const std::string& nonfinite_inputs) {
    const Comparison c = compare_to_reference(out, ref, n);
    const bool ok = passes(c, bound, mode);
    std::printf("%s %s (bound %s), %zu non-finite elements: %s\n", error_name(mode),
                shortest(error_of(c, mode)).c_str(), shortest(bound).c_str(), c.nonfinite, ok ? "ok" : "FAILED");
    std::fflush(stdout);
    if (!ok && !nonfinite_inputs.empty())
        throw UsageError("--validate cannot check an output computed from non-finite values: " + nonfinite_inputs +
                         ", the output " + std::to_string(c.nonfinite) + " non-finite elements; " + out_path +
                         " not written (without --validate they are computed with, as scipy does)");
    if (!ok)
        std::fprintf(stderr, "xcorr: validation failed: %s is off the float64 reference; %s not written\n",
                     what.c_str(), out_path.c_str());
    return ok;
}

// "the left input L.npy holds 2 non-finite values (NaN or Inf)" (and/or the right's), or "" where
// both are finite.
std::string nonfinite_note(const Stack& left, const Stack& right, const std::vector<std::string>& inputs) {
    std::string note;
    const Stack* stacks[] = {&left, &right};
    for (size_t i = 0; i < 2; ++i) {
        const auto n = std::count_if(stacks[i]->data.begin(), stacks[i]->data.end(), [](float v) { return !std::isfinite(v); });
        if (n)
            note += std::string(note.empty() ? "" : " and ") + "the " + (i == 0 ? "left" : "right") + " input " +
                    inputs[i] + " holds " + std::to_string(n) + " non-finite value" + (n == 1 ? "" : "s") +
                    " (NaN or Inf)";
    }
    return note;
}

std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o;
}

int cmd_list(bool json) {
    if (json) {
        std::cout << "[\n";
        bool first = true;
        for (const auto& v : variants()) {
            std::cout << (first ? "" : ",\n") << "  {\"name\": \"" << json_escape(v.name) << "\", \"family\": \""
                      << json_escape(v.family) << "\", \"summary\": \"" << json_escape(v.summary)
                      << "\", \"timed\": \"" << json_escape(v.timed) << "\", \"precision\": \"" << v.precision
                      << "\", \"tolerance\": " << v.tolerance << ", \"forms\": [";
            for (size_t i = 0; i < v.forms.size(); ++i) std::cout << (i ? ", " : "") << '"' << form_name(v.forms[i]) << '"';
            std::cout << "], \"windows\": [\"" << v.windows_text("\", \"") << "\"], \"signals_only\": "
                      << (v.signals_only ? "true" : "false") << ", \"max_shifts\": " << v.max_shifts << ", \"max_transform\": " << v.max_transform
                      << ", \"crop_windows\": " << (v.crop_windows ? "true" : "false") << ", \"work_tile\": ["
                      << v.work_tile.dy << ", " << v.work_tile.dx << "], \"params\": {";
            for (size_t i = 0; i < v.params.size(); ++i) {
                std::cout << (i ? ", " : "") << '"' << v.params[i].name << "\": [";
                for (size_t j = 0; j < v.params[i].values.size(); ++j)
                    std::cout << (j ? ", " : "") << '"' << json_escape(v.params[i].values[j]) << '"';
                std::cout << "]";
            }
            std::cout << "}}";
            first = false;
        }
        std::cout << "\n]\n";
        return 0;
    }
    for (const auto& v : variants()) {
        std::cout << v.name << "  [" << v.family << ", " << v.precision << "]\n    " << v.summary << "\n    forms:";
        for (Form f : v.forms) std::cout << ' ' << form_name(f);
        std::cout << "\n    windows: " << v.windows_text(" ");
        if (v.max_shifts > 0) std::cout << " (at most " << v.max_shifts << " shifts per pair)";
        if (v.signals_only) std::cout << "\n    signals only (1 x n)";
        if (v.max_transform > 0) std::cout << "\n    transforms up to " << v.max_transform << " points per axis";
        if (v.crop_windows) std::cout << "\n    a window runs on the parts of the inputs it touches (copied first, timed)";
        std::cout << "\n    timed: " << v.timed << '\n';
        for (const auto& p : v.params) {
            std::cout << "    --param " << p.name << "=";
            for (size_t j = 0; j < p.values.size(); ++j) std::cout << (j ? "|" : "") << p.values[j];
            std::cout << "  (" << p.help << "; default " << p.values.front() << ")\n";
        }
    }
    return 0;
}

// The GPU and this build as JSON. Without a usable GPU: this build and the reason
// (xcorr_no_gpu_reason), then the NoGpuError again (exit 3, one line on stderr).
int cmd_info() {
    std::vector<std::pair<std::string, std::string>> entries;
    std::exception_ptr no_gpu;
    try {
        entries = context_entries(require_gpu());
    } catch (const NoGpuError& e) {
        no_gpu = std::current_exception();
        entries = build_entries();
        for (auto& env : environment_context()) entries.push_back(std::move(env));
        entries.emplace_back("xcorr_no_gpu_reason", e.what());
    }
    std::cout << "{";
    for (const auto& [k, v] : entries) std::cout << '"' << k << "\": \"" << json_escape(v) << "\", ";
    std::cout << "\"xcorr_variants\": [";
    for (size_t i = 0; i < variants().size(); ++i)
        std::cout << (i ? ", " : "") << '"' << json_escape(variants()[i].name) << '"';
    std::cout << "]}\n" << std::flush;
    if (no_gpu) std::rethrow_exception(no_gpu);
    return 0;
}

// The window option that argument `a` gives (--mode, --max-shift, --shifts, and for signals
// --max-lag, --lags; alone or as --flag=value), or null.
const char* window_option(const std::string& a) {
    for (const char* flag : {"--mode", "--max-shift", "--shifts", "--max-lag", "--lags"})
        if (a == flag || a.rfind(std::string(flag) + "=", 0) == 0) return flag;
    return nullptr;
}

WindowRequest parse_window(const std::string& flag, const std::string& text) {
    if (flag == "--mode") return parse_mode(text);
    if (flag == "--max-shift") return parse_max_shift(text);
    if (flag == "--shifts") return parse_shifts(text);
    if (flag == "--max-lag") return parse_max_lag(text);
    return parse_lags(text);
}

// --dims: 2 (matrices, the default) or 1 (signals).
int parse_dims(const std::string& text) {
    if (text != "1" && text != "2") throw UsageError("--dims takes 1 (signals) or 2 (matrices), got '" + text + "'");
    return text[0] - '0';
}

bool is_help(const std::string& a) { return a == "--help" || a == "-h"; }

// Refuses a window option that does not belong to `dims` (checked once every option is read: the
// order of --dims and the window is free).
void check_window_dims(int dims, const std::string& flag, const WindowRequest& w) {
    if (flag.empty() || flag == "--mode") return;
    if (dims == 2 && (flag == "--max-lag" || flag == "--lags"))
        throw UsageError(flag + " is a window of 1-D signals: give --dims 1 (matrices: --max-shift, --shifts)");
    if (dims == 1 && flag == "--max-shift")
        throw UsageError("--max-shift SY[,SX] is a window of matrices: with --dims 1 give --max-lag S");
    if (dims == 1 && flag == "--shifts" && (w.given.dy0 != 0 || w.given.dy1 != 0))
        throw UsageError("--shifts " + w.given.text() + " with --dims 1: a signal has one row, so DY0:DY1 must be 0:0 "
                         "(--lags D0:D1 gives the lags alone)");
}

// The bound of the reference's float32 output against its float64 values: their float32 rounding
// (zncc: absolute, so the rounding of the largest magnitude, at least 1's).
double reference_output_bound(const double* ref, size_t n, Normalize normalize) {
    double bound = kReferenceFloat32Bound;
    if (absolute_error_for(normalize))
        for (size_t i = 0; i < n; ++i) bound = std::max(bound, kReferenceFloat32Bound * std::fabs(ref[i]));
    return bound;
}

// The CPU reference is one core's float64 loop: about 1e9 multiply-adds a second, and each output
// element costs about kReferenceSecondsPerOutput beside them (its overlap test, the first touch of
// its float64 and float32 host memory, its writing: a 32 x 32 pair within +-8000, 2.6e8 outputs and
// 1e6 multiply-adds, took 15-20 s on a 2-core VM, half of it writing the 1 GB .npy).
constexpr double kReferenceFmasPerSecond = 1e9;
constexpr double kReferenceSecondsPerOutput = 6e-8;

double reference_seconds(const Problem& p) {
    return p.fmas() / kReferenceFmasPerSecond + double(p.out_elems()) * kReferenceSecondsPerOutput;
}

// A problem a GPU finishes in a second can take the CPU reference hours, so a long one is announced
// (with what runs faster) rather than left to look like a hang.
void note_cpu_reference(const Problem& p, const char* what) {
    const double fmas = p.fmas(), seconds = reference_seconds(p);
    if (seconds < 10) return;
    char when[64], work[96];
    if (seconds < 120) std::snprintf(when, sizeof when, "%.0f s", seconds);
    else if (seconds < 7200) std::snprintf(when, sizeof when, "%.0f minutes", seconds / 60);
    else std::snprintf(when, sizeof when, "%.1f hours", seconds / 3600);
    const double outputs = double(p.out_elems());
    if (outputs * kReferenceSecondsPerOutput < 0.1 * seconds) std::snprintf(work, sizeof work, "%.2g multiply-adds", fmas);
    else std::snprintf(work, sizeof work, "%.2g multiply-adds and %.3g output elements", fmas, outputs);
    std::fprintf(stderr, "xcorr: %s: the float64 CPU reference, %s on one core: about %s "
                 "(a GPU algorithm, --algorithm auto, takes a fraction of a second to seconds)\n", what, work, when);
}

// The progress line of a CPU reference run: reference_cpu's output rows done, then the writing of
// a large output. On a terminal: one line rewritten in place a few times a second, erased at the
// end. Elsewhere (a log, a pipe, a test reading stderr): nothing for a run estimated under 2 s;
// beyond, a line each tenth of the estimate (at least 2 s apart), further apart as the run outlasts
// it (a quarter of the time so far, at most 60 s), one when done, and one before writing an output
// of kWriteNoteBytes or more.
class ReferenceProgress {
public:
    explicit ReferenceProgress(const Problem& p)
        : tty_(isatty(STDERR_FILENO) == 1),
          on_(tty_ || reference_seconds(p) >= 2),
          every_(tty_ ? 0.25 : std::clamp(reference_seconds(p) / 10, 2.0, 60.0)),  // see next_
          next_(tty_ ? 0.0 : every_) {}
    ReferenceProgress(const ReferenceProgress&) = delete;
    ReferenceProgress& operator=(const ReferenceProgress&) = delete;
    ~ReferenceProgress() {
        if (tty_ && shown_) std::fputs("\r\033[K", stderr);  // the line goes: the result is what follows
    }

    void operator()(int64_t done, int64_t total) {
        if (!on_) return;
        const double t = std::chrono::duration<double>(Clock::now() - start_).count();
        if (t < next_ && !(done == total && shown_ && !tty_)) return;
        next_ = t + (tty_ ? every_ : std::min(60.0, std::max(every_, t / 4)));
        shown_ = true;
        const double left = done > 0 ? t * double(total - done) / double(done) : 0;
        if (tty_)
            std::fprintf(stderr, "\r\033[Kxcorr: the float64 CPU reference: %.0f%% of the output rows, %.0f s, about %.0f s left",
                         100.0 * double(done) / double(total), t, left);
        else if (done < total)
            std::fprintf(stderr, "xcorr: the float64 CPU reference: %.0f%% of the output rows after %.0f s, about %.0f s left\n",
                         100.0 * double(done) / double(total), t, left);
        else
            std::fprintf(stderr, "xcorr: the float64 CPU reference: done in %.0f s\n", t);
        std::fflush(stderr);
    }

    // Before the output's `bytes` are written to `path` (a large one takes seconds, and its fsync more).
    void writing(const std::string& path, size_t bytes) {
        if (!on_ || (!tty_ && bytes < kWriteNoteBytes)) return;
        shown_ = true;
        const double b = double(bytes);
        char size[32];
        if (b >= 1e9) std::snprintf(size, sizeof size, "%.3g GB", b / 1e9);
        else if (b >= 1e6) std::snprintf(size, sizeof size, "%.3g MB", b / 1e6);
        else std::snprintf(size, sizeof size, "%.3g kB", b / 1e3);
        std::fprintf(stderr, "%sxcorr: writing the output, %s, to %s%s", tty_ ? "\r\033[K" : "", size, path.c_str(),
                     tty_ ? "" : "\n");
        std::fflush(stderr);
    }

private:
    using Clock = std::chrono::steady_clock;
    static constexpr size_t kWriteNoteBytes = size_t(256) << 20;
    const bool tty_, on_;
    const double every_;  // seconds between lines
    double next_;         // when the next line is due, seconds from the start
    bool shown_ = false;
    const Clock::time_point start_ = Clock::now();
};

// reference_cpu with the announcement of a long run (note_cpu_reference's `what`) and its progress
// line; `rounded`, where given, gets each output row rounded to float32 as soon as it is computed.
void reference_on_cpu(const Problem& p, const Stack& left, const Stack& right, double* out, const char* what,
                      ReferenceProgress& progress, float* rounded = nullptr) {
    note_cpu_reference(p, what);
    const size_t row = size_t(p.out_w());
    reference_cpu(p, left.data.data(), right.data.data(), out, [&](int64_t done, int64_t total) {
        if (rounded)
            for (size_t i = size_t(done - 1) * row; i < size_t(done) * row; ++i) rounded[i] = float(out[i]);
        progress(done, total);
    });
}

void reference_on_cpu(const Problem& p, const Stack& left, const Stack& right, double* out, const char* what) {
    ReferenceProgress progress(p);
    reference_on_cpu(p, left, right, out, what, progress);
}

// --out a FIFO (named pipe) that nobody reads yet: opening it to write waits for a reader, which
// looked like a hang. Made with the output, before it is written: where the FIFO has no reader, one
// line on stderr says that xcorr waits for one. The probe's write end stays open until the output is
// written (closed at once, it would give a reader that came just then an end of file, no output).
class FifoReaderNote {
public:
    explicit FifoReaderNote(const std::string& path) {
        struct stat st{};
        if (::stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) return;
        fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd_ < 0 && errno == ENXIO) {  // on a terminal, in place of a progress line (ReferenceProgress)
            std::fprintf(stderr, "%sxcorr: waiting for a reader of the FIFO %s: the output is written once one opens it\n",
                         isatty(STDERR_FILENO) == 1 ? "\r\033[K" : "", path.c_str());
            std::fflush(stderr);
        }
    }
    FifoReaderNote(const FifoReaderNote&) = delete;
    FifoReaderNote& operator=(const FifoReaderNote&) = delete;
    ~FifoReaderNote() {
        if (fd_ >= 0) ::close(fd_);
    }

private:
    int fd_ = -1;
};

// The output's writers (npy.hpp, npz.hpp) with the note of a FIFO without a reader.
void write_output(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
    FifoReaderNote note(path);
    write_npy_atomic(path, shape, data);
}

void write_output(const std::string& path, const std::vector<NpzMember>& members) {
    FifoReaderNote note(path);
    write_npz_atomic(path, members);
}

// What auto chose, on stderr (xcorr run --algorithm auto).
void print_auto_choice(const Plan& plan) {
    std::string ps;
    for (const auto& [k, v] : plan.params()) ps += (ps.empty() ? " " : ",") + k + "=" + v;
    std::fprintf(stderr, "xcorr: auto chose %s%s: %s\n", plan.algorithm().c_str(), ps.c_str(), plan.explain().c_str());
}

// xcorr run --gpus / --chunk: the batch from host memory through run_batch (batch.hpp), the pieces
// on stderr, --validate against the CPU reference (the inputs need not fit one GPU).
int run_batched(const PlanSpec& spec, const Problem& p, const Stack& left, const Stack& right, std::vector<float>& out,
                const std::optional<std::string>& gpus, int64_t chunk, Split split, bool validate, double tolerance,
                const std::string& out_path, const std::vector<int64_t>& out_shape, const std::string& nonfinite) {
    BatchOptions options;
    if (gpus) options.devices = parse_devices(*gpus);
    options.max_outputs = chunk;
    options.split = split;
    if (spec.algorithm == "reference") note_cpu_reference(p, "--algorithm reference --chunk runs its pieces on");
    const BatchReport report = run_batch(spec, left.data.data(), right.data.data(), out.data(), options);
    std::map<int, int> per_device;
    for (const Piece& c : report.pieces) ++per_device[c.device];
    std::string where;
    for (const auto& [d, n] : per_device)
        where += (where.empty() ? "" : ", ") + std::to_string(n) + " on " +
                 (spec.algorithm == "reference" ? std::string("the CPU")
                                                : "GPU " + std::to_string(options.devices.empty() ? 0 : options.devices[d])) +
                 " (" + report.algorithms[size_t(d)] + ")";
    std::fprintf(stderr, "xcorr: %zu pieces of at most %lld output matrices: %s\n", report.pieces.size(),
                 (long long)std::max_element(report.pieces.begin(), report.pieces.end(), [](const Piece& a, const Piece& b) {
                     return a.problem.out_count() < b.problem.out_count();
                 })->problem.out_count(), where.c_str());
    for (size_t d = 0; d < report.seconds.size(); ++d)  // where a device's time went (host clock)
        std::fprintf(stderr,
                     "xcorr: GPU %d: start %.2f ms, setup %.1f ms, pipeline %.1f ms, teardown %.1f ms, finish %.2f ms, "
                     "split %s\n",
                     options.devices.empty() ? 0 : options.devices[d], 1e3 * report.seconds[d].start,
                     1e3 * report.seconds[d].setup, 1e3 * report.seconds[d].pipeline,
                     1e3 * report.seconds[d].teardown, 1e3 * report.seconds[d].finish, split_name(report.split[d]));
    if (validate) {
        std::vector<double> ref(out.size());
        reference_on_cpu(p, left, right, ref.data(), "--validate checks the batch against");
        double bound = 0;
        if (spec.algorithm == "reference") {
            bound = reference_output_bound(ref.data(), ref.size(), p.normalize);
        } else {
            double tol = 0;  // the loosest bound of the algorithms the devices ran (auto may differ per piece shape)
            for (const std::string& a : report.algorithms)
                if (!a.empty()) tol = std::max(tol, find_variant(a).tolerance);
            bound = bound_for(tol, p.normalize);
        }
        if (!validation_passes(out.data(), ref.data(), out.size(), tolerance >= 0 ? tolerance : bound, p.normalize,
                               spec.algorithm, out_path, nonfinite))
            return 1;
    }
    write_output(out_path, out_shape, out.data());
    return 0;
}

// What xcorr run asked of host memory, for main's message if an allocation fails (std::bad_alloc).
struct HostRequest {
    size_t bytes = 0;
    std::string what;
} host_request;

// --out naming an input (the same file through another path, a hard link or a symbolic link: the
// same device and inode) would replace that input with the output: refused before any work.
void refuse_output_over_input(const std::string& out_path, const std::vector<std::string>& inputs) {
    struct stat out{};
    if (::stat(out_path.c_str(), &out) != 0 || !S_ISREG(out.st_mode)) return;  // nothing of the user's to replace
    for (size_t i = 0; i < inputs.size(); ++i) {
        struct stat in{};
        if (::stat(inputs[i].c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
            throw UsageError("--out " + out_path + " is the same file as the " + (i == 0 ? "left" : "right") +
                             " input " + inputs[i] + ": the output would replace it; give another --out");
    }
}

// xcorr run --peaks / --max-over-rights, --validate: the answer `got` against the float64 reference
// maps with reduce.hpp's checks (the contract's "correct when"): each failed check printed, then one
// summary line. `bound`: the algorithm's (relative, or absolute for zncc: absolute_error_for).
bool reduced_passes(const Problem& p, const Reduction& r, const Stack& left, const Stack& right,
                    const std::vector<double>& maps, const HostReduced& got, bool is_ref, double bound,
                    double tolerance, const std::string& algorithm, const std::string& out_path) {
    // Absolute for zncc, else relative to each map's largest value, as --validate of the maps
    // (--tolerance X the same kind); the reference's own rounding is relative in every mode.
    const double b = tolerance >= 0 ? tolerance : bound;
    const bool abs_bound = absolute_error_for(p.normalize) && (tolerance >= 0 || !is_ref);
    // Inputs holding NaN: the returned peaks are checked, not that nothing else exceeds them
    // (CONVENTIONS.md: which values an algorithm leaves to take there is its own).
    const bool finite_inputs = nonfinite_note(left, right, {"", ""}).empty();
    const PeakCheck c = check_answer(p, r, maps.data(), got, b, abs_bound, 8, finite_inputs);
    for (const std::string& line : c.failures) std::printf("%s\n", line.c_str());
    std::printf("%s of %lld %s checked against the float64 reference (bound %s %s): %lld failed checks: %s\n",
                reduction_name(r.kind),
                (long long)(r.kind == ReductionKind::Peaks ? p.out_count() : reduced_lefts(p)),
                r.kind == ReductionKind::Peaks ? "maps" : "lefts", abs_bound ? "absolute" : "relative",
                shortest(b).c_str(), (long long)c.failed, c.failed ? "FAILED" : "ok");
    std::fflush(stdout);
    if (c.failed)
        std::fprintf(stderr, "xcorr: validation failed: %s's %s is off the float64 reference; %s not written\n",
                     algorithm.c_str(), reduction_name(r.kind), out_path.c_str());
    return !c.failed;
}

// The answer of a reduction as the .npz's arrays (docs/cli.md). Signals: peaks' shift and subpixel
// keep the lag (dx) alone; a maximum's maps are (lefts, n_out).
void write_reduced(const Problem& p, const Reduction& r, int dims, const HostReduced& got, const std::string& out_path) {
    std::vector<NpzMember> members;
    std::vector<int32_t> lags;
    std::vector<float> sub_lags;
    if (r.kind == ReductionKind::Peaks) {
        const int64_t count = p.out_count(), k = r.k;
        members.push_back({"value", NpyType::Float32, {count, k}, got.value.data()});
        if (dims == 1) {
            lags.resize(got.value.size()), sub_lags.resize(got.value.size());
            for (size_t i = 0; i < lags.size(); ++i) lags[i] = got.shift[2 * i + 1], sub_lags[i] = got.subpixel[2 * i + 1];
            members.push_back({"shift", NpyType::Int32, {count, k}, lags.data()});
            members.push_back({"subpixel", NpyType::Float32, {count, k}, sub_lags.data()});
        } else {
            members.push_back({"shift", NpyType::Int32, {count, k, 2}, got.shift.data()});
            members.push_back({"subpixel", NpyType::Float32, {count, k, 2}, got.subpixel.data()});
        }
    } else {
        const int64_t lefts = reduced_lefts(p);
        const std::vector<int64_t> shape =
            dims == 1 ? std::vector<int64_t>{lefts, p.out_w()} : std::vector<int64_t>{lefts, p.out_h(), p.out_w()};
        members.push_back({"value", NpyType::Float32, shape, got.value.data()});
        members.push_back({"index", NpyType::Int32, shape, got.index.data()});
        if (r.stats) {
            members.push_back({"sum", NpyType::Float64, shape, got.sum.data()});
            members.push_back({"sumsq", NpyType::Float64, shape, got.sumsq.data()});
        }
    }
    write_output(out_path, members);
}

// xcorr run --peaks / --max-over-rights: the answer instead of the maps, into an .npz (docs/cli.md).
// The reference computes the float64 maps on the CPU and reduces them (reference_peaks,
// reference_max_over_rights); a GPU algorithm runs a plan with spec.reduce set, which never writes
// a map. --validate checks the answer against the float64 reference maps (reduced_passes).
int run_reduced(const PlanSpec& spec, const Problem& p, const Stack& left, const Stack& right, int dims,
                bool validate, double tolerance, const std::string& out_path) {
    const Reduction& r = spec.reduce;
    r.check(p);
    const bool is_ref = spec.algorithm == "reference";
    const size_t map_elems = size_t(p.out_elems());
    const bool need_maps = is_ref || validate;
    if (!is_ref) {
        require_gpu();
        require_free_memory(sizeof(float) * size_t(p.left_elems() + p.right_elems()) + reduced_bytes(p, r),
                            "this problem");
    }
    host_request = {reduced_bytes(p, r) + (need_maps ? sizeof(double) * map_elems : 0),
                    "this problem's " + std::string(reduction_name(r.kind)) + (need_maps ? " and its reference maps" : "") +
                        " (" + p.describe() + ")"};
    require_host_memory(host_request.bytes, host_request.what);
    HostReduced got(p, r);
    std::vector<double> maps;
    std::string algorithm = spec.algorithm;
    double bound = 0;  // relative, or absolute for zncc (absolute_error_for)
    if (is_ref) {
        maps.resize(map_elems);
        reference_on_cpu(p, left, right, maps.data(), "--algorithm reference computes the maps with");
        reference_answer(p, r, maps.data(), got);
        bound = kReferenceFloat32Bound;  // its float32 rounding: relative to each map's largest value
    } else {
        DeviceBuffer<float> dl(size_t(p.left_elems())), dr(size_t(p.right_elems()));
        XC_CUDA_CHECK(cudaMemcpy(dl.get(), left.data.data(), dl.bytes(), cudaMemcpyHostToDevice));
        XC_CUDA_CHECK(cudaMemcpy(dr.get(), right.data.data(), dr.bytes(), cudaMemcpyHostToDevice));
        Plan plan(spec);
        DeviceReduced out(p, r);
        out.poison(nullptr);
        if (spec.algorithm == "auto") print_auto_choice(plan);
        plan.execute(dl.get(), dr.get(), out.outputs(), nullptr);
        XC_CUDA_CHECK(cudaDeviceSynchronize());
        out.copy_to(got, 0, nullptr);
        algorithm = plan.algorithm();
        if (validate) {
            // The CPU reference where it is quick, the float64 GPU reference (tested against it) beyond.
            if (p.fmas() < 2e8) {
                maps.resize(map_elems);
                reference_cpu(p, left.data.data(), right.data.data(), maps.data());
            } else {
                maps = full_reference(p, dl.get(), dr.get(), nullptr).values;
            }
        }
        bound = bound_for(plan.variant().tolerance, p.normalize);
    }
    if (validate && !reduced_passes(p, r, left, right, maps, got, is_ref, bound, tolerance, algorithm, out_path))
        return 1;
    write_reduced(p, r, dims, got, out_path);
    return 0;
}

// xcorr run's command line as given (parse_run_options); judged by check_run_options and the steps
// after it, before any file is read.
struct RunOptions {
    bool help = false;  // --help: the usage, nothing else
    std::string algorithm, form_text, out_path, precision = "fp32";
    std::vector<std::string> inputs;
    Params given;
    bool validate = false;
    double tolerance = -1;                // the variant's own bound unless --tolerance is given
    std::optional<WindowRequest> window;  // unset: the full output
    std::string window_flag;              // the option that set it
    Normalize normalize = Normalize::None;
    int dims = 2;
    std::optional<std::string> gpus;  // --gpus: the batch split across these GPUs
    int64_t chunk = 0;                 // --chunk: at most this many output matrices per piece
    std::optional<Split> split;        // --split: how n-to-m runs of whole lefts are cut
    // --peaks K / --max-over-rights: the answer instead of the maps (reduce.hpp), into an .npz
    std::optional<int> peaks;
    std::optional<int> min_distance;
    std::optional<std::string> subpixel;
    bool max_over_rights = false, stats = false;
};

// Reads xcorr run's options, each on its own (a bad value, a repeated option, an unknown one: a
// UsageError); stops at --help.
RunOptions parse_run_options(int argc, char** argv) {
    RunOptions o;
    OptionSeen options;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const std::string& flag) { return option_value(argc, argv, i, flag); };
        auto is = [&](const char* flag) { return options.once(a, flag); };
        if (is_help(a)) {  // here, not in a value: --out -h names a file
            o.help = true;
            return o;
        }
        if (is("--algorithm")) o.algorithm = value("--algorithm");
        else if (is("--form")) o.form_text = value("--form");
        else if (is("--out")) o.out_path = value("--out");
        else if (is("--precision")) o.precision = value("--precision");
        else if (a == "--param" || a.rfind("--param=", 0) == 0) {
            std::string kv = value("--param");
            auto eq = kv.find('=');
            if (eq == std::string::npos || eq == 0) throw UsageError("--param takes KEY=VALUE, got '" + kv + "'");
            if (!o.given.emplace(kv.substr(0, eq), kv.substr(eq + 1)).second)
                throw UsageError("--param " + kv.substr(0, eq) + " is given twice");
        } else if (a == "--validate") o.validate = true;
        else if (is("--normalize")) o.normalize = parse_normalize(value("--normalize"));
        else if (is("--tolerance")) o.tolerance = parse_positive("--tolerance", value("--tolerance"), true);
        else if (is("--dims")) o.dims = parse_dims(value("--dims"));
        else if (is("--gpus")) o.gpus = value("--gpus");
        else if (is("--chunk")) o.chunk = parse_integer("--chunk", value("--chunk"), 1, int64_t(1) << 40);
        else if (is("--split")) o.split = parse_split(value("--split"));
        else if (is("--peaks")) o.peaks = int(parse_integer("--peaks (k, the peaks per map)", value("--peaks"), 1, INT32_MAX));
        else if (is("--min-distance"))
            o.min_distance = int(parse_integer("--min-distance", value("--min-distance"), 0, INT32_MAX));
        else if (is("--subpixel")) o.subpixel = value("--subpixel");
        else if (a == "--max-over-rights") o.max_over_rights = true;
        else if (a == "--stats") o.stats = true;
        else if (const char* flag = window_option(a)) {
            if (o.window) throw UsageError(o.window_flag + " and " + flag + " both choose the window: give one of --mode, --max-shift, --shifts (--dims 1: --mode, --max-lag, --lags)");
            o.window_flag = flag;
            o.window = parse_window(o.window_flag, value(o.window_flag));
        } else if (a.rfind("--", 0) == 0) throw UsageError("unknown option " + a);
        else o.inputs.push_back(a);
    }
    return o;
}

// What is missing, and what applies to an option not given.
void check_run_options(const RunOptions& o) {
    if (o.algorithm.empty()) throw UsageError("missing --algorithm");
    if (o.form_text.empty()) throw UsageError("missing --form");
    if (o.out_path.empty()) throw UsageError("missing --out");
    if (o.inputs.size() != 2) throw UsageError("expected two input files (LEFT.npy RIGHT.npy), got " + std::to_string(o.inputs.size()));
    if (o.tolerance >= 0 && !o.validate) throw UsageError("--tolerance applies to --validate, which is not given");
    if (o.window) check_window_dims(o.dims, o.window_flag, *o.window);
    if (o.gpus && *o.gpus != "all") parse_devices(*o.gpus, false);  // its form, before any file is read
}

// The reduction that --peaks or --max-over-rights asks for (kind Map where neither), checked.
Reduction run_reduction(const RunOptions& o, Form form) {
    Reduction reduce;
    if (o.peaks && o.max_over_rights)
        throw UsageError("--peaks and --max-over-rights both reduce the output: give one of them");
    if (!o.peaks && (o.min_distance || o.subpixel))
        throw UsageError(std::string(o.min_distance ? "--min-distance" : "--subpixel") +
                         " applies to --peaks K, which is not given");
    if (!o.max_over_rights && o.stats) throw UsageError("--stats applies to --max-over-rights, which is not given");
    if (o.peaks) {
        reduce.kind = ReductionKind::Peaks;
        reduce.k = *o.peaks;
        reduce.min_distance = o.min_distance.value_or(0);
        if (o.subpixel) reduce.subpixel = parse_subpixel(*o.subpixel);
    }
    if (o.max_over_rights) {
        reduce.kind = ReductionKind::MaxOverRights;
        reduce.stats = o.stats;
        if (form == Form::OneToOne)
            throw UsageError("--max-over-rights reduces over a left's rights: form one-to-one has one right per "
                             "left (give one-to-many, n-to-m or n-to-mn)");
    }
    if (reduce.kind != ReductionKind::Map) {
        const std::string flag = o.peaks ? "--peaks" : "--max-over-rights";
        if (o.out_path.size() < 4 || o.out_path.compare(o.out_path.size() - 4, 4, ".npz") != 0)
            throw UsageError(flag + " writes several arrays into one .npz: give --out ending .npz, got '" + o.out_path + "'");
        if (o.gpus || o.chunk) throw UsageError(flag + " runs one plan: give no --gpus or --chunk with it");
    }
    return reduce;
}

// A named variant's form and parameters; auto's and the reference's (none).
void check_algorithm(const RunOptions& o, Form form) {
    const bool is_auto = o.algorithm == "auto", is_ref = o.algorithm == "reference";
    if (is_ref && !o.given.empty()) throw UsageError("the reference takes no parameters");
    if (is_auto && !o.given.empty())
        throw UsageError("auto sets its own parameters: give no --param with --algorithm auto, or name the algorithm");
    if (!is_auto && !is_ref) {
        const Variant& v = find_variant(o.algorithm);
        if (!v.supports(form)) throw UsageError(o.algorithm + " does not support form " + o.form_text);
        v.resolve(o.given);
    }
}

// The plan's spec from the options and the inputs' shapes.
PlanSpec run_spec(const RunOptions& o, Form form, const Reduction& reduce, const Stack& left, const Stack& right) {
    std::optional<WindowRequest> window = o.window;
    if (o.dims == 1 && window && window->kind == WindowKind::Same) window = signal_same(left.w, right.w);
    if (o.dims == 1 && window) window->lags = true;  // named in lags where refused
    PlanSpec spec;
    spec.form = form;
    spec.nL = left.count, spec.nR = right.count;
    spec.hL = left.h, spec.wL = left.w, spec.hR = right.h, spec.wR = right.w;
    if (window) spec.window = *window;
    spec.normalize = normalize_name(o.normalize);
    spec.precision = o.precision;
    spec.algorithm = o.algorithm;
    spec.params = o.given;
    spec.reduce = reduce;
    return spec;
}

// What the problem itself rules out, before the GPU is needed: --split without a batch, the
// reference on GPUs, a window or size the named variant does not compute.
void check_run_problem(const RunOptions& o, const PlanSpec& spec, const Problem& p) {
    const bool is_auto = o.algorithm == "auto", is_ref = o.algorithm == "reference";
    if (o.split && !(o.gpus || o.chunk > 0)) throw UsageError(kSplitNeedsBatch);
    if (is_ref && o.gpus) throw UsageError("--gpus: the reference runs on the CPU (give --chunk N to split it)");
    // A variant never computes a window it does not declare.
    if (!is_auto && !is_ref) {
        const Variant& v = find_variant(o.algorithm);
        const std::string why = refusal(v, p, o.precision, spec.window);
        if (!why.empty()) throw UsageError(why + (v.supports_window(p) ? "" : " (the reference computes every window)"));
    }
}

// The maps on the CPU: the float64 reference, rounded to float32 row by row (--validate: that
// rounding). Both arrays are left uninitialized until written, so that their pages are first touched
// (seconds for gigabytes) under the progress line, not in a zeroing pass before it.
int run_reference_maps(const RunOptions& o, const Problem& p, const Stack& left, const Stack& right,
                       const std::vector<int64_t>& out_shape, const std::string& nonfinite) {
    const size_t n = size_t(p.out_elems());
    const auto ref = std::make_unique_for_overwrite<double[]>(n);
    const auto out = std::make_unique_for_overwrite<float[]>(n);
    ReferenceProgress progress(p);
    reference_on_cpu(p, left, right, ref.get(), "--algorithm reference is", progress, out.get());
    if (o.validate &&
        !validation_passes(out.get(), ref.get(), n, o.tolerance >= 0 ? o.tolerance : reference_output_bound(ref.get(), n, o.normalize),
                           o.normalize, o.algorithm, o.out_path, nonfinite))
        return 1;
    progress.writing(o.out_path, sizeof(float) * n);
    write_output(o.out_path, out_shape, out.get());
    return 0;
}

// The maps on the GPU: one plan, the inputs and output in its memory; --validate against the CPU
// reference where it is quick, the float64 GPU reference (tested against it) beyond.
int run_gpu_maps(const RunOptions& o, const PlanSpec& spec, const Problem& p, const Stack& left, const Stack& right,
                 std::vector<float>& out, const std::vector<int64_t>& out_shape, const std::string& nonfinite) {
    DeviceBuffer<float> dl(size_t(p.left_elems())), dr(size_t(p.right_elems())), dout(size_t(p.out_elems()));
    XC_CUDA_CHECK(cudaMemcpy(dl.get(), left.data.data(), dl.bytes(), cudaMemcpyHostToDevice));
    XC_CUDA_CHECK(cudaMemcpy(dr.get(), right.data.data(), dr.bytes(), cudaMemcpyHostToDevice));
    poison(dout.get(), dout.size(), nullptr);
    Plan plan(spec);
    if (o.algorithm == "auto") print_auto_choice(plan);
    plan.execute(dl.get(), dr.get(), dout.get(), nullptr);
    XC_CUDA_CHECK(cudaDeviceSynchronize());
    XC_CUDA_CHECK(cudaMemcpy(out.data(), dout.get(), dout.bytes(), cudaMemcpyDeviceToHost));
    if (o.validate) {
        std::vector<double> ref;
        if (p.fmas() < 2e8) {
            ref.resize(out.size());
            reference_cpu(p, left.data.data(), right.data.data(), ref.data());
        } else {
            ref = full_reference(p, dl.get(), dr.get(), nullptr).values;
        }
        if (!validation_passes(out.data(), ref.data(), out.size(),
                               o.tolerance >= 0 ? o.tolerance : bound_for(plan.variant().tolerance, o.normalize),
                               o.normalize, plan.algorithm(), o.out_path, nonfinite))
            return 1;
    }
    write_output(o.out_path, out_shape, out.data());
    return 0;
}

// The maps into an .npy: what does not fit refused before anything is allocated (a 400 GB output
// must be an error message, not the out-of-memory killer), then a batch, the reference or one plan.
int run_maps(const RunOptions& o, const PlanSpec& spec, const Problem& p, const Stack& left, const Stack& right) {
    const bool gpu = o.algorithm != "reference";
    const bool batch = o.gpus || o.chunk > 0;
    // Signals: (count, n_out); every 1-D window has the one row dy = 0.
    const std::vector<int64_t> out_shape = o.dims == 1 ? std::vector<int64_t>{p.out_count(), p.out_w()}
                                                       : std::vector<int64_t>{p.out_count(), p.out_h(), p.out_w()};
    const size_t out_elems = size_t(p.out_elems());
    const bool need_ref = !gpu || o.validate;
    if (gpu) require_gpu();
    if (gpu && !batch) {  // a batch is run in pieces that fit
        const size_t io_bytes = sizeof(float) * size_t(p.left_elems() + p.right_elems() + p.out_elems());
        require_free_memory(io_bytes + (o.validate && p.fmas() >= 2e8 ? sizeof(double) * out_elems : 0), "this problem");
    }
    // The host's peak beyond the inputs: the float32 output and, for the reference or --validate,
    // the float64 reference beside it. An allocation that fails all the same (a limit the check
    // cannot see) is reported by main with what this asked for (host_request).
    host_request = {out_elems * (sizeof(float) + (need_ref ? sizeof(double) : 0)),
                    "this problem's output (" + p.describe() + ")"};
    require_host_memory(host_request.bytes, host_request.what);
    const std::string nonfinite = o.validate ? nonfinite_note(left, right, o.inputs) : "";
    if (!gpu && !batch) return run_reference_maps(o, p, left, right, out_shape, nonfinite);
    std::vector<float> out(out_elems);
    if (batch)
        return run_batched(spec, p, left, right, out, o.gpus, o.chunk, o.split.value_or(Split::Auto), o.validate,
                           o.tolerance, o.out_path, out_shape, nonfinite);
    return run_gpu_maps(o, spec, p, left, right, out, out_shape, nonfinite);
}

int cmd_run(int argc, char** argv) {
    const RunOptions o = parse_run_options(argc, argv);
    if (o.help) return print_usage(), 0;
    check_environment();  // after --help (which always answers), before any file or GPU work
    check_run_options(o);
    const Form form = parse_form(o.form_text);
    const Reduction reduce = run_reduction(o, form);  // checked before any file is read
    check_precision(o.precision);
    check_algorithm(o, form);  // a named variant's form and parameters, before the files are read
    refuse_output_over_input(o.out_path, o.inputs);
    host_request.what = "the inputs " + o.inputs[0] + " and " + o.inputs[1];
    const Stack left = read_npy_stack(o.inputs[0], o.dims);
    const Stack right = read_npy_stack(o.inputs[1], o.dims);
    const PlanSpec spec = run_spec(o, form, reduce, left, right);
    const Problem p = problem_of(spec);
    check_run_problem(o, spec, p);
    if (reduce.kind != ReductionKind::Map)
        return run_reduced(spec, p, left, right, o.dims, o.validate, o.tolerance, o.out_path);
    return run_maps(o, spec, p, left, right);
}

// "[N:]HxW" (--left, --right of xcorr explain), "[N:]n" with --dims 1: count and sizes.
void parse_stack_shape(const std::string& flag, const std::string& text, int dims, int& n, int& h, int& w) {
    std::string rest = text;
    n = 1;
    if (auto colon = rest.find(':'); colon != std::string::npos) {
        n = int(parse_integer(flag + " count", rest.substr(0, colon), 1, INT32_MAX));
        rest = rest.substr(colon + 1);
    }
    if (dims == 1) {
        if (rest.find('x') != std::string::npos) throw UsageError(flag + " takes [N:]n with --dims 1 (a signal's length), got '" + text + "'");
        h = 1;
        w = int(parse_integer(flag + " length", rest, 1, INT32_MAX));
        return;
    }
    const auto x = rest.find('x');
    if (x == std::string::npos) throw UsageError(flag + " takes [N:]HxW, got '" + text + "'");
    h = int(parse_integer(flag + " height", rest.substr(0, x), 1, INT32_MAX));
    w = int(parse_integer(flag + " width", rest.substr(x + 1), 1, INT32_MAX));
}

// "name k=v,k=v" of a candidate.
std::string choice_text(const AutoChoice& c) {
    std::string s = c.algorithm;
    char sep = ' ';
    for (const auto& [k, v] : c.params) {
        s += sep;
        s += k;
        s += '=';
        s += v;
        sep = ',';
    }
    return s;
}

// xcorr explain's command line (parse_explain_options): the problem's spec, the GPU whose
// measurements to use and the batch split to show.
struct ExplainOptions {
    bool help = false;  // --help: the usage, nothing else
    PlanSpec spec;
    bool json = false, have_left = false, have_right = false, have_form = false;
    std::optional<std::string> gpu_name;
    AutoOptions options;
    std::string window_flag;
    bool have_window = false;
    int dims = 2;
    std::string left_text, right_text;  // parsed once --dims is known
    std::optional<std::string> gpus;     // --gpus / --chunk: show how xcorr run would split the batch
    int64_t chunk = 0;
    std::optional<Split> split;
};

// Reads xcorr explain's options, each on its own; stops at --help.
ExplainOptions parse_explain_options(int argc, char** argv) {
    ExplainOptions o;
    PlanSpec& spec = o.spec;
    OptionSeen seen;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const std::string& flag) { return option_value(argc, argv, i, flag); };
        auto is = [&](const char* flag) { return seen.once(a, flag); };
        if (is_help(a)) {
            o.help = true;
            return o;
        }
        if (is("--form")) spec.form = parse_form(value("--form")), o.have_form = true;
        else if (is("--left")) o.left_text = value("--left"), o.have_left = true;
        else if (is("--right")) o.right_text = value("--right"), o.have_right = true;
        else if (is("--dims")) o.dims = parse_dims(value("--dims"));
        else if (is("--precision")) spec.precision = value("--precision");
        else if (is("--normalize")) spec.normalize = normalize_name(parse_normalize(value("--normalize")));
        else if (is("--gpu")) o.gpu_name = value("--gpu");
        else if (is("--gpus")) o.gpus = value("--gpus");
        else if (is("--chunk")) o.chunk = parse_integer("--chunk", value("--chunk"), 1, int64_t(1) << 40);
        else if (is("--split")) o.split = parse_split(value("--split"));
        else if (a == "--json") o.json = true;
        // Evaluation (scripts/auto-report): leave this problem's own measurements out, or use the
        // cost model alone.
        else if (a == "--leave-out") o.options.leave_out_self = true;
        else if (a == "--model-only") o.options.model_only = true;
        else if (const char* flag = window_option(a)) {
            if (o.have_window) throw UsageError(o.window_flag + " and " + flag + " both choose the window: give one of --mode, --max-shift, --shifts (--dims 1: --mode, --max-lag, --lags)");
            o.window_flag = flag;
            o.have_window = true;
            spec.window = parse_window(o.window_flag, value(o.window_flag));
        } else throw UsageError("unknown argument " + a + " (xcorr explain --help)");
    }
    return o;
}

// The problem explained: what is missing, the stacks' shapes and the window, checked.
Problem explained_problem(ExplainOptions& o) {
    PlanSpec& spec = o.spec;
    if (!o.have_form) throw UsageError("missing --form");
    if (!o.have_left || !o.have_right) throw UsageError(o.dims == 1 ? "missing --left or --right ([N:]n)" : "missing --left or --right ([N:]HxW)");
    parse_stack_shape("--left", o.left_text, o.dims, spec.nL, spec.hL, spec.wL);
    parse_stack_shape("--right", o.right_text, o.dims, spec.nR, spec.hR, spec.wR);
    if (o.have_window) check_window_dims(o.dims, o.window_flag, spec.window);
    if (o.dims == 1 && spec.window.kind == WindowKind::Same) spec.window = signal_same(spec.wL, spec.wR);
    if (o.dims == 1) spec.window.lags = true;
    return problem_of(spec);
}

// The GPU whose measurements auto uses: --gpu's (a name without tables is a fair question, auto on
// a GPU nobody measured, or a typo: said on stderr, with the GPUs measured), else the GPU found,
// else "" (the cost model).
std::string explained_gpu(const ExplainOptions& o) {
    if (o.gpu_name && !o.gpu_name->empty() && !o.options.model_only) {
        const std::vector<std::string> keys = measured_gpus();
        if (std::find(keys.begin(), keys.end(), gpu_key(*o.gpu_name)) == keys.end()) {
            std::string have;
            for (const std::string& k : keys) have += (have.empty() ? "" : ", ") + k;
            std::fprintf(stderr, "xcorr explain: no measurements of '%s' (results/%s) in this build, which has %s: "
                         "auto's choice from the cost model alone\n", o.gpu_name->c_str(), gpu_key(*o.gpu_name).c_str(),
                         have.empty() ? "none" : have.c_str());
        }
    }
    if (o.gpu_name) return *o.gpu_name;
    try {
        return require_gpu().name;
    } catch (const NoGpuError&) {
        return "";  // no GPU here: the cost model
    }
}

// Where a candidate runs a raw problem on the parts its window touches (crop.hpp): "" if not.
std::string raw_crop_text(const Problem& p, const AutoChoice& c) {
    if (p.normalize != Normalize::None || !tries_raw_crop(find_variant(c.algorithm), p)) return "";
    const NormalizeCrop crop = touched_crop(p);
    return "the window touches " + describe_regions(p, crop) + ": " + c.algorithm +
           " runs on these (copied first, timed) as " + crop.raw(p).describe() +
           " (on the whole inputs where it does not compute that window)";
}

// The split of xcorr run --gpus/--chunk (with --chunk alone, one device); the sizes a piece would
// fit in memory are not known here, so without --chunk a device's run is one piece.
struct ExplainedSplit {
    std::vector<int> devices;
    std::vector<Piece> pieces;
    bool by_rights = false;
    Split ran = Split::Auto;
    int device_of(const Piece& c) const { return devices.empty() ? 0 : devices[size_t(c.device)]; }
};

ExplainedSplit explained_split(const ExplainOptions& o, const Problem& p) {
    ExplainedSplit s;
    if (o.gpus) s.devices = parse_devices(*o.gpus, false);
    if (o.split && !o.gpus && !o.chunk) throw UsageError(kSplitNeedsBatch);
    // The split xcorr run uses: auto resolves for its pageable arrays (a library call with
    // page-locked ones takes blocks: resolve_split).
    s.by_rights = rights_divide(p, std::max<int>(1, int(s.devices.size())));
    s.ran = resolve_split(o.split.value_or(Split::Auto), false, false, s.by_rights);
    if (o.gpus || o.chunk) s.pieces = split_batch(p, std::max<int>(1, int(s.devices.size())), o.chunk, s.ran);
    return s;
}

// explain --json: the normalization's crop of a normalized problem, its regions as [row0, row1,
// column0, column1), the raw problem the variant is given, the table columns the epilogue reads
// and how the Normalizer prepares the crops.
void print_crop_json(const Problem& p, const std::string& crop_note) {
    const NormalizeCrop c = touched_crop(p);
    auto region = [](const Region& r) {
        return "[" + std::to_string(r.r0) + ", " + std::to_string(r.r1) + ", " + std::to_string(r.c0) + ", " +
               std::to_string(r.c1) + "]";
    };
    std::cout << ", \"normalization_crop\": {\"left\": " << region(c.left) << ", \"right\": "
              << region(c.right) << ", \"empty\": " << (c.empty() ? "true" : "false") << ", \"whole\": "
              << (c.whole(p) ? "true" : "false") << ", \"raw\": \""
              << json_escape(c.empty() ? "" : c.raw(p).describe()) << "\", \"note\": \""
              << json_escape(crop_note) << "\"";
    if (!c.empty()) {
        // The table columns the epilogue reads, as [first, count] runs (normalize_crop.hpp).
        const TableColumnsPair tc = read_columns(p, c);
        auto runs = [](const TableColumns& t) {
            return "[[" + std::to_string(t.a0) + ", " + std::to_string(t.n1) + "], [" + std::to_string(t.b0) +
                   ", " + std::to_string(t.n2) + "]]";
        };
        std::cout << ", \"table_columns\": {\"left\": " << runs(tc.left) << ", \"right\": " << runs(tc.right)
                  << "}";
        // How the Normalizer prepares these crops (normalize.hpp: prepass_of).
        const Prepass pp = prepass_of(p, c);
        auto stack = [&](const StackPrepass& s, const Region& r) {
            return "{\"fused\": " + std::string(s.fused ? "true" : "false") +
                   ", \"partials\": " + std::to_string(s.partials) +
                   ", \"row_segments\": " + std::to_string(s.row_segments) +
                   ", \"chunked_rows\": " + (s.chunked_rows ? "true" : "false") +
                   ", \"col_bands\": " + std::to_string(s.col_bands) +
                   ", \"strip\": " + (s.strip ? "true" : "false") +
                   ", \"table_columns\": " + std::to_string(s.cols.width()) +
                   ", \"sampled\": " + (s.sampled(r.w()) ? "true" : "false") + "}";
        };
        std::cout << ", \"prepass\": {\"left\": " << stack(pp.left, c.left) << ", \"right\": "
                  << stack(pp.right, c.right) << ", \"staged_epilogue\": "
                  << (pp.staged_epilogue ? "true" : "false") << ", \"template_epilogue\": "
                  << (pp.template_epilogue ? "true" : "false") << ", \"rebuild_left\": "
                  << (pp.rebuild_left ? "true" : "false") << ", \"c00_parts\": " << pp.c00_parts << "}";
    }
    std::cout << "}";
}

// explain --json: the problem, auto's candidates in the order tried, and the pieces of a batch.
void print_explain_json(const Problem& p, const PlanSpec& spec, const std::string& gpu_name,
                        const std::vector<AutoChoice>& cs, const ExplainedSplit& s) {
    const std::string crop_note = p.normalize == Normalize::None ? "" : describe_crop(p);
    std::cout << "{\"problem\": \"" << json_escape(p.describe()) << "\", \"gpu\": \"" << json_escape(gpu_name)
              << "\", \"table\": \"" << json_escape(gpu_name.empty() ? "" : gpu_key(gpu_name)) << "\", \"precision\": \""
              << json_escape(spec.precision) << "\", \"normalize\": \"" << normalize_name(p.normalize)
              << "\", \"normalization\": \"" << json_escape(normalization_note(p.normalize)) << "\"";
    if (!crop_note.empty()) print_crop_json(p, crop_note);
    std::cout << ", \"candidates\": [";
    for (size_t i = 0; i < cs.size(); ++i) {
        std::cout << (i ? ", " : "") << "{\"algorithm\": \"" << json_escape(cs[i].algorithm) << "\", \"params\": {";
        bool first = true;
        for (const auto& [k, v] : cs[i].params) {
            std::cout << (first ? "" : ", ") << '"' << json_escape(k) << "\": \"" << json_escape(v) << '"';
            first = false;
        }
        std::cout << "}, \"predicted_us\": " << cs[i].predicted_us << ", \"reason\": \"" << json_escape(cs[i].reason) << '"';
        if (const std::string crop = raw_crop_text(p, cs[i]); !crop.empty())
            std::cout << ", \"raw_crop\": \"" << json_escape(crop) << '"';
        std::cout << "}";
    }
    std::cout << "]";
    if (!s.pieces.empty()) {
        std::cout << ", \"split\": \"" << split_name(s.ran) << "\", \"pieces\": [";
        for (size_t i = 0; i < s.pieces.size(); ++i) {
            const PieceLayout L = layout_of(p, s.pieces[i]);
            std::cout << (i ? ", " : "") << "{\"device\": " << s.device_of(s.pieces[i]) << ", \"problem\": \""
                      << json_escape(s.pieces[i].problem.describe()) << "\", \"left0\": " << s.pieces[i].left0
                      << ", \"right0\": " << s.pieces[i].right0 << ", \"out0\": " << s.pieces[i].out0
                      << ", \"outputs\": " << s.pieces[i].problem.out_count() << ", \"rows\": " << L.rows
                      << ", \"row\": " << L.row << ", \"pitch\": " << L.pitch << "}";
        }
        std::cout << "]";
    }
    std::cout << "}\n";
}

// explain as text: auto's choice and why, the normalization's notes, the candidates, the pieces.
void print_explain_text(const Problem& p, const PlanSpec& spec, const std::string& gpu_name,
                        const std::vector<AutoChoice>& cs, const ExplainedSplit& s, const std::optional<Split>& split) {
    const std::string note = normalization_note(p.normalize);
    // Where the normalization's prepass and raw correlation run (normalize_crop.hpp).
    const std::string crop_note = p.normalize == Normalize::None ? "" : describe_crop(p);
    const std::string raw_crop_note = raw_crop_text(p, cs[0]);
    std::cout << "problem: " << p.describe() << "\nprecision: " << spec.precision << "\ngpu: "
              << (gpu_name.empty() ? "none (cost model)" : gpu_name) << "\nauto runs: " << choice_text(cs[0])
              << "\n  because " << cs[0].reason << (note.empty() ? "" : "\n  " + note)
              << (crop_note.empty() ? "" : "\n  " + crop_note) << (raw_crop_note.empty() ? "" : "\n  " + raw_crop_note)
              << "\ncandidates, in the order tried (a variant may refuse the problem when the plan is built):\n";
    for (size_t i = 0; i < cs.size(); ++i)
        std::cout << "  " << i + 1 << ". " << choice_text(cs[i]) << ": " << cs[i].reason << '\n';
    if (s.pieces.empty()) return;
    std::cout << "pieces (xcorr run --gpus/--chunk, split " << split_name(s.ran)
              << (split.value_or(Split::Auto) != Split::Auto ? ""
                  : s.by_rights ? ": auto, the GPUs dividing the rights"
                                : ": auto for pageable arrays; page-locked ones take blocks")
              << (s.ran == Split::Blocks && s.by_rights ? "; each GPU takes every left and its run of the rights" : "")
              << "), outputs first..last:\n";
    for (const Piece& c : s.pieces) {
        const PieceLayout L = layout_of(p, c);
        std::cout << "  GPU " << s.device_of(c) << ": outputs " << c.out0 << ".." << c.out0 + (L.rows - 1) * L.pitch + L.row - 1;
        if (L.rows > 1) std::cout << " (" << L.rows << " rows of " << L.row << ", " << L.pitch << " apart)";
        std::cout << ": " << c.problem.describe() << " (lefts from " << c.left0 << ", rights from " << c.right0 << ")\n";
    }
}

int cmd_explain(int argc, char** argv) {
    ExplainOptions o = parse_explain_options(argc, argv);
    if (o.help) return print_usage(), 0;
    check_environment();
    const Problem p = explained_problem(o);
    const std::string gpu_name = explained_gpu(o);
    const std::vector<AutoChoice> cs = auto_candidates(p, o.spec.precision, gpu_name, o.options);
    if (cs.empty())
        throw UsageError("no algorithm of this build computes " + p.describe() + " with precision " + o.spec.precision);
    const ExplainedSplit s = explained_split(o, p);
    if (o.json) print_explain_json(p, o.spec, gpu_name, cs, s);
    else print_explain_text(p, o.spec, gpu_name, cs, s, o.split);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    // A reader that goes away (--out a FIFO or a pipe) makes the write fail with EPIPE, reported
    // as a failed write, instead of killing the tool without a word.
    std::signal(SIGPIPE, SIG_IGN);
    try {
        if (argc < 2) {
            print_usage();
            return 2;
        }
        const std::string cmd = argv[1];
        // Help answers before anything is checked; run and explain find --help among their options
        // (not in a value: --out -h is a file name).
        if (cmd == "help" || is_help(cmd) || ((cmd == "list" || cmd == "info") && argc == 3 && is_help(argv[2])))
            return print_usage(), 0;
        if (cmd == "list") {
            if (argc > 3 || (argc == 3 && std::string(argv[2]) != "--json")) throw UsageError("usage: xcorr list [--json]");
            check_environment();
            return cmd_list(argc == 3);
        }
        if (cmd == "info") {
            if (argc > 2) throw UsageError("usage: xcorr info (it takes no arguments)");
            check_environment();
            return cmd_info();
        }
        if (cmd == "run") return cmd_run(argc - 2, argv + 2);
        if (cmd == "explain") return cmd_explain(argc - 2, argv + 2);
        throw UsageError("unknown command '" + cmd + "' (expected list, info, run, explain or help)");
    } catch (const UsageError& e) {
        std::fprintf(stderr, "xcorr: error: %s\n", e.what());
        return 2;
    } catch (const NoGpuError& e) {
        std::fprintf(stderr, "xcorr: no GPU: %s\n", e.what());
        return 3;
    } catch (const std::bad_alloc&) {
        // Too large for the memory the process may use: bad input (exit 2), like a refusal up front.
        if (host_request.bytes) {
            std::string where;
            const size_t available = available_host_memory(&where);
            std::fprintf(stderr, "xcorr: error: %s (an allocation failed)\n",
                         host_memory_shortfall(host_request.bytes, host_request.what, available, where).c_str());
        } else {
            std::fprintf(stderr, "xcorr: error: not enough host memory for %s: an allocation failed (%s)\n",
                         host_request.what.empty() ? "this command" : host_request.what.c_str(),
                         host_memory_left().c_str());
        }
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xcorr: failed: %s\n", e.what());
        return 1;
    }
}
