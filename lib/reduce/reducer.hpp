// A reduced plan's engine (plan.hpp, PlanSpec::reduce): the problem cut into chunks of pairs whose
// maps fit a bounded device scratch area, one inner (map) plan per chunk size, and the reduction
// kernels (kernels.cuh) run on each chunk's maps as soon as they are written.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "lib/reduce/kernels.cuh"
#include "xcorr/device_buffer.hpp"
#include "xcorr/plan.hpp"

namespace xcorr::reduce {

// One chunk of a reduced problem: the inner (map) problem's form and counts, where its inputs start
// in the caller's stacks, and where its answers go. Peaks: its `pairs` maps are outputs out0 ..
// out0 + pairs - 1 of the whole problem, in order. Maximum over the rights: it holds rights j0 ..
// j0 + rights - 1 of every left, the map of left i and chunk right jj being its map i*si + jj*sj.
struct Chunk {
    Form form;
    int nL, nR;
    int64_t left_off, right_off;  // elements
    int64_t out0, pairs;
    int64_t j0, rights, si, sj;
};
// The chunks of problem `p` for reduction `kind` with at most `cap` maps a chunk where the form
// allows (one map, one left's rights or one group's maps are taken whole): no GPU needed, so that
// tests/reduce_chunks_host.cpp checks on the CPU that they cover every pair once, in the answer's
// order, with the inner problems' own pair maps.
std::vector<Chunk> chunks_of(const Problem& p, ReductionKind kind, int64_t cap);

class Reducer {
public:
    // `spec` with spec.reduce not the map; `problem` its resolved problem. Builds the inner plans on
    // the current device (their algorithm: spec.algorithm, "auto" chosen for the chunk's problem).
    Reducer(const PlanSpec& spec, const Problem& problem);

    void execute(const float* left, const float* right, const ReducedOutputs& out, cudaStream_t stream,
                 bool accumulate, int64_t first_right);

    const Plan& main_plan() const { return *main_; }
    // Every chunk's answer comes from its variant's own pass (Instance::run_peak1, run_max): no map
    // is written.
    bool fused() const {
        return !chunk_fused_.empty() && std::all_of(chunk_fused_.begin(), chunk_fused_.end(), [](bool f) { return f; });
    }
    size_t workspace_bytes() const;
    std::string explain() const;  // how it is chunked and what runs each chunk

private:
    PlanSpec inner_spec(const Chunk& c) const;
    // Whether a chunk's plan writes its k = 1 peaks itself (Instance::takes_peak1), the map never
    // written, where the reduction allows it.
    bool fuses(Plan& plan) const;
    // The maximum over the rights of a one-to-one or one-to-many problem whose whole stack one plan's
    // instance folds itself (Instance::takes_max_over_rights; "auto": fft-large where the transform
    // is beyond fft-fused's 1024): that plan, one chunk of every right; else null.
    std::unique_ptr<Plan> fused_max_plan() const;
    // Peaks: the chunk plans that take the tiles' maxima in their own store (Instance::takes_tile_max)
    // are given tile_key_, so that launch_peaks reads none of their maps before its selection.
    void take_tile_maxima();

    PlanSpec spec_;
    Problem problem_;
    Reduction r_;
    int64_t map_elems_ = 0;
    std::map<std::tuple<int, int, int>, std::unique_ptr<Plan>> plans_;  // by (form, nL, nR)
    std::vector<Chunk> chunks_;
    std::vector<Plan*> chunk_plan_;  // each chunk's plan
    std::vector<bool> chunk_fused_;  // each chunk's: its peaks from its plan's run_peak1
    std::vector<bool> chunk_tiles_;  // each chunk's: its tile maxima from its plan's store (take_tile_maxima)
    Plan* main_ = nullptr;  // the largest chunk's
    int64_t chunk_pairs_ = 0;  // the most maps of one chunk
    Tiles tiles_;
    DeviceBuffer<float> maps_;
    DeviceBuffer<float> tile_value_;
    DeviceBuffer<int> tile_index_;
    DeviceBuffer<unsigned long long> tile_key_;  // take_tile_maxima(); empty: the reduce kernels' tile pass
    DeviceBuffer<unsigned char> mask_;
};

}  // namespace xcorr::reduce
