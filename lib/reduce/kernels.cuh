// The reduction kernels' host halves (kernels.cu): what the reduced plan (reducer.cpp) launches on
// the maps of one chunk, held in device scratch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "xcorr/reduce.hpp"

namespace xcorr::reduce {

// A map of h x w values cut into tiles of th x tw (the last row and column of tiles may be
// smaller): the unit whose maximum the peak search keeps, and recomputes when a taken peak
// suppresses part of it. About 1024 values a tile, 128 wide (a warp reads 4 coalesced rows of 32);
// a map of one row (a signal) in tiles of 1024 of it; a small map is one tile.
struct Tiles {
    int h = 0, w = 0, th = 0, tw = 0, ny = 0, nx = 0;
    XC_HD int count() const { return ny * nx; }
};
Tiles tiles_of(int h, int w);

// Peaks of `count` maps of g.h x g.w floats, one after another from `maps`: value/shift/subpixel of
// map q at [q * r.k ...] (reduce.hpp's layout), the shifts (dy0 + row, dx0 + column). Scratch:
// tile_value/tile_index count * g.count() each; `mask` count * h * w bytes, all 0 on entry and on
// return (only read and written when r.k > 1). `tile_key` (count * g.count(), or null): the tiles'
// maxima as the maps' writer took them (Instance::set_tile_sink), read instead of the maps' first
// pass and left 0.
void launch_peaks(const float* maps, int count, const Tiles& g, int dy0, int dx0, const Reduction& r,
                  float* tile_value, int* tile_index, unsigned long long* tile_key, unsigned char* mask, float* value,
                  int32_t* shift, float* subpixel, cudaStream_t stream);

// Folds the maps of rights [first, first + rights) of `lefts` lefts into the running maximum (and
// sums) of reduce.hpp's layout: the map of left i and chunk right jj at maps + (i * si + jj * sj) * n.
// `fresh`: the running maps start from nothing (value NaN, index -1, sums 0) instead of what `out`
// holds.
void launch_fold_max(const float* maps, int64_t n, int lefts, int rights, int64_t si, int64_t sj, int32_t first,
                     bool fresh, const ReducedOutputs& out, cudaStream_t stream);

}  // namespace xcorr::reduce
