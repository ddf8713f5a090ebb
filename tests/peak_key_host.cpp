// The candidate key of lib/reduce/peak.cuh (peak_key, peak_of_key) on the CPU: the one 64-bit key
// whose unsigned order is the contract's order of peaks (CONVENTIONS.md, "Reductions": the larger
// value first, of equal values the smaller row-major index), so that an atomicMax of keys merges
// the partial answers of many blocks: fft-fused's k = 1 peaks and the tile maxima its zncc store
// takes. Over every pair of candidates drawn from the values that matter (both infinities, both
// zeros, subnormals, the largest finite values, near-ties one ulp apart) and indices from 0 to
// INT_MAX - 1: the keys order as better() (the reduce kernels' comparison) does, every key is above
// 0 ("no number yet"), and a key decodes to its candidate (-0 as +0, which compares equal).
// tests/test_peak_key.py runs it (no GPU needed). Prints one FAIL line per broken case (at most
// 20) and "N cases, N failed".
#include <bit>
#include <climits>
#include <cmath>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>  // host_defines: __device__ and __forceinline__ for a host compiler

// What peak.cuh's device functions call, for a host compiler (only peak_key, peak_of_key, none and
// better run here; the warp and block functions need to compile, not to run).
using std::fmax;
using std::fmin;
using std::isfinite;
using std::log;
struct HostIndex {
    unsigned x = 0, y = 0, z = 0;
};
HostIndex threadIdx, blockDim;
inline void __syncthreads() {}
inline float __shfl_xor_sync(unsigned, float v, int) { return v; }
inline int __shfl_xor_sync(unsigned, int v, int) { return v; }
inline unsigned long long __shfl_xor_sync(unsigned, unsigned long long v, int) { return v; }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a < b ? b : a; }

#include "lib/reduce/peak.cuh"

using xcorr::reduce::Cand;

namespace {
int failed = 0;
long cases = 0;

void expect(bool ok, const char* what, Cand a, Cand b) {
    ++cases;
    if (!ok && ++failed <= 20)
        std::printf("FAIL  %s: (%.9g, %d) and (%.9g, %d)\n", what, double(a.v), a.i, double(b.v), b.i);
}
}  // namespace

int main() {
    using xcorr::reduce::better;
    using xcorr::reduce::none;
    using xcorr::reduce::peak_key;
    using xcorr::reduce::peak_of_key;
    const float inf = INFINITY, big = 3.4028235e38f, sub = 1.4e-45f;
    std::vector<float> values = {-inf, -big, -1.0f, -sub, -0.0f, 0.0f, sub, 1.0f, big, inf,
                                 std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f), -2.0f, 0.5f};
    const std::vector<int> indices = {0, 1, 2, 993, 994, 1 << 20, INT_MAX - 1};
    std::vector<Cand> cands;
    for (float v : values)
        for (int i : indices) cands.push_back(Cand{v, i});
    for (const Cand& a : cands) {
        const unsigned long long ka = peak_key(a.v, a.i);
        expect(ka > 0, "a key at or below 0 (no number yet)", a, a);
        const Cand d = peak_of_key(ka);
        expect(d.v == a.v && d.i == a.i && !(d.v == 0 && std::signbit(d.v)), "decoded to another candidate", a, d);
        for (const Cand& b : cands) {
            const unsigned long long kb = peak_key(b.v, b.i);
            // better(a, b) returns b where b comes first in the contract's order; equal candidates
            // (or zeros of both signs at one index) have equal keys
            const bool b_first = better(a, b).i == b.i && better(a, b).v == b.v && !(a.v == b.v && a.i == b.i);
            expect((kb > ka) == b_first, "the keys' order is not the contract's", a, b);
            expect((ka == kb) == (a.v == b.v && a.i == b.i), "keys equal for unequal candidates or unequal for equal",
                   a, b);
        }
    }
    const Cand n = peak_of_key(0);
    const Cand w = none();
    expect(n.v == w.v && n.i == w.i, "key 0 did not decode to none()", n, w);
    std::printf("%ld cases, %d failed\n", cases, failed);
    return failed ? 1 : 0;
}
