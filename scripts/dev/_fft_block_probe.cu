// scripts/dev/fft-block-probe's program: batched complex-to-complex fp32 forward FFTs of the
// lengths fft-large needs (2160, 4320) and the powers of two around them, one transform per block
// (or a few), global memory in and out, timed these ways:
//   dx      cuFFTDx 1.5 (nvidia-mathdx 25.6.0) block FFTs, a few elements-per-thread (EPT) and
//           FFTs-per-block (FPB) each; lengths its sm_90 database lacks (2160, 4320) go to its
//           Bluestein path, which needs a workspace ("dx-blue": a 2^k-point FFT of 2N - 1 or more
//           points, twice, with chirp products);
//   dx-comp the same lengths composed from lengths the database has, four-step in shared memory:
//           2160 = 36 x 60 (two cuFFTDx thread FFTs), 4320 = 72 x 60 (cuFFTDx block FFTs of 72,
//           60 of them a block, then cuFFTDx thread FFTs of 60);
//   ours    algorithms/common/block_fft.cuh (run-time-length Stockham in shared memory) with
//           plan.threads threads a transform, as algorithms/53_fft_large.cu launches it (G = 1:
//           one transform a block; G = 2: two side by side, as its row_inverse_kernel pairs them);
//   team    at 1024 also algorithms/common/team_dft.cuh, fft-fused's register team (64 threads),
//           2 or 4 teams a block;
//   ours 2-step  n = N1 x N2 as two steps of whole DFTs in registers (team_dft.cuh's dft<R>), the
//           structure of dx-comp's thread + thread with our DFTs (fft-large's TwoStepFft);
//   cufft   cuFFT's batched 1-D plan (out of place): the reference floor.
// Every result is checked against cuFFT over the whole batch and, for three transforms, against
// a float64 DFT on the host (max |X - ref| / max |ref|). Times: CUDA events, warm-up, the median
// of --reps runs. GB/s counts one read and one write of the batch.
//   usage: fft-block-probe [--batch B] [--reps R] [--sizes 2160,4320,...]
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cufftdx.hpp>

#include "common/block_fft.cuh"

#define CK(x)                                                                                          \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(1);                                                                              \
        }                                                                                              \
    } while (0)

namespace {

using namespace cufftdx;
constexpr unsigned kArch = 900;  // sm_90 (H100/H200); the database's records are per architecture

template <int N, int EPT, int FPB>
using BlockFFT = decltype(Size<N>() + Precision<float>() + Type<fft_type::c2c>() + Direction<fft_direction::forward>() +
                          ElementsPerThread<EPT>() + FFTsPerBlock<FPB>() + SM<kArch>() + Block());
template <int N>
using ThreadFFT = decltype(Size<N>() + Precision<float>() + Type<fft_type::c2c>() + Direction<fft_direction::forward>() +
                           Thread());

template <class T>
__device__ __forceinline__ T to(float2 a) {
    T t;
    t.x = a.x, t.y = a.y;
    return t;
}
template <class T>
__device__ __forceinline__ float2 from(const T& t) { return make_float2(t.x, t.y); }
template <class T>
__device__ __forceinline__ T cmulw(const T& a, float2 w) {
    T t;
    t.x = a.x * w.x - a.y * w.y, t.y = a.x * w.y + a.y * w.x;
    return t;
}

// (a) cuFFTDx block FFT, register API: thread (x, y) holds elements x + i * stride of transform
// blockIdx.x * FPB + y, in and out (Bluestein: the same layout over its longer length; indices
// past N are zero in and ignored out).
template <class FFT>
__global__ void __launch_bounds__(FFT::max_threads_per_block)
    dx_kernel(const float2* __restrict__ in, float2* __restrict__ out, typename FFT::workspace_type ws) {
    extern __shared__ __align__(16) unsigned char dx_smem[];
    using T = typename FFT::value_type;
    constexpr int N = size_of<FFT>::value;
    const size_t base = (size_t(blockIdx.x) * FFT::ffts_per_block + threadIdx.y) * N;
    T v[FFT::storage_size];
#pragma unroll
    for (int i = 0; i < int(FFT::storage_size); ++i) {
        const int idx = int(threadIdx.x) + i * int(FFT::stride);
        v[i] = (i < int(FFT::input_ept) && idx < N) ? to<T>(__ldg(in + base + idx)) : to<T>(make_float2(0.f, 0.f));
    }
    if constexpr (FFT::requires_workspace) FFT().execute(v, dx_smem, ws);
    else FFT().execute(v, dx_smem);
#pragma unroll
    for (int i = 0; i < int(FFT::output_ept); ++i) {
        const int idx = int(threadIdx.x) + i * int(FFT::stride);
        if (idx < N) out[base + idx] = from(v[i]);
    }
}

// Four-step in shared memory, N = N1 N2, x[N2 n1 + n2] -> X[k1 + N1 k2]:
//   Y[k1][n2] = W_N^{n2 k1} sum_n1 x[N2 n1 + n2] W_N1^{n1 k1}   (N2 FFTs of N1, strided loads from global)
//   X[k1 + N1 k2] = sum_n2 Y[k1][n2] W_N2^{n2 k2}                 (N1 FFTs of N2, out to global)
// Y sits in shared memory with rows of N2 + 1 (a row per thread in the second step: the pad
// spreads the lanes over the banks). tw[m] = W_N^m (m < N, float64 on the host).
// (b1) and (e), thread + thread: both steps whole DFTs a thread, D1 of N1 then D2 of N2 (DxThread:
// cuFFTDx thread FFTs, 2160 = 36 x 60 style; OursThread: team_dft.cuh's dft<R>, compile-time
// twiddles, a composite R by one Cooley-Tukey split: fft-large's candidate beyond one team);
// block (max(N1, N2), B): B transforms a block.
template <int N>
struct DxThread {
    __device__ __forceinline__ static void run(float2 (&v)[N]) {
        using F = ThreadFFT<N>;
        using T = typename F::value_type;
        T t[F::storage_size];
#pragma unroll
        for (int i = 0; i < N; ++i) t[i] = to<T>(v[i]);
        F().execute(t);
#pragma unroll
        for (int i = 0; i < N; ++i) v[i] = from(t[i]);
    }
};
template <int N>
struct OursThread {
    __device__ __forceinline__ static void run(float2 (&v)[N]) { xcorr::dft<N, -1>(v); }
};
template <template <int> class D, int N1, int N2, int B>
__global__ void __launch_bounds__((N1 > N2 ? N1 : N2) * B)
    thread_thread_kernel(const float2* __restrict__ in, float2* __restrict__ out, const float2* __restrict__ tw) {
    extern __shared__ __align__(16) unsigned char comp_smem[];
    constexpr int N = N1 * N2, LD = N2 + 1;
    float2* s = reinterpret_cast<float2*>(comp_smem) + threadIdx.y * (N1 * LD);
    const size_t base = (size_t(blockIdx.x) * B + threadIdx.y) * N;
    const int x = threadIdx.x;
    if (x < N2) {
        float2 v[N1];
#pragma unroll
        for (int n1 = 0; n1 < N1; ++n1) v[n1] = __ldg(in + base + N2 * n1 + x);
        D<N1>::run(v);
#pragma unroll
        for (int k1 = 0; k1 < N1; ++k1) s[k1 * LD + x] = k1 ? xcorr::cmul(v[k1], __ldg(tw + x * k1)) : v[k1];
    }
    __syncthreads();
    if (x < N1) {
        float2 u[N2];
#pragma unroll
        for (int n2 = 0; n2 < N2; ++n2) u[n2] = s[x * LD + n2];
        D<N2>::run(u);
#pragma unroll
        for (int k2 = 0; k2 < N2; ++k2) out[base + x + N1 * k2] = u[k2];
    }
}

// (b2) 4320 = 72 x 60 style: step one cuFFTDx block FFTs of N1 (N2 of them: FFTsPerBlock = N2,
// block (N1 / EPT, N2)), step two cuFFTDx thread FFTs of N2 on the first N1 threads. One
// transform a block; the block FFT's scratch aliases Y (a barrier between them).
template <int N1, int N2, int EPT>
using CompFFT1 = BlockFFT<N1, EPT, N2>;
template <int N1, int N2, int EPT>
__global__ void __launch_bounds__(CompFFT1<N1, N2, EPT>::max_threads_per_block)
    comp_bt_kernel(const float2* __restrict__ in, float2* __restrict__ out, const float2* __restrict__ tw) {
    extern __shared__ __align__(16) unsigned char comp_smem[];
    using F1 = CompFFT1<N1, N2, EPT>;
    using T = typename F1::value_type;
    constexpr int N = N1 * N2, LD = N2 + 1, S = F1::stride;
    float2* s = reinterpret_cast<float2*>(comp_smem);
    const size_t base = size_t(blockIdx.x) * N;
    const int tx = threadIdx.x, n2 = threadIdx.y;
    T v[F1::storage_size];
#pragma unroll
    for (int i = 0; i < EPT; ++i) v[i] = to<T>(__ldg(in + base + N2 * (tx + i * S) + n2));
    F1().execute(v, comp_smem);
    __syncthreads();  // the scratch is Y from here on
#pragma unroll
    for (int i = 0; i < EPT; ++i) {
        const int k1 = tx + i * S;
        s[k1 * LD + n2] = from(k1 ? cmulw(v[i], __ldg(tw + n2 * k1)) : v[i]);
    }
    __syncthreads();
    const int f = n2 * S + tx;
    if (f < N1) {
        using F2 = ThreadFFT<N2>;
        using U = typename F2::value_type;
        U u[F2::storage_size];
#pragma unroll
        for (int m = 0; m < N2; ++m) u[m] = to<U>(s[f * LD + m]);
        F2().execute(u);
#pragma unroll
        for (int k2 = 0; k2 < N2; ++k2) out[base + f + N1 * k2] = from(u[k2]);
    }
}

// (c) ours: block_fft.cuh, G transforms a block (threadIdx.y), plan.threads threads each.
template <int G>
__global__ void __launch_bounds__(xcorr::kBlockFftMaxThreads) ours_kernel(const float2* __restrict__ in, float2* __restrict__ out,
                                                                         xcorr::BlockFftPlan p) {
    using namespace xcorr;
    extern __shared__ float2 ours_buf[];
    __shared__ BlockFftStage stages[kBlockFftMaxStages];
    if (threadIdx.y == 0) block_fft_stages(p, stages);
    const int n = p.n;
    float2* buf = ours_buf + threadIdx.y * block_fft_slot(n);
    const size_t base = (size_t(blockIdx.x) * G + threadIdx.y) * n;
    for (int t = threadIdx.x; t < n; t += blockDim.x) buf[bf_pad(t, p.pad)] = __ldg(in + base + t);
    __syncthreads();
    block_fft<-1>(buf, p, stages, threadIdx.x);
    for (int t = threadIdx.x; t < n; t += blockDim.x) out[base + t] = buf[bf_pad(t, p.pad)];
}

// (d) ours at 1024: team_dft.cuh's register team (fft-fused's transform: E = 16 elements a thread,
// T = 64 threads, element t + T e in thread t's v[e]), K teams a block, twiddles in shared memory.
template <int N, int K>
__global__ void __launch_bounds__(xcorr::TeamShape<N>::T * K) team_kernel(const float2* __restrict__ in, float2* __restrict__ out) {
    using namespace xcorr;
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T, TW = (TeamShape<N>::twiddles + 1) / 2 * 2;
    extern __shared__ __align__(16) float2 team_smem[];
    float2* tw = team_smem;
    const int team = int(threadIdx.x) / T, t = int(threadIdx.x) % T;
    float2* slot = team_smem + TW + team * TeamShape<N>::slot_size;
    fill_twiddles<N>(tw);
    const size_t base = (size_t(blockIdx.x) * K + team) * N;
    float2 v[E];
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = __ldg(in + base + t + T * e);
    __syncthreads();
    team_dft<N, -1>(v, StridedSlot{slot, 1}, team_mask<T>(), tw);
#pragma unroll
    for (int e = 0; e < E; ++e) out[base + t + T * e] = v[e];
}

__global__ void fill_kernel(float2* a, size_t count, unsigned seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
        unsigned h = unsigned(i) * 2654435761u ^ seed ^ unsigned(i >> 32) * 0x9E3779B9u;
        h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
        const unsigned g = h * 0x2c1b3c6du + 0x297a2d39u;
        a[i] = make_float2(float(h >> 8) * (2.f / 16777216.f) - 1.f, float(g >> 8) * (2.f / 16777216.f) - 1.f);
    }
}
// res[0] = max |a - b|, res[1] = max |b| (as the bits of non-negative floats, which order as ints)
__global__ void diff_kernel(const float2* a, const float2* b, size_t count, unsigned* res) {
    float d = 0.f, m = 0.f;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
        const float2 x = a[i], y = b[i];
        const float e = hypotf(x.x - y.x, x.y - y.y);
        d = fmaxf(d, e != e ? INFINITY : e), m = fmaxf(m, hypotf(y.x, y.y));
    }
    for (int o = 16; o; o >>= 1) d = fmaxf(d, __shfl_xor_sync(~0u, d, o)), m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
    if ((threadIdx.x & 31) == 0) atomicMax(res, __float_as_uint(d)), atomicMax(res + 1, __float_as_uint(m));
}

struct Method {
    std::string name, note;
    const void* func = nullptr;  // for the attributes; null: cuFFT
    int threads = 0, per_block = 1;
    size_t smem = 0;
    std::function<void(cudaStream_t)> launch;
    std::function<void()> release;
};

struct Ctx {
    int n = 0, batch = 0;
    float2 *in = nullptr, *out = nullptr, *tw = nullptr;
};

template <class FFT>
void add_dx(std::vector<Method>& ms, const Ctx& c, const char* tag) {
    constexpr int fpb = FFT::ffts_per_block;
    Method m;
    m.name = std::string(tag) + " ept=" + std::to_string(FFT::elements_per_thread) + " fpb=" + std::to_string(fpb);
    m.func = reinterpret_cast<const void*>(&dx_kernel<FFT>);
    m.threads = FFT::block_dim.x * FFT::block_dim.y * FFT::block_dim.z, m.per_block = fpb;
    m.smem = FFT::shared_memory_size;
    if (c.batch % fpb) return;
    cudaError_t err = cudaSuccess;
    auto* ws = new decltype(make_workspace<FFT>(err))(make_workspace<FFT>(err));
    CK(err);
    if (FFT::requires_workspace) m.note = "workspace " + std::to_string(FFT::workspace_size) + " B";
    const dim3 grid(unsigned(c.batch / fpb)), block = FFT::block_dim;
    const size_t smem = m.smem;
    float2 *in = c.in, *out = c.out;
    m.launch = [=](cudaStream_t s) { dx_kernel<FFT><<<grid, block, smem, s>>>(in, out, *ws); };
    m.release = [ws] { delete ws; };
    ms.push_back(m);
}

template <template <int> class D, int N1, int N2, int B>
void add_thread_thread(std::vector<Method>& ms, const Ctx& c, const std::string& tag) {
    Method m;
    m.name = tag + " " + std::to_string(N1) + "x" + std::to_string(N2) + " B=" + std::to_string(B);
    m.func = reinterpret_cast<const void*>(&thread_thread_kernel<D, N1, N2, B>);
    m.threads = std::max(N1, N2) * B, m.per_block = B;
    m.smem = size_t(B) * N1 * (N2 + 1) * sizeof(float2);
    if (c.batch % B) return;
    const dim3 grid(unsigned(c.batch / B)), block(unsigned(std::max(N1, N2)), B);
    const size_t smem = m.smem;
    float2 *in = c.in, *out = c.out, *tw = c.tw;
    m.launch = [=](cudaStream_t s) { thread_thread_kernel<D, N1, N2, B><<<grid, block, smem, s>>>(in, out, tw); };
    ms.push_back(m);
}
template <int N1, int N2, int B>
void add_comp_tt(std::vector<Method>& ms, const Ctx& c) {
    add_thread_thread<DxThread, N1, N2, B>(ms, c, "dx-comp thread+thread");
}
template <int N1, int N2, int B>
void add_ours2(std::vector<Method>& ms, const Ctx& c) {
    add_thread_thread<OursThread, N1, N2, B>(ms, c, "ours 2-step dft");
}

template <int N1, int N2, int EPT>
void add_comp_bt(std::vector<Method>& ms, const Ctx& c) {
    using F1 = CompFFT1<N1, N2, EPT>;
    Method m;
    m.name = "dx-comp " + std::to_string(N1) + "x" + std::to_string(N2) + " block(ept=" + std::to_string(EPT) + ")+thread";
    m.func = reinterpret_cast<const void*>(&comp_bt_kernel<N1, N2, EPT>);
    m.threads = F1::block_dim.x * F1::block_dim.y;
    m.smem = std::max<size_t>(F1::shared_memory_size, size_t(N1) * (N2 + 1) * sizeof(float2));
    const dim3 grid(unsigned(c.batch)), block = F1::block_dim;
    const size_t smem = m.smem;
    float2 *in = c.in, *out = c.out, *tw = c.tw;
    m.launch = [=](cudaStream_t s) { comp_bt_kernel<N1, N2, EPT><<<grid, block, smem, s>>>(in, out, tw); };
    ms.push_back(m);
}

template <int G>
void add_ours(std::vector<Method>& ms, const Ctx& c, const xcorr::BlockFftPlan& p) {
    Method m;
    std::string rad;
    for (int s = 0; s < p.stages; ++s) rad += (s ? "x" : "") + std::to_string(p.st[s].r);
    m.name = "ours G=" + std::to_string(G) + " (" + rad + ")";
    m.func = reinterpret_cast<const void*>(&ours_kernel<G>);
    m.threads = p.threads * G, m.per_block = G;
    m.smem = size_t(G) * xcorr::block_fft_slot(p.n) * sizeof(float2);
    if (c.batch % G || m.threads > xcorr::kBlockFftMaxThreads) return;
    const dim3 grid(unsigned(c.batch / G)), block(unsigned(p.threads), G);
    const size_t smem = m.smem;
    float2 *in = c.in, *out = c.out;
    m.launch = [=](cudaStream_t s) { ours_kernel<G><<<grid, block, smem, s>>>(in, out, p); };
    ms.push_back(m);
}

template <int N, int K>
void add_team(std::vector<Method>& ms, const Ctx& c) {
    using S = xcorr::TeamShape<N>;
    static_assert(K <= xcorr::kMaxWarpTeams || S::T <= 32, "named barriers: at most kMaxWarpTeams teams of whole warps");
    Method m;
    m.name = "ours team_dft E=" + std::to_string(S::E) + " T=" + std::to_string(S::T) + " teams=" + std::to_string(K);
    m.func = reinterpret_cast<const void*>(&team_kernel<N, K>);
    m.threads = S::T * K, m.per_block = K;
    m.smem = (size_t((S::twiddles + 1) / 2 * 2) + size_t(K) * S::slot_size) * sizeof(float2);
    if (c.batch % K) return;
    const dim3 grid(unsigned(c.batch / K)), block(unsigned(m.threads));
    const size_t smem = m.smem;
    float2 *in = c.in, *out = c.out;
    m.launch = [=](cudaStream_t s) { team_kernel<N, K><<<grid, block, smem, s>>>(in, out); };
    ms.push_back(m);
}

// The sizes' methods (each a template instantiation: the list is what this build compiles).
void methods_for(int n, const Ctx& c, std::vector<Method>& ms) {
    switch (n) {
        case 1024:
            add_dx<BlockFFT<1024, 8, 1>>(ms, c, "dx");
            add_dx<BlockFFT<1024, 16, 1>>(ms, c, "dx");
            add_dx<BlockFFT<1024, 16, 2>>(ms, c, "dx");
            add_dx<BlockFFT<1024, 32, 4>>(ms, c, "dx");
            add_team<1024, 2>(ms, c);
            add_team<1024, 4>(ms, c);
            break;
        case 2048:
            add_dx<BlockFFT<2048, 8, 1>>(ms, c, "dx");
            add_dx<BlockFFT<2048, 16, 1>>(ms, c, "dx");
            add_dx<BlockFFT<2048, 32, 1>>(ms, c, "dx");
            break;
        case 4096:
            add_dx<BlockFFT<4096, 8, 1>>(ms, c, "dx");
            add_dx<BlockFFT<4096, 16, 1>>(ms, c, "dx");
            add_dx<BlockFFT<4096, 32, 1>>(ms, c, "dx");
            add_ours2<64, 64, 1>(ms, c);
            add_ours2<64, 64, 2>(ms, c);
            break;
        case 2160:  // not in the sm_90 database: Bluestein over 8192 points (EPT: 8192's)
            add_dx<BlockFFT<2160, 16, 1>>(ms, c, "dx-blue");
            add_dx<BlockFFT<2160, 32, 1>>(ms, c, "dx-blue");
            add_comp_tt<36, 60, 2>(ms, c);
            add_comp_tt<36, 60, 4>(ms, c);
            add_ours2<36, 60, 2>(ms, c);
            add_ours2<36, 60, 4>(ms, c);
            add_ours2<60, 36, 2>(ms, c);
            add_ours2<48, 45, 2>(ms, c);
            break;
        case 4320:  // Bluestein over 16384 points
            add_dx<BlockFFT<4320, 16, 1>>(ms, c, "dx-blue");
            add_dx<BlockFFT<4320, 32, 1>>(ms, c, "dx-blue");
            add_comp_bt<72, 60, 12>(ms, c);
            add_comp_bt<72, 60, 18>(ms, c);
            add_ours2<72, 60, 1>(ms, c);
            add_ours2<60, 72, 1>(ms, c);
            break;
        default:
            break;
    }
}

// The float64 DFT of transform t of the (host copy of the) input.
std::vector<std::complex<double>> dft64(const std::vector<float2>& x, int n) {
    std::vector<std::complex<double>> w(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) w[size_t(k)] = std::polar(1.0, -2.0 * M_PI * k / n);
    for (int k = 0; k < n; ++k) {
        std::complex<double> s = 0;
        for (int j = 0; j < n; ++j) s += std::complex<double>(x[size_t(j)].x, x[size_t(j)].y) * w[size_t((int64_t(j) * k) % n)];
        y[size_t(k)] = s;
    }
    return y;
}

double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
    int batch = 1 << 14, reps = 21;
    std::vector<int> sizes = {2160, 4320, 4096, 2048, 1024};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--batch" && i + 1 < argc) batch = std::atoi(argv[++i]);
        else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--sizes" && i + 1 < argc) {
            sizes.clear();
            for (char* t = std::strtok(argv[++i], ","); t; t = std::strtok(nullptr, ",")) sizes.push_back(std::atoi(t));
        } else {
            std::fprintf(stderr, "usage: %s [--batch B] [--reps R] [--sizes 2160,4320,...]\n", argv[0]);
            return a == "-h" || a == "--help" ? 0 : 2;
        }
    }
    int dev = 0;
    cudaDeviceProp prop{};
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    int clock_khz = 0, mem_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev);
    std::printf("# %s, sm_%d%d, %d SMs, %d kHz; cuFFTDx %d.%d.%d; batch %d, %d timed runs (median)\n", prop.name, prop.major,
                prop.minor, prop.multiProcessorCount, clock_khz, CUFFTDX_VERSION_MAJOR, CUFFTDX_VERSION_MINOR,
                CUFFTDX_VERSION_PATCH, batch, reps);
    if (prop.major * 10 + prop.minor != 90)
        std::printf("# note: built for sm_90 only (cuFFTDx's SM<900> records); this GPU is sm_%d%d\n", prop.major, prop.minor);
    std::printf("\n| size | method | us/batch | ns/transform | GB/s | err vs cuFFT | err vs fp64 | regs | blocks/SM | threads | smem B | note |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    unsigned* res;
    CK(cudaMalloc(&res, 2 * sizeof(unsigned)));

    for (int n : sizes) {
        Ctx c;
        c.n = n, c.batch = batch;
        const size_t count = size_t(n) * size_t(batch);
        float2* ref;
        CK(cudaMalloc(&c.in, count * sizeof(float2)));
        CK(cudaMalloc(&c.out, count * sizeof(float2)));
        CK(cudaMalloc(&ref, count * sizeof(float2)));
        CK(cudaMalloc(&c.tw, size_t(n) * sizeof(float2)));
        {
            std::vector<float2> tw(static_cast<size_t>(n));
            for (int m = 0; m < n; ++m)
                tw[size_t(m)] = make_float2(float(std::cos(-2.0 * M_PI * m / n)), float(std::sin(-2.0 * M_PI * m / n)));
            CK(cudaMemcpy(c.tw, tw.data(), tw.size() * sizeof(float2), cudaMemcpyHostToDevice));
        }
        fill_kernel<<<1024, 256, 0, st>>>(c.in, count, 12345u + unsigned(n));
        CK(cudaGetLastError());
        // float64 reference of three transforms
        const int samples[3] = {0, batch / 2, batch - 1};
        std::vector<std::vector<std::complex<double>>> want;
        std::vector<float2> hx(static_cast<size_t>(n));
        for (int t : samples) {
            CK(cudaMemcpyAsync(hx.data(), c.in + size_t(t) * n, size_t(n) * sizeof(float2), cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            want.push_back(dft64(hx, n));
        }
        auto err64 = [&]() {
            double d = 0, m = 0;
            for (int q = 0; q < 3; ++q) {
                CK(cudaMemcpyAsync(hx.data(), c.out + size_t(samples[q]) * n, size_t(n) * sizeof(float2), cudaMemcpyDeviceToHost, st));
                CK(cudaStreamSynchronize(st));
                for (int k = 0; k < n; ++k) {
                    const std::complex<double> y(hx[size_t(k)].x, hx[size_t(k)].y);
                    const double e = std::abs(y - want[size_t(q)][size_t(k)]);
                    d = std::isnan(e) ? INFINITY : std::max(d, e), m = std::max(m, std::abs(want[size_t(q)][size_t(k)]));
                }
            }
            return d / m;
        };
        auto time_it = [&](const std::function<void(cudaStream_t)>& launch) {
            for (int w = 0; w < 3; ++w) launch(st);
            CK(cudaGetLastError());
            std::vector<float> ms;
            for (int r = 0; r < reps; ++r) {
                CK(cudaEventRecord(e0, st));
                launch(st);
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                float t = 0;
                CK(cudaEventElapsedTime(&t, e0, e1));
                ms.push_back(t);
            }
            CK(cudaGetLastError());
            return median(ms) * 1e3;  // us
        };
        auto row = [&](const std::string& name, double us, double e_cufft, double e64, const Method* m) {
            const double bytes = 2.0 * double(count) * sizeof(float2);
            char regs[16] = "-", occ[16] = "-", thr[16] = "-", sm[24] = "-";
            if (m && m->func) {
                cudaFuncAttributes fa{};
                if (cudaFuncGetAttributes(&fa, m->func) == cudaSuccess) std::snprintf(regs, sizeof regs, "%d", fa.numRegs);
                int nb = 0;
                if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, m->func, m->threads, m->smem) == cudaSuccess)
                    std::snprintf(occ, sizeof occ, "%d", nb);
                std::snprintf(thr, sizeof thr, "%d", m->threads);
                std::snprintf(sm, sizeof sm, "%zu", m->smem);
            }
            std::printf("| %d | %s | %.1f | %.2f | %.0f | %.2e | %.2e | %s | %s | %s | %s | %s |\n", n, name.c_str(), us,
                        us * 1e3 / batch, bytes / (us * 1e-6) / 1e9, e_cufft, e64, regs, occ, thr, sm, m ? m->note.c_str() : "");
            std::fflush(stdout);
        };
        auto diff = [&](const float2* a, const float2* b) {
            CK(cudaMemsetAsync(res, 0, 2 * sizeof(unsigned), st));
            diff_kernel<<<1024, 256, 0, st>>>(a, b, count, res);
            unsigned h[2];
            CK(cudaMemcpyAsync(h, res, sizeof h, cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            float d, m;
            std::memcpy(&d, &h[0], 4), std::memcpy(&m, &h[1], 4);
            return double(d) / double(m);
        };

        // (c) cuFFT first: the reference of the whole batch.
        cufftHandle plan;
        int nn = n;
        if (cufftPlanMany(&plan, 1, &nn, nullptr, 1, n, nullptr, 1, n, CUFFT_C2C, batch) != CUFFT_SUCCESS) {
            std::fprintf(stderr, "cufftPlanMany failed for %d\n", n);
            return 1;
        }
        cufftSetStream(plan, st);
        auto cufft_launch = [&](cudaStream_t) { cufftExecC2C(plan, reinterpret_cast<cufftComplex*>(c.in), reinterpret_cast<cufftComplex*>(ref), CUFFT_FORWARD); };
        const double us_cufft = time_it(cufft_launch);
        CK(cudaMemcpyAsync(c.out, ref, count * sizeof(float2), cudaMemcpyDeviceToDevice, st));
        row("cufft", us_cufft, 0.0, err64(), nullptr);

        std::vector<Method> ms;
        methods_for(n, c, ms);
        float2* dtw = nullptr;
        if (xcorr::is_7_smooth(n) && n <= xcorr::kBlockFftMaxN) {
            try {
                xcorr::BlockFftHost h = xcorr::block_fft_host(n);
                CK(cudaMalloc(&dtw, h.twiddles.size() * sizeof(float2)));
                CK(cudaMemcpy(dtw, h.twiddles.data(), h.twiddles.size() * sizeof(float2), cudaMemcpyHostToDevice));
                h.plan.tw = dtw;
                add_ours<1>(ms, c, h.plan);
                add_ours<2>(ms, c, h.plan);
            } catch (const std::exception& ex) {
                std::printf("| %d | ours | - | - | - | - | - | - | - | - | - | %s |\n", n, ex.what());
            }
        }
        for (Method& m : ms) {
            if (m.smem > size_t(prop.sharedMemPerBlockOptin)) {
                std::printf("| %d | %s | - | - | - | - | - | - | - | %d | %zu | shared memory above the device's %zu |\n", n,
                            m.name.c_str(), m.threads, m.smem, size_t(prop.sharedMemPerBlockOptin));
                continue;
            }
            CK(cudaFuncSetAttribute(m.func, cudaFuncAttributeMaxDynamicSharedMemorySize, int(m.smem)));
            CK(cudaMemsetAsync(c.out, 0xff, count * sizeof(float2), st));  // NaN: a skipped element shows
            m.launch(st);
            const cudaError_t le = cudaGetLastError();
            if (le != cudaSuccess) {
                std::printf("| %d | %s | - | - | - | - | - | - | - | %d | %zu | launch: %s |\n", n, m.name.c_str(), m.threads,
                            m.smem, cudaGetErrorString(le));
                continue;
            }
            CK(cudaStreamSynchronize(st));
            const double e_cufft = diff(c.out, ref), e64 = err64();
            const double us = time_it(m.launch);
            row(m.name, us, e_cufft, e64, &m);
        }
        for (Method& m : ms)
            if (m.release) m.release();
        if (dtw) CK(cudaFree(dtw));
        cufftDestroy(plan);
        CK(cudaFree(c.in));
        CK(cudaFree(c.out));
        CK(cudaFree(ref));
        CK(cudaFree(c.tw));
    }
    return 0;
}
