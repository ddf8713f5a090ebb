// One DFT of compile-time length N by a team of threads in registers (the building block of
// fft-fused, 51_fft_fused.cu, whose header explains the mapping): in-register DFTs of radix 2, 3, 4
// and their composites, the team's plan (E elements a thread, T threads), the exchange through
// shared memory, the twiddle table. Device code; also compiled for the CPU by
// tests/team_dft_host.cpp, which runs every instantiated size's team_dft with threads for lanes
// (tests/test_team_dft.py): keep it free of anything but the intrinsics that test provides
// (__syncwarp, lane_id's XCORR_TEAM_DFT_HOST, threadIdx / blockDim).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "common/device.cuh"

namespace xcorr {

// ---------------------------------------------------------------------------------------------
// In-register DFTs of compile-time length
// ---------------------------------------------------------------------------------------------

// Taylor series for |x| <= pi, evaluated at compile time only (the twiddles of the composite DFTs).
__host__ __device__ constexpr double taylor_sin(double x) {
    double term = x, sum = x;
    for (int n = 1; n < 18; ++n) {
        term *= -x * x / double((2 * n) * (2 * n + 1));
        sum += term;
    }
    return sum;
}
__host__ __device__ constexpr double taylor_cos(double x) {
    double term = 1.0, sum = 1.0;
    for (int n = 1; n < 18; ++n) {
        term *= -x * x / double((2 * n - 1) * (2 * n));
        sum += term;
    }
    return sum;
}
// exp(Sign * 2 pi i * Num / Den) as compile-time constants.
template <int Num, int Den, int Sign>
struct Twiddle {
    static constexpr int r = Num % Den;
    static constexpr double angle = 2.0 * 3.14159265358979323846 * double(2 * r > Den ? r - Den : r) / Den;
    static constexpr float c = float(taylor_cos(angle));
    static constexpr float s = float(Sign * taylor_sin(angle));
};

__device__ __forceinline__ float2 cadd(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float2 csub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
    return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
// a * (Sign i)
template <int Sign>
__device__ __forceinline__ float2 mul_i(float2 a) {
    return Sign > 0 ? make_float2(-a.y, a.x) : make_float2(a.y, -a.x);
}

// f(integral_constant<int, 0>), ..., f(integral_constant<int, N - 1>): loops whose index must be a
// constant expression (twiddle template arguments).
template <class F, int... I>
__device__ __forceinline__ void unroll_seq(F&& f, std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
__device__ __forceinline__ void unroll(F&& f) {
    unroll_seq(f, std::make_integer_sequence<int, N>{});
}

// dft's odd primes, by compile-time recursion (nested generic lambdas here crash g++ 12, which
// compiles this file for tests/team_dft_host.cpp and tests/block_fft_host.cpp): output K and
// R - K from v0 and the sums s[n-1] = v_n + v_{R-n} and differences d[n-1] = v_n - v_{R-n}.
template <int R, int K, int N>
__device__ __forceinline__ void odd_prime_terms(float2& re, float2& im, const float2* s, const float2* d) {
    using W = Twiddle<N * K, R, 1>;  // cos and sin of 2 pi N K / R
    re = make_float2(re.x + W::c * s[N - 1].x, re.y + W::c * s[N - 1].y);
    im = make_float2(im.x + W::s * d[N - 1].x, im.y + W::s * d[N - 1].y);
    if constexpr (N < R / 2) odd_prime_terms<R, K, N + 1>(re, im, s, d);
}
template <int R, int Sign, int K>
__device__ __forceinline__ void odd_prime_outputs(float2 (&v)[R], float2 v0, const float2* s, const float2* d) {
    float2 re = v0, im = make_float2(0.f, 0.f);
    odd_prime_terms<R, K, 1>(re, im, s, d);
    const float2 t = mul_i<Sign>(im);
    v[K] = cadd(re, t);
    v[R - K] = csub(re, t);
    if constexpr (K < R / 2) odd_prime_outputs<R, Sign, K + 1>(v, v0, s, d);
}

// v[k] <- sum_n v[n] exp(Sign 2 pi i n k / R). Radices 2, 3, 4, 5, 7 directly; a composite R = A * B by
// one Cooley-Tukey split, n = n1 + A n2, k = B k1 + k2: A DFTs of length B over n2, twiddles
// W_R^{n1 k2}, B DFTs of length A over n1.
template <int R, int Sign>
__device__ __forceinline__ void dft(float2 (&v)[R]) {
    if constexpr (R == 2) {
        const float2 a = v[0], b = v[1];
        v[0] = cadd(a, b);
        v[1] = csub(a, b);
    } else if constexpr (R == 3) {
        constexpr float kS = 0.86602540378443865f;  // sin(2 pi / 3)
        const float2 t = cadd(v[1], v[2]);
        const float2 d = mul_i<Sign>(csub(v[1], v[2]));
        const float2 m = make_float2(v[0].x - 0.5f * t.x, v[0].y - 0.5f * t.y);
        v[0] = cadd(v[0], t);
        v[1] = make_float2(m.x + kS * d.x, m.y + kS * d.y);
        v[2] = make_float2(m.x - kS * d.x, m.y - kS * d.y);
    } else if constexpr (R == 4) {
        const float2 s02 = cadd(v[0], v[2]), d02 = csub(v[0], v[2]);
        const float2 s13 = cadd(v[1], v[3]), d13 = mul_i<Sign>(csub(v[1], v[3]));
        v[0] = cadd(s02, s13);
        v[1] = cadd(d02, d13);
        v[2] = csub(s02, s13);
        v[3] = csub(d02, d13);
    } else if constexpr (R == 5 || R == 7) {
        // Odd primes (block_fft.cuh's 7-smooth lengths): the pairs n, R - n share a cosine and
        // take opposite sines, v[k] = v0 + sum_{n <= R/2} (v_n + v_{R-n}) cos + Sign i (v_n - v_{R-n}) sin.
        float2 s[R / 2], d[R / 2];
#pragma unroll
        for (int n = 1; n <= R / 2; ++n) s[n - 1] = cadd(v[n], v[R - n]), d[n - 1] = csub(v[n], v[R - n]);
        const float2 v0 = v[0];
        float2 sum = v0;
#pragma unroll
        for (int n = 0; n < R / 2; ++n) sum = cadd(sum, s[n]);
        odd_prime_outputs<R, Sign, 1>(v, v0, s, d);
        v[0] = sum;
    } else {
        constexpr int A = R % 4 == 0 ? 4 : R % 2 == 0 ? 2 : R % 3 == 0 ? 3 : R % 5 == 0 ? 5 : 7;
        constexpr int B = R / A;
        static_assert(A * B == R && B > 1, "radix built from 2, 3, 4, 5 and 7");
        float2 y[A][B];
        unroll<A>([&](auto n1) {
            float2 t[B];
#pragma unroll
            for (int n2 = 0; n2 < B; ++n2) t[n2] = v[n1 + A * n2];
            dft<B, Sign>(t);
            unroll<B>([&](auto k2) {
                constexpr int idx = decltype(n1)::value * decltype(k2)::value;
                if constexpr (idx % R == 0) {
                    y[n1][k2] = t[k2];
                } else if constexpr ((4 * idx) % R == 0) {  // a quarter turn: no multiplications
                    constexpr int q = (4 * idx / R) % 4;
                    y[n1][k2] = q == 1 ? mul_i<Sign>(t[k2])
                              : q == 2 ? make_float2(-t[k2].x, -t[k2].y)
                                       : mul_i<-Sign>(t[k2]);
                } else {
                    using W = Twiddle<idx, R, Sign>;
                    y[n1][k2] = cmul(t[k2], make_float2(W::c, W::s));
                }
            });
        });
#pragma unroll
        for (int k2 = 0; k2 < B; ++k2) {
            float2 t[A];
#pragma unroll
            for (int n1 = 0; n1 < A; ++n1) t[n1] = y[n1][k2];
            dft<A, Sign>(t);
#pragma unroll
            for (int k1 = 0; k1 < A; ++k1) v[B * k1 + k2] = t[k1];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One DFT of length N by a team of threads
// ---------------------------------------------------------------------------------------------

// E elements per thread, T = N / E threads. Two stages (radix E, then radix T) where T divides
// E; three (radix E, E, then R3 = T / E) where N = R3 E^2 (N = 512: E = 16, a warp a team,
// R3 = 2; N = 1024: E = 16, two warps a team, R3 = 4): half the registers and twice the threads
// of E = 32, for the staged kernels, which are latency-bound (notes/51_fft_fused.md).
// Mixed (R1 > 0; N = 384 and 768, which neither of those fits): radix R1, then R2 = T / R1, then
// E, each dividing E (N = 384: 4, 4, 24 with T = 16; 768: 4, 8, 24 with T = 32), so that the
// staged path has the fast sizes between 256, 512 and 1024 (outputs of 257 .. 383 and 513 .. 767
// need not round up to the next power of two: 1.78x the transform's area).
// `padded`: the team's exchange slot holds N + T elements, one pad after every E (swizzle, below),
// where a half-warp holds one or two teams (T >= 8); with four teams a half-warp (N = 32, 96) the
// exchange keeps the rotated layout in slots of N. Three stages are padded; mixed plans pad each of
// their two exchanges in their own way (team_dft).
struct TwoOrThreeStages {
    static constexpr int R1 = 0;
};
template <int N> struct TeamPlan;
template <> struct TeamPlan<32> : TwoOrThreeStages { static constexpr int E = 8; static constexpr bool padded = false; };
template <> struct TeamPlan<48> : TwoOrThreeStages { static constexpr int E = 12; static constexpr bool padded = true; };  // teams of 4, padded
template <> struct TeamPlan<64> : TwoOrThreeStages { static constexpr int E = 8; static constexpr bool padded = true; };
template <> struct TeamPlan<96> : TwoOrThreeStages { static constexpr int E = 24; static constexpr bool padded = false; };
template <> struct TeamPlan<128> : TwoOrThreeStages { static constexpr int E = 16; static constexpr bool padded = true; };
template <> struct TeamPlan<192> : TwoOrThreeStages { static constexpr int E = 24; static constexpr bool padded = true; };
template <> struct TeamPlan<256> : TwoOrThreeStages { static constexpr int E = 16; static constexpr bool padded = true; };  // the staged path
template <> struct TeamPlan<384> { static constexpr int E = 24, R1 = 4; static constexpr bool padded = true; };  // mixed: 4, 4, 24
template <> struct TeamPlan<512> : TwoOrThreeStages { static constexpr int E = 16; static constexpr bool padded = true; };  // three stages
template <> struct TeamPlan<768> { static constexpr int E = 24, R1 = 4; static constexpr bool padded = true; };  // mixed: 4, 8, 24
template <> struct TeamPlan<1024> : TwoOrThreeStages { static constexpr int E = 16; static constexpr bool padded = true; };  // three stages, two warps a team

// A length-N DFT's team: E elements per thread, T threads.
template <int N>
struct TeamShape {
    static constexpr int E = TeamPlan<N>::E;
    static constexpr int T = N / E;
    static constexpr int R1 = TeamPlan<N>::R1;
    static constexpr bool mixed = R1 > 0;                  // radix R1, R2, then E
    static constexpr int R2 = mixed ? T / R1 : 1;
    static constexpr bool three_stage = !mixed && T > E;  // N = R3 E^2, R3 = T / E
    static constexpr int R3 = three_stage ? T / E : 1;
    static constexpr bool two_stage = !mixed && !three_stage;
    static constexpr bool padded = TeamPlan<N>::padded;
    // Mixed plans' exchanges (mixed_dft) place element p < N at p + p / 16 and at p + (p / T) R1:
    // the slot holds the larger of the two layouts.
    static constexpr int mixed_slot1 = N + (N - 1) / 16, mixed_slot2 = N + (N - 1) / T * R1;
    static constexpr int slot_size = mixed     ? (mixed_slot1 > mixed_slot2 ? mixed_slot1 : mixed_slot2)
                                     : padded ? N + T
                                              : N;  // elements of the team's exchange slot
    static constexpr int twiddles = mixed ? N + T : N;  // entries of the twiddle table (fill_twiddles)
    static_assert(mixed ? (R1 * R2 == T && E % R1 == 0 && E % R2 == 0 && T % 16 == 0 && T <= kWarp && padded)
                        : (E % T == 0 || (three_stage && T % E == 0 && E % R3 == 0 && (E & (E - 1)) == 0 &&
                                          (T <= kWarp || T % kWarp == 0))),
                  "two stages: the second stage's radix T divides E; three: T = R3 E with R3 dividing E (E a "
                  "power of two), a team within a warp or of whole warps; mixed: R1 R2 = T, both dividing E, "
                  "a team of one or two half-warps");
};

// The row pitch of a buffer whose row pairs and columns are team slots (fft-fused's one-block S,
// N/2 + 1 columns) for the padded exchange with teams of 8: at least N/2 + 2 and (N + T) / 2 (a
// row pair holds a slot), and 2 mod 4, so that the two teams of a half-warp, on row pairs p and
// p + 2 (4 pitch apart) or on adjacent columns, touch 16 distinct 64-bit words modulo 16
// (tests/team_dft_host.cpp models both).
template <int N>
constexpr int padded_pair_pitch() {
    int p = N / 2 + 2 > (N + TeamShape<N>::T + 1) / 2 ? N / 2 + 2 : (N + TeamShape<N>::T + 1) / 2;
    while (p % 4 != 2) ++p;
    return p;
}

// The column a team of 4 takes first in fft-fused's phase 2, where four teams share a half-warp
// (N = 32, 48, 96; 51_fft_fused.cu's column_team): on adjacent columns c .. c + 3 at a pitch of 2
// mod 8 every column access takes two wavefronts; teams 4h + j on columns c, c + 1, c + 8, c + 9
// fill the 16 words. Id bit 0 stays bit 0, id bit 1 becomes bit 3, id bits 2-3 bits 1-2: a
// permutation of each 16 ids (tests/team_dft_host.cpp checks both).
__host__ __device__ constexpr int quad_team_column(int id) {
    return (id & ~15) | (id & 1) | ((id >> 1) & 1) << 3 | ((id >> 2) & 3) << 1;
}

// The N complex numbers a team exchanges through: a column of S (stride pitch) or one row pair
// (stride 1: rows 2p and 2p + 1 are contiguous).
struct StridedSlot {
    float2* base;
    int stride;
    __device__ __forceinline__ float2& operator[](int n) const { return base[n * stride]; }
};

template <int T>
__device__ __forceinline__ unsigned team_mask() {
    const unsigned lane = threadIdx.x % kWarp;
    return T >= kWarp ? kFullMask : ((1u << T) - 1u) << (lane & ~unsigned(T - 1));
}

// A barrier of one team (and the ordering of its shared-memory accesses): __syncwarp of its lanes
// for a team within a warp; for a team of whole warps the named barrier 1 + team (T threads;
// barrier 0 is __syncthreads'), at most kMaxWarpTeams such teams a block. Each id is an
// immediate of its own bar.sync (a warp-uniform branch picks it). The CPU test's __syncwarp is
// its team's barrier whatever T.
constexpr int kMaxWarpTeams = 4;  // ids 1-4 (the staged kernels: 256 threads, teams of 64)
template <int Id, int T>
__device__ __forceinline__ void named_barrier() {
    asm volatile("bar.sync %0, %1;" ::"n"(Id), "n"(T) : "memory");
}
template <int T, int... I>
__device__ __forceinline__ void team_barrier(int team, std::integer_sequence<int, I...>) {
    ((team == I ? named_barrier<1 + I, T>() : void()), ...);
}
template <int T>
__device__ __forceinline__ void team_sync(unsigned mask) {
#ifndef XCORR_TEAM_DFT_HOST
    if constexpr (T > kWarp) {
        team_barrier<T>(int(threadIdx.x / T), std::make_integer_sequence<int, kMaxWarpTeams>{});
        return;
    }
#endif
    __syncwarp(mask);
}

// Position of exchange element p = r E + c in the slot: row r of the T x E exchange rotated by r,
// so that the stage-1 writes (a column of it: p = t E + m) and the reads (a row segment:
// p = t + T e) both spread over the banks. The padded layout (TeamPlan) spreads them by a pad
// after each row instead, p -> p + p / E, whose positions are a per-thread base plus compile-time
// offsets both ways (writes t (E + 1) + m; reads t + T e + e / G, or with three stages
// t + t / E + (T + R3) e): no index arithmetic per element, where the rotation costs about six
// integer instructions per access (SASS of the staged kernels). Banks: with 64-bit accesses a
// half-warp's 16 positions, times an odd stride, are distinct modulo 16 both ways.
template <int E>
__device__ __forceinline__ int swizzle(int p) {
    const int r = p / E, c = p - r * E;
    return r * E + (c + r < E ? c + r : c + r - E);
}

// The calling thread's lane in its warp, read by an asm volatile (an opaque value: team_dft). The
// CPU test of this file (XCORR_TEAM_DFT_HOST) runs lanes as threads and says which one this is.
#ifdef XCORR_TEAM_DFT_HOST
unsigned host_lane_id();
#endif
__device__ __forceinline__ unsigned lane_id() {
#ifdef XCORR_TEAM_DFT_HOST
    return host_lane_id();
#else
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
#endif
}

// A mixed plan's DFT (TeamShape::mixed; team_dft calls it): three Stockham stages, radix R1
// (Ns = 1), R2 (Ns = R1) and E (Ns = T). Stage butterfly j (k = j mod Ns) takes elements
// j + (N / R) m, twiddled by W_{Ns R}^{k m}, and writes (j / Ns) Ns R + k + Ns m. Thread t takes
// butterflies j = t + T i (i < E / R): their inputs are its own v[i + (E / R) m] (natural layout),
// and since Ns divides T every position below is a per-thread base plus a compile-time offset.
// The last stage (radix E, j = t) writes t + T m, natural layout, in registers. Exchange 1 puts
// element p at p + p / 16, exchange 2 at p + (p / T) R1: on every access the 16 lanes of a
// half-warp touch 16 distinct 64-bit words (the CPU test's bank model).
template <int N, int Sign, class Slot, class Post>
__device__ __forceinline__ void mixed_dft(float2 (&v)[TeamPlan<N>::E], const Slot& slot, unsigned mask,
                                          const float2* __restrict__ tw, Post post, int t) {
    using S = TeamShape<N>;
    constexpr int E = S::E, T = S::T, R1 = S::R1, R2 = S::R2, B1 = E / R1, B2 = E / R2;
    static_assert(16 % R1 == 0 && T % 16 == 0, "exchange 1's pad: (R1 t + m) / 16 = R1 t / 16 for m < R1");
    const auto flip = [](float2 w) { return Sign < 0 ? make_float2(w.x, -w.y) : w; };
    // Stage 1 (radix R1): butterfly t + T i writes p = (t + T i) R1 + m at p + p / 16.
    team_sync<T>(mask);  // the team has read the slot (the caller may have loaded v from it)
    const int w1 = R1 * t + R1 * t / 16;
#pragma unroll
    for (int i = 0; i < B1; ++i) {
        float2 u[R1];
#pragma unroll
        for (int m = 0; m < R1; ++m) u[m] = v[i + B1 * m];
        dft<R1, Sign>(u);
#pragma unroll
        for (int m = 0; m < R1; ++m) slot[w1 + (T * R1 + T * R1 / 16) * i + m] = u[m];
    }
    team_sync<T>(mask);
    const int r1 = t + t / 16;  // p = t + T e
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = slot[r1 + (T + T / 16) * e];
    // Stage 2 (radix R2, Ns = R1, k = t mod R1): twiddles W_T^{k m} (tw[N + m R1 + k]), the same for
    // every i; butterfly t + T i writes p = (t / R1 + R2 i) T + k + R1 m at p + (p / T) R1.
    const int k = t % R1;
    float2 w[R2];
#pragma unroll
    for (int m = 1; m < R2; ++m) w[m] = flip(tw[N + m * R1 + k]);
    team_sync<T>(mask);  // the team has read exchange 1
    const int w2 = (t / R1) * (T + R1) + k;
#pragma unroll
    for (int i = 0; i < B2; ++i) {
        float2 u[R2];
        u[0] = v[i];
#pragma unroll
        for (int m = 1; m < R2; ++m) u[m] = cmul(v[i + B2 * m], w[m]);
        dft<R2, Sign>(u);
#pragma unroll
        for (int m = 0; m < R2; ++m) slot[w2 + R2 * (T + R1) * i + R1 * m] = u[m];
    }
    team_sync<T>(mask);
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = slot[t + (T + R1) * e];  // p = t + T e
    // Stage 3 (radix E, Ns = T): butterfly t, twiddles W_N^{t m} (tw[m T + t]), natural layout out.
#pragma unroll
    for (int m = 1; m < E; ++m) v[m] = cmul(v[m], flip(tw[m * T + t]));
    dft<E, Sign>(v);
#pragma unroll
    for (int m = 0; m < E; ++m) v[m] = post(t + T * m, v[m]);
}

// The DFT (Sign -1 forward, +1 inverse, unnormalised) of the sequence the team holds in natural
// layout: v[e] of thread t is element t + T e, on entry and on exit. tw[m E + j] = W_N^{jm}.
// `post(n, x)` maps each output element n as soon as its butterfly is done (the spectrum product
// goes there: its loads then spread over the butterflies instead of holding E values at once).
struct Identity {
    __device__ __forceinline__ float2 operator()(int, float2 x) const { return x; }
};
template <int N, int Sign, class Slot, class Post = Identity>
__device__ __forceinline__ void team_dft(float2 (&v)[TeamPlan<N>::E], const Slot& slot, unsigned mask,
                                         const float2* __restrict__ tw, Post post = Post{}) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T;
    // The thread's place in the team, read here rather than passed in: an opaque value keeps the
    // compiler from hoisting the 2E swizzled slot offsets out of the callers' loops (in the fused
    // kernel that spills at 168 registers).
    int t = int(lane_id() % T);
    if constexpr (T > kWarp) t += kWarp * int((threadIdx.x / kWarp) % (T / kWarp));
    if constexpr (TeamShape<N>::mixed) {
        mixed_dft<N, Sign>(v, slot, mask, tw, post, t);
        return;
    }
    // Stage 1 (Stockham, Ns = 1): butterfly t takes elements t + T m, writes t E + m.
    dft<E, Sign>(v);
    team_sync<T>(mask);  // the team has read the slot (the caller may have loaded v from it)
    if constexpr (TeamShape<N>::two_stage) {
        constexpr int G = E / T;
        if constexpr (TeamShape<N>::padded) {
#pragma unroll
            for (int m = 0; m < E; ++m) slot[t * (E + 1) + m] = v[m];
            team_sync<T>(mask);
#pragma unroll
            for (int e = 0; e < E; ++e) v[e] = slot[t + T * e + e / G];  // (t + T e) / E = e / G
        } else {
#pragma unroll
            for (int m = 0; m < E; ++m) slot[t * E + (m + t < E ? m + t : m + t - E)] = v[m];  // swizzle(t E + m)
            team_sync<T>(mask);
#pragma unroll
            for (int e = 0; e < E; ++e) v[e] = slot[swizzle<E>(t + T * e)];
        }
        // Stage 2 (Ns = E, radix T): butterfly j = t + T i takes and writes elements j + E m, which
        // are v[i + G m] of this thread: the output is in natural layout without another exchange.
#pragma unroll
        for (int i = 0; i < G; ++i) {
            const int j = t + T * i;
            float2 u[T];
            u[0] = v[i];
#pragma unroll
            for (int m = 1; m < T; ++m) {
                float2 w = tw[m * E + j];
                if (Sign < 0) w.y = -w.y;
                u[m] = cmul(v[i + G * m], w);
            }
            dft<T, Sign>(u);
#pragma unroll
            for (int m = 0; m < T; ++m) v[i + G * m] = post(j + E * m, u[m]);
        }
    } else if constexpr (TeamShape<N>::three_stage) {
        static_assert(TeamShape<N>::padded, "three stages exchange through the padded layout");
#pragma unroll
        for (int m = 0; m < E; ++m) slot[t * (E + 1) + m] = v[m];
        team_sync<T>(mask);
        const int base = t + t / E;  // (t + T e) / E = t / E + R3 e
#pragma unroll
        for (int e = 0; e < E; ++e) v[e] = slot[base + (T + TeamShape<N>::R3) * e];
        // Stage 2 (Ns = E, radix E): butterfly t (k = t mod E) takes elements t + T m, twiddled
        // by W_{E^2}^{k m} (tw[m E + k]), and writes (t / E) E^2 + k + E m: unit stride.
        const int k = t % E;
#pragma unroll
        for (int m = 1; m < E; ++m) {
            float2 w = tw[m * E + k];
            if (Sign < 0) w.y = -w.y;
            v[m] = cmul(v[m], w);
        }
        dft<E, Sign>(v);
        team_sync<T>(mask);
#pragma unroll
        for (int m = 0; m < E; ++m) slot[(t / E) * E * E + k + E * m] = v[m];
        team_sync<T>(mask);
        // Stage 3 (Ns = E^2, radix R3): butterfly j = t + T i (i < E / R3) takes elements
        // j + E^2 m (m < R3), twiddled by W_N^{j m} (tw[E^2 m + j]), and writes the same ones:
        // elements t + T (i + (E / R3) m) of this thread, natural layout.
        constexpr int R3 = TeamShape<N>::R3, B = E / R3, S = E * E;
#pragma unroll
        for (int i = 0; i < B; ++i) {
            const int j = t + T * i;
            float2 w[R3], u[R3];
#pragma unroll
            for (int m = 1; m < R3; ++m) {
                w[m] = tw[S * m + j];
                if (Sign < 0) w[m].y = -w[m].y;
            }
            u[0] = slot[j];
#pragma unroll
            for (int m = 1; m < R3; ++m) u[m] = cmul(slot[j + S * m], w[m]);
            dft<R3, Sign>(u);
#pragma unroll
            for (int m = 0; m < R3; ++m) v[i + B * m] = post(j + S * m, u[m]);
        }
    }
}

// Twiddle table (TeamShape::twiddles entries; a warp's loads of one m are consecutive: no bank
// conflicts). Entry i is exp(2 pi i twiddle_turns(i) / N). Two stages: tw[m E + j] =
// exp(2 pi i j m / N), m < T, j < E. Three: the second stage's tw[m E + k] = exp(2 pi i k m / E^2)
// = exp(2 pi i R3 k m / N), m, k < E, then the third's tw[E^2 m + j] = exp(2 pi i j m / N),
// 1 <= m < R3, j < E^2 (E^2 R3 = N entries in all). Mixed: the last stage's tw[m T + t] =
// exp(2 pi i t m / N), m < E, t < T, then the second's tw[N + m R1 + k] = exp(2 pi i k m / T),
// m < R2, k < R1 (N + T entries).
template <int N>
__host__ __device__ constexpr int twiddle_turns(int i) {
    constexpr int E = TeamShape<N>::E, S = E * E, R3 = TeamShape<N>::R3, T = TeamShape<N>::T, R1 = TeamShape<N>::R1;
    return TeamShape<N>::mixed        ? (i < N ? (i % T) * (i / T) : E * ((i - N) % R1) * ((i - N) / R1))
           : !TeamShape<N>::three_stage ? (i % E) * (i / E)
           : i < S                      ? R3 * (i % E) * (i / E)
                                        : (i % S) * (i / S);
}

// exp(2 pi i turns / N) rounded to float, at compile time: the turns reduced to the first octant
// (exact integer arithmetic), so the quarter and half turns are exact (cos 0 = 1, sin 0 = 0) and the
// Taylor series (|x| <= pi / 4) is accurate to a few units of double's last place.
template <int N>
__host__ __device__ constexpr float2 twiddle_value(int turns) {
    int r = turns % N;                    // [0, N)
    if (2 * r > N) r -= N;                // (-N/2, N/2]
    const bool neg = r < 0;
    int a = neg ? -r : r;                 // [0, N/2]
    const bool back = 4 * a > N;          // pi - x: cos -> -cos
    if (back) a = N / 2 - a;              // [0, N/4]
    const bool swap = 8 * a > N;          // pi/2 - x: cos <-> sin
    const int b = swap ? N - 4 * a : 4 * a;  // the angle in units of pi / (2 N): [0, N/2]
    const double x = 3.14159265358979323846 * double(b) / (2.0 * N);
    double c = taylor_cos(x), s = taylor_sin(x);
    if (swap) {
        const double t = c;
        c = s;
        s = t;
    }
    if (back) c = -c;
    if (neg) s = -s;
    return float2{float(c), float(s)};
}

template <int N>
struct alignas(16) TwiddleTable {
    float2 w[TeamShape<N>::twiddles];
};
template <int N>
constexpr TwiddleTable<N> make_twiddle_table() {
    TwiddleTable<N> t{};
    for (int i = 0; i < TeamShape<N>::twiddles; ++i) t.w[i] = twiddle_value<N>(twiddle_turns<N>(i));
    return t;
}
// The table in global memory, computed by the compiler: every block copies it (fill_twiddles)
// instead of evaluating sincos in double precision, a sizeable share of the staged kernels'
// instructions (92 a table entry, 2-4 entries a thread, for blocks that do one DFT a team).
template <int N>
__device__ const TwiddleTable<N> kTwiddleTable = make_twiddle_table<N>();

// The table's copy into shared memory, in 16-byte pieces. Threads: the block's size, for
// straight-line code whose loads all go out before the stores (a load-store loop waits for each in
// turn); 0: a loop over blockDim.x, which the one-block kernels keep (persistent blocks copy the
// table once; straight-line, ptxas spills pair_kernel<128>, bounded to 64 registers). tw is 16-byte
// aligned (the callers' static_asserts).
template <int N, int Threads = 0>
__device__ __forceinline__ void fill_twiddles(float2* tw) {
    constexpr int M = TeamShape<N>::twiddles / 2;  // 16-byte pieces
    static_assert(TeamShape<N>::twiddles % 2 == 0, "whole 16-byte pieces");
    const float4* src = reinterpret_cast<const float4*>(kTwiddleTable<N>.w);
    float4* dst = reinterpret_cast<float4*>(tw);
    if constexpr (Threads == 0) {
        for (int i = threadIdx.x; i < M; i += blockDim.x) dst[i] = src[i];
    } else {
        constexpr int K = (M + Threads - 1) / Threads;
        float4 w[K];
#pragma unroll
        for (int k = 0; k < K; ++k)
            if (int(threadIdx.x) + k * Threads < M) w[k] = src[int(threadIdx.x) + k * Threads];
#pragma unroll
        for (int k = 0; k < K; ++k)
            if (int(threadIdx.x) + k * Threads < M) dst[int(threadIdx.x) + k * Threads] = w[k];
    }
}

}  // namespace xcorr
