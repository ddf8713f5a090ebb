// The team DFT of algorithms/common/team_dft.cuh (fft-fused's building block), compiled for the CPU
// and run with one thread per lane: each instantiated size N (TeamPlan), forward and inverse,
// through a unit-stride and a strided exchange slot, against a DFT in double precision; `post` is
// given a factor per element index, so that an element delivered to the wrong index (or twice, or
// never) fails. The lanes of a team are T std::threads; __syncwarp is a barrier of those T, and
// every exchange slot starts poisoned (NaN) and checks its indices. A race between the exchange's
// writes and reads, a wrong exchange position or one outside the slot fails here, without a GPU.
// For teams of 16 threads or more (the staged sizes: a half-warp inside one team) it also models
// the shared-memory banks: the k-th exchange access of the 16 lanes of each half-warp, 64-bit
// words at index x stride, must fall on 16 distinct word positions modulo 16 (one wavefront).
// Padded teams of 8 (fft-fused's one-block path: two teams a half-warp) are modelled as there:
// in row-pair slots 4 pitch apart (stride 1) and in adjacent columns (stride pitch), with
// padded_pair_pitch; teams of 4 (N = 32, 48, 96: four a half-warp, pitch N/2 + 2) in row-pair
// slots 2 pitch apart and on the four columns quad_team_column gives a half-warp in phase 2
// (where adjacent columns must show their conflicts).
// tests/test_team_dft.py runs it: exit 0 and a line per case; 1 and the failures otherwise.
#include <atomic>
#include <barrier>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime.h>  // float2, make_float2 (host-usable)

// The device intrinsics team_dft.cuh uses, for std::threads standing in for the lanes of one team.
struct HostIndex {
    unsigned x = 0, y = 0, z = 0;
};
thread_local HostIndex threadIdx;  // the lane; team_mask reads threadIdx.x
HostIndex blockDim;                // the team's lanes (fill_twiddles<N>'s loop strides by it)
thread_local unsigned host_lane = 0;
thread_local std::barrier<>* host_team = nullptr;

inline void __syncwarp(unsigned) { host_team->arrive_and_wait(); }
inline float __ldg(const float* p) { return *p; }  // device.cuh's load_or_zero

#define XCORR_TEAM_DFT_HOST 1
namespace xcorr {
unsigned host_lane_id();
}
#include "common/team_dft.cuh"
unsigned xcorr::host_lane_id() { return host_lane; }

namespace {

using cd = std::complex<double>;

// f(lane) on T threads at once, each knowing its lane and the team's barrier.
void on_team(int T, const std::function<void(int)>& f) {
    std::barrier<> team(T);
    std::vector<std::thread> lanes;
    for (int t = 0; t < T; ++t)
        lanes.emplace_back([&, t] {
            threadIdx.x = unsigned(t);
            host_lane = unsigned(t) % 32u;  // the lane in its warp (a team of T > 32 spans warps)
            host_team = &team;
            f(t);
        });
    for (auto& l : lanes) l.join();
}

// The exchange slot as team_dft's Slot: element n at base[n * stride], n checked against
// [0, slot_size) (N, N + T for the padded layout, more for mixed plans)
// (an index outside counts and lands in a NaN scratch element instead of outside the buffer).
struct CheckedSlot {
    float2* base;
    int stride, n;
    std::atomic<int>* outside;
    float2* scratch;
    std::vector<int>* trace;  // the lane's accesses in order
    float2& operator[](int i) const {
        trace->push_back(i);
        if (i < 0 || i >= n) {
            ++*outside;
            *scratch = make_float2(NAN, NAN);
            return *scratch;
        }
        return base[size_t(i) * size_t(stride)];
    }
};

// A per-index factor for `post`: element n of the result must arrive as n, once.
float2 factor(int n) { return make_float2(1.0f + 0.001f * float(n % 97), 0.0005f * float(n % 13)); }

template <int N, int Sign>
bool check(int stride, std::mt19937& rng, int& failures) {
    using Shape = xcorr::TeamShape<N>;
    constexpr int E = Shape::E, T = Shape::T;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float2> x(N);
    for (auto& v : x) v = make_float2(u(rng), u(rng));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float2> tw(Shape::twiddles, make_float2(nan, nan)), slot(static_cast<size_t>(Shape::slot_size) * stride, make_float2(nan, nan)), got(N);
    blockDim.x = unsigned(T);
    on_team(T, [&](int) { xcorr::fill_twiddles<N, T>(tw.data()); });
    std::vector<int> seen(N, 0);
    std::mutex seen_lock;
    std::atomic<int> outside{0};
    std::vector<std::vector<int>> trace(T);
    on_team(T, [&](int t) {
        float2 scratch;
        float2 v[E];
        for (int e = 0; e < E; ++e) v[e] = x[size_t(t + T * e)];
        const auto post = [&](int n, float2 z) {
            {
                std::lock_guard<std::mutex> g(seen_lock);
                if (n >= 0 && n < N) ++seen[size_t(n)];
            }
            return xcorr::cmul(z, factor(n));
        };
        xcorr::team_dft<N, Sign>(v, CheckedSlot{slot.data(), stride, Shape::slot_size, &outside, &scratch, &trace[size_t(t)]}, xcorr::team_mask<T>(),
                                 tw.data(), post);
        for (int e = 0; e < E; ++e) got[size_t(t + T * e)] = v[e];  // natural layout on exit
    });
    double err = 0, scale = 0;
    for (int k = 0; k < N; ++k) {
        cd want = 0;
        for (int n = 0; n < N; ++n)
            want += cd(x[size_t(n)].x, x[size_t(n)].y) * std::polar(1.0, Sign * 2.0 * M_PI * double(n) * k / N);
        const float2 f = factor(k);
        want *= cd(f.x, f.y);
        const cd g(got[size_t(k)].x, got[size_t(k)].y);
        err = std::max(err, std::isfinite(g.real()) && std::isfinite(g.imag()) ? std::abs(g - want) : INFINITY);
        scale = std::max(scale, std::abs(want));
    }
    int wrong_post = 0;
    for (int n = 0; n < N; ++n) wrong_post += seen[size_t(n)] != 1;
    const double rel = err / scale;
    int conflicts = 0;  // accesses of a half-warp that need more than one wavefront
    if constexpr (T == 8 && Shape::padded) {
        constexpr int pitch = xcorr::padded_pair_pitch<N>();
        for (const auto& [base, step] : {std::pair{4 * pitch, 1}, std::pair{1, pitch}}) {  // second team's base, stride
            for (size_t k = 0; k < trace[0].size(); ++k) {
                unsigned words = 0;
                for (int l = 0; l < T; ++l) {
                    const int w = trace[size_t(l)][k] * step;
                    words |= 1u << (w % 16) | 1u << ((w + base) % 16);
                }
                conflicts += words != 0xffffu;
            }
        }
    }
    if constexpr (T == 4) {  // fft-fused's N = 32, 48, 96: four teams a half-warp, at pitch Qh + 1 (Geometry)
        constexpr int pitch = N / 2 + 2;
        int adjacent = 0;  // the columns' model on columns c .. c + 3: it must see their 2-way conflicts
        if (stride == 1)
            for (size_t k = 0; k < trace[0].size(); ++k) {
                unsigned rows = 0, cols = 0, plain = 0;
                for (int j = 0; j < 4; ++j)
                    for (int l = 0; l < T; ++l) {
                        const int x = trace[size_t(l)][k];
                        rows |= 1u << ((x + 2 * j * pitch) % 16);  // phases 1 and 3: row pairs p .. p + 3
                        cols |= 1u << ((x * pitch + xcorr::quad_team_column(j)) % 16);  // phase 2's columns
                        plain |= 1u << ((x * pitch + j) % 16);
                    }
                conflicts += (rows != 0xffffu) + (cols != 0xffffu);
                adjacent += plain != 0xffffu;
            }
        conflicts += stride == 1 && adjacent == 0;  // a model blind to the layout it replaces
    }
    if (T >= 16) {
        for (int h = 0; h < T; h += 16) {
            for (size_t k = 0; k < trace[size_t(h)].size(); ++k) {
                unsigned words = 0;
                for (int l = h; l < h + 16; ++l)
                    if (k < trace[size_t(l)].size()) words |= 1u << ((trace[size_t(l)][k] * stride) % 16);
                conflicts += words != 0xffffu;
            }
        }
    }
    const bool ok = rel <= 1e-5 && wrong_post == 0 && outside == 0 && conflicts == 0;
    std::printf("%s  N = %4d (E = %2d, T = %2d%s)  %s  slot stride %d  relative error %.2e%s%s%s\n", ok ? "PASS" : "FAIL",
                N, E, T, Shape::mixed ? ", mixed radix" : Shape::three_stage ? ", three stages" : "", Sign < 0 ? "forward" : "inverse", stride, rel,
                wrong_post ? "  (post saw some index not exactly once)" : "",
                outside ? "  (slot indices outside the slot)" : "",
                conflicts ? "  (bank conflicts in the exchange)" : "");
    failures += !ok;
    return ok;
}

// The twiddle table (computed by the compiler, team_dft.cuh): each entry exp(2 pi i turns / N)
// rounded to float (within half a unit of float's last place at 1, 2^-25, of the double value),
// and both fill_twiddles forms (a loop over blockDim, straight-line for Threads) copy all of it.
template <int N>
void check_table(int& failures) {
    using Shape = xcorr::TeamShape<N>;
    constexpr int T = Shape::T, M = Shape::twiddles;
    double err = 0;
    for (int i = 0; i < M; ++i) {
        const cd want = std::polar(1.0, 2.0 * M_PI * double(xcorr::twiddle_turns<N>(i) % N) / N);
        const float2 w = xcorr::kTwiddleTable<N>.w[i];
        err = std::max(err, std::max(std::abs(double(w.x) - want.real()), std::abs(double(w.y) - want.imag())));
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float2> loop(M, make_float2(nan, nan)), straight(M, make_float2(nan, nan));
    blockDim.x = unsigned(T);
    on_team(T, [&](int) {
        xcorr::fill_twiddles<N>(loop.data());
        xcorr::fill_twiddles<N, T>(straight.data());
    });
    int copied = 0;
    for (int i = 0; i < M; ++i) {
        const float2 w = xcorr::kTwiddleTable<N>.w[i];
        copied += loop[size_t(i)].x == w.x && loop[size_t(i)].y == w.y && straight[size_t(i)].x == w.x &&
                  straight[size_t(i)].y == w.y;
    }
    const bool ok = err <= 0x1p-25 && copied == M;
    std::printf("%s  N = %4d  twiddle table: %d entries, largest error %.2e, %d of %d copied by both fills\n",
                ok ? "PASS" : "FAIL", N, M, err, copied, M);
    failures += !ok;
}

template <int N>
void check_size(std::mt19937& rng, int& failures) {
    check_table<N>(failures);
    for (int stride : {1, 9}) {  // a row (unit stride) and a column of a tile (fft-fused's pitches are odd)
        check<N, -1>(stride, rng, failures);
        check<N, +1>(stride, rng, failures);
    }
}

}  // namespace

int main() {
    std::mt19937 rng(20261125);
    int failures = 0;
    {  // quad_team_column permutes each 16 team ids (fft-fused's blocks hold 32 or 64 teams of 4)
        int hit[64] = {};
        for (int id = 0; id < 64; ++id) {
            const int c = xcorr::quad_team_column(id);
            if (c >= 0 && c < 64 && (c & ~15) == (id & ~15)) ++hit[c];
        }
        int once = 0;
        for (int c = 0; c < 64; ++c) once += hit[c] == 1;
        std::printf("%s  quad_team_column: %d of 64 columns taken once\n", once == 64 ? "PASS" : "FAIL", once);
        failures += once != 64;
    }
    check_size<32>(rng, failures);
    check_size<48>(rng, failures);
    check_size<64>(rng, failures);
    check_size<96>(rng, failures);
    check_size<128>(rng, failures);
    check_size<192>(rng, failures);
    check_size<256>(rng, failures);
    check_size<384>(rng, failures);
    check_size<512>(rng, failures);
    check_size<768>(rng, failures);
    check_size<1024>(rng, failures);
    std::printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
