// TF32 tensor-core helpers shared by the tensor-core variants (algorithms/23_tensor_3xtf32.cu,
// 24_tensor_presplit.cu, 25_tensor_rowpair.cu; 26_tensor_wgmma.cu uses all but the MMA):
// TF32 rounding, the 3xTF32 split of an FP32 value, the split left pairs of 25 and 26's staging,
// the m16n8k8 MMA and the flush of a chunk's truncating accumulator.
// The MMA is device code for sm_80 and newer only (callers guard their kernels the same way); the
// splits are plain arithmetic, defined for every architecture, since helpers outside the guarded
// kernels use them. The host-side check, require_mma_tf32(), is algorithms/common/launch.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace xcorr {

// Round to TF32 (10 explicit mantissa bits), to nearest, ties away: the operand format of the MMA.
// Adding half a TF32 ulp to the bits and clearing the 13 low ones is cvt.rna.tf32.f32 for every
// finite input (an overflow carries into the exponent and gives infinity, as rna does) in 2
// instructions; sm_90 has no native cvt.rna.tf32, and ptxas expands it to 4-5 (an infinity test,
// a predicated add, a mask) that made the splits most of the kernel's instructions.
__device__ __forceinline__ uint32_t tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
// x = big + small: big = tf32(x), small = x - big exactly (|small| <= 2^-11 |x|), passed as FP32
// bits: the MMA reads a TF32 operand's top 19 bits, i.e. truncates small (error <= 2^-10 |small|
// <= 2^-21 |x|) at no instruction cost (CUTLASS's 3xTF32 likewise feeds one part unrounded).
__device__ __forceinline__ void split(float x, uint32_t& big, uint32_t& small) {
    big = tf32(x);
    small = __float_as_uint(x - __uint_as_float(big));
}
// One row of a 64-slot window of left pairs (25, 26): slot x holds (big L[x], big L[x+1], small
// L[x], small L[x+1]), so one 16-byte load gives a thread both K-permuted columns of a fragment
// (k = t <-> column 2t, k = t + 4 <-> 2t + 1), big and small. The lane holds the row's values at
// columns lane and lane + 32 (one global load per value); the right neighbours come by shuffle,
// lane 31's from lane 0's second value. Slot 63's neighbour lies outside the window: callers never
// read slot 63. Called by all 32 lanes of the warp.
__device__ __forceinline__ void store_split_pairs(const float (&v)[2], uint4* row) {
    const int lane = threadIdx.x & 31;
    float nb[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) nb[h] = __shfl_sync(0xffffffffu, v[h], (lane + 1) & 31);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        uint32_t b0, s0, b1, s1;
        split(v[h], b0, s0);
        split(lane == 31 && h == 0 ? nb[1] : nb[h], b1, s1);
        row[lane + 32 * h] = make_uint4(b0, b1, s0, s1);
    }
}
// D = A * B + D, m16n8k8, A row-major 16 x 8, B column-major 8 x 8, FP32 accumulate. Fragments
// (PTX ISA; CUTLASS SM80_16x8x8_F32TF32TF32F32_TN): g = lane / 4, t = lane % 4;
// a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (k t, n g), b1 (k t+4, n g);
// c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// The chunk flush of the 3xTF32 kernels: the tensor cores' FP32 accumulation truncates, so each
// chunk's MMAs accumulate into `part`, which is then added into the round-to-nearest total and
// cleared (any shape of float array, element by element).
__device__ __forceinline__ void flush_partial(float& total, float& part) {
    total += part;
    part = 0.0f;
}
template <class T, int N>
__device__ __forceinline__ void flush_partial(T (&total)[N], T (&part)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) flush_partial(total[i], part[i]);
}

}  // namespace xcorr
