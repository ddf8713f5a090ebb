// "auto" (plan.hpp, auto.hpp): which variant a plan runs when none is named.
//
// With a table for the GPU (auto_table.cpp, measured results of results/<gpu>/):
//  1. the problem itself measured: its variants, fastest first (each with its fastest parameters);
//  2. every other admissible variant, predicted from its nearest measured problems of the same
//     form: distance in log2 of the sizes, the counts and the output extent (plus a penalty for
//     another window kind, and for a normalized problem one measured raw), the measured times
//     scaled by the variant's cost model from there to here, averaged in log space with weights
//     1/d^2 over the two nearest; ranked by prediction. A normalized problem (zncc, zero-lag) is a
//     problem of its own in the table; a raw one is never predicted from normalized measurements.
//  3. a variant with no measured neighbour near enough: its cost model's prediction, ranked among
//     those of step 2 at kModelDoubt times its value (on the H200 tables 2 left more window picks
//     unmeasured than 4, and 8 picked the same as 4: scripts/auto_report.py).
// Without a table (a GPU nobody measured): the cost model alone,
// time = floor + units * cost per unit, fitted by the script on the measured GPUs (multiply-adds
// for the direct variants, FFT slot elements for the fft family).
// Only variants that declare the form and the window and meet the precision policy are candidates;
// fft+plan (the benchmark of plan creation inside the timed run) never is, fft computes the same.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "xcorr/auto.hpp"
#include "xcorr/registry.hpp"

namespace xcorr {

std::string gpu_key(const std::string& name) {
    std::string s;
    for (char c : name) {
        const char l = char(std::tolower(static_cast<unsigned char>(c)));
        const bool keep = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
        if (keep) s += l;
        else if (!s.empty() && s.back() != '-') s += '-';
    }
    while (!s.empty() && s.back() == '-') s.pop_back();
    return s.empty() ? "unknown-gpu" : s;
}

namespace {

using autotab::Case;
using autotab::Model;
using autotab::Row;
using autotab::Table;

constexpr double kMaxDistance = 4.0;        // log2 units: farther measurements do not predict
constexpr int kSignalsModel = -2;             // Model::form of a model fitted on 1-D problems
constexpr double kKindPenalty = 1.5;        // another window kind counts as this far
constexpr double kNormalizePenalty = 1.5;   // another normalization (a normalized problem from a raw one)
constexpr int kNeighbours = 2;
constexpr double kModelDoubt = 4.0;          // a model-only prediction against measured neighbours' (step 3)
constexpr double kFastestWriteBytesPerUs = 8e6;  // 8 TB/s: above every GPU measured here (the H200's 4.8)

std::string fmt(double x, const char* f = "%.3g") {
    char b[64];
    std::snprintf(b, sizeof b, f, x);
    return b;
}

Params parse_params(const std::string& text) {
    Params out;
    std::stringstream s(text);
    std::string kv;
    while (std::getline(s, kv, ','))
        if (auto eq = kv.find('='); eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
    return out;
}

Problem case_problem(const Case& c) {
    Problem p{Form(c.form), c.hL, c.wL, c.hR, c.wR, c.nL, c.nR};
    const Window w{c.dy0, c.dy1, c.dx0, c.dx1};
    if (!(w == full_window(p))) p.window = w;
    p.normalize = Normalize(c.normalize);
    return p;
}

bool same_problem(const Problem& a, const Problem& b) {
    return a.form == b.form && a.hL == b.hL && a.wL == b.wL && a.hR == b.hR && a.wR == b.wR && a.nL == b.nL &&
           a.nR == b.nR && a.shifts() == b.shifts() && a.normalize == b.normalize;
}

WindowKind kind_of(const Problem& p) {
    for (WindowKind k : {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift})
        if (window_is(k, p)) return k;
    return WindowKind::Shifts;
}

double distance(const Problem& a, const Problem& b) {
    auto l = [](double x) { return std::log2(std::max(x, 1.0)); };
    const double fa[] = {l(a.hL), l(a.wL), l(a.hR), l(a.wR), l(a.nL), l(a.nR), l(a.out_h()), l(a.out_w())};
    const double fb[] = {l(b.hL), l(b.wL), l(b.hR), l(b.wR), l(b.nL), l(b.nR), l(b.out_h()), l(b.out_w())};
    double d2 = 0;
    for (int i = 0; i < 8; ++i) d2 += (fa[i] - fb[i]) * (fa[i] - fb[i]);
    return std::sqrt(d2) + (kind_of(a) == kind_of(b) ? 0.0 : kKindPenalty) +
           (a.normalize == b.normalize ? 0.0 : kNormalizePenalty);
}

// The work a variant's time scales with: multiply-adds, or for the fft family the elements of the
// transform slots it pads, transforms, multiplies and inverts (lefts + rights + products). A direct
// variant's window is first rounded up to whole work tiles (Variant::work_tile) from its first
// shift: register-tiled on ±1 of 2048 x 2048 computes a warp's 32 x 32 shifts, 114 times the
// window's multiply-adds (the padded shifts past the matrices add none, as their warps skip).
double work_units(const Problem& p, bool fft, Variant::WorkTile tile = {}) {
    if (!fft) {
        Window w = p.shifts();
        auto round_up = [](int64_t n, int t) { return (n + t - 1) / t * t; };
        w.dy1 = int(w.dy0 + round_up(int64_t(w.dy1) - w.dy0 + 1, tile.dy) - 1);
        w.dx1 = int(w.dx0 + round_up(int64_t(w.dx1) - w.dx0 + 1, tile.dx) - 1);
        return std::max(double(p.out_count()) * w.fmas(p.hL, p.wL, p.hR, p.wR), 1.0);
    }
    const Window w = p.shifts();
    const double slot = double(transform_need(w.dy0, w.dy1, p.hL, p.hR)) * transform_need(w.dx0, w.dx1, p.wL, p.wR);
    return double(p.nL + p.nR + p.out_count()) * slot;
}

// The model of a variant for p: for a one-dimensional problem (hL == hR == 1) its signals model
// (form -2, fitted on signals only) where it has one; else the one of p's form, else of all forms
// (both fitted on 2-D problems).
const Model* model_of(const std::string& variant, const Problem& p) {
    const bool signal = p.hL == 1 && p.hR == 1;
    const Model *any = nullptr, *of_form = nullptr;
    for (int i = 0; i < autotab::kNumModels; ++i) {
        const Model& m = autotab::kModels[i];
        if (variant != m.variant) continue;
        if (m.form == kSignalsModel && signal) return &m;
        if (m.form == int(p.form)) of_form = &m;
        if (m.form == -1) any = &m;
    }
    return of_form ? of_form : any;
}

double model_us(const Model& m, const Problem& p, Variant::WorkTile tile) {
    return m.floor_us + work_units(p, m.fft, tile) * m.us_per_unit;
}

const Table* table_of(const std::string& gpu_name) {
    const std::string key = gpu_key(gpu_name);
    for (int i = 0; i < autotab::kNumTables; ++i)
        if (key == autotab::kTables[i].key) return &autotab::kTables[i];
    return nullptr;
}

bool candidate(const Variant& v, const Problem& p, const std::string& precision) {
    return v.name != "fft+plan" && v.supports_problem(p) && precision_admits(precision, v);
}

std::vector<AutoChoice> from_model(const Problem& p, const std::vector<const Variant*>& vs, const std::string& why) {
    std::vector<AutoChoice> out, unknown;
    for (const Variant* v : vs) {
        const Model* m = model_of(v->name, p);
        if (!m) {
            unknown.push_back({v->name, {}, why + "no measurement or model of " + v->name + ": tried last", -1});
            continue;
        }
        const double units = work_units(p, m->fft, v->work_tile);
        const double t = model_us(*m, p, v->work_tile);
        out.push_back({v->name, {}, why + "cost model: " + v->name + " floor " + fmt(m->floor_us) + " us + " +
                                        fmt(units) + (m->fft ? " FFT slot elements" : " multiply-adds") + " x " +
                                        fmt(m->us_per_unit * 1e6) + " ps = " + fmt(t) + " us",
                       t});
    }
    std::stable_sort(out.begin(), out.end(), [](const AutoChoice& a, const AutoChoice& b) { return a.predicted_us < b.predicted_us; });
    out.insert(out.end(), unknown.begin(), unknown.end());
    return out;
}

// No variant writes its output faster than any GPU's memory: a predicted time under out_bytes /
// kFastestWriteBytesPerUs is raised to it, saying so. The neighbours' scaling and the cost models
// count multiply-adds or transform slots, of which a window far beyond the full output has almost
// none while its output is as large as the window (a 1.6 GB output was predicted at 8 us). The
// order is the predictions' own: a common floor keeps it, and measured times are left as measured.
std::vector<AutoChoice> with_output_floor(const Problem& p, std::vector<AutoChoice> cs) {
    const double bytes = double(p.out_elems()) * sizeof(float);
    const double floor_us = bytes / kFastestWriteBytesPerUs;
    for (AutoChoice& c : cs)
        if (c.predicted_us >= 0 && c.predicted_us < floor_us && c.reason.rfind("measured on ", 0) != 0) {
            c.reason += "; at least " + fmt(floor_us) + " us to write its " + fmt(bytes / 1e6, "%.4g") +
                        " MB of output (at 8 TB/s, faster than any GPU measured)";
            c.predicted_us = floor_us;
        }
    return cs;
}

// The candidates in the order tried, as auto_candidates returns them before with_output_floor.
std::vector<AutoChoice> ranked_candidates(const Problem& p, const std::string& precision, const std::string& gpu_name,
                                          const AutoOptions& options) {
    check_precision(precision);
    std::vector<const Variant*> vs;
    for (const Variant& v : variants())
        if (candidate(v, p, precision)) vs.push_back(&v);
    const Table* table = options.model_only ? nullptr : table_of(gpu_name);
    if (!table)
        return from_model(p, vs, options.model_only || gpu_name.empty() ? ""
                                 : "no measurements of " + gpu_name + " (results/" + gpu_key(gpu_name) + "): ");

    std::vector<AutoChoice> out;
    auto listed = [&](const std::string& name) {
        return std::any_of(out.begin(), out.end(), [&](const AutoChoice& c) { return c.algorithm == name; });
    };
    auto admissible = [&](const std::string& name) {
        return std::any_of(vs.begin(), vs.end(), [&](const Variant* v) { return v->name == name; });
    };
    // 1. This very problem, measured.
    for (int i = 0; i < table->n_cases; ++i) {
        const Case& c = table->cases[i];
        if (c.form != int(p.form)) continue;
        const Problem q = case_problem(c);
        if (!same_problem(p, q) || options.leave_out_self) continue;
        for (int r = c.first; r < c.first + c.count; ++r) {
            const Row& row = table->rows[r];
            if (!admissible(row.variant) || listed(row.variant)) continue;
            out.push_back({row.variant, parse_params(row.params),
                           std::string("measured on ") + table->gpu_name + ": " + q.describe() + " " + fmt(row.us) + " us",
                           row.us});
        }
    }
    // 2. The others, from their nearest measured problems.
    std::vector<AutoChoice> predicted;
    std::vector<const Variant*> unpredicted;
    for (const Variant* v : vs) {
        if (listed(v->name)) continue;
        struct Near {
            double d;
            const Case* c;
            const Row* row;
        };
        std::vector<Near> near;
        for (int i = 0; i < table->n_cases; ++i) {
            const Case& c = table->cases[i];
            if (c.form != int(p.form)) continue;
            const Problem q = case_problem(c);
            if (same_problem(p, q)) continue;  // left out (or already listed above)
            if (p.normalize == Normalize::None && q.normalize != Normalize::None) continue;  // not a raw time
            for (int r = c.first; r < c.first + c.count; ++r)
                if (v->name == table->rows[r].variant) {
                    const double d = distance(p, q);
                    if (d <= kMaxDistance) near.push_back({d, &c, &table->rows[r]});
                    break;
                }
        }
        if (near.empty()) {
            unpredicted.push_back(v);
            continue;
        }
        std::sort(near.begin(), near.end(), [](const Near& a, const Near& b) { return a.d < b.d; });
        if (near.size() > kNeighbours) near.resize(kNeighbours);
        const Model* m = model_of(v->name, p);
        double wsum = 0, lsum = 0;
        for (const Near& n : near) {
            const Problem q = case_problem(*n.c);
            const bool fft = v->name.rfind("fft", 0) == 0;
            const double scale = m ? model_us(*m, p, v->work_tile) / model_us(*m, q, v->work_tile)
                                   : work_units(p, fft, v->work_tile) / work_units(q, fft, v->work_tile);
            const double w = 1.0 / (n.d * n.d + 1e-3);
            wsum += w;
            lsum += w * std::log(n.row->us * scale);
        }
        const double t = std::exp(lsum / wsum);
        const Problem q0 = case_problem(*near[0].c);
        predicted.push_back({v->name, parse_params(near[0].row->params),
                             std::string("predicted for ") + table->gpu_name + " from " + q0.describe() + " (" +
                                 fmt(near[0].row->us) + " us" + (near.size() > 1 ? " and 1 more" : "") +
                                 ", scaled by the cost model): " + fmt(t) + " us",
                             t});
    }
    // 3. What no measurement near enough covers: the cost model's prediction, ranked with the
    // neighbours' predictions but counted kModelDoubt times (the model alone is the less certain:
    // it places a variant first only where it predicts under a quarter of what the neighbours say, as
    // fft-segmented on seed 004's case, 9x faster than the fft its measured neighbour gave); a
    // variant without any model goes last.
    std::vector<std::pair<double, AutoChoice>> ranked;  // (rank key, choice)
    for (AutoChoice& c : predicted) ranked.emplace_back(c.predicted_us, std::move(c));
    for (AutoChoice& c : from_model(p, unpredicted, "nothing measured near on " + std::string(table->gpu_name) + "; "))
        ranked.emplace_back(c.predicted_us < 0 ? HUGE_VAL : kModelDoubt * c.predicted_us, std::move(c));
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [key, c] : ranked) out.push_back(std::move(c));
    return out;
}

}  // namespace

std::vector<AutoChoice> auto_candidates(const Problem& p, const std::string& precision, const std::string& gpu_name,
                                        const AutoOptions& options) {
    return with_output_floor(p, ranked_candidates(p, precision, gpu_name, options));
}

std::vector<AutoChoice> auto_candidates(const Problem& p, const std::string& precision, const std::string& gpu_name) {
    return auto_candidates(p, precision, gpu_name, AutoOptions{});
}

}  // namespace xcorr
