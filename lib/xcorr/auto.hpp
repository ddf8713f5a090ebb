// "auto" inside the library (not installed): the precision policy, the compact tables of measured
// results (auto_table.cpp, generated in the build directory by scripts/auto-tables-cpp from the
// committed lib/auto_tables/, which scripts/auto-tables makes of results/<gpu>/summary.csv)
// and the cost model calibrated on them.
#pragma once

#include <string>
#include <vector>

#include "xcorr/auto_choice.hpp"
#include "xcorr/core.hpp"

namespace xcorr {

struct Variant;

// The error bound of precision "fp32" (plan.hpp): FP32-class, relative to float64.
constexpr double kFp32Tolerance = 1e-5;
bool precision_admits(const std::string& precision, const Variant& v);
void check_precision(const std::string& precision);  // UsageError unless "fp32" or "tf32"
// Why `v` cannot compute `p` under `precision` ("" when it can); `w` names the window asked for.
std::string refusal(const Variant& v, const Problem& p, const std::string& precision, const WindowRequest& w);

// "NVIDIA H200" -> "nvidia-h200": the results/ folder of a GPU (xcsuite.paths.gpu_slug).
std::string gpu_key(const std::string& name);
// The results/ folders (gpu_key) whose measurements this build's auto tables hold, in table order.
std::vector<std::string> measured_gpus();
// The work units of auto's cost model for p (auto.cpp says what they count), a direct variant's
// window rounded up to whole tiles of tile_dy x tile_dx shifts (Variant::work_tile); fft: the fft
// family's. At least 1.
double work_units(const Problem& p, bool fft, int tile_dy = 1, int tile_dx = 1);

namespace autotab {
// One measured (variant, parameters) of a case: its fastest parameters, time of run + finish.
struct Row {
    const char* variant;
    const char* params;  // "key=value,key=value" ("" for none)
    double us;
};
// One measured problem: rows [first, first + count) of its table, fastest first.
struct Case {
    int form, hL, wL, hR, wR, nL, nR;
    int dy0, dy1, dx0, dx1;  // its shifts (the full window's when it was measured in full)
    int normalize;           // xcorr::Normalize: a normalized problem is measured (and looked up) apart
    int first, count;
};
struct Table {
    const char* key;       // results/ folder, "nvidia-h200"
    const char* gpu_name;  // "NVIDIA H200"
    const Case* cases;
    int n_cases;
    const Row* rows;
};
// The cost model of one variant (for one form, form -1: all forms, both fitted on 2-D problems, or
// form -2: one-dimensional problems, every form, fitted on those): time = floor_us + units *
// us_per_unit, where units are multiply-adds (direct variants) or FFT slot elements (fft family:
// work_units in auto.cpp). Fitted by the script on every measured GPU's table.
struct Model {
    const char* variant;
    int form;
    int fft;
    double floor_us, us_per_unit;
    int n_rows;  // the rows it was fitted on
};
extern const Table kTables[];
extern const int kNumTables;
extern const Model kModels[];
extern const int kNumModels;
}  // namespace autotab

// Evaluation switches (xcorr explain, scripts/auto-report).
struct AutoOptions {
    bool leave_out_self = false;  // ignore the table's rows of exactly this problem (leave-one-out)
    bool model_only = false;      // as on a GPU without a table: the cost model alone
};
std::vector<AutoChoice> auto_candidates(const Problem& p, const std::string& precision, const std::string& gpu_name,
                                        const AutoOptions& options);

}  // namespace xcorr
