// A reduced plan's engine (plan.hpp, PlanSpec::reduce): the problem cut into chunks of pairs whose
// maps fit a bounded device scratch area, one inner (map) plan per chunk size, and the reduction
// kernels (kernels.cuh) run on each chunk's maps as soon as they are written.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/reduce/kernels.cuh"
#include "xcorr/device_buffer.hpp"
#include "xcorr/plan.hpp"

namespace xcorr::reduce {

class Reducer {
public:
    // `spec` with spec.reduce not the map; `problem` its resolved problem. Builds the inner plans on
    // the current device (their algorithm: spec.algorithm, "auto" chosen for the chunk's problem).
    Reducer(const PlanSpec& spec, const Problem& problem);

    void execute(const float* left, const float* right, const ReducedOutputs& out, cudaStream_t stream,
                 bool accumulate, int64_t first_right);

    const Plan& main_plan() const { return *plans_.at(main_count_); }
    size_t workspace_bytes() const;
    std::string explain() const;  // how it is chunked and what runs each chunk

private:
    // One chunk: the inner plan's problem for `pairs` maps, where its inputs start, and where its
    // answers go (peaks: output out0 onwards; max: rights from j0, map (i, jj) at i*si + jj*sj).
    struct Chunk {
        int plan_key;  // key into plans_
        int64_t left_off, right_off;  // elements
        int64_t out0;
        int64_t pairs;
        int64_t j0, rights, si, sj;
    };
    PlanSpec inner_spec(Form form, int nL, int nR) const;
    void add_chunk(Form form, int nL, int nR, Chunk c);

    PlanSpec spec_;
    Problem problem_;
    Reduction r_;
    int64_t map_elems_ = 0;
    int main_count_ = 0;  // key of the largest chunk's plan
    std::map<int, std::unique_ptr<Plan>> plans_;  // by a key (form and counts)
    std::map<int, std::vector<int>> plan_shape_;  // key -> (form, nL, nR)
    std::vector<Chunk> chunks_;
    int64_t chunk_pairs_ = 0;  // the most maps of one chunk
    Tiles tiles_;
    DeviceBuffer<float> maps_;
    DeviceBuffer<float> tile_value_;
    DeviceBuffer<int> tile_index_;
    DeviceBuffer<unsigned char> mask_;
};

}  // namespace xcorr::reduce
