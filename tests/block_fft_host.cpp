// The block FFT of algorithms/common/block_fft.cuh (fft-large's building block), compiled for the
// CPU and run with one std::thread per thread of the block: __syncthreads is a barrier of those
// threads, the shared buffer starts poisoned (NaN) in its pad words too, and every shared access
// is checked against the buffer. Each length n given on the command line (or the default list:
// fft-large's 2-D template matching lengths 4320 and 2160 (radices 18, 16, 15, 12), lengths with
// 5 and 7 (60, 210, 343), and the trivial 1 and 2), forward and inverse, against a DFT in double precision.
// Exit 0 and a line per case; 1 and the failures otherwise. `--layouts N...` checks every order
// of N's radices in every layout (kBlockFftPads), not only the one block_fft_host picks.
// `--schedules` instead prints the schedule (radices in stage order, threads, layout, and the
// shared-memory wavefronts of its stages against the first order in the densest layout and the
// ideal: block_fft_wavefronts) of every 7-smooth length up to kBlockFftMaxN, or "none", so that
// tests/test_block_fft.py checks which lengths fft-large serves; `--long-schedules` the long
// schedules (block_fft_pingpong's) of every length up to kBlockFftMaxLongN. Without lengths it also checks
// block_fft_pingpong (several butterflies a thread; long schedules). Run by tests/test_block_fft.py.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>  // float2, make_float2 (host-usable)

// The device intrinsics block_fft.cuh uses, for std::threads standing in for a block's threads.
struct HostIndex {
    unsigned x = 0, y = 0, z = 0;
};
thread_local HostIndex threadIdx;
HostIndex blockDim;
thread_local std::barrier<>* host_block = nullptr;
inline void __syncthreads() { host_block->arrive_and_wait(); }
inline void __syncwarp(unsigned) {}  // team_dft.cuh's team_sync, which the block FFT never calls
inline float __ldg(const float* p) { return *p; }
inline float2 __ldg(const float2* p) { return *p; }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * uint64_t(b)) >> 32); }

#define XCORR_TEAM_DFT_HOST 1
namespace xcorr {
unsigned host_lane_id();
}
#include "common/block_fft.cuh"
unsigned xcorr::host_lane_id() { return threadIdx.x % 32u; }

namespace {

using cd = std::complex<double>;

// f(thread) on T threads at once, each knowing its index and the block's barrier.
void on_block(int T, const std::function<void(int)>& f) {
    std::barrier<> block(T);
    std::vector<std::thread> threads;
    blockDim.x = unsigned(T);
    for (int t = 0; t < T; ++t)
        threads.emplace_back([&, t] {
            threadIdx.x = unsigned(t);
            host_block = &block;
            f(t);
        });
    for (auto& th : threads) th.join();
}

std::vector<cd> dft(const std::vector<cd>& x, int sign) {
    const int n = int(x.size());
    std::vector<cd> w(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) w[size_t(t)] = std::polar(1.0, sign * 2.0 * M_PI * double(t) / n);
    for (int k = 0; k < n; ++k)
        for (int m = 0, t = 0; m < n; ++m, t = t + k >= n ? t + k - n : t + k) y[size_t(k)] += x[size_t(m)] * w[size_t(t)];
    return y;
}

double max_rel(const std::vector<float2>& got, const std::vector<cd>& want) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const float2 g = got[i];
        err = std::max(err, std::isfinite(g.x) && std::isfinite(g.y) ? std::abs(cd(g.x, g.y) - want[i]) : INFINITY);
        scale = std::max(scale, std::abs(want[i]));
    }
    return err / std::max(scale, 1e-30);
}

template <int Sign>
bool check(xcorr::BlockFftHost h, std::mt19937& rng) {
    const int n = h.plan.n, pad = h.plan.pad;
    h.plan.tw = h.twiddles.data();
    // A block of more threads than the transform needs: the others only meet the barriers.
    const int T = h.plan.threads + 32;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float2> x(static_cast<size_t>(n));
    for (auto& v : x) v = make_float2(u(rng), u(rng));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const int slot = xcorr::block_fft_slot(n);
    std::vector<float2> buf(size_t(slot), make_float2(nan, nan));
    for (int i = 0; i < n; ++i) buf[size_t(xcorr::bf_pad(i, pad))] = x[size_t(i)];
    std::vector<xcorr::BlockFftStage> stages(xcorr::kBlockFftMaxStages);
    on_block(T, [&](int t) {
        xcorr::block_fft_stages(h.plan, stages.data());
        __syncthreads();
        xcorr::block_fft<Sign>(buf.data(), h.plan, stages.data(), t);
    });
    std::vector<cd> xd(static_cast<size_t>(n));
    std::vector<float2> got(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
        xd[size_t(i)] = cd(x[size_t(i)].x, x[size_t(i)].y), got[size_t(i)] = buf[size_t(xcorr::bf_pad(i, pad))];
    const double rel = max_rel(got, dft(xd, Sign));
    // The pad words are never written.
    std::vector<bool> data(size_t(slot), false);
    for (int i = 0; i < n; ++i) data[size_t(xcorr::bf_pad(i, pad))] = true;
    int pads_written = 0;
    for (int i = 0; i < slot; ++i)
        if (!data[size_t(i)] && !std::isnan(buf[size_t(i)].x)) ++pads_written;
    // FP32 FFT: a few ulp per stage, growing like log n.
    const bool ok = rel < 2e-6 && pads_written == 0;
    std::string radices;
    for (int s = 0; s < h.plan.stages; ++s) {
        if (s) radices += 'x';
        radices += std::to_string(h.plan.st[s].r);
    }
    std::printf("%s  n = %5d  %s  radices %s  pad %d  threads %d  max rel err %.2e  pads written %d\n",
                ok ? "PASS" : "FAIL", n, Sign < 0 ? "forward" : "inverse", radices.empty() ? "-" : radices.c_str(), pad,
                h.plan.threads, rel, pads_written);
    return ok;
}

// block_fft_pingpong: the DFT of n random points with T threads (fewer than the stages'
// butterflies: several a thread), between two poisoned buffers; the result in the buffer it
// returns (the one the stage count's parity says), the pad words of both never written.
template <int Sign>
bool check_pingpong(xcorr::BlockFftHost h, int T, std::mt19937& rng) {
    const int n = h.plan.n, pad = h.plan.pad, slot = xcorr::block_fft_slot(n);
    h.plan.tw = h.twiddles.data();
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float2> a(size_t(slot), make_float2(nan, nan)), b = a;
    std::vector<cd> xd(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        const float2 v = make_float2(u(rng), u(rng));
        a[size_t(xcorr::bf_pad(i, pad))] = v, xd[size_t(i)] = cd(v.x, v.y);
    }
    std::vector<xcorr::BlockFftStage> stages(xcorr::kBlockFftMaxStages);
    std::vector<float2*> result(size_t(T), nullptr);
    on_block(T, [&](int t) {
        xcorr::block_fft_stages(h.plan, stages.data());
        __syncthreads();
        result[size_t(t)] = xcorr::block_fft_pingpong<Sign>(a.data(), b.data(), h.plan, stages.data(), t, T);
    });
    float2* const want_at = h.plan.stages % 2 ? b.data() : a.data();
    const bool agreed = std::all_of(result.begin(), result.end(), [&](float2* r) { return r == want_at; });
    std::vector<float2> got(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) got[size_t(i)] = want_at[xcorr::bf_pad(i, pad)];
    const double rel = max_rel(got, dft(xd, Sign));
    int pads_written = 0;
    std::vector<bool> data(size_t(slot), false);
    for (int i = 0; i < n; ++i) data[size_t(xcorr::bf_pad(i, pad))] = true;
    for (int i = 0; i < slot; ++i)
        if (!data[size_t(i)] && (!std::isnan(a[size_t(i)].x) || !std::isnan(b[size_t(i)].x))) ++pads_written;
    int most = 1;
    std::string radices;
    for (int s = 0; s < h.plan.stages; ++s) {
        radices += (s ? "x" : "") + std::to_string(h.plan.st[s].r);
        most = std::max(most, h.plan.st[s].m);
    }
    const bool ok = rel < 3e-6 && pads_written == 0 && agreed;
    std::printf("%s  n = %5d  pingpong %s  radices %s  pad %d  threads %d for %d butterflies  max rel err %.2e  "
                "pads written %d  result where expected %s\n",
                ok ? "PASS" : "FAIL", n, Sign < 0 ? "forward" : "inverse", radices.c_str(), pad, T, most, rel,
                pads_written, agreed ? "yes" : "no");
    return ok;
}

// `live` random inputs of a transform of n points (zeros beyond), and the loader that the fused
// ends read them through, as load(i, r) (bf_load_input): a read at or beyond `live` is counted (and
// fails the case), and so is an r that is not element i's place in its stage-0 butterfly, i / m
// (m = n / R, the plan's stage 0's butterflies: pass 3 builds its twiddle from r).
struct LiveInputs {
    std::vector<float2> x;
    std::vector<cd> xd;  // the n points in double, for the reference DFT
    int m0;
    std::atomic<int> beyond{0}, wrong_r{0};
    LiveInputs(const xcorr::BlockFftPlan& p, int live, std::mt19937& rng)
        : x(static_cast<size_t>(live)), xd(static_cast<size_t>(p.n)), m0(p.stages > 0 ? p.st[0].m : 1) {
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (int i = 0; i < live; ++i) x[size_t(i)] = make_float2(u(rng), u(rng)), xd[size_t(i)] = cd(x[size_t(i)].x, x[size_t(i)].y);
    }
    float2 operator()(int i, int r) {
        if (r != i / m0) ++wrong_r;
        if (i < 0 || i >= int(x.size())) {
            ++beyond;
            return make_float2(std::numeric_limits<float>::quiet_NaN(), 0.f);
        }
        return x[size_t(i)];
    }
};

// block_fft_from: the forward DFT of `live` inputs read through load (the rest zeros, never read:
// a read at or beyond `live` fails the case), written to the poisoned buffer; after_first called
// once by every thread, after stage 0. (Its loads hoisted, block_fft_from's default; the loads
// inlined per radix are block_fft_correlate's, checked below.)
bool check_from(const xcorr::BlockFftHost& h0, int live, std::mt19937& rng) {
    xcorr::BlockFftHost h = h0;
    const int n = h.plan.n, pad = h.plan.pad;
    h.plan.tw = h.twiddles.data();
    const int T = h.plan.threads + 32;
    LiveInputs in(h.plan, live, rng);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float2> buf(size_t(xcorr::block_fft_slot(n)), make_float2(nan, nan));
    std::vector<xcorr::BlockFftStage> stages(xcorr::kBlockFftMaxStages);
    std::atomic<int> after{0};
    on_block(T, [&](int t) {
        xcorr::block_fft_stages(h.plan, stages.data());
        __syncthreads();
        xcorr::block_fft_from<-1>(buf.data(), h.plan, stages.data(), t, live, in, [&] { ++after; });
    });
    std::vector<float2> got(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) got[size_t(i)] = buf[size_t(xcorr::bf_pad(i, pad))];
    const double rel = max_rel(got, dft(in.xd, -1));
    const bool ok = rel < 2e-6 && in.beyond == 0 && in.wrong_r == 0 && after == T;
    std::printf("%s  n = %5d  from live %d  max rel err %.2e  reads beyond %d  wrong r %d  after_first %d of %d\n",
                ok ? "PASS" : "FAIL", n, live, rel, in.beyond.load(), in.wrong_r.load(), after.load(), T);
    return ok;
}

// block_fft_correlate: y = DFT^-1(L * conj(DFT(x))) of `live` inputs, each output handed to store
// exactly once; and forward_only, where mid sees DFT(x) and nothing is stored.
bool check_correlate(int n, int live, bool forward_only, std::mt19937& rng) {
    xcorr::BlockFftPair pr = xcorr::block_fft_host_pair(n);
    pr.fwd.plan.tw = pr.fwd.twiddles.data();
    pr.inv.plan.tw = pr.inv.twiddles.data();
    const int T = pr.fwd.plan.threads + 32;
    LiveInputs in(pr.fwd.plan, live, rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float2> l(static_cast<size_t>(n));
    for (auto& v : l) v = make_float2(u(rng), u(rng));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float2> buf(size_t(xcorr::block_fft_slot(n)), make_float2(nan, nan));
    std::vector<float2> spec(static_cast<size_t>(n), make_float2(nan, nan)), out(static_cast<size_t>(n), make_float2(nan, nan));
    std::vector<std::atomic<int>> mids(static_cast<size_t>(n)), stores(static_cast<size_t>(n));
    std::vector<xcorr::BlockFftStage> fst(xcorr::kBlockFftMaxStages), ist(xcorr::kBlockFftMaxStages);
    on_block(T, [&](int t) {
        xcorr::block_fft_stages(pr.fwd.plan, fst.data());
        xcorr::block_fft_stages(pr.inv.plan, ist.data());
        __syncthreads();
        xcorr::block_fft_correlate(
            buf.data(), pr.fwd.plan, fst.data(), pr.inv.plan, ist.data(), t, live, in,
            [&](int i, float2 v) {
                ++mids[size_t(i)];
                spec[size_t(i)] = v;
                return make_float2(l[size_t(i)].x * v.x + l[size_t(i)].y * v.y, l[size_t(i)].y * v.x - l[size_t(i)].x * v.y);
            },
            [&](int i, float2 v) {
                ++stores[size_t(i)];
                out[size_t(i)] = v;
            },
            forward_only);
    });
    const std::vector<cd> X = dft(in.xd, -1);
    std::vector<cd> prod(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) prod[size_t(i)] = cd(l[size_t(i)].x, l[size_t(i)].y) * std::conj(X[size_t(i)]);
    const double rel_spec = max_rel(spec, X);
    const double rel = forward_only ? 0.0 : max_rel(out, dft(prod, 1));
    bool once = true;
    for (int i = 0; i < n; ++i) once = once && mids[size_t(i)] == 1 && stores[size_t(i)] == (forward_only ? 0 : 1);
    const bool ok = rel_spec < 2e-6 && rel < 4e-6 && once && in.beyond == 0 && in.wrong_r == 0;
    std::string radices;
    for (int s = 0; s < pr.fwd.plan.stages; ++s) radices += (s ? "x" : "") + std::to_string(pr.fwd.plan.st[s].r);
    std::printf("%s  n = %5d  correlate%s live %d  radices %s  pads %d %d  spectrum err %.2e  result err %.2e  "
                "each once %s  reads beyond %d  wrong r %d\n",
                ok ? "PASS" : "FAIL", n, forward_only ? " forward_only" : "", live, radices.c_str(), pr.fwd.plan.pad,
                pr.inv.plan.pad, rel_spec, rel, once ? "yes" : "no", in.beyond.load(), in.wrong_r.load());
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "--schedules") {
        for (int n = 1; n <= xcorr::kBlockFftMaxN; ++n) {
            if (!xcorr::is_7_smooth(n)) continue;
            try {
                const xcorr::BlockFftHost h = xcorr::block_fft_host(n);
                std::vector<int> r;
                for (int s = 0; s < h.plan.stages; ++s) r.push_back(h.plan.st[s].r);
                int64_t ideal = 0;
                const int64_t w = xcorr::block_fft_wavefronts(n, r, h.plan.pad, &ideal);
                const int64_t first = xcorr::block_fft_wavefronts(n, xcorr::block_fft_radices(n), 4);
                std::printf("%d", n);
                for (int q : r) std::printf(" %d", q);
                std::printf(" threads %d pad %d wavefronts %lld first %lld ideal %lld\n", h.plan.threads, h.plan.pad,
                            (long long)w, (long long)first, (long long)ideal);
            } catch (const std::exception&) {
                std::printf("%d none\n", n);
            }
        }
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "--long-schedules") {
        // The long schedules (block_fft_pingpong's) of every 7-smooth length up to its longest:
        // radices in block_fft_radices's order and the most butterflies of a stage, or "none".
        for (int n = 1; n <= xcorr::kBlockFftMaxLongN; ++n) {
            if (!xcorr::is_7_smooth(n)) continue;
            try {
                const std::vector<int> r = xcorr::block_fft_radices(n, true);
                int most = 1;
                std::printf("%d", n);
                for (int q : r) std::printf(" %d", q), most = std::max(most, n / q);
                std::printf(" butterflies %d\n", most);
            } catch (const std::exception&) {
                std::printf("%d none\n", n);
            }
        }
        return 0;
    }
    const bool layouts = argc > 1 && std::string(argv[1]) == "--layouts";
    std::vector<int> sizes;
    for (int i = layouts ? 2 : 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
    if (sizes.empty()) sizes = {1, 2, 60, 210, 343, 2160, 4320};
    std::mt19937 rng(12345);
    int failed = 0, passed = 0;
    for (int n : sizes) {
        try {
            std::vector<xcorr::BlockFftHost> plans;
            if (layouts) {
                std::vector<int> r = xcorr::block_fft_radices(n);
                std::sort(r.begin(), r.end());
                do {
                    for (int pad : xcorr::kBlockFftPads) plans.push_back(xcorr::block_fft_host(n, r, pad));
                } while (std::next_permutation(r.begin(), r.end()));
            } else {
                plans.push_back(xcorr::block_fft_host(n));
            }
            for (const auto& h : plans) {
                (check<-1>(h, rng) ? passed : failed)++;
                (check<1>(h, rng) ? passed : failed)++;
            }
            if (!layouts) {
                // Stage 0 read through load: every input live, at most two a butterfly (dft_two),
                // one; and the correlation's pair with its pivot, and its forward half alone.
                const xcorr::BlockFftHost& h = plans.front();
                const int m0 = n / h.plan.st[0].r;
                for (int live : {n, std::min(n, 2 * m0), std::min(n, m0 + 1), 1}) (check_from(h, live, rng) ? passed : failed)++;
                for (int live : {n, std::min(n, 2 * m0 - 1)}) (check_correlate(n, live, false, rng) ? passed : failed)++;
                (check_correlate(n, std::min(n, 2 * m0), true, rng) ? passed : failed)++;
            }
        } catch (const std::exception& e) {  // no schedule for n
            std::printf("FAIL  n = %5d  %s\n", n, e.what());
            failed += 2;
        }
    }
    if (!layouts && argc == 1) {
        // block_fft_pingpong: a plan of block_fft's with a few threads (several butterflies a
        // thread), and long schedules at a block's most threads.
        std::vector<std::pair<xcorr::BlockFftHost, int>> pp;
        pp.emplace_back(xcorr::block_fft_host(4320), 96);
        for (int n : {6000, 8640}) pp.emplace_back(xcorr::block_fft_host(n, true), xcorr::kBlockFftMaxThreads);
        for (const auto& [h, T] : pp) {
            (check_pingpong<-1>(h, T, rng) ? passed : failed)++;
            (check_pingpong<1>(h, T, rng) ? passed : failed)++;
        }
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
