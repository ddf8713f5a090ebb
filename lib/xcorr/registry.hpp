// The registry of algorithm variants. A variant is one .cu file under algorithms/ that registers
// itself with XCORR_REGISTER_VARIANT; the benchmark binary, the `xcorr` tool and the validator all
// enumerate this registry, so a registered variant is built, validated, benchmarked and swept
// without any other change.
//
// Life cycle of one run (the harness drives it, the variant implements it):
//   1. Variant::make(problem, params)   untimed: check support, allocate workspace, create plans.
//   2. Instance::run(left, right, out)  TIMED: all device work that turns the inputs into `out`,
//                                       enqueued on `stream`, no host synchronisation, every
//                                       launch checked with XC_CHECK_LAUNCH().
//   3. Instance::finish(out)            untimed and optional: post-processing a variant chooses
//                                       not to time (its Variant::timed text says so); the harness
//                                       times it separately and reports it as `finish_time`.
// What step 2 covers is stated in Variant::timed and recorded with every benchmark.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "xcorr/core.hpp"
#include "xcorr/reduce.hpp"
#include "xcorr/store_norm.hpp"

namespace xcorr {

// Where an instance that fuses a k = 1 peak search (Instance::takes_peak1) writes output k's peak:
// value[k], shift[2k..2k+1], subpixel[2k..2k+1] (reduce.hpp's layout), the shifts counted from the
// window's first (dy0, dx0), the sub-pixel fit `method`.
struct PeakSink {
    float* value = nullptr;
    int32_t* shift = nullptr;
    float* subpixel = nullptr;
    int dy0 = 0, dx0 = 0;
    Subpixel method = Subpixel::Parabolic;
};

// Where an instance whose store also takes each tile's maximum (Instance::takes_tile_max) writes
// it: output k's tile (ty, tx), the shifts [ty th, (ty + 1) th) x [tx tw, (tx + 1) tw) of its
// window's map (lib/reduce/kernels.cuh, Tiles), at key[k per + ty nx + tx], merged by atomicMax of
// lib/reduce/peak.cuh's peak_key of each value that is a number (its index the flat one in the map);
// the keys are 0 before a run, and the reduction that reads them leaves them 0 again.
struct TileSink {
    unsigned long long* key = nullptr;
    int th = 0, tw = 0, nx = 0;
    int64_t per = 0;  // tiles a map
};

class Instance {
public:
    virtual ~Instance() = default;
    // The timed work. `left`, `right` and `out` are device stacks laid out as in CONVENTIONS.md;
    // `out` holds garbage on entry (tests poison it) and every element must be written.
    virtual void run(const float* left, const float* right, float* out, cudaStream_t stream) = 0;
    // Untimed post-processing (see above). Only called when has_finish() is true.
    virtual bool has_finish() const { return false; }
    virtual void finish(float* /*out*/, cudaStream_t /*stream*/) {}
    // Device memory the instance holds that its DeviceBuffers do not count (device_buffer.hpp):
    // cuFFT work areas, which cuFFT allocates itself. Plan::workspace_bytes adds it.
    virtual size_t external_device_bytes() const { return 0; }
    // An instance of a normalized problem's raw correlation may write the normalized values itself
    // (xcorr/store_norm.hpp: the template epilogue's problems). takes_store_norm: whether it would
    // for this normalization; set_store_norm: from now on it does, in every run() (the Normalizer
    // then skips its epilogue; the buffers `s` points to stay valid while it runs).
    virtual bool takes_store_norm(Normalize /*mode*/) const { return false; }
    virtual void set_store_norm(const StoreNorm& /*s*/) {}
    // A normalized problem's instance whose raw instance took set_store_norm (Plan::explain says so).
    virtual bool normalizes_in_store() const { return false; }
    // A reduced plan's peaks at k = 1 (reduce.hpp) may come from the instance's own last pass, the
    // map never written: takes_peak1, whether it can for its problem; run_peak1 enqueues that
    // instead of run() (direct launches: a replayed graph's key holds run()'s pointers only).
    // Only the variant's own instance and wrappers that forward them answer true (a normalized
    // instance does not: its epilogue needs the map).
    virtual bool takes_peak1() const { return false; }
    virtual void run_peak1(const float* /*left*/, const float* /*right*/, const PeakSink& /*sink*/,
                           cudaStream_t /*stream*/) {}
    // A reduced plan's peaks at any k take each tile's maximum of the maps (lib/reduce/kernels.cu's
    // first pass, a read of every map) unless the instance's own store takes them as it writes the
    // map: takes_tile_max, whether it would with these tiles; set_tile_sink: from now on every run()
    // does (called before the first run: a replayed graph holds the launches' arguments).
    virtual bool takes_tile_max(const TileSink& /*s*/) const { return false; }
    virtual void set_tile_sink(const TileSink& /*s*/) {}
    // A reduced plan's maximum over the rights (reduce.hpp) of a one-to-one or one-to-many problem
    // may come from the instance's own last pass, no map written (fft-large): takes_max_over_rights,
    // whether it can; run_max folds this call's rights, numbered from `first`, into out's value,
    // index, sum and sum of squares (sum null: no sums), starting them afresh when `fresh`.
    virtual bool takes_max_over_rights() const { return false; }
    virtual void run_max(const float* /*left*/, const float* /*right*/, const ReducedOutputs& /*out*/,
                         int32_t /*first*/, bool /*fresh*/, cudaStream_t /*stream*/) {}
};

// One tuning parameter and every value that is instantiated for it. values[0] is the default.
// Values are text so that enumerations ("none", "rectangle", "triangle") and numbers mix;
// "n" conventionally means "no split / all".
struct ParamSpec {
    std::string name;
    std::vector<std::string> values;
    std::string help;
};

// A plain function (a variant's captureless lambda converts to it): not std::function, whose header
// (C++20 <functional>) costs every variant's compile ~1.5 s of front-end time for nothing.
using Factory = std::unique_ptr<Instance> (*)(const Problem&, const Params&);

// One dimension of a windowed problem (50_fft.cu's header comment, "Windows"): the shifts [s0, s1]
// of the window clamped to those that overlap, [lo, hi]; the rows (columns) of the hl-long left,
// [l0, l0 + ln), and of the hr-long right, [r0, r0 + rn), that those shifts use (the crop of
// xcorr/crop.hpp); and the period `need` that holds them without aliasing (the whole inputs for the
// full window: hl + hr - 1). Shift s is shift s + r0 - l0 of the cropped parts. Empty (ln = 0) when
// no shift of the window overlaps.
struct AxisFit {
    int lo = 0, hi = -1, l0 = 0, ln = 0, r0 = 0, rn = 0, need = 0;
    bool empty() const { return ln == 0; }
};
AxisFit fit_axis(int s0, int s1, int hl, int hr);
// fit_axis(...).need, 0 when no shift overlaps (registry.cpp says why): fft's transform, fft-fused's
// limit (Variant::max_transform), auto's FFT work (auto.cpp). Python: python/xcorr/_rules.py.
int transform_need(int s0, int s1, int hl, int hr);

struct Variant {
    std::string name;     // as in the paper where it has a name: "overlap-wise", "split-row", ...
    std::string family;   // groups variants in plots and tables: "baseline", "warp-shuffle", ...
    std::string summary;  // one line for `xcorr list`
    std::string timed;    // what Instance::run covers, e.g. "kernel" or "zero output + kernel"
    std::string precision = "fp32";
    double tolerance = 1e-5;  // bound on ||out - ref|| / ||ref|| against the float64 reference
    std::vector<Form> forms;
    std::vector<ParamSpec> params;
    // Creates a ready-to-run instance. Throws UsageError when the problem or parameter
    // combination is not supported (for example a size the kernel cannot handle).
    Factory make;
    // Most back-to-back calls the benchmark may put between one pair of events (a variant whose
    // call is dominated by host work, such as plan creation, sets 1).
    int max_batch = 256;
    // The definition's FMA count, from which the benchmark sizes its batch, overstates this
    // variant's work by orders of magnitude (fft): the batch comes from a timed pilot call instead.
    bool pilot_batch = false;
    // Its instances may fold the maximum over the rights themselves (Instance::takes_max_over_rights):
    // a reduction by this variant then makes one plan of every right (lib/reduce/), which for a
    // variant that writes maps would hold every map at once.
    bool folds_max_over_rights = false;
    // A call with the pointers of the call before it takes another path than a call with new ones
    // (fft: its graph's pointers are patched only when they change; fft-fused: GraphReplay's
    // capture and replay): the validator runs each pointer set twice in a row, so that both paths
    // meet its poisoned output; other variants' runs are one a pointer set.
    bool replays_repeated_calls = false;
    // The windows it computes (CONVENTIONS.md, "Output windows"): a problem whose shifts are none
    // of these is refused before make() (supports_window). Every variant computes the full output.
    std::vector<WindowKind> windows = {WindowKind::Full};
    // Problems it is built for beyond its forms and windows, also refused before make()
    // (shape_refusal): a kernel for one-dimensional signals only (hL == hR == 1, CONVENTIONS.md,
    // "One-dimensional signals"), and a kernel for small windows (at most max_shifts shifts per
    // pair; 0: no limit). The tests, the validator and the experiments read both from `xcorr list`.
    bool signals_only = false;
    int64_t max_shifts = 0;
    // The largest transform it holds (fft-fused: 1024), per axis over the parts of the inputs the
    // window touches (transform_need): a problem that needs more is refused before make() too,
    // so that auto never picks it there. 0: no limit.
    int max_transform = 0;
    // A variant whose cost follows its inputs' sizes rather than its window's (fft-fused: the
    // transform size) sets this: where a raw problem's window touches only part of the inputs, the
    // harness runs it on those parts with the window translated (xcorr/crop.hpp), copying them
    // first (timed). Normalized problems are always cropped (normalize.hpp).
    bool crop_windows = false;
    // The block of shifts its kernel computes as a whole (dy rows x dx columns): a window narrower
    // than a tile still pays for the tile (register-tiled: 32 x 32 per warp). auto's cost model
    // (auto.cpp: work_units) rounds the window up to whole tiles; 1 x 1 where the work follows the
    // window's shifts exactly. The fit takes it from `xcorr list --json` as well
    // (scripts/auto-tables keeps it in harness/auto_tables/variants.json).
    struct WorkTile {
        int dy = 1, dx = 1;
    } work_tile;
    // The GPUs its kernels run on (major * 10 + minor), beyond the binary's own architectures
    // (built_archs, a wheel's fat binary): at least min_cc (mma.sync TF32: 80); an architecture-
    // specific kernel (sm_90a's wgmma) only on arch_cc and only where the binary holds SASS for it.
    // Refused before make() (gpu_refusal) and never a candidate of auto on another GPU.
    int min_cc = 0;
    int arch_cc = 0;

    bool supports(Form f) const;
    // Whether p's shifts are a window of a declared kind for p's sizes: a window asked for by
    // another name that is the same rectangle (valid with a 1 x 1 right is full) is supported.
    bool supports_window(const Problem& p) const;
    // Its window kinds, "full, valid, ..." (`separator` between them).
    std::string windows_text(const char* separator = ", ") const;
    // Why p's window is refused: "<name> does not compute the <asked> window (shifts ...) of this
    // problem, only: full, ..." (xcorr run and xcorr_bench); a window asked for in signals' terms
    // (asked.lags) is named in them: "the max-lag 2 window (lags -2:2)".
    std::string window_refusal(const Problem& p, const WindowRequest& asked) const;
    // Why p's shape is refused (signals_only, max_shifts, max_transform), or "" when it is not.
    std::string shape_refusal(const Problem& p) const;
    // Its max_transform part alone (shape_refusal's last): the validator's shapes a variant is
    // built for leave it out.
    std::string transform_refusal(const Problem& p) const;
    // Why it does not run on a GPU of compute capability cc (major * 10 + minor) with this binary
    // (min_cc, arch_cc, and the architectures built), or "" when it does.
    std::string gpu_refusal(int cc) const;
    // supports(p.form), supports_window(p) and no shape_refusal(p): what make() may be asked.
    bool supports_problem(const Problem& p) const;
    // Fills in defaults and rejects unknown parameters and values outside the allowed set
    // with a UsageError naming the allowed values.
    Params resolve(const Params& given) const;
};

// Registration happens from static initialisers in each variant's translation unit.
int register_variant(Variant v);
const std::vector<Variant>& variants();  // sorted by name
const Variant& find_variant(const std::string& name);  // throws UsageError with the known names

}  // namespace xcorr

#define XCORR_CONCAT_INNER(a, b) a##b
#define XCORR_CONCAT(a, b) XCORR_CONCAT_INNER(a, b)
// Usage, at namespace scope in a variant's .cu file:
//   XCORR_REGISTER_VARIANT(xcorr::Variant{ ...designated fields... });
#define XCORR_REGISTER_VARIANT(...) \
    static const int XCORR_CONCAT(xcorr_registered_, __COUNTER__) = ::xcorr::register_variant(__VA_ARGS__)
