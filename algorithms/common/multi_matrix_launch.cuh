// The host side of the multi-matrix variants (algorithms/10_* .. 15_*; their device side is
// algorithms/common/multi_matrix.cuh): the grid limits, how a stack is cut into matrix groups, the
// row-block order, the split-row plans, and the stream fan-out of the `launch` parameter.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/device.cuh"
#include "common/launch.cuh"
#include "common/multi_matrix.cuh"
#include "xcorr/core.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::multi {

// Grid dimensions y and z are limited to 65535: row blocks (non-split kernels) and column blocks
// (split-row kernels) must fit.
inline void require_grid(const Problem& p, int rows_per_block) {
    if (ceil_div(p.out_h(), rows_per_block) > 65535 || ceil_div(p.out_w(), kWarp) > 65535)
        throw UsageError("multi-matrix kernels: output " + std::to_string(p.out_h()) + "x" +
                         std::to_string(p.out_w()) + " needs more than 65535 row or column blocks");
}

// A run of `groups` consecutive matrix groups of `size` matrices starting at matrix `begin`.
struct Piece {
    int begin, groups, size;
};
// Cuts `count` matrices into groups of `size`; the rest, which does not fill a group, into groups
// of the next smaller instantiated size, and so on (Sizes: the instantiated group sizes, a Values
// type that holds 1). No padding: every group is full, every piece one launch.
template <class Sizes>
std::vector<Piece> cut(int count, int size) {
    static_assert(Sizes::has(1), "groups of 1 must be instantiated: they take the rest");
    std::vector<Piece> out;
    int begin = 0;
    for (int s : Sizes::descending()) {
        if (s > size) continue;
        const int groups = (count - begin) / s;
        if (groups > 0) out.push_back(Piece{begin, groups, s});
        begin += groups * s;
    }
    return out;
}

// Grid y (or z) holds the matrix groups; it is limited to 65535, so kernels stride over it.
inline unsigned grid_groups(int64_t groups) { return unsigned(std::min<int64_t>(groups, 65535)); }

// Row-block order of the non-split kernels (why: row_block, common/multi_matrix.cuh): whether a
// launch of `grid` blocks of `kernel` runs centre-first. The resident
// block count per kernel is asked once (cudaOccupancy*) and cached, so the timed calls make no
// extra API calls.
class BlockOrder {
public:
    template <class Kernel>
    bool centre_first(Kernel* kernel, dim3 grid) {
        const void* key = reinterpret_cast<const void*>(kernel);
        int slots = -1;
        for (const auto& [k, n] : slots_)
            if (k == key) slots = n;
        if (slots < 0) {
            int dev = 0, sms = 0, per_sm = 0;
            XC_CUDA_CHECK(cudaGetDevice(&dev));
            XC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
            XC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarp * kWarps, 0));
            slots = sms * std::max(per_sm, 1);
            slots_.emplace_back(key, slots);
        }
        return int64_t(grid.x) * grid.y * grid.z > slots;
    }

private:
    std::vector<std::pair<const void*, int>> slots_;
};

// ---------------------------------------------------------------------------------------------
// Split-row plans (the distributions: common/multi_matrix.cuh, SplitView).
// The distribution's names, the first the default (xcorr/dispatch.hpp).
inline constexpr auto kDistributions = choices<Distribution>(
    {{Distribution::Triangle, "triangle"}, {Distribution::Rectangle, "rectangle"}, {Distribution::None, "none"}});

class SplitPlan {
public:
    // rows_text: "1", "2", ... or "n" (the whole overlap: no split).
    SplitPlan(const Problem& p, const std::string& dist_text, const std::string& rows_text)
        : dist_(kDistributions.parse(dist_text, "distribution")) {
        const int max_height = std::min(p.hL, p.hR);
        if (rows_text == "n") rows_ = std::max(p.hL, p.hR);
        else {
            rows_ = std::atoi(rows_text.c_str());
            if (rows_ <= 0) throw UsageError("rows must be a positive number or n, not " + rows_text);
            if (dist_ == Distribution::None)
                throw UsageError("distribution=none does not split overlaps: it needs rows=n (got rows=" +
                                 rows_text + ")");
        }
        const int per_overlap = ceil_div(max_height, rows_);
        atomic_ = per_overlap > 1;
        if (dist_ == Distribution::Triangle) {
            std::vector<int2> t;
            for (int y = 0; y < p.out_h(); ++y) {
                const Span s = overlap_span(y - (p.hR - 1), p.hL, p.hR);
                for (int j = 0; j < ceil_div(s.end - s.begin, rows_); ++j) t.push_back(int2{y, j});
            }
            workers_ = int64_t(t.size());
            table_ = DeviceBuffer<int2>(t.size());
            upload(table_, t.data(), t.size());  // in device memory before any stream's kernel reads it
        } else {
            workers_ = int64_t(p.out_h()) * (dist_ == Distribution::None ? 1 : per_overlap);
        }
        if (ceil_div64(workers_, kWarps) > 0x7fffffff) throw UsageError("split-row: too many workers");
        view_ = SplitView{int(dist_), rows_, p.out_h(), p.hL, p.hR, workers_, table_.get()};
    }
    // Several workers add into one output element: the output must be zeroed first.
    bool atomic() const { return atomic_; }
    unsigned worker_blocks() const { return unsigned(ceil_div64(workers_, kWarps)); }
    const SplitView& view() const { return view_; }

private:
    Distribution dist_;
    int rows_ = 1;
    bool atomic_ = false;
    int64_t workers_ = 0;
    DeviceBuffer<int2> table_;
    SplitView view_{};
};

// The "launch" parameter of the multi-matrix-right variants (n-to-mn both ways the paper names):
//   grid       one launch per piece, the left index folded into grid z (default);
//   streamsK   the problem as N one-to-many instances, one per left matrix, launched round-robin
//              on K streams that the instance owns; they are forked from the caller's stream and
//              joined back to it with events, so the caller's timing covers all of them.
inline int parse_launch(const std::string& v) {
    if (v == "grid") return 0;
    if (v.rfind("streams", 0) == 0) {
        const int k = std::atoi(v.c_str() + 7);
        if (k > 0) return k;
    }
    throw UsageError("launch must be grid or streamsK (K streams), not " + v);
}

// The left loop of the multi-matrix-right variants (n-to-mn, n-to-m): one launch over all N lefts
// (launch=grid: no fan) or one launch per left on the fan's streams; launch(i_begin, n_lefts, s).
template <class F>
void for_lefts(std::optional<StreamFan>& fan, cudaStream_t stream, int lefts, F&& launch) {
    if (fan)
        fan->run(stream, lefts, [&](int i, cudaStream_t s) { launch(i, 1, s); });
    else
        launch(0, lefts, stream);
}
// The split-row variants' `rows` and `distribution` parameters (SplitPlan reads them).
inline const ParamSpec kSplitRowsParam{
    "rows", {"1", "2", "4", "8", "16", "n"}, "overlap rows per job (n: the whole overlap, no split)"};
inline const ParamSpec kDistributionParam = kDistributions.param(
    "distribution", "worker -> job map: exact (triangle), m per output row (rectangle), no split (none, rows=n)");

// Their `launch` parameter (parse_launch reads it).
inline const ParamSpec kLaunchParam{
    "launch", {"grid", "streams1", "streams20"},
    "n-to-mn/n-to-m: left index in the grid, or one one-to-many launch per left on K streams"};

}  // namespace xcorr::multi
