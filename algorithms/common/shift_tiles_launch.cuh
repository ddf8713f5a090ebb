// The host side of the shared-memory tiled kernels (algorithms/21_*, 23_* .. 26_*; their device
// side is algorithms/common/shift_tiles.cuh): the order of the shift tiles by work, the schedule of
// (shift tile, pair group) work items, TileOrderedLaunch (a block per shift tile and pair group),
// and GroupTiled, the Instance that launches a kernel striding over the work items.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/device.cuh"
#include "common/shift_tiles.cuh"
#include "xcorr/core.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/registry.hpp"

namespace xcorr {

// The output's shifts (Problem::shifts(): the full output or a window) cut into tiles of tdy x tdx
// from its first shift (dy0, dx0), listed by the size of the union of their overlaps (the work; a
// tile's shifts past the window's last are left out, a tile without overlap has none), largest
// first, each as the pair (tx, ty) (ShiftTileIndex: a long 1-D output, 1 x 4.3 M, has more than
// 65535 tiles along x, which a 16-bit packing refused), and uploaded: a kernel maps blockIdx.x
// through this list, so the heaviest tiles start in the first wave and the last wave holds the
// lightest ones (no long tail). At most 2^31 - 1 tiles (grid x, WorkItems::ntiles), else UsageError.
inline DeviceBuffer<ShiftTileIndex> shift_tiles_by_work(const Problem& p, int tdy, int tdx) {
    const int nty = ceil_div(p.out_h(), tdy), ntx = ceil_div(p.out_w(), tdx);
    if (int64_t(nty) * ntx > 0x7fffffff)
        throw UsageError("output of " + std::to_string(p.out_h()) + " x " + std::to_string(p.out_w()) +
                         " has more than 2^31 - 1 shift tiles");
    // Rows (or columns) of the union of the overlaps of the shifts d0 .. d1 (union_span's size; in
    // 64 bits, as a window's shifts may lie far outside the full range).
    auto extent = [](int64_t d0, int64_t d1, int64_t m, int64_t n) {
        return std::max<int64_t>(0, std::min(n, m - d0) - std::max<int64_t>(0, -std::min(d1, m - 1)));
    };
    const Window s = p.shifts();
    std::vector<std::pair<int64_t, ShiftTileIndex>> tiles;
    tiles.reserve(size_t(nty) * size_t(ntx));
    for (int ty = 0; ty < nty; ++ty)
        for (int tx = 0; tx < ntx; ++tx) {
            const int64_t dy = int64_t(s.dy0) + int64_t(ty) * tdy, dx = int64_t(s.dx0) + int64_t(tx) * tdx;
            const int64_t work = extent(dy, std::min<int64_t>(dy + tdy - 1, s.dy1), p.hL, p.hR) *
                                 extent(dx, std::min<int64_t>(dx + tdx - 1, s.dx1), p.wL, p.wR);
            tiles.push_back({-work, ShiftTileIndex{unsigned(tx), unsigned(ty)}});
        }
    std::stable_sort(tiles.begin(), tiles.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<ShiftTileIndex> order(tiles.size());
    for (size_t k = 0; k < tiles.size(); ++k) order[k] = tiles[k].second;
    DeviceBuffer<ShiftTileIndex> out(order.size());
    upload(out, order.data(), order.size());  // in device memory before any stream's kernel reads it
    return out;
}

// Host side: the tile order of a tdy x tdx block tile, the window of `ngroups` pair groups of
// `group_bytes` of inputs each, the K slices per item (`ksplit`), and the grid (one block per item
// and slice up to 2^31 - 1; blocks stride).
class TileSchedule {
public:
    TileSchedule(const Problem& p, int tdy, int tdx, int64_t ngroups, int64_t group_bytes, int ksplit = 1)
        : order_(shift_tiles_by_work(p, tdy, tdx)), ngroups_(ngroups), shifts_(p.shifts()), ksplit_(ksplit) {
        int dev = 0, l2 = 0;
        XC_CUDA_CHECK(cudaGetDevice(&dev));
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        zwin_ = std::clamp<int64_t>(int64_t(l2) / 2 / std::max<int64_t>(group_bytes, 1), 1, std::max<int64_t>(ngroups, 1));
    }
    WorkItems items() const { return WorkItems{order_.get(), int(order_.size()), ngroups_, zwin_, shifts_, ksplit_}; }
    unsigned grid() const {
        return unsigned(std::clamp<int64_t>(int64_t(order_.size()) * ngroups_ * ksplit_, 1, 0x7fffffff));
    }

private:
    DeviceBuffer<ShiftTileIndex> order_;
    int64_t ngroups_, zwin_ = 1;
    Window shifts_;
    int ksplit_;
};

// The launch of a kernel with a block per (shift tile, pair group): blockIdx.x through the shift
// tiles by work (shift_tiles_by_work), blockIdx.z over the pair groups (the kernel strides beyond
// 65535) (21_multi_matrix_tiled.cu, 23_tensor_3xtf32.cu):
// kernel(left, right, out, hL, wL, hR, wR, pairs, order). set() takes the instantiation once,
// untimed, raises its shared-memory limit and builds the tile order; run() enqueues it.
using TileOrderedKernel = void (*)(const float*, const float*, float*, int, int, int, int, Pairs,
                                   const ShiftTileIndex*);
class TileOrderedLaunch {
public:
    void set(const Problem& p, const Pairs& P, TileOrderedKernel kernel, int threads, size_t smem, int tdy, int tdx) {
        kernel_ = kernel, threads_ = threads, smem_ = smem;
        XC_CUDA_CHECK(cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_)));
        order_ = shift_tiles_by_work(p, tdy, tdx);  // largest work first
        const int64_t nz = int64_t(P.groupsI) * P.groupsJ;
        grid_ = dim3(unsigned(order_.size()), 1, unsigned(std::min<int64_t>(nz, 65535)));
    }
    void run(const Problem& p, const Pairs& P, const float* left, const float* right, float* out,
             cudaStream_t stream) const {
        kernel_<<<grid_, threads_, smem_, stream>>>(left, right, out, p.hL, p.wL, p.hR, p.wR, P, order_.get());
        XC_CHECK_LAUNCH();
    }

private:
    TileOrderedKernel kernel_ = nullptr;
    int threads_ = 0;
    size_t smem_ = 0;
    DeviceBuffer<ShiftTileIndex> order_;
    dim3 grid_;
};

// The launch wrapper of a kernel that strides over TileSchedule work items with a block per (left,
// group of `slots` rights) of a tdy x tdx shift tile (24_tensor_presplit.cu, 25_tensor_rowpair.cu,
// 26_tensor_wgmma.cu):
// kernel(left, right, out, hL, wL, hR, wR, pairs, items), `threads` threads, `smem` bytes of
// dynamic shared memory. With ksplit > 1 each item is `ksplit` blocks that each take a slice of its
// K loop and add their partial sums into the output, which run() zeroes first (26's windows).
using GroupTiledKernel = void (*)(const float*, const float*, float*, int, int, int, int, Pairs, WorkItems);
class GroupTiled final : public Instance {
public:
    GroupTiled(const Problem& p, GroupTiledKernel kernel, int threads, size_t smem, int tdy, int tdx, int slots,
               int ksplit = 1)
        : p_(p), kernel_(kernel), threads_(threads), smem_(smem), P_(pairs_of(p, 1, slots)),
          sched_(p, tdy, tdx, int64_t(P_.groupsI) * P_.groupsJ,
                 int64_t(sizeof(float)) * (int64_t(p.hL) * p.wL + int64_t(slots) * p.hR * p.wR), ksplit),
          ksplit_(ksplit) {
        XC_CUDA_CHECK(cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_)));
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (ksplit_ > 1) XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(p_.out_elems()) * sizeof(float), stream));
        kernel_<<<sched_.grid(), threads_, smem_, stream>>>(left, right, out, p_.hL, p_.wL, p_.hR, p_.wR, P_,
                                                            sched_.items());
        XC_CHECK_LAUNCH();
    }

private:
    Problem p_;
    GroupTiledKernel kernel_;
    int threads_;
    size_t smem_;
    Pairs P_;
    TileSchedule sched_;
    int ksplit_;
};

}  // namespace xcorr
