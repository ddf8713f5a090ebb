// The reduced plan's engine (reducer.hpp). How a problem is cut into chunks, so that each chunk's
// maps are one call of an ordinary plan into the scratch area, contiguous in the answer:
//   peaks            one-to-one   the pair;
//                    one-to-many  runs of c rights;
//                    n-to-mn      runs of g groups of nL rights (output k's left is k mod nL, so a
//                                 run that starts at a multiple of nL keeps every pair's left);
//                    n-to-m       runs of a lefts with all their rights, or, where one left's maps
//                                 alone pass the budget, runs of c rights of one left (one-to-many);
//   max over rights  runs of c rights of every left (one-to-many, n-to-m; n-to-mn: c groups), each
//                    folded into the running maps as soon as it is computed.
// The budget (Reduction::scratch_bytes) bounds the maps of one chunk; at least one chunk's worth
// (one map, or one left's or group's maps where the form needs them together) is always taken.
#include "lib/reduce/reducer.hpp"

#include <algorithm>

#include "xcorr/cuda_check.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::reduce {

namespace {
int64_t default_budget() {
    size_t free_b = 0, total_b = 0;
    XC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return std::min<int64_t>(int64_t(1) << 30, int64_t(free_b / 4));
}
}  // namespace

std::vector<Chunk> chunks_of(const Problem& p, ReductionKind kind, int64_t cap) {
    cap = std::max<int64_t>(cap, 1);
    const int64_t L = int64_t(p.hL) * p.wL, R = int64_t(p.hR) * p.wR;
    std::vector<Chunk> out;
    // Runs of `step` over [0, total): f(first, count).
    auto runs = [](int64_t total, int64_t step, auto&& f) {
        for (int64_t a = 0; a < total; a += step) f(a, std::min(step, total - a));
    };
    switch (p.form) {
        case Form::OneToOne:
            out.push_back(Chunk{Form::OneToOne, 1, 1, 0, 0, 0, 1, 0, 1, 0, 1});
            break;
        case Form::OneToMany:
            runs(p.nR, std::min<int64_t>(p.nR, cap), [&](int64_t j0, int64_t c) {
                out.push_back(Chunk{Form::OneToMany, 1, int(c), 0, j0 * R, j0, c, j0, c, 0, 1});
            });
            break;
        case Form::NToMn: {  // groups of N rights, so that right k's left stays k mod N
            const int64_t N = p.nL, M = p.nR / p.nL;
            runs(M, std::clamp<int64_t>(cap / N, 1, M), [&](int64_t g0, int64_t g) {
                out.push_back(Chunk{Form::NToMn, int(N), int(g * N), 0, g0 * N * R, g0 * N, g * N, g0, g, 1, N});
            });
            break;
        }
        case Form::NToM: {
            const int64_t N = p.nL, M = p.nR;
            if (kind == ReductionKind::MaxOverRights) {  // every left, runs of rights
                runs(M, std::clamp<int64_t>(cap / N, 1, M), [&](int64_t j0, int64_t c) {
                    out.push_back(Chunk{Form::NToM, int(N), int(c), 0, j0 * R, 0, N * c, j0, c, c, 1});
                });
            } else if (M <= cap) {  // runs of lefts with all their rights
                runs(N, std::min<int64_t>(N, cap / M), [&](int64_t i0, int64_t a) {
                    out.push_back(Chunk{Form::NToM, int(a), int(M), i0 * L, 0, i0 * M, a * M, 0, M, 0, 1});
                });
            } else {  // one left's maps pass the budget: runs of its rights, one-to-many
                for (int64_t i = 0; i < N; ++i)
                    runs(M, cap, [&](int64_t j0, int64_t c) {
                        out.push_back(Chunk{Form::OneToMany, 1, int(c), i * L, j0 * R, i * M + j0, c, j0, c, 0, 1});
                    });
            }
            break;
        }
    }
    return out;
}

PlanSpec Reducer::inner_spec(const Chunk& c) const {
    PlanSpec s = spec_;
    s.reduce = Reduction{};
    s.form = c.form, s.nL = c.nL, s.nR = c.nR;
    return s;
}

bool Reducer::fuses(Plan& plan) const {
    // k = 1 peaks of a raw problem, where the chunk's variant takes them in its own pass (block-per-pair:
    // its block holds every shift of its pairs); XCORR_NO_FUSED_PEAKS=1 takes the map and the reduce
    // kernels instead (an A/B of the two).
    if (r_.kind != ReductionKind::Peaks || r_.k != 1 || problem_.normalize != Normalize::None ||
        env_on("XCORR_NO_FUSED_PEAKS"))
        return false;
    try {
        return plan.instance().takes_peak1();
    } catch (const UsageError&) {  // a plan without one instance
        return false;
    }
}

std::unique_ptr<Plan> Reducer::fused_max_plan() const {
    const Problem& p = problem_;
    if (r_.kind != ReductionKind::MaxOverRights || p.normalize != Normalize::None ||
        (p.form != Form::OneToOne && p.form != Form::OneToMany))
        return nullptr;
    PlanSpec s = spec_;
    s.reduce = Reduction{};
    const bool chosen = s.algorithm == "auto";
    if (chosen) {
        // Beyond one block of fft-fused every map is a full cuFFT round trip through DRAM, and the
        // fold reads it back: fft-large folds the rights where their rows are transformed.
        const Window w = p.shifts();
        const int need = std::max(transform_need(w.dy0, w.dy1, p.hL, p.hR), transform_need(w.dx0, w.dx1, p.wL, p.wR));
        if (need <= 1024) return nullptr;
        s.algorithm = "fft-large";
        s.params.clear();
    } else if (!find_variant(s.algorithm).folds_max_over_rights) {
        return nullptr;  // a plan of every right at once would hold every map
    }
    std::unique_ptr<Plan> plan;
    try {
        plan = std::make_unique<Plan>(s);
    } catch (const UsageError&) {
        if (!chosen) throw;
        return nullptr;  // beyond fft-large's sizes: auto takes the chunked maps
    }
    return plan->instance().takes_max_over_rights() ? std::move(plan) : nullptr;
}

Reducer::Reducer(const PlanSpec& spec, const Problem& p) : spec_(spec), problem_(p), r_(spec.reduce) {
    map_elems_ = int64_t(p.out_h()) * p.out_w();
    if (map_elems_ >= (int64_t(1) << 31))
        throw UsageError("a reduction reads each map with 32-bit indices: " + std::to_string(map_elems_) +
                         " shifts per map is too many (narrow the window)");
    if (auto plan = fused_max_plan()) {  // every right in one chunk, folded by the plan's own pass
        chunks_ = chunks_of(p, r_.kind, int64_t(p.nL) * p.nR);
        main_ = plan.get();
        chunk_pairs_ = chunks_.front().pairs;
        plans_[{int(chunks_.front().form), chunks_.front().nL, chunks_.front().nR}] = std::move(plan);
        chunk_plan_.assign(chunks_.size(), main_);
        chunk_fused_.assign(chunks_.size(), true);
        return;
    }
    const int64_t budget = r_.scratch_bytes > 0 ? r_.scratch_bytes : default_budget();
    chunks_ = chunks_of(p, r_.kind, budget / (map_elems_ * int64_t(sizeof(float))));
    // One plan per chunk shape (the full one and the last, shorter one), built here, so that
    // execute() allocates nothing.
    for (const Chunk& c : chunks_) {
        auto& plan = plans_[{int(c.form), c.nL, c.nR}];
        if (!plan) plan = std::make_unique<Plan>(inner_spec(c));
        chunk_plan_.push_back(plan.get());
        chunk_fused_.push_back(fuses(*plan));
        if (c.pairs > chunk_pairs_) chunk_pairs_ = c.pairs, main_ = plan.get();
    }
    if (fused()) return;  // no map is written: no scratch
    maps_ = DeviceBuffer<float>(size_t(chunk_pairs_ * map_elems_));
    if (r_.kind == ReductionKind::Peaks) {
        tiles_ = tiles_of(p.out_h(), p.out_w());
        tile_value_ = DeviceBuffer<float>(size_t(chunk_pairs_ * tiles_.count()));
        tile_index_ = DeviceBuffer<int>(size_t(chunk_pairs_ * tiles_.count()));
        if (r_.k > 1) {
            mask_ = DeviceBuffer<unsigned char>(size_t(chunk_pairs_ * map_elems_));
            XC_CUDA_CHECK(cudaMemsetAsync(mask_.get(), 0, mask_.bytes(), nullptr));
        }
        take_tile_maxima();
        XC_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // the mask and keys are 0 before any stream uses them
    }
}

void Reducer::take_tile_maxima() {
    // The chunk plans that write their maps' tile maxima as they store them (a short last chunk's
    // plan may not: fft-fused's zncc store wants 8 templates an image); XCORR_NO_FUSED_TILES=1
    // keeps the reduce kernels' pass over the maps for all (an A/B of the two).
    chunk_tiles_.assign(chunks_.size(), false);
    if (env_on("XCORR_NO_FUSED_TILES")) return;
    TileSink sink{nullptr, tiles_.th, tiles_.tw, tiles_.nx, tiles_.count()};
    const auto takes = [&](Plan* plan) {
        try {
            return plan->instance().takes_tile_max(sink);
        } catch (const UsageError&) {  // a plan without one instance
            return false;
        }
    };
    for (size_t ci = 0; ci < chunks_.size(); ++ci) chunk_tiles_[ci] = takes(chunk_plan_[ci]);
    if (std::none_of(chunk_tiles_.begin(), chunk_tiles_.end(), [](bool t) { return t; })) return;
    tile_key_ = DeviceBuffer<unsigned long long>(size_t(chunk_pairs_ * tiles_.count()));
    XC_CUDA_CHECK(cudaMemsetAsync(tile_key_.get(), 0, tile_key_.bytes(), nullptr));
    sink.key = tile_key_.get();
    for (size_t ci = 0; ci < chunks_.size(); ++ci)  // a plan that serves several chunks is set again: the same sink
        if (chunk_tiles_[ci]) chunk_plan_[ci]->instance().set_tile_sink(sink);
}

void Reducer::execute(const float* left, const float* right, const ReducedOutputs& out, cudaStream_t stream,
                      bool accumulate, int64_t first_right) {
    const Window w = problem_.shifts();
    const int64_t lefts = reduced_lefts(problem_);
    for (size_t ci = 0; ci < chunks_.size(); ++ci) {
        const Chunk& c = chunks_[ci];
        if (chunk_fused_[ci] && r_.kind == ReductionKind::MaxOverRights) {  // folded in the variant's pass
            chunk_plan_[ci]->instance().run_max(left + c.left_off, right + c.right_off, out,
                                                int32_t(first_right + c.j0), ci == 0 && !accumulate, stream);
            continue;
        }
        if (chunk_fused_[ci]) {  // k = 1: the chunk's peaks straight from its variant's pass
            const int64_t o = c.out0;
            chunk_plan_[ci]->instance().run_peak1(
                left + c.left_off, right + c.right_off,
                PeakSink{out.value + o, out.shift + 2 * o, out.subpixel + 2 * o, w.dy0, w.dx0, r_.subpixel}, stream);
            continue;
        }
        chunk_plan_[ci]->execute(left + c.left_off, right + c.right_off, maps_.get(), stream);
        if (r_.kind == ReductionKind::Peaks) {
            const int64_t o = c.out0 * r_.k;
            launch_peaks(maps_.get(), int(c.pairs), tiles_, w.dy0, w.dx0, r_, tile_value_.get(), tile_index_.get(),
                         chunk_tiles_[ci] ? tile_key_.get() : nullptr, mask_.get(), out.value + o, out.shift + 2 * o,
                         out.subpixel + 2 * o, stream);
        } else {
            launch_fold_max(maps_.get(), map_elems_, int(lefts), int(c.rights), c.si, c.sj,
                            int32_t(first_right + c.j0), ci == 0 && !accumulate, out, stream);
        }
    }
}

size_t Reducer::workspace_bytes() const {
    size_t b = maps_.bytes() + tile_value_.bytes() + tile_index_.bytes() + tile_key_.bytes() + mask_.bytes();
    for (const auto& [key, plan] : plans_) b += plan->workspace_bytes();
    return b;
}

std::string Reducer::explain() const {
    const Plan& m = main_plan();
    if (fused() && r_.kind == ReductionKind::MaxOverRights)
        return "max-over-rights folded in " + m.algorithm() + "'s last pass over every right, no map written: " +
               m.explain();
    if (fused())
        return "peaks k=1 taken in " + m.algorithm() + "'s own pass, no map written (" + std::to_string(chunks_.size()) +
               " chunk(s) of up to " + std::to_string(chunk_pairs_) + " pair(s)): " + m.explain();
    return std::string(reduction_name(r_.kind)) + " of the maps of " + std::to_string(chunk_pairs_) +
           " pair(s) at a time (" + std::to_string(chunks_.size()) + " chunk(s), " +
           std::to_string(maps_.bytes() >> 20) + " MiB of device scratch), each chunk's maps by " + m.algorithm() +
           (chunk_tiles_.size() && chunk_tiles_.front() ? " with their tile maxima taken in its store" : "") + ": " +
           m.explain();
}

}  // namespace xcorr::reduce
