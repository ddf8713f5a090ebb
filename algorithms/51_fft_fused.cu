// fft-fused: the FFT-based cross-correlation with hand-written DFTs, fused so that a right matrix is
// read once (unpadded) and its output written once, in the final layout. Up to full outputs of
// 191 x 191 (transform sizes 32, 48, 64, 96, 128, 192) one block per matrix does everything in shared
// memory; larger transforms (256, 384, 512, 768, 1024: full outputs up to 1023 x 1023; a window may
// need a smaller transform, see "Output windows") take the staged path at the end of this file, the same
// phases as kernels of their own, and so do problems of at most 32 outputs at N = 192 (at 256:
// one block of 192 per matrix leaves the GPU idle; FftFused's constructor). A reduced plan's k = 1
// peaks on the staged path and for window pairs of 64-point transforms (paired_kernel; below 64 the
// map and the reduce kernels are faster) come from phase 3 itself, no map written ("Fused k = 1
// peaks" and peak_output, below),
// and so do template matching's zncc coefficients (norm_rows_kernel: the Normalizer's template
// epilogue, a pass over the whole output, is then not run).
// Beyond the paper: its
// fft (and ours, 50_fft.cu) is five passes over a global workspace (pad, cuFFT's two R2C kernels,
// the product, cuFFT's two C2R kernels), each bound by DRAM bandwidth; for the real-data shape
// that is 7.6 GB.
//
// Algorithm (the same transform as fft: both matrices at the top left of an N x N zero-padded
// slot, C = F^-1(F(L) conj(F(R))) / N^2, shift (dy, dx) at circular position (dy mod N, dx mod N));
// N is the smallest instantiated size that holds the window's shifts without aliasing (output
// windows, below; for the full window: >= both output dimensions). A block holds
// one half spectrum S of N rows x (N/2 + 1) columns in shared memory (149 KB at N = 192) and works
// in three phases separated by barriers:
//   1. rows: the real rows of the matrix are packed in pairs as one complex row (row a + i row b,
//      read straight from the unpadded stack; the padding is implicit), one complex DFT of length N
//      per pair, and the two half spectra separated (A[k] = (Z[k] + conj Z[-k]) / 2,
//      B[k] = (Z[k] - conj Z[-k]) / 2i) into rows a and b of S;
//   2. columns: the forward DFT down each of the N/2 + 1 columns (the rows below the matrix are
//      zero and never written), the product with the left spectrum's column (read from global,
//      L2-resident), and the inverse DFT, all in registers but one exchange per DFT;
//   3. rows: each pair of needed output rows (the quadrant swap, and the window's cut, are just the
//      choice of rows) packed as H_a + i H_b, extended by Hermitian symmetry to length N, one
//      inverse complex DFT, the real and imaginary parts written as the two output rows, rotated
//      (full window: by wR - 1 columns) and cut to the window's columns.
// The left spectra are computed first by spectrum_kernel (phases 1 and 2's forward part), stored
// column-major ([column][row]: phase 2 reads a column as consecutive addresses). n-to-m reuses
// every spectrum: spectrum_kernel transforms all N + M matrices and pair_kernel runs phases 2
// (product and inverse only) and 3 per output pair. n-to-mn with one right a left (PIV's window pairs)
// reuses none: up to N = 64 paired_kernel transforms both matrices of a pair in one block, and no
// spectrum goes through global memory. The second kernel is a programmatic
// dependent launch: it starts while spectrum_kernel runs and waits for the spectra only before
// phase 2, so its launch and the right's row DFTs overlap the left's transform (gain: notes/51_fft_fused.md).
// fused_kernel's blocks are persistent; while one transforms right k, a thread of it prefetches the
// block's next right into the L2 (prefetch_l2: one bulk prefetch), which phase 1 then reads
// without waiting for DRAM (N = 96 excepted: Geometry::prefetch).
//
// Output windows (CONVENTIONS.md; any rectangle of shifts dy0..dy1 x dx0..dx1). Its shifts with
// overlap are the rectangle clamped to the full range, [s0y, s1y] x [s0x, s1x]; a circular
// correlation of period P holds shift s unaliased iff the shifts s + jP (j != 0) lie outside the
// full range, i.e. P >= max(hL - s0, s1 + hR) over [s0, s1] (the full window: hL + hR - 1). N is
// the smallest instantiated size >= that bound in both dimensions and >= every matrix dimension
// (the matrices go into the slot unfolded; that binds only for narrow windows off the centre):
// the valid window of 64 x 64 * 32 x 32 (PIV) takes N = 64 where its full output takes 96. Only
// phase 3 knows the window (OutMap): it writes the clamped block, each circular row and column at
// most once (the block is at most N x N), and skips row pairs that hold no row of it. Shifts
// without overlap (a window reaching beyond the full range) are exact zeros written by
// zero_outside_kernel before the transforms; a window with no overlap at all runs only that kernel.
// The spectrum, row and column kernels do not depend on the window (same machine code as before
// windows); the output kernels take the map as a separate parameter.
//
// Which instantiation runs: the output kernels (fused_kernel, pair_kernel, out_rows_kernel) have a
// compile-time kWindow. The full output (Problem::full(), however it was asked for) takes
// kWindow = false: the code from before windows (same PTX bodies; registers: Resources), the
// oh x ow output and its rotation (hR - 1, wR - 1) computed from the sizes, the map passed but not
// read. Every other window takes kWindow = true, phase 3 through OutMap (the full map would give
// the same elements: oy = ox = 0, cy x cx = oh x ow, (sy, sx) = (hR - 1, wR - 1)). Both write
// the same values (same floating-point instruction sequence); only addresses and skip tests
// differ. The host picks one per instance (FftFused::for_window); the other is never launched.
//
// Mapping of work to threads (the DFT itself: common/team_dft.cuh, tested on the CPU by
// tests/team_dft_host.cpp). Every length-N DFT belongs to one team of T = N / E threads inside
// a warp (E = 8, 12, 8, 24, 16, 24 elements per thread for N = 32, 48, 64, 96, 128, 192, so T = 4
// or 8);
// teams take rows or columns round-robin and synchronise with __syncwarp only. Thread t of a team
// holds elements t + T e (e < E) in registers, on entry and on exit ("natural layout"). The DFT is
// two Stockham stages: a radix-E DFT in each thread's registers (a compile-time composite of
// radices 4, 3, 2 with constant twiddles), one exchange through the team's row or column of S
// (in place: everything is read before anything is written), and E/T radix-T butterflies per
// thread with twiddles W_N^{jm} from a table in shared memory. The second stage leaves each
// thread exactly the elements it needs next, so the forward DFT, the product and the inverse DFT
// of a column follow one another in registers, and phase 3's results go straight to global memory.
// The staged path's N = 512 and 1024 take three stages (radix 16, 16, then 2 or 4; E = 16, T = 32
// or 64: team_dft), whose last stage leaves the thread the same natural-layout elements; a team
// of 64 (two warps) synchronises through a named barrier of its own (team_sync). N = 384 and 768
// take three too, in the other order (radix 4, 4 or 8, then E = 24; T = 16 or 32: mixed_dft).
//
// Shared-memory banks. Stage 1 writes a column of the T x E exchange and the reads take row
// segments, a transpose. Where a team has 8 or more threads (N = 64, 128, 192 and the staged
// sizes) the exchange is padded, element p at p + p / E (slots of N + T: team_dft.cuh), so every
// position is a per-thread base plus a compile-time offset; in the one-block path the row pitch is
// then 2 mod 4 and the two teams of a half-warp take row pairs p and p + 2 in phases 1 and 3
// (Geometry), and a bank model of every access pattern (64-bit accesses, per half-warp) gives no
// conflicts; the CPU test of the team DFT checks every padded size's exchanges (one team a
// half-warp, or two of 8 at padded_pair_pitch). N = 32 and 96 (4 teams a half-warp) keep the
// rotated exchange (row r shifted by r), N = 48 pads it; all three keep pitch Qh + 1, and their
// four teams of a half-warp take columns c, c + 1, c + 8 and c + 9 in phase 2 (column_team), where
// adjacent columns met 2-way conflicts on every access.
//
// Why this beats five cuFFT passes: per 96 x 96 right matrix of the real-data shape it moves
// 36 KB in and 146 KB out of DRAM plus 149 KB of left spectrum from L2 (the fft variant moves
// about 1.7 MB); the transforms run out of shared memory at one block per SM. The half spectrum
// must fit in shared memory (N <= 192, 161 KB with the exchange's pad and the twiddles); beyond, the staged path, up to
// N = 1024; larger problems are refused with a pointer to `fft`. Sizes are compile-time (the
// register arrays and the unrolled DFTs); adding one means one TeamPlan line and one `Sizes`
// value. N = 384 and 768 take a mixed-radix plan (team_dft.cuh) and only problems of 16 and 4
// outputs or more (mixed_min_outputs): fewer are as fast or faster at the next power of two.
//
// Resource budget: no spills and no stack frame in any kernel (the strict build enforces it).
// Threads per block 256 (N = 32, 64, 96), 128 (N = 48), 512 (N = 128), 384 (N = 192):
// Geometry::threads, with the register limits that follow from them; pair_kernel<128> is bounded
// to two blocks an SM (64 registers), paired_kernel to four (64) or at N = 48 five (96). Shared
// memory (dynamic): (rows pitch + N) x 8 bytes (Geometry), 161 KB at N = 192 (one block per SM),
// 76 KB at 128.
// Measurements and the history of the design (and the per-kernel register counts): notes/51_fft_fused.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/pdl.cuh"
#include "common/team_dft.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/dispatch.hpp"
#include "common/launch.cuh"
#include "lib/reduce/peak.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::fft_fused {
namespace {

// The one-block path's block (N <= 192).
template <int N>
struct Geometry {
    static constexpr int E = TeamShape<N>::E;
    static constexpr int T = TeamShape<N>::T;
    static constexpr int Qh = N / 2 + 1;  // columns of the half spectrum
    // Row pitch Qh + 1 (even) with the rotated exchange (N = 32, 96; at 64, 128 and 192, before
    // the padded exchange, a bank model found it free of conflicts, where pitch Qh unrotated cost
    // 2-2.5x the wavefronts). Rows 2p and 2p + 1 hold a team's slot (2 pitch >= N, or N + T
    // padded).
    // With the padded exchange (TeamPlan; T = 8: N = 64, 128, 192) a row pair's slot needs N + T
    // elements and a column's N + T rows, and the pitch is 2 mod 4: the two teams of a half-warp
    // take row pairs 4 pitch = 8 words apart (mod 16), and down a column pitch t mod 16 is even and
    // distinct for t < 8 (the half-warp's other team, the next column, takes the odd words). The
    // smallest such pitch >= Qh + 1 and >= (N + T) / 2 (padded_pair_pitch): 38, 70, 102.
    // N = 48 pads the exchange with teams of 4 (four a half-warp, on row pairs p .. p + 3) at pitch
    // Qh + 1 = 26: 2 pitch = 52 = N + T holds a slot, and the row pairs' bases 4 p mod 16 words put
    // the four teams' accesses on distinct banks (the CPU test's model); down a column too, with the
    // half-warp's teams on columns c, c + 1, c + 8, c + 9 (column_team).
    static constexpr bool padded = TeamShape<N>::padded;
    static constexpr int pitch = !padded || T == 4 ? Qh + 1 : padded_pair_pitch<N>();
    static constexpr int rows = TeamShape<N>::slot_size;  // of S: N, then the columns' exchange pad
    static_assert(!padded || (T == 8 && 2 * pitch >= N + T && pitch >= Qh + 1 && pitch % 4 == 2) ||
                      (T == 4 && 2 * pitch >= N + T && (2 * pitch) % 16 == 4),
                  "the padded one-block layout's conditions");
    // 192: 12 warps (up to 168 registers per thread for the 24-element DFTs; at 16 warps they
    // spill); 128: 16 warps; 48: 4 warps (32 teams of 4: a 32-row matrix's 16 row pairs and its 25
    // columns a round each); the other sizes 8 warps (several blocks per SM).
    static constexpr int threads = N == 192 ? 384 : N >= 128 ? 512 : N == 48 ? 128 : 256;
    static constexpr int teams = threads / T;
    // fused_kernel prefetches its next right into the L2, but not at N = 96: with the prefetch the
    // compiler gives that kernel 201-209 registers (one block an SM instead of two), and bounded to
    // 128 it spills.
    static constexpr bool prefetch = N != 96;
    // pair_kernel's blocks an SM: two at N = 128 (64 registers, no spills; shared memory holds two).
    static constexpr int pair_blocks = N == 128 ? 2 : 1;
    // paired_kernel's blocks an SM: four of 256 threads (64 registers); at N = 48, whose two
    // 12-element columns a thread spill 136-168 bytes at 64 registers and 8-24 at 80, five of 128
    // (96 registers).
    static constexpr int paired_blocks = N == 48 ? 5 : 4;
    // paired_kernel's column jobs a matrix: the Qh columns, or N/2 with the edge pair packed
    // (load_column_job) where that saves a round of the block's teams (N = 64: 33 columns on 32
    // teams). fused_kernel and pair_kernel keep a job a column: the split's registers cost them
    // occupancy, and 5-10% (notes/51_fft_fused.md).
    static constexpr bool edge_pair = ceil_div(Qh, teams) > ceil_div(N / 2, teams);
    static constexpr int column_jobs = edge_pair ? N / 2 : Qh;
    static constexpr int slot = rows * pitch;  // S
    static constexpr size_t smem_bytes = (size_t(slot) + TeamShape<N>::twiddles) * sizeof(float2);  // S + twiddles
    static constexpr size_t paired_smem_bytes = smem_bytes + size_t(slot) * sizeof(float2);  // paired_kernel: SL too
};

// ---------------------------------------------------------------------------------------------
// The three phases (every thread of the block calls them; barriers are the caller's)
// ---------------------------------------------------------------------------------------------

struct Team {
    int t;          // thread within the team
    int id;         // team within the block
    unsigned mask;  // the team's lanes
};
template <int N>
__device__ __forceinline__ Team this_team() {
    constexpr int T = TeamShape<N>::T;
    return Team{int(threadIdx.x % T), int(threadIdx.x / T), team_mask<T>()};
}
// The row pair a team takes first in phases 1 and 3. With T = 8 a half-warp holds two teams, and
// consecutive pairs start 2 pitch = 8 banks apart: the two would share banks. Swapping bits 0
// and 1 of the team id gives the two teams of a half-warp pairs p and p + 2 (16 banks apart).
template <int N>
__device__ __forceinline__ int row_team(const Team& tm) {
    if constexpr (TeamShape<N>::T == 8) return (tm.id & ~3) | ((tm.id & 1) << 1) | ((tm.id >> 1) & 1);
    else return tm.id;
}
// The column a team takes first in phase 2 (then + teams). With T = 4 a half-warp holds four
// teams, and on adjacent columns c .. c + 3 every column access (the loads, the exchange, the
// stores: positions n pitch + c) took two wavefronts: at pitch = 2 mod 8 (18, 26, 50 for N = 32,
// 48, 96) the four lanes of a team reach words {0, 2, 4, 6} or {0, 10, 4, 14} + a base (mod 16),
// which four adjacent columns overlap; on columns c, c + 1, c + 8, c + 9 (quad_team_column) they
// fill the 16 words. Teams of 8 keep c = id (two a half-warp on adjacent columns are already
// conflict-free at padded_pair_pitch).
template <int N>
__device__ __forceinline__ int column_team(const Team& tm) {
    if constexpr (TeamShape<N>::T == 4) {
        static_assert(Geometry<N>::teams % 16 == 0, "the permutation maps each 16 teams onto themselves");
        return quad_team_column(tm.id);
    } else {
        return tm.id;
    }
}

// The team's values back into its exchange slot in natural layout (thread t's v[e], element
// t + T e, at slot[(t + T e) pitch]). The exchange left the slot holding other threads' elements
// (swizzled), and a team's lanes need not leave the DFT together: without the barrier a lane's store
// can overwrite a slot that a slower lane of its team has yet to read (racecheck: a WAR hazard,
// seen at N = 96).
template <int N>
__device__ __forceinline__ void store_natural(const float2 (&v)[TeamPlan<N>::E], float2* slot, int pitch,
                                              const Team& tm) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T;
    team_sync<T>(tm.mask);
#pragma unroll
    for (int e = 0; e < E; ++e) slot[(tm.t + T * e) * pitch] = v[e];
}

// One packed row pair, forward: rows a (ra) and b (ra + w; zero unless has_b) of a w-wide matrix,
// Z = F(a + i b) by one DFT through `slot`, separated into the half spectra F(a) -> da and
// F(b) -> db (k <= N/2). da and db may overlap the slot (the reads finish before the writes).
template <int N>
__device__ __forceinline__ void forward_row_pair(const float* __restrict__ ra, int w, bool has_b, float2* slot,
                                                 float2* da, float2* db, const Team& tm, const float2* tw) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T, Qh = N / 2 + 1;
    float2 v[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int n = tm.t + T * e;
        v[e] = make_float2(n < w ? __ldg(ra + n) : 0.0f, n < w && has_b ? __ldg(ra + w + n) : 0.0f);
    }
    team_dft<N, -1>(v, StridedSlot{slot, 1}, tm.mask, tw);
    // F(a)[k] = (Z[k] + conj Z[N - k]) / 2, F(b)[k] = (Z[k] - conj Z[N - k]) / 2i: Z[N - k] is
    // another thread's, so Z goes through the slot.
    store_natural<N>(v, slot, 1, tm);
    team_sync<T>(tm.mask);
    constexpr int KE = (Qh + T - 1) / T;
    float2 fa[KE], fb[KE];
#pragma unroll
    for (int e = 0; e < KE; ++e) {
        const int k = tm.t + T * e;
        if (k < Qh) {
            const float2 zm = slot[k == 0 ? 0 : N - k];
            fa[e] = even_part(v[e], zm);
            fb[e] = odd_part(v[e], zm);
        }
    }
    team_sync<T>(tm.mask);
#pragma unroll
    for (int e = 0; e < KE; ++e) {
        const int k = tm.t + T * e;
        if (k < Qh) {
            da[k] = fa[e];
            db[k] = fb[e];
        }
    }
}

// Phase 1: rows [0, h) of an h x w matrix M (row-major, unpadded) -> half-spectrum rows of its S;
// rows from round_up(h, 2) on are not written: phase 2 reads them as zeros. kTwo (paired_kernel):
// two matrices at once, M0's row pairs, then M1's, as one list dealt to the teams, so that two
// 32-row matrices' 32 row pairs are one round of 32 teams, where one matrix at a time would be two
// rounds with half the teams idle. Without kTwo, M1 is ignored: one matrix's loop (its bound as
// 2 j < h, which compiles to the same code as the one-matrix function this replaced).
template <int N, bool kTwo>
__device__ __forceinline__ void forward_rows_of(float2* S0, const float* __restrict__ M0, int h0, int w0,
                                                float2* S1, const float* __restrict__ M1, int h1, int w1,
                                                const float2* tw) {
    using G = Geometry<N>;
    const Team tm = this_team<N>();
    const int pairs0 = (h0 + 1) / 2, pairs = pairs0 + (h1 + 1) / 2;
    for (int j = row_team<N>(tm); kTwo ? j < pairs : 2 * j < h0; j += G::teams) {
        const bool first = !kTwo || j < pairs0;
        const int p = first ? j : j - pairs0, h = first ? h0 : h1, w = first ? w0 : w1;
        float2* row = (first ? S0 : S1) + 2 * p * G::pitch;  // rows 2p and 2p + 1: 2 pitch >= a slot
        forward_row_pair<N>((first ? M0 : M1) + int64_t(2 * p) * w, w, 2 * p + 1 < h, row, row, row + G::pitch, tm, tw);
    }
}
template <int N>
__device__ __forceinline__ void forward_rows(float2* S, const float* __restrict__ M, int h, int w, const float2* tw) {
    forward_rows_of<N, false>(S, M, h, w, nullptr, nullptr, 0, 0, tw);
}
template <int N>
__device__ __forceinline__ void forward_rows_of_two(float2* S0, const float* __restrict__ M0, int h0, int w0,
                                                    float2* S1, const float* __restrict__ M1, int h1, int w1,
                                                    const float2* tw) {
    forward_rows_of<N, true>(S0, M0, h0, w0, S1, M1, h1, w1, tw);
}

// Loads a column in shared memory (element n at col[n * pitch]; rows >= h_data read as zero) into
// natural layout and runs the forward DFT, exchanging through the column itself.
template <int N, class Post = Identity>
__device__ __forceinline__ void forward_column(float2 (&v)[TeamPlan<N>::E], float2* col, int pitch, int h_data,
                                               const Team& tm, const float2* tw, Post post = Post{}) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int n = tm.t + T * e;
        v[e] = n < h_data ? col[n * pitch] : make_float2(0.0f, 0.0f);
    }
    team_dft<N, -1>(v, StridedSlot{col, pitch}, tm.mask, tw, post);
}

// Inverse DFT of a column held in v, written back to the column.
template <int N>
__device__ __forceinline__ void inverse_column(float2 (&v)[TeamPlan<N>::E], float2* col, int pitch, const Team& tm,
                                               const float2* tw) {
    team_dft<N, +1>(v, StridedSlot{col, pitch}, tm.mask, tw);
    store_natural<N>(v, col, pitch, tm);
}

// The edge pair: columns 0 and N/2 of a half spectrum hold real numbers (each row DFT's DC and
// Nyquist terms), so one complex DFT of c0 + i cN transforms both, and the Qh = N/2 + 1 columns are
// N/2 column DFTs a matrix. paired_kernel's 32 teams at N = 64 then take them in one round where
// Qh took two, the second one team's while the block waited at the barrier (notes/51_fft_fused.md).
// Where packing saves no round (Geometry::edge_pair), job c is column c.

// Job c's column (rows >= h_data as zeros) into natural layout; `edge` (c = 0): the edge pair packed.
template <int N>
__device__ __forceinline__ void load_column_job(float2 (&v)[TeamPlan<N>::E], const float2* S, int c, bool edge,
                                                int pitch, int h_data, const Team& tm) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int n = tm.t + T * e;
        float2 x = make_float2(0.0f, 0.0f);
        if (n < h_data) {
            x = S[n * pitch + c];
            if (edge) x.y = S[n * pitch + N / 2].x;
        }
        v[e] = x;
    }
}

// The spectra of the edge pair from its transform z (thread t's elements t + T e): f(e, k, X_k,
// Y_k) for each, X of column 0 and Y of column N/2, the mirror Z[N - k] read from `col` (stride
// pitch), where z is stored first. f may overwrite z[e] (it is read before f is called).
template <int N, class F>
__device__ __forceinline__ void edge_split(float2 (&z)[TeamPlan<N>::E], float2* col, int pitch, const Team& tm,
                                           F&& f) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T;
    store_natural<N>(z, col, pitch, tm);
    team_sync<T>(tm.mask);
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int k = tm.t + T * e;
        const float2 zm = col[(k == 0 ? 0 : N - k) * pitch];
        f(e, k, even_part(z[e], zm), odd_part(z[e], zm));
    }
}

// The edge pair's product: z, the right's packed transform, split (edge_split, through `col`),
// each part times the left's (left_of(e, k, L0_k, LN_k)) as mul_conj(left, right) scaled, and
// packed again, P0 + i PN, for one inverse DFT: both products are column spectra of real
// sequences. (The split as a function of its own: inlined here, paired_kernel<64>'s map instance
// spilled 4 bytes at its 64 registers.)
template <int N, class LeftOf>
__device__ __forceinline__ void edge_product(float2 (&z)[TeamPlan<N>::E], float2* col, int pitch, float scale,
                                             const Team& tm, LeftOf&& left_of) {
    edge_split<N>(z, col, pitch, tm, [&](int e, int k, float2 x, float2 y) {
        float2 l0, ln;
        left_of(e, k, l0, ln);
        const float2 p0 = mul_conj(l0, x, scale), pn = mul_conj(ln, y, scale);
        z[e] = make_float2(p0.x - pn.y, p0.y + pn.x);
    });
}

// Job c's inverse: the DFT of v, written back to column c, or for the edge pair unpacked to
// columns 0 (real part) and N/2 (imaginary part), as the real numbers they are.
template <int N>
__device__ __forceinline__ void inverse_column_job(float2 (&v)[TeamPlan<N>::E], float2* S, int c, bool edge,
                                                   int pitch, const Team& tm, const float2* tw) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T;
    team_dft<N, +1>(v, StridedSlot{S + c, pitch}, tm.mask, tw);
    if (!edge) {
        store_natural<N>(v, S + c, pitch, tm);
        return;
    }
    team_sync<T>(tm.mask);  // the team has read the column in the DFT
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int n = tm.t + T * e;
        S[n * pitch] = make_float2(v[e].x, 0.0f);
        S[n * pitch + N / 2] = make_float2(v[e].y, 0.0f);
    }
}

// One row pair's inverse DFT (inverse_row_pair below, without the stores): rows A and B of the
// column-inverted product H (N/2 + 1 columns each), Z = H_a + i H_b extended to length N by
// Hermitian symmetry, transformed through `slot` (which may be A itself); thread t's elements
// t + T e end in v[e], real part row a's circular column t + T e, imaginary part row b's. The fused
// k = 1 peak (peak_rows_kernel, peak_near_kernel) reads them there instead of storing them.
template <int N>
__device__ __forceinline__ void row_pair_values(const float2* A, const float2* B, float2* slot, const Team& tm,
                                                const float2* tw, float2 (&v)[TeamPlan<N>::E]) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T, H = N / 2;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        // H[N - k] = conj(H[k]); H[0] and H[N/2] are real.
        const int k = tm.t + T * e;
        const int kk = k <= H ? k : N - k;
        float2 a = A[kk], b = B[kk];
        if (kk == 0 || kk == H) a.y = b.y = 0.0f;
        if (k > H) {
            a.y = -a.y;
            b.y = -b.y;
        }
        v[e] = make_float2(a.x - b.y, a.y + b.x);
    }
    team_dft<N, +1>(v, StridedSlot{slot, 1}, tm.mask, tw);
}

// One row pair, inverse: rows A and B of the column-inverted product H (N/2 + 1 columns each),
// Z = H_a + i H_b extended to length N by Hermitian symmetry, one inverse DFT through `slot`
// (which may be A itself), real and imaginary parts to rows ya and yb of the computed block
// (each if < cy; `out` is its first element, rows ow apart), rotated by sx columns (those < cx).
// kOpaqueRows (the staged path): the two output rows' starts as opaque pointers, so that each
// store's address is one wide multiply-add from one, where the compiler otherwise rebuilds it from
// the kernel parameter, the output's offset and the column in 64-bit halves (about 7 instructions
// a store: SASS). The one-block path has no two registers to spare (pair_kernel<128>: 64).
template <int N, bool kOpaqueRows = false>
__device__ __forceinline__ void inverse_row_pair(const float2* A, const float2* B, float2* slot, int ya, int yb,
                                                 float* __restrict__ out, int cy, int cx, int ow, int sx,
                                                 const Team& tm, const float2* tw) {
    constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T;
    float2 v[E];
    row_pair_values<N>(A, B, slot, tm, tw, v);
    float* oa = out + int64_t(ya) * ow;
    float* ob = out + int64_t(yb) * ow;
    if constexpr (kOpaqueRows) {
        oa = opaque_ptr(oa);
        ob = opaque_ptr(ob);
        // Aligned stores: the two rows go through the slot (row a's floats, then row b's, in
        // output order x), and the team writes each row in segments of A = min(T, 32) floats on
        // the output's own A-float grid: a warp's store covers whole 32-byte sectors (one 128-byte
        // line at T >= 32), where element n's store at x = (n + sx) mod N straddled two lines.
        constexpr int A = T < kWarp ? T : kWarp;
        float* sa = reinterpret_cast<float*>(slot);
        float* sb = sa + N;  // the slot holds SN >= N + T complex numbers
        team_sync<T>(tm.mask);  // the team has read the slot in the DFT
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int n = tm.t + T * e;
            const int x = n + sx >= N ? n + sx - N : n + sx;
            sa[x] = v[e].x;
            sb[x] = v[e].y;
        }
        team_sync<T>(tm.mask);
        const int ma = int(reinterpret_cast<uintptr_t>(oa) / sizeof(float)) & (A - 1);
        const int mb = int(reinterpret_cast<uintptr_t>(ob) / sizeof(float)) & (A - 1);
#pragma unroll
        for (int k = 0; k <= E; ++k) {  // q = x + m over [m, m + cx) in T k + t: E + 1 steps
            const int xa = tm.t + T * k - ma, xb = tm.t + T * k - mb;
            if (ya < cy && unsigned(xa) < unsigned(cx)) __stwb(oa + xa, sa[xa]);
            if (yb < cy && unsigned(xb) < unsigned(cx)) __stwb(ob + xb, sb[xb]);
        }
    } else {  // (an else, not code after a return: nvcc warns of an unreachable loop otherwise)
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int n = tm.t + T * e;
            const unsigned x = unsigned(n + sx >= N ? n + sx - N : n + sx);
            if (x < unsigned(cx)) {
                if (ya < cy) oa[x] = v[e].x;
                if (yb < cy) ob[x] = v[e].y;
            }
        }
    }
}

// Rows of the computed block held by row pair p: block (y, x) is at circular position
// ((y - sy) mod N, (x - sx) mod N) (OutMap), so rows 2p and 2p + 1 of H hold block rows
// (2p + sy) mod N and (2p + 1 + sy) mod N; false when neither is below cy (the pair is skipped:
// the quadrant swap, and a window's cut, are this choice of rows).
template <int N>
__device__ __forceinline__ bool output_rows(int p, int sy, int cy, int& ya, int& yb) {
    ya = 2 * p + sy >= N ? 2 * p + sy - N : 2 * p + sy;
    yb = ya + 1 == N ? 0 : ya + 1;
    return ya < cy || yb < cy;
}

// Phase 3: the computed block (cy x cx, first element at `out`, rows ow apart) from S, which holds
// the column-inverted product H.
template <int N>
__device__ __forceinline__ void inverse_rows(float2* S, float* __restrict__ out, int cy, int cx, int ow, int sy,
                                             int sx, const float2* tw) {
    using G = Geometry<N>;
    const Team tm = this_team<N>();
    for (int p = row_team<N>(tm); p < N / 2; p += G::teams) {
        int ya, yb;
        if (!output_rows<N>(p, sy, cy, ya, yb)) continue;
        float2* row = S + 2 * p * G::pitch;  // rows 2p and 2p + 1: 2 pitch >= a slot (N, or N + T padded)
        inverse_row_pair<N>(row, row + G::pitch, row, ya, yb, out, cy, cx, ow, sx, tm, tw);
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

// Where the window's output comes from (header, "Output windows"; built by FftFused's constructor).
// The window is an oh x ow matrix of shifts; the shifts with overlap, [s0y, s1y] x [s0x, s1x]
// (the window clamped to the full range), are its cy x cx block at row oy, column ox, computed
// from the circular correlation of period N; every other element is 0 (zero_outside_kernel).
// Block (y, x) is shift (s0y + y, s0x + x), at circular position ((y - sy) mod N, (x - sx) mod N)
// with sy = -s0y mod N, sx = -s0x mod N. cy, cx <= N: each circular row and column lands once.
// The full window: oy = ox = 0, cy = oh = hL + hR - 1, cx = ow, sy = hR - 1, sx = wR - 1.
struct OutMap {
    int oh, ow;  // the window (ow: the row pitch of an output matrix)
    int oy, ox;  // the computed block's first row and column in it
    int cy, cx;  // the computed block's size (0 x 0 when no shift of the window has overlap)
    int sy, sx;  // its rotation in the circular result
    // Whether the computed block is the whole window (every shift of it has overlap): no zeros
    // outside it, and block element (y, x) is window element (y, x).
    __host__ __device__ bool whole() const { return oy == 0 && ox == 0 && cy == oh && cx == ow; }
    // The computed block's first element in output matrix k.
    __device__ __forceinline__ float* block(float* out, int64_t k) const {
        return out + k * int64_t(oh) * ow + (int64_t(oy) * ow + ox);
    }
};

struct Args {
    const float* left;
    const float* right;
    float* out;
    float2* spec;  // spectrum slot s at spec + s * N * Qh, column-major: [column][row]
    int hL, wL, hR, wR;
    int64_t count;  // matrices (spectrum_kernel) or outputs (fused_kernel, pair_kernel)
    PairMap pairs;
    float scale;    // 1 / N^2
    unsigned long long* keys = nullptr;  // paired_kernel's kPeak: output k's peak key,
    float* near = nullptr;               // and its 3 x 3 neighbourhood at near + 9 k (peak_output)
};

// A block's dynamic shared memory: the half spectrum S (N rows of pitch; paired_kernel: the
// left's, SL, after it), then the twiddle table, filled here (the callers' first __syncthreads()
// publishes it).
struct BlockSmem {
    float2* S;
    float2* tw;
};
template <int N, int Spectra = 1>
__device__ __forceinline__ BlockSmem block_smem() {
    extern __shared__ float2 smem[];
    float2* tw = smem + Spectra * Geometry<N>::slot;
    static_assert(Geometry<N>::slot % 2 == 0, "the twiddle table 16-byte aligned");
    fill_twiddles<N>(tw);
    return BlockSmem{smem, tw};
}

// Phase 3 for output k. kWindow: the window's block through the map. Without (the full output,
// the pre-window code): the oh x ow output rotated by (hR - 1, wR - 1), from the sizes alone; the
// map (then the full map, OutMap's last line) is not read.
template <int N, bool kWindow>
__device__ __forceinline__ void write_output(float2* S, const Args& a, const OutMap& m, int64_t k, const float2* tw) {
    if constexpr (kWindow) {
        inverse_rows<N>(S, m.block(a.out, k), m.cy, m.cx, m.ow, m.sy, m.sx, tw);
    } else {
        const int oh = a.hL + a.hR - 1, ow = a.wL + a.wR - 1;
        inverse_rows<N>(S, a.out + k * int64_t(oh) * ow, oh, ow, ow, a.hR - 1, a.wR - 1, tw);
    }
}

// spectrum_kernel: the spectra of matrices [0, count): lefts first, then rights (n-to-m).
template <int N>
__global__ void __launch_bounds__(Geometry<N>::threads, 1) spectrum_kernel(Args a) {
    using G = Geometry<N>;
    pdl_launch_dependents();  // the second kernel may start now (see the header)
    const auto [S, tw] = block_smem<N>();
    const Team tm = this_team<N>();
    const int nL = a.pairs.nL;
    for (int64_t s = blockIdx.x; s < a.count; s += gridDim.x) {
        const bool is_left = s < nL;
        const int h = is_left ? a.hL : a.hR, w = is_left ? a.wL : a.wR;
        const float* M = is_left ? a.left + s * a.hL * a.wL : a.right + (s - nL) * a.hR * a.wR;
        __syncthreads();  // twiddles written; the previous matrix's columns read
        forward_rows<N>(S, M, h, w, tw);
        __syncthreads();
        float2* dst = a.spec + s * int64_t(N) * G::Qh;
        for (int c = column_team<N>(tm); c < G::Qh; c += G::teams) {
            float2 v[G::E];
            forward_column<N>(v, S + c, G::pitch, (h + 1) & ~1, tm, tw);
#pragma unroll
            for (int e = 0; e < G::E; ++e) dst[c * N + tm.t + G::T * e] = v[e];
        }
    }
}

// fused_kernel (one-to-one, one-to-many, n-to-mn): output k = right k, whose left spectrum is ready.
// kWindow = false (the full output) does not read m (write_output).
template <int N, bool kWindow>
__global__ void __launch_bounds__(Geometry<N>::threads, 1) fused_kernel(Args a, OutMap m) {
    using G = Geometry<N>;
    const auto [S, tw] = block_smem<N>();
    const Team tm = this_team<N>();
    for (int64_t k = blockIdx.x; k < a.count; k += gridDim.x) {
        __syncthreads();  // twiddles written; the previous output's rows read
        forward_rows<N>(S, a.right + k * a.hR * a.wR, a.hR, a.wR, tw);
        __syncthreads();
        // The block's next right into the L2 while phases 2 and 3 run: phase 1 waited for DRAM with
        // every warp of the block at once (long-scoreboard stalls the largest share). Issued
        // before phase 1 instead, beside its reads, it gains less.
        if (G::prefetch && threadIdx.x == 0 && k + gridDim.x < a.count)
            prefetch_l2(a.right + (k + gridDim.x) * a.hR * a.wR, size_t(a.hR) * a.wR * sizeof(float));
        const float2* L = a.spec + int64_t(a.pairs.left_of(k)) * N * G::Qh;
        pdl_wait();  // the spectra are ready (returns at once after the first time)
        for (int c = column_team<N>(tm); c < G::Qh; c += G::teams) {
            float2 v[G::E];
            const float2* Lc = L + c * N;
            forward_column<N>(v, S + c, G::pitch, (a.hR + 1) & ~1, tm, tw,
                              [&](int n, float2 x) { return mul_conj(__ldg(Lc + n), x, a.scale); });
            inverse_column<N>(v, S + c, G::pitch, tm, tw);
        }
        __syncthreads();
        write_output<N, kWindow>(S, a, m, k, tw);
    }
}

// Phase 3 of a fused k = 1 peak (paired_kernel's kPeak, the one-block path's Instance::run_peak1):
// the row DFTs of write_output, their values stored as they leave the DFT (thread t's elements
// t + T e of row pair p, complex: rows 2p and 2p + 1) into `map` in shared memory instead of the
// output's layout in DRAM; then the block's largest value of the window (the whole computed block,
// takes_peak1; NaN never; of equal values the smaller row-major index) as output k's key
// (lib/reduce/peak.cuh's peak_key; 0: no number) and its 3 x 3 neighbourhood (those off the map
// not written), which peak_write_kernel turns into the record (the fit, as on the staged path).
// At 64 registers (four blocks an SM) the row DFTs leave no room: write_output's rotated and cut
// stores into shared memory spilled 64-68 bytes, and so did a neighbourhood read by coordinates;
// hence the natural-layout stores, and a walk over the peak's rows for the neighbours (a warp a
// row: no division). The maximum is taken as the values leave the DFT, in lib/reduce/peak.cuh's
// key order throughout: a thread's, its warp's (warp_max_key: two redux instructions), then the
// block's by one shared atomicMax a warp (a walk over the stored map and block_best's rounds cost
// more than the reduce kernels they replace: notes/51_fft_fused.md). `map` holds N N floats;
// `best`, the block's key, is 0 on entry (paired_kernel).
template <int N>
__device__ __forceinline__ void peak_output(float2* S, float* map, unsigned long long& best, const OutMap& m,
                                            const Args& a, int64_t k, const float2* tw) {
    using G = Geometry<N>;
    const Team tm = this_team<N>();
    float2* circ = reinterpret_cast<float2*>(map);  // circ[p N + n]: row pair p's column n (.x row 2p, .y 2p + 1)
    unsigned long long key = 0;  // the thread's best: no number yet
    for (int p = row_team<N>(tm); p < N / 2; p += G::teams) {
        int ya, yb;
        if (!output_rows<N>(p, m.sy, m.cy, ya, yb)) continue;
        float2* row = S + 2 * p * G::pitch;
        float2 v[G::E];
        row_pair_values<N>(row, row + G::pitch, row, tm, tw, v);
#pragma unroll
        for (int e = 0; e < G::E; ++e) {
            circ[p * N + tm.t + G::T * e] = v[e];
            const int n = tm.t + G::T * e;
            const int x = n + m.sx >= N ? n + m.sx - N : n + m.sx;
            if (x < m.cx) {
                if (ya < m.cy && !isnan(v[e].x)) key = max(key, reduce::peak_key(v[e].x, ya * m.cx + x));
                if (yb < m.cy && !isnan(v[e].y)) key = max(key, reduce::peak_key(v[e].y, yb * m.cx + x));
            }
        }
    }
    key = reduce::warp_max_key(key);
    if (threadIdx.x % kWarp == 0 && key != 0) atomicMax(&best, key);
    __syncthreads();
    key = best;
    if (threadIdx.x == 0) a.keys[k] = key;
    if (key == 0) return;  // no value of the map is a number (the whole block alike)
    const int i = reduce::peak_of_key(key).i;
    const int py = int(unsigned(i) / unsigned(m.cx)), px = i - py * m.cx;
    // The neighbourhood, window rows py - 1 .. py + 1 a warp a row: window element (y, x) is at
    // circular row (y - sy) mod N, column (x - sx) mod N.
    for (int y = max(py - 1, 0) + int(threadIdx.x) / kWarp; y < min(py + 2, m.cy); y += G::threads / kWarp) {
        const int cr = y - m.sy < 0 ? y - m.sy + N : y - m.sy;
        const int x = px - 1 + int(threadIdx.x) % kWarp;
        if (threadIdx.x % kWarp < 3 && unsigned(x) < unsigned(m.cx)) {
            const float2 z = circ[(cr >> 1) * N + (x - m.sx < 0 ? x - m.sx + N : x - m.sx)];
            a.near[9 * k + (y - py + 1) * 3 + x - px + 1] = (cr & 1) ? z.y : z.x;
        }
    }
}

// paired_kernel (n-to-mn with one right a left: PIV's window pairs): output k = (left k, right k),
// both transformed in the block. spectrum_kernel would write, and fused_kernel read back, a left
// spectrum of N Qh complex numbers a pair (16.9 KB at N = 64, twice the two 32 x 32 inputs), which
// no other output reuses. Phase 1 transforms both matrices' rows as one list of row pairs (the
// left's into SL, after S: forward_rows_of_two),
// phase 2 each column job of both (two forward DFTs, then the product of the two register arrays:
// both hold thread t's elements t + T e, natural layout; at N = 64 the edge pair packed, so that
// 32 teams take the jobs in one round) and its inverse, phase 3 as fused_kernel; or,
// kPeak (a reduced plan's k = 1 peaks, the window whole), peak_output: the map goes to SL, free by
// then, and only the peak's key and neighbourhood to DRAM.
// Instantiated up to kPairedMax (two spectra a block; above, the registers of two E-element
// columns and the shared memory of two spectra would leave one block an SM). Bounded to four
// blocks an SM (64 registers, no spill; 71-77 unbounded, three blocks), at N = 48 to five blocks
// of 128 threads (96 registers; Geometry::paired_blocks): notes/51_fft_fused.md.
template <int N, bool kWindow, bool kPeak = false>
__global__ void __launch_bounds__(Geometry<N>::threads, Geometry<N>::paired_blocks) paired_kernel(Args a, OutMap m) {
    static_assert(!kPeak || kWindow, "the fused peak reads the window through the map");
    static_assert(2 * Geometry<N>::slot >= N * N, "SL holds the map");
    __shared__ unsigned long long best;  // kPeak: output k's best key (peak_output)
    if constexpr (kPeak) pdl_launch_dependents();  // peak_write_kernel's launch overlaps this grid
    using G = Geometry<N>;
    const auto [S, tw] = block_smem<N, 2>();
    float2* SL = S + G::slot;
    const Team tm = this_team<N>();
    const int64_t left_size = int64_t(a.hL) * a.wL, right_size = int64_t(a.hR) * a.wR;
    for (int64_t k = blockIdx.x; k < a.count; k += gridDim.x) {
        __syncthreads();  // twiddles written; the previous output's rows read
        if (kPeak && threadIdx.x == 0) best = 0;  // last read before the barrier above
        forward_rows_of_two<N>(S, a.right + k * right_size, a.hR, a.wR, SL, a.left + k * left_size, a.hL, a.wL, tw);
        __syncthreads();
        if (G::prefetch && threadIdx.x == 0 && k + gridDim.x < a.count) {  // (as fused_kernel)
            prefetch_l2(a.right + (k + gridDim.x) * right_size, size_t(right_size) * sizeof(float));
            prefetch_l2(a.left + (k + gridDim.x) * left_size, size_t(left_size) * sizeof(float));
        }
        for (int c = column_team<N>(tm); c < G::column_jobs; c += G::teams) {
            const bool edge = G::edge_pair && c == 0;
            float2 vl[G::E], v[G::E];
            load_column_job<N>(vl, SL, c, edge, G::pitch, (a.hL + 1) & ~1, tm);
            team_dft<N, -1>(vl, StridedSlot{SL + c, G::pitch}, tm.mask, tw);
            load_column_job<N>(v, S, c, edge, G::pitch, (a.hR + 1) & ~1, tm);
            team_dft<N, -1>(v, StridedSlot{S + c, G::pitch}, tm.mask, tw);
            if (edge) {  // the left's split parts from vl and its mirror in SL's column 0
                store_natural<N>(vl, SL, G::pitch, tm);
                edge_product<N>(v, S, G::pitch, a.scale, tm, [&](int e, int k, float2& l0, float2& ln) {
                    const float2 lm = SL[(k == 0 ? 0 : N - k) * G::pitch];
                    l0 = even_part(vl[e], lm), ln = odd_part(vl[e], lm);
                });
            } else {
#pragma unroll
                for (int e = 0; e < G::E; ++e) v[e] = mul_conj(vl[e], v[e], a.scale);
            }
            inverse_column_job<N>(v, S, c, edge, G::pitch, tm, tw);
        }
        __syncthreads();
        if constexpr (kPeak) peak_output<N>(S, reinterpret_cast<float*>(SL), best, m, a, k, tw);
        else write_output<N, kWindow>(S, a, m, k, tw);
    }
}

// pair_kernel (n-to-m): output k = (left k / M, right k mod M), both spectra ready. kWindow: as
// fused_kernel.
template <int N, bool kWindow>
__global__ void __launch_bounds__(Geometry<N>::threads, Geometry<N>::pair_blocks) pair_kernel(Args a, OutMap m) {
    using G = Geometry<N>;
    const auto [S, tw] = block_smem<N>();
    const Team tm = this_team<N>();
    const int64_t slot = int64_t(N) * G::Qh;
    pdl_wait();  // the spectra are ready
    for (int64_t k = blockIdx.x; k < a.count; k += gridDim.x) {
        const float2* L = a.spec + a.pairs.left_of(k) * slot;
        const float2* R = a.spec + (a.pairs.nL + a.pairs.right_of(k)) * slot;
        __syncthreads();  // twiddles written; the previous output's rows read
        for (int c = column_team<N>(tm); c < G::Qh; c += G::teams) {
            float2 v[G::E];
#pragma unroll
            for (int e = 0; e < G::E; ++e) {
                const int i = c * N + tm.t + G::T * e;
                v[e] = mul_conj(__ldg(L + i), __ldg(R + i), a.scale);
            }
            inverse_column<N>(v, S + c, G::pitch, tm, tw);
        }
        __syncthreads();
        write_output<N, kWindow>(S, a, m, k, tw);
    }
}

// ---------------------------------------------------------------------------------------------
// The staged path: transforms too large for one block (N = 256, 384, 512, 768, 1024)
// ---------------------------------------------------------------------------------------------
//
// The same three phases, each a kernel of its own, with global memory between them instead of
// one block's shared memory: rows_kernel (phase 1: row pairs -> row spectra R, rows below the
// matrix never written), cols_kernel (phase 2: a block stages a tile of TC adjacent columns of R
// in shared memory, one column per team; the forward DFT, then per mode: store the spectrum
// (kForward), or multiply by the left spectrum and invert (kCorrelate), or multiply two stored
// spectra and invert (kPair), or, one-to-one, transform the left's staged column too and multiply
// by it (kCorrelateBoth at N = 1024; at N <= 512 both_kernel, the left's and the right's column
// by two teams at once: no kForward launch for the left), the result written back as rows of H),
// and out_rows_kernel (phase 3: row pairs of H -> output rows). Per 256 x 256 right of 1-to-32 at
// 256 (N = 512) that moves about 4.4 MB (input 0.26, R 0.5 twice, H 1 twice, output 1, left
// spectrum from L2) where the cuFFT pipeline moves about 11. Every kernel but the first of a run
// is a programmatic dependent launch that waits for its predecessor before touching global memory
// (so each also covers everything before it): launch latency and twiddle tables overlap, and the
// first chunk's row pass overlaps the left spectra (rows_kernel).
//
// Resources: 256 threads a block, no spills (the strict build enforces it); the column passes'
// register limits come from their declared blocks per SM (cols_min_blocks). 512 uses a
// three-stage DFT with a warp a team, 1024 three stages with two warps a team; the mixed radix
// sizes (E = 24) teams of 16 at 384 and a warp a team at 768. Every exchange slot holds
// SN = N + T elements (the padded layout, team_dft.cuh; mixed plans 476 at 384, 860 at 768).
// Shared memory: rows and out_rows (teams SN + TW) x 8 bytes (39 KB at N = 512, 43 KB at 1024),
// cols (SN (TC + 1) + TW) x 8 bytes (43 KB at N = 512, 52 KB at 1024, 66 KB at 384 and 768),
// both_kernel (2 SN (TC / 2 + 1) + TW) x 8 bytes (48 KB at 512), kCorrelateBoth (2 SN (TC + 1) + TW)
// x 8 bytes (95 KB at 1024); TW = N twiddles (N + T for mixed plans).
// Measurements of the staged path: notes/51_fft_fused.md.

// Complex numbers per row of R and H: Qh = N / 2 + 1 rounded up to 16 (128-byte rows). The column
// passes write H (and read R) in pieces of TC adjacent columns of each row, TC x 8 = 32 or 64
// bytes at column multiples of TC; with 128-byte rows those pieces are whole 32-byte sectors. With
// the pitch Qh + 1 they were not (rows 16 bytes off the sector grid), and every piece written
// became partly written sectors at both ends.
constexpr int staged_row_pitch(int N) { return (N / 2 + 1 + 15) / 16 * 16; }

template <int N>
struct Staged {
    static constexpr int E = TeamShape<N>::E, T = TeamShape<N>::T;
    static constexpr int threads = 256;
    static constexpr int teams = threads / T;  // 16 (N = 256, 384), 8 (N = 512, 768), 4 (N = 1024: two warps a team)
    static_assert(T <= kWarp || teams <= kMaxWarpTeams, "a named barrier per team of whole warps");
    static constexpr int Qh = N / 2 + 1;
    static constexpr int SN = TeamShape<N>::slot_size;  // a team's exchange slot: N + T (padded, team_dft.cuh)
    static constexpr int rpitch = staged_row_pitch(N);  // complex numbers per row of R and H
    static constexpr int TC = teams;           // columns per block of cols_kernel, one per team
    static constexpr int tpitch = TC + 1;      // complex numbers per row of its tile (odd)
    static constexpr int col_tiles = (Qh + TC - 1) / TC;
    static constexpr int TW = TeamShape<N>::twiddles;  // twiddle table entries (N; mixed plans N + T)
    static constexpr size_t row_smem = (size_t(teams) * SN + TW) * sizeof(float2);  // team slots + twiddles
    // A tile: SN rows (N of data, then the exchange's pad) of tpitch.
    static constexpr size_t col_smem = (size_t(SN) * tpitch + TW) * sizeof(float2);  // tile + twiddles
    static constexpr size_t col_smem_both() { return (2 * size_t(SN) * tpitch + TW) * sizeof(float2); }  // kCorrelateBoth
    // The grid of a row pass (rows_kernel, out_rows_kernel, peak_rows_kernel, peak_near_kernel): a
    // team per item.
    static dim3 rows_grid(int64_t items) { return dim3(unsigned(ceil_div64(items, teams))); }
    static_assert(teams * SN % 2 == 0 && SN * tpitch % 2 == 0,
                  "twiddle tables 16-byte aligned (fill_twiddles)");
    static_assert(rpitch * sizeof(float2) % 128 == 0 && TC * sizeof(float2) % 32 == 0,
                  "the column passes' row pieces are whole 32-byte sectors");
};

// both_kernel's geometry (teams within a warp): two teams a column, TB columns a block.
template <int N>
struct Both {
    using G = Staged<N>;
    static constexpr int TB = G::teams / 2, pitch = TB + 1, tiles = (G::Qh + TB - 1) / TB;
    static_assert(TB * sizeof(float2) % 32 == 0, "row pieces of whole 32-byte sectors (staged_row_pitch)");
    static constexpr size_t smem = (2 * size_t(G::SN) * pitch + G::TW) * sizeof(float2);  // two tiles + twiddles
};

struct StagedArgs {
    const float* src;   // rows_kernel: the stack whose matrices [0, count) it transforms
    int h, w;           // their size
    float* out;
    float2* R;          // row spectra of the matrices of one launch: matrix s at R + s N rpitch
    float2* spec;       // column-major spectra ([column][row]), slot i at spec + i N Qh
    float2* H;          // column-inverted products of one chunk: output s at H + s N rpitch
    int hL, wL, hR, wR;
    int64_t count;      // matrices or outputs of this launch
    int64_t spec0;      // cols_kernel kForward: spectrum slot of matrix 0
    int64_t j0;         // first right of the chunk
    int kc;             // rights in the chunk
    int wait_late;      // rows_kernel: wait for the previous kernel after the work, not before
    PairMap pairs;
    float scale;
    const float2* RL = nullptr;  // cols_kernel kCorrelateBoth: the lefts' row spectra (matrix i at RL + i N rpitch)
    int group = 1;               // n-to-m: lefts per pair group (1: left-major order; chunk_pair)
};

// n-to-m chunk output s as (left i, right j0 + jj), for nL lefts and the chunk's kc rights. With
// group = 1, left-major: s = i kc + jj. With group = g > 1 (FftFused::pair_group), in groups of g lefts
// (the last group: the lefts that remain), the left fastest within a group: consecutive pairs share
// a right, so the pair pass reads each right's spectrum from DRAM once per group while the group's
// lefts stay in the L2 (left-major, every left cycles through all the chunk's rights, and each pair
// reads its right's spectrum from DRAM once the chunk's spectra outgrow the L2). In 32-bit
// arithmetic (a 64-bit division is a subroutine call in every block): s is below the chunk's count,
// which the launcher's constructor keeps below 2^31 (a UsageError otherwise).
struct ChunkPair {
    int i, jj;
};
__host__ __device__ constexpr ChunkPair chunk_pair_of(unsigned s, unsigned kc, unsigned nL, unsigned group) {
    if (group == 1) {
        const unsigned q = s / kc;
        return ChunkPair{int(q), int(s - q * kc)};
    }
    const unsigned g = s / (group * kc), r = s - g * (group * kc);
    const unsigned i0 = g * group, ti = nL - i0 < group ? nL - i0 : group;
    const unsigned jj = r / ti;
    return ChunkPair{int(i0 + (r - jj * ti)), int(jj)};
}
// The slot s of pair (i, jj): chunk_pair_of's inverse (the output-row pass walks the outputs in
// their own order and reads each one's H from here).
__host__ __device__ constexpr unsigned chunk_slot_of(unsigned i, unsigned jj, unsigned kc, unsigned nL, unsigned group) {
    if (group == 1) return i * kc + jj;
    const unsigned i0 = i / group * group, ti = nL - i0 < group ? nL - i0 : group;
    return i0 * kc + jj * ti + (i - i0);
}
// Every slot one pair and every pair one slot, chunk_slot_of its inverse: for the group sizes the
// launcher takes, nL and kc up to the suite's 100 lefts and 40 rights (partial groups included).
constexpr bool chunk_pairs_are_bijective(unsigned nL, unsigned kc, unsigned group) {
    bool seen[100 * 40] = {};
    for (unsigned s = 0; s < nL * kc; ++s) {
        const ChunkPair p = chunk_pair_of(s, kc, nL, group);
        if (p.i < 0 || unsigned(p.i) >= nL || p.jj < 0 || unsigned(p.jj) >= kc || seen[p.i * kc + p.jj] ||
            chunk_slot_of(unsigned(p.i), unsigned(p.jj), kc, nL, group) != s)
            return false;
        seen[p.i * kc + p.jj] = true;
    }
    return true;
}
constexpr unsigned kPairGroup = 8;
constexpr bool chunk_pairs_are_bijective() {
    for (unsigned group : {1u, kPairGroup})
        for (unsigned nL : {1u, 2u, 3u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 32u, 33u, 100u})
            for (unsigned kc : {1u, 2u, 3u, 5u, 8u, 13u, 32u, 40u})
                if (!chunk_pairs_are_bijective(nL, kc, group)) return false;
    return true;
}
static_assert(chunk_pairs_are_bijective(), "chunk_pair_of: every pair exactly once, chunk_slot_of its inverse");
__device__ __forceinline__ ChunkPair chunk_pair(const StagedArgs& a, int64_t s) {
    return chunk_pair_of(unsigned(s), unsigned(a.kc), unsigned(a.pairs.nL), unsigned(a.group));
}

// Output index of chunk output s in the outputs' own order: one right per output (k = j0 + s), or
// for n-to-m left-major pairs (chunk_pair_of with groups of one). Only the pair pass walks n-to-m in
// groups (chunk_pair); the output-row pass walks outputs in this order and finds their H slots.
__device__ __forceinline__ int64_t chunk_output(const StagedArgs& a, int64_t s) {
    if (a.pairs.form != int(Form::NToM)) return a.j0 + s;
    const ChunkPair p = chunk_pair_of(unsigned(s), unsigned(a.kc), unsigned(a.pairs.nL), 1);
    return int64_t(p.i) * a.pairs.nR + a.j0 + p.jj;
}

template <int N>
__device__ __forceinline__ float2* staged_twiddles(float2* tw, bool wait = true) {
    fill_twiddles<N, Staged<N>::threads>(tw);
    __syncthreads();
    pdl_launch_dependents();
    if (wait) pdl_wait();  // the previous kernel's writes are visible, and it no longer reads what this one writes
    return tw;
}

// Phase 1: one team per row pair of matrices [0, count) of src. With wait_late (the first chunk of
// rights) it runs alongside the left spectra, the kernels before it: it reads only the input and
// writes only the rights' part of R, which nothing before it in this run touches (and the run's
// first kernel is an ordinary launch, so the previous run is complete). It waits at the end, so
// that its completion still implies theirs.
// kTwo: a second stack, b.count matrices of b.h x b.w at b.src, after a's (their row spectra at
// R + (a.count + s) N rpitch): the first chunk's rights in the lefts' launch, one dependent launch
// fewer in the chain (FftFused::merge_rows: one-to-one's right; a few rights in the other forms).
// A template parameter, so that every other launch runs the one-stack code as it was (a runtime
// choice of source cost the one-stack kernel registers, and one-to-one at N = 1024 time:
// notes/51_fft_fused.md), and a parameter of its own, so that StagedArgs (every staged kernel's) keeps its
// layout.
struct SecondStack {
    const float* src = nullptr;
    int h = 0, w = 0;
    int64_t count = 0;
};

// The sizes that take kTwo: those without a mixed radix but N = 1024, where one-to-one's two
// launches are faster (notes/51_fft_fused.md).
template <int N>
constexpr bool rows_take_two = !TeamShape<N>::mixed && N < 1024;

template <int N, bool kTwo>
__global__ void __launch_bounds__(Staged<N>::threads) rows_kernel(StagedArgs a, SecondStack b) {
    static_assert(!kTwo || rows_take_two<N>);
    using G = Staged<N>;
    extern __shared__ float2 smem[];
    const float2* tw = staged_twiddles<N>(smem + G::teams * G::SN, !a.wait_late);
    const Team tm = this_team<N>();
    int64_t item = int64_t(blockIdx.x) * G::teams + tm.id, m0 = 0, count = a.count;
    const float* src = a.src;
    int h = a.h, w = a.w;
    if constexpr (kTwo) {
        const int64_t first = a.count * ((a.h + 1) / 2);  // row pairs of a's stack
        if (item >= first) {  // a block's teams may straddle the two
            item -= first;
            src = b.src, h = b.h, w = b.w, m0 = a.count, count = b.count;
        }
    }
    const int pairs = (h + 1) / 2;
    if (item < count * pairs) {  // whole teams
        const int64_t s = item / pairs;
        const int r = 2 * int(item - s * pairs);
        float2* dst = a.R + ((m0 + s) * N + r) * G::rpitch;
        forward_row_pair<N>(src + (s * h + r) * w, w, r + 1 < h, smem + tm.id * G::SN, dst, dst + G::rpitch, tm, tw);
    }
    if (a.wait_late) pdl_wait();
}

// The column passes' tile copies (all threads of the block): rows [0, h) of the TC columns of the
// global rows at src (row pitch rpitch) into a tile of pitch P; columns from ncols on are skipped,
// or with kCopyLast filled with column ncols - 1 (cols_kernel's surplus teams at N = 1024). And
// the tile's N rows back out to dst. Thread x copies column x mod TC of rows row() + (threads / TC) k,
// so every address is a per-thread base plus a compile-time offset (a flat loop over the tile's
// elements took about 20 instructions an element in division and 64-bit index arithmetic: SASS).
// A warp's accesses at each k are whole 8-byte columns of 32 / TC rows, as the flat loop's were,
// but not consecutive rows: a half-warp's 16 / TC rows are TC apart. With the tile's pitch TC + 1
// (odd, for the column DFTs), consecutive rows put two of a half-warp's 8-byte elements in the same
// bank pair at TC = 4 and 8 (a 2-way conflict: twice the wavefronts of a conflict-free access);
// rows TC apart land TC bank pairs apart (P TC = TC^2 + TC = TC mod 16).
template <int N, int TC>
struct TileCopy {
    static constexpr int step = Staged<N>::threads / TC, K = N / step;  // rows apart; rows a thread copies
    static constexpr int n = 16 / TC;                                    // rows of a half-warp's access
    static_assert(Staged<N>::threads % TC == 0 && N % step == 0, "whole rows per step");
    static_assert(16 % TC == 0 && step % 16 == 0, "a half-warp's rows within one step");
    // Row of thread group q (threads q TC to q TC + TC - 1): half-warp ph = q / n takes rows
    // ph mod TC + 16 (ph / TC) + TC i, i < n.
    static constexpr int row_of(int q) { return (q / n) % TC + 16 * (q / n / TC) + TC * (q % n); }
    // Every row of a step exactly once, and each half-warp's elements in distinct bank pairs.
    static constexpr bool conflict_free(int P) {
        bool seen[step] = {};
        for (int q = 0; q < step; ++q) {
            if (row_of(q) < 0 || row_of(q) >= step || seen[row_of(q)]) return false;
            seen[row_of(q)] = true;
        }
        for (int ph = 0; ph < step / n; ++ph) {
            unsigned pairs = 0;
            for (int q = ph * n; q < ph * n + n; ++q)
                for (int j = 0; j < TC; ++j) pairs |= 1u << ((row_of(q) * P + j) % 16);
            if (pairs != 0xffffu) return false;
        }
        return true;
    }
    static __device__ __forceinline__ int column() { return int(threadIdx.x) % TC; }
    static __device__ __forceinline__ int row() { return row_of(int(threadIdx.x) / TC); }
};
template <int N, int TC, int P, bool kCopyLast = false>
__device__ __forceinline__ void tile_in(float2* tile, const float2* src, int h, int ncols) {
    using C = TileCopy<N, TC>;
    static_assert(C::conflict_free(P), "tile rows of a half-warp in distinct bank pairs");
    constexpr int rp = Staged<N>::rpitch;
    const int j = C::column(), r0 = C::row();
    if (!kCopyLast && j >= ncols) return;
    // Rows from h on are not written in R: each thread reads row h - 1 in their place, and the
    // tile's rows from h on, which the column DFTs never read, get copies of it. No predicate per
    // element: with one each (7 predicate registers) ptxas issues the loads two at a time, each
    // pair's stores waiting for it, and the copy dominates the forward pass).
    const float2* s = src + (kCopyLast ? min(j, ncols - 1) : j);
    float2* d = tile + r0 * P + j;
    float2 x[C::K];  // every load issued before the first store
#pragma unroll
    for (int k = 0; k < C::K; ++k) x[k] = s[min(r0 + C::step * k, h - 1) * rp];
#pragma unroll
    for (int k = 0; k < C::K; ++k) d[C::step * P * k] = x[k];
}
template <int N, int TC, int P>
__device__ __forceinline__ void tile_out(float2* dst, const float2* tile, int ncols) {
    using C = TileCopy<N, TC>;
    static_assert(C::conflict_free(P), "tile rows of a half-warp in distinct bank pairs");
    constexpr int rp = Staged<N>::rpitch;
    const int j = C::column(), r0 = C::row();
    if (j >= ncols) return;
    const float2* s = tile + r0 * P + j;
    float2* d = dst + r0 * rp + j;
    // One store at a time, the block sweeping down the tile: issuing all of a thread's stores at
    // once (every load first) is no faster, and slower on large one-to-many shapes.
#pragma unroll 1
    for (int k = 0; k < C::K; ++k) d[C::step * rp * k] = s[C::step * P * k];
}

// kCorrelateBoth (one-to-one at N = 1024; N <= 512: both_kernel, below): kCorrelate with the left's
// column DFTs done in the same block, from the left's row spectra staged beside the right's,
// instead of by a kForward launch before it: one dependent launch fewer in a chain of a few small
// ones.
enum ColMode : int { kForward = 0, kCorrelate = 1, kPair = 2, kCorrelateBoth = 3 };

// Phase 2: blockIdx.x = tile of TC columns, blockIdx.y strides over the launch's matrices/outputs.
// Blocks per SM declared, each the fastest bound measured for its mode and size (the numbers:
// notes/51_fft_fused.md): kPair three at N = 512 and 1024 (at most 80 registers; four, at 64,
// is slower), the compiler's default at 256; kCorrelate three at 256 and 1024 but two at 512 (at
// most 128 registers: three there costs more on small batches than it gains elsewhere). The mixed
// sizes (E = 24): kCorrelate two and kPair two (three spills, or is slower at 768; unbounded is
// slower still). kForward three at 1024, so that the copies' registers cannot lower its occupancy.
template <int N, int MODE>
constexpr int cols_min_blocks() {
    if (MODE == kPair) return N == 384 || N == 768 ? 2 : N >= 512 ? 3 : 1;
    if (MODE == kCorrelate) return N == 256 || N == 1024 ? 3 : 2;
    if (MODE == kForward) return N == 1024 ? 3 : 1;  // 80 registers (81 unbounded)
    return 1;
}

template <int N, int MODE>
__global__ void __launch_bounds__(Staged<N>::threads, cols_min_blocks<N, MODE>()) cols_kernel(StagedArgs a) {
    using G = Staged<N>;
    constexpr int E = G::E, T = G::T, TC = G::TC, P = G::tpitch;
    constexpr bool kBoth = MODE == kCorrelateBoth;
    extern __shared__ float2 smem[];
    float2* tile = smem;
    float2* tile_l = smem + G::SN * P;  // kBoth: the left's tile
    const float2* tw = staged_twiddles<N>(smem + (kBoth ? 2 : 1) * G::SN * P);
    const Team tm = this_team<N>();
    const int c0 = blockIdx.x * TC, ncols = min(TC, G::Qh - c0);
    // Teams of whole warps (N = 1024) all transform a column, the last tile's surplus teams a copy
    // of its last one (staged, read and written only inside the block), so that every warp passes
    // the same named barriers before the block's: racecheck orders shared-memory accesses across
    // __syncthreads only then (a race-free minimal kernel reproduces its false report:
    // notes/51_fft_fused.md). Smaller teams skip surplus columns.
    constexpr bool kEveryTeam = T > kWarp;
    const bool surplus = tm.id >= ncols;
    const int c = kEveryTeam ? min(c0 + tm.id, G::Qh - 1) : c0 + tm.id;
    const int h_data = ((MODE == kForward ? a.h : a.hR) + 1) & ~1;  // rows of R written (even)
    float2* col = tile + tm.id;
    for (int64_t s = blockIdx.y; s < a.count; s += gridDim.y) {
        if constexpr (MODE != kPair) {
            // rows [0, h) of the tile's columns of matrix m's row spectra at R
            const auto stage = [&](float2* dst, const float2* R, int64_t m, int h) {
                tile_in<N, TC, P, kEveryTeam>(dst, R + m * N * G::rpitch + c0, h, ncols);
            };
            stage(tile, a.R, s, h_data);
            if constexpr (kBoth) stage(tile_l, a.RL, a.pairs.left_of(chunk_output(a, s)), (a.hL + 1) & ~1);
            __syncthreads();
        }
        if (kEveryTeam || !surplus) {
            float2 v[E];
            if constexpr (MODE == kPair) {
                const ChunkPair p = chunk_pair(a, s);  // left p.i, the chunk's right p.jj
                // The thread's first elements as opaque pointers: each load is one instruction at
                // an immediate offset (the compiler otherwise rebuilds every 64-bit address, three
                // instructions a load: SASS).
                const float2* L = opaque_ptr(a.spec + (int64_t(p.i) * G::Qh + c) * N + tm.t);
                const float2* Rs = opaque_ptr(a.spec + (int64_t(a.pairs.nL + p.jj) * G::Qh + c) * N + tm.t);
#pragma unroll
                for (int e = 0; e < E; ++e) v[e] = mul_conj(__ldg(L + T * e), __ldg(Rs + T * e), a.scale);
            } else if constexpr (kBoth) {
                // The left column's spectrum, back into its own slots in natural layout (the
                // thread's elements t + T e: exactly those `post` asks this thread for below), then
                // the right's forward DFT with the product in its post step, as in kCorrelate.
                float2* col_l = tile_l + tm.id;
                forward_column<N>(v, col_l, P, (a.hL + 1) & ~1, tm, tw);
                store_natural<N>(v, col_l, P, tm);
                forward_column<N>(v, col, P, h_data, tm, tw,
                                  [&](int n, float2 x) { return mul_conj(col_l[n * P], x, a.scale); });
            } else if constexpr (MODE == kForward) {
                forward_column<N>(v, col, P, h_data, tm, tw);
                float2* dst = a.spec + ((a.spec0 + s) * G::Qh + c) * N;
                if (!surplus) {
#pragma unroll
                    for (int e = 0; e < E; ++e) dst[tm.t + T * e] = v[e];
                }
            } else {
                const float2* L = a.spec + (int64_t(a.pairs.left_of(chunk_output(a, s))) * G::Qh + c) * N;
                forward_column<N>(v, col, P, h_data, tm, tw,
                                  [&](int n, float2 x) { return mul_conj(__ldg(L + n), x, a.scale); });
            }
            if constexpr (MODE != kForward) inverse_column<N>(v, col, P, tm, tw);
        }
        if constexpr (MODE != kForward) {
            __syncthreads();
            tile_out<N, TC, P>(a.H + s * N * G::rpitch + c0, tile, ncols);
        }
        __syncthreads();  // the tile is staged again for the next s
    }
}

// One-to-one's correlate pass with two teams a column (N <= 512: teams within a warp): team 2c
// transforms the left's column c and team 2c + 1 the right's, at once; after the block's barrier
// the right's team multiplies by the left's spectrum and inverts. A column's chain is two DFTs
// where kCorrelateBoth's single team runs three (the left's, the right's with the product, the
// inverse), over twice the blocks (TB = teams / 2 columns each). Teams of whole warps (N = 1024)
// keep kCorrelateBoth: a left team passes fewer named barriers than its right before the block's
// barrier (racecheck's false report: notes/51_fft_fused.md).
template <int N>
__global__ void __launch_bounds__(Staged<N>::threads) both_kernel(StagedArgs a) {
    using G = Staged<N>;
    constexpr int E = G::E, T = G::T, TB = Both<N>::TB, P = Both<N>::pitch;
    static_assert(T <= kWarp, "teams within a warp");
    extern __shared__ float2 smem[];
    float2* tile = smem;                // the right's columns
    float2* tile_l = smem + G::SN * P;  // the left's
    const float2* tw = staged_twiddles<N>(smem + 2 * G::SN * P);
    const Team tm = this_team<N>();
    const int c0 = blockIdx.x * TB, ncols = min(TB, G::Qh - c0);
    const int j = tm.id / 2;          // the team's column in the tile
    const bool right = tm.id & 1;
    const int hR = (a.hR + 1) & ~1, hL = (a.hL + 1) & ~1;  // rows of R written (even)
    for (int64_t s = blockIdx.y; s < a.count; s += gridDim.y) {
        const float2* srcR = a.R + s * N * G::rpitch + c0;
        const float2* srcL = a.RL + int64_t(a.pairs.left_of(chunk_output(a, s))) * N * G::rpitch + c0;
        tile_in<N, TB, P>(tile, srcR, hR, ncols);
        tile_in<N, TB, P>(tile_l, srcL, hL, ncols);
        __syncthreads();
        float2 v[E];
        float2* col = (right ? tile : tile_l) + j;
        if (j < ncols) {
            forward_column<N>(v, col, P, right ? hR : hL, tm, tw);
            if (!right) store_natural<N>(v, col, P, tm);  // the left's spectrum, natural layout
        }
        __syncthreads();
        if (j < ncols && right) {
            const float2* col_l = tile_l + j;
#pragma unroll
            for (int e = 0; e < E; ++e) v[e] = mul_conj(col_l[(tm.t + T * e) * P], v[e], a.scale);
            inverse_column<N>(v, col, P, tm, tw);
        }
        __syncthreads();
        tile_out<N, TB, P>(a.H + s * N * G::rpitch + c0, tile, ncols);
        __syncthreads();  // the tiles are staged again for the next s
    }
}

// The H slot of chunk output o (in the outputs' own order): chunk_slot_of, the pair pass's order.
__device__ __forceinline__ int64_t chunk_h_slot(const StagedArgs& a, int64_t o) {
    if (a.group != 1 && a.pairs.form == int(Form::NToM)) {
        const ChunkPair q = chunk_pair_of(unsigned(o), unsigned(a.kc), unsigned(a.pairs.nL), 1);  // left-major
        return chunk_slot_of(unsigned(q.i), unsigned(q.jj), unsigned(a.kc), unsigned(a.pairs.nL), unsigned(a.group));
    }
    return o;
}

// Phase 3: one team per row pair of chunk outputs [0, count), written through the window's map
// (kWindow), or, for the full output, as before windows: the oh x ow output rotated by
// (hR - 1, wR - 1), m not read.
template <int N, bool kWindow>
__global__ void __launch_bounds__(Staged<N>::threads) out_rows_kernel(StagedArgs a, OutMap m) {
    using G = Staged<N>;
    extern __shared__ float2 smem[];
    const float2* tw = staged_twiddles<N>(smem + G::teams * G::SN);
    const Team tm = this_team<N>();
    const int64_t item = int64_t(blockIdx.x) * G::teams + tm.id;
    if (item >= a.count * (N / 2)) return;
    // Chunk output o in the outputs' own order (consecutive teams write consecutive outputs), its H
    // at slot chunk_h_slot(a, o)
    const int64_t o = item / (N / 2);
    const int p = int(item - o * (N / 2));
    const float2* rows = a.H + (chunk_h_slot(a, o) * N + 2 * p) * G::rpitch;
    int ya, yb;
    if constexpr (kWindow) {
        if (!output_rows<N>(p, m.sy, m.cy, ya, yb)) return;
        inverse_row_pair<N, true>(rows, rows + G::rpitch, smem + tm.id * G::SN, ya, yb,
                                  m.block(a.out, chunk_output(a, o)), m.cy, m.cx, m.ow, m.sx, tm, tw);
    } else {
        const int oh = a.hL + a.hR - 1, ow = a.wL + a.wR - 1;
        if (!output_rows<N>(p, a.hR - 1, oh, ya, yb)) return;
        inverse_row_pair<N, true>(rows, rows + G::rpitch, smem + tm.id * G::SN, ya, yb,
                                  a.out + chunk_output(a, o) * int64_t(oh) * ow, oh, ow, ow, a.wR - 1, tm, tw);
    }
}

// Phase 3 storing zncc's coefficient instead of the map (FftFused::takes_store_norm;
// xcorr/store_norm.hpp): output k = pair (l, q) at window element (y, x) gets the template
// epilogue's value of its raw sum there, from the Normalizer's terms, so that no pass over the map
// follows. Per element the terms are 16 bytes (ΣL' and 1/sqrt(fL) of left l, in double), four times
// the output, and what they cost is the L2's bandwidth to the SMs (read by each team for its own
// output, they made phase 3 2.2x slower: notes/51_fft_fused.md). So a block's teams take row pair p
// of consecutive outputs (the outputs fastest, item = p count + o: each row's terms also come from
// DRAM once a chunk), each team leaves its two rows' values in its slot, in window order, and then
// the block stores them together: a thread a column of the two rows for every team, each term
// loaded once for the teams that share its left and row. Only where the computed block is the whole
// window (the template epilogue's windows, whose every shift has overlap): block element (y, x) is
// window element y ow + x. In 32 bits: a chunk's H (N rpitch 8 bytes an output) bounds its items
// far below 2^32, and out_count < 2^31 (takes_store_norm).
// kTiles (FftFused::set_tile_sink: a reduced plan's peaks): the store also takes each tile's
// maximum of the values it writes, so that the reduction reads no map before its selection. Warp w
// then stores the columns [w kNormSpan, (w + 1) kNormSpan), 32 consecutive ones at a time (stores
// and term loads as coalesced as the map's), which lie in one tile (takes_tile_max: tw a multiple
// of the span, or the whole width), an output at a time: each thread keeps its best value and
// column of each row with one compare as it stores, and once an output the warp's best key (two
// redux instructions) goes to the tile by lane 0's atomicMax, a team's two rows together where
// they lie in one tile row. The terms stay in registers across the outputs (76 at N = 1024: three
// blocks an SM where the map's loop runs four; loading them per output instead was slower). The
// map alone (kTiles false) keeps its own loop: the reductions' reconvergence points in it cost a
// per-column form of this ~50 us of the map's ~240 at N = 1024 (notes/51_fft_fused.md).
struct TeamStore {
    float* out;  // output k's first element
    int64_t l;   // its left
    double2 kt;  // its terms (StoreNorm::kterm)
    double ml, mr;
    int ya, yb;  // its two window rows (cy or more: none)
};
struct TeamTiles {  // kTiles
    unsigned long long* keys;  // output k's tile keys (TileSink)
    int ta, tb;                // the offsets in keys of its rows' tile rows (ty nx)
};
template <int N>
constexpr int kNormSpan = (N + Staged<N>::threads - 1) / Staged<N>::threads * kWarp;  // a warp's columns
// The sizes whose span is a power of two (a tile of 128 holds whole spans): every staged size but 768.
template <int N>
constexpr bool kNormTiles = (kNormSpan<N> & (kNormSpan<N> - 1)) == 0;
template <int N, bool kTiles>
__global__ void __launch_bounds__(Staged<N>::threads) norm_rows_kernel(StagedArgs a, OutMap m, StoreNorm norm,
                                                                        TileSink tiles) {
    using G = Staged<N>;
    constexpr int E = G::E, T = G::T;
    extern __shared__ float2 smem[];
    __shared__ TeamStore st[G::teams];
    __shared__ TeamTiles stt[kTiles ? G::teams : 1];
    const float2* tw = staged_twiddles<N>(smem + G::teams * G::SN);
    const Team tm = this_team<N>();
    const unsigned item = blockIdx.x * unsigned(G::teams) + unsigned(tm.id), count = unsigned(a.count);
    const unsigned p = item / count, o = item - p * count;
    int ya = m.cy, yb = m.cy;
    if (item < count * unsigned(N / 2) && output_rows<N>(int(p), m.sy, m.cy, ya, yb)) {
        float2* slot = smem + tm.id * G::SN;
        const float2* rows = a.H + (chunk_h_slot(a, o) * N + 2 * p) * G::rpitch;
        float2 v[E];
        row_pair_values<N>(rows, rows + G::rpitch, slot, tm, tw, v);
        team_sync<T>(tm.mask);  // the team has read the slot in the DFT
        float* sa = reinterpret_cast<float*>(slot);  // row a's values, then row b's (SN >= N + T)
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int n = tm.t + T * e;
            const int x = n + m.sx >= N ? n + m.sx - N : n + m.sx;
            sa[x] = v[e].x;
            sa[N + x] = v[e].y;
        }
        if (tm.t == 0) {
            const int64_t k = chunk_output(a, o);
            const PairMap::Pair pq = a.pairs.pair32(int(k));
            st[tm.id] = TeamStore{m.block(a.out, k), pq.left, norm.kterm[k], norm.lmean[pq.left], norm.rmean[pq.right],
                                  ya, yb};
            if constexpr (kTiles)  // (a row outside the window: the other's tile row)
                stt[tm.id] = TeamTiles{tiles.key + k * tiles.per, (ya < m.cy ? ya : yb) / tiles.th * tiles.nx,
                                       (yb < m.cy ? yb : ya) / tiles.th * tiles.nx};
        }
    } else if (tm.t == 0) {
        st[tm.id].ya = st[tm.id].yb = m.cy;  // nothing to store
    }
    __syncthreads();
    // The terms of the block's first team with rows to store, for every column this thread stores,
    // loaded at once (one latency, not one a column); a team of another left or rows (the block
    // straddles two row pairs) loads its own.
    int j0 = 0;
    while (j0 < G::teams && st[j0].ya >= m.cy && st[j0].yb >= m.cy) ++j0;
    if (j0 == G::teams) return;  // (the same for every thread of the block)
    constexpr int kCols = (N + G::threads - 1) / G::threads;  // columns a thread: cx <= N
    const int lane = int(threadIdx.x) % kWarp;
    const int xw = int(threadIdx.x) / kWarp * kNormSpan<N>;  // kTiles: the warp's first column
    const auto column = [=](int i) { return kTiles ? xw + kWarp * i + lane : int(threadIdx.x) + i * G::threads; };
    const int64_t l0 = st[j0].l;
    const int y0[2] = {st[j0].ya, st[j0].yb};
    double2 lt[kCols][2];
#pragma unroll
    for (int i = 0; i < kCols; ++i) {
        const int x = column(i);
#pragma unroll
        for (int r = 0; r < 2; ++r)
            lt[i][r] = x < m.cx && y0[r] < m.cy ? norm.lterm[l0 * norm.per + int64_t(y0[r]) * m.ow + x]
                                                 : make_double2(0, 0);
    }
    const float* vals = reinterpret_cast<const float*>(smem);
    // The two loops' element store is written out in each: as one lambda it took the map's loop
    // (kTiles false) from 64 registers to 79 at N = 1024, a block an SM fewer (ptxas, sm_90a).
    if constexpr (!kTiles) {
#pragma unroll
        for (int i = 0; i < kCols; ++i) {
            const int x = column(i);
            if (x >= m.cx) break;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
#pragma unroll
                for (int j = 0; j < G::teams; ++j) {
                    const TeamStore& s = st[j];
                    const int y = r ? s.yb : s.ya;
                    if (y >= m.cy) continue;
                    const int64_t e = int64_t(y) * m.ow + x;
                    const double2 t = s.l == l0 && y == y0[r] ? lt[i][r] : norm.lterm[s.l * norm.per + e];
                    const float c = vals[j * 2 * G::SN + r * N + x];
                    __stwb(s.out + e, float(template_value<Normalize::Zncc>(double(c), t.x, t.y, s.kt.x, s.kt.y, s.ml,
                                                                            s.mr, norm.n)));
                }
            }
        }
    } else {
        const int tile = tiles.tw >= m.cx ? 0 : xw / tiles.tw;  // the warp's tile column
#pragma unroll
        for (int j = 0; j < G::teams; ++j) {
            const TeamStore& s = st[j];
            if (s.ya >= m.cy && s.yb >= m.cy) continue;  // nothing to store (the same for the whole block)
            // Each row's best in this thread: the coefficient (a number in [-1, 1]: template_value
            // clamps, and a NaN sum gives -1, so -2 is below all) and its column; the columns rise,
            // so a strict > keeps the smaller index among ties.
            float bv[2] = {-2.0f, -2.0f};
            int bx[2] = {-1, -1};
#pragma unroll
            for (int i = 0; i < kCols; ++i) {
                const int x = column(i);
                if (x >= m.cx) break;
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int y = r ? s.yb : s.ya;
                    if (y >= m.cy) continue;
                    const int64_t e = int64_t(y) * m.ow + x;
                    const double2 t = s.l == l0 && y == y0[r] ? lt[i][r] : norm.lterm[s.l * norm.per + e];
                    const float c = vals[j * 2 * G::SN + r * N + x];
                    const float z = float(template_value<Normalize::Zncc>(double(c), t.x, t.y, s.kt.x, s.kt.y, s.ml,
                                                                          s.mr, norm.n));
                    __stwb(s.out + e, z);
                    if (z > bv[r]) bv[r] = z, bx[r] = x;
                }
            }
            unsigned long long k[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) k[r] = bx[r] >= 0 ? reduce::peak_key(bv[r], (r ? s.yb : s.ya) * m.ow + bx[r]) : 0;
            const TeamTiles& u = stt[j];
            if (u.ta == u.tb) {  // (the same for the whole block)
                const unsigned long long b = reduce::warp_max_key(max(k[0], k[1]));
                if (lane == 0 && b != 0) atomicMax(u.keys + u.ta + tile, b);
            } else {  // the rows in two tile rows
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const unsigned long long b = reduce::warp_max_key(k[r]);
                    if (lane == 0 && b != 0) atomicMax(u.keys + (r ? u.tb : u.ta) + tile, b);
                }
            }
        }
    }
}

// Fused k = 1 peaks of the staged path (Instance::run_peak1: a reduced plan's peaks at k = 1, the
// map never written; lib/reduce/reducer.cpp). Phase 3 as peak_rows_kernel: the same row DFTs as
// out_rows_kernel, whose values are compared instead of stored; each team's best goes to its
// output's key by one atomicMax (lib/reduce/peak.cuh's peak_key: its order is the contract's, the
// larger value first and of equal values the smaller row-major index; 0 is "no number yet"). Then
// peak_near_kernel, a team an output: the key decoded, the row DFTs of the (at most three) row
// pairs that hold the peak's row and its neighbours run again from H, still in memory, to give the
// three-point fit its neighbours (the very values the map would hold there); and peak_write_kernel,
// a thread an output: the peak written (lib/reduce/peak.cuh, the reduce kernels' code; apart from
// the DFTs, whose registers its double-precision fit would spill) and the key cleared for the next
// chunk. Only for
// windows whose every shift has overlap (FftFused::takes_peak1): the zeros outside it would be
// candidates too.
template <int N>
__global__ void __launch_bounds__(Staged<N>::threads) peak_rows_kernel(StagedArgs a, OutMap m,
                                                                        unsigned long long* __restrict__ keys) {
    using G = Staged<N>;
    constexpr int E = G::E, T = G::T, L = T < kWarp ? T : kWarp;  // L: the team's lanes within one warp
    extern __shared__ float2 smem[];
    const float2* tw = staged_twiddles<N>(smem + G::teams * G::SN);
    const Team tm = this_team<N>();
    const int64_t item = int64_t(blockIdx.x) * G::teams + tm.id;
    if (item >= a.count * (N / 2)) return;
    const int64_t o = item / (N / 2);
    const int p = int(item - o * (N / 2));
    int ya, yb;
    if (!output_rows<N>(p, m.sy, m.cy, ya, yb)) return;  // the whole team alike
    const float2* rows = a.H + (chunk_h_slot(a, o) * N + 2 * p) * G::rpitch;
    float2 v[E];
    row_pair_values<N>(rows, rows + G::rpitch, smem + tm.id * G::SN, tm, tw, v);
    unsigned long long best = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int n = tm.t + T * e;
        const int x = n + m.sx >= N ? n + m.sx - N : n + m.sx;
        if (x < m.cx) {
            if (ya < m.cy && !isnan(v[e].x)) best = max(best, reduce::peak_key(v[e].x, (m.oy + ya) * m.ow + m.ox + x));
            if (yb < m.cy && !isnan(v[e].y)) best = max(best, reduce::peak_key(v[e].y, (m.oy + yb) * m.ow + m.ox + x));
        }
    }
#pragma unroll
    for (int off = L / 2; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(tm.mask, best, off));
    if (tm.t % L == 0 && best != 0) atomicMax(keys + o, best);
}

// The neighbourhood of each chunk output's peak (a team an output): near[9 o ..] its 3 x 3 values,
// row-major, the peak at the centre (those off the computed block not written: the fit never
// reads them).
template <int N>
__global__ void __launch_bounds__(Staged<N>::threads) peak_near_kernel(StagedArgs a, OutMap m,
                                                                        const unsigned long long* __restrict__ keys,
                                                                        float* __restrict__ near) {
    using G = Staged<N>;
    constexpr int E = G::E, T = G::T;
    extern __shared__ float2 smem[];
    const float2* tw = staged_twiddles<N>(smem + G::teams * G::SN);
    const Team tm = this_team<N>();
    const int64_t o = int64_t(blockIdx.x) * G::teams + tm.id;
    if (o >= a.count || keys[o] == 0) return;  // (no number in the map: no neighbourhood)
    const reduce::Cand c = reduce::peak_of_key(keys[o]);
    const int y = c.i / m.ow - m.oy, x = c.i % m.ow - m.ox;  // in the computed block
    float* nb = near + 9 * o;
    int last = -1;  // the row pair done last (rows y - 1 .. y + 1 lie in consecutive pairs)
#pragma unroll 1
    for (int yy = max(y - 1, 0); yy <= min(y + 1, m.cy - 1); ++yy) {
        const int circ = yy - m.sy < 0 ? yy - m.sy + N : yy - m.sy;  // its circular row: (yy - sy) mod N
        const int p = circ / 2;
        if (p == last) continue;
        last = p;
        int ya, yb;
        output_rows<N>(p, m.sy, m.cy, ya, yb);
        const float2* rows = a.H + (chunk_h_slot(a, o) * N + 2 * p) * G::rpitch;
        float2 v[E];
        row_pair_values<N>(rows, rows + G::rpitch, smem + tm.id * G::SN, tm, tw, v);
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int n = tm.t + T * e;
            const int dx = (n + m.sx >= N ? n + m.sx - N : n + m.sx) - x;
            if (dx < -1 || dx > 1) continue;
            if (ya < m.cy && unsigned(ya - y + 1) < 3u) nb[(ya - y + 1) * 3 + dx + 1] = v[e].x;
            if (yb < m.cy && unsigned(yb - y + 1) < 3u) nb[(yb - y + 1) * 3 + dx + 1] = v[e].y;
        }
        team_sync<T>(tm.mask);  // the slot is free again for the next row pair's DFT
    }
}

// Each chunk output's peak record, a thread an output: from its key (none: absent) and its
// neighbourhood, the fit of lib/reduce/peak.cuh; the key cleared for the next chunk. Also
// paired_kernel's (peak_output), its outputs one chunk.
constexpr int kPeakWriteThreads = 128;
__global__ void __launch_bounds__(kPeakWriteThreads) peak_write_kernel(StagedArgs a, OutMap m,
                                                                        unsigned long long* __restrict__ keys,
                                                                        const float* __restrict__ near, PeakSink sink) {
    pdl_launch_dependents();
    pdl_wait();  // the keys and neighbourhoods are written
    const int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (o >= a.count) return;
    const unsigned long long key = keys[o];
    const int out_index = int(chunk_output(a, o));
    if (key == 0) {  // no value of the map is a number
        reduce::write_absent(sink.value, sink.shift, sink.subpixel, out_index);
        return;
    }
    const reduce::Cand c = reduce::peak_of_key(key);
    const int y = c.i / m.ow, x = c.i - y * m.ow;
    const float* nb = near + 9 * o;
    reduce::write_peak(sink.value, sink.shift, sink.subpixel, out_index, c, m.oh, m.ow, sink.dy0, sink.dx0,
                       int(sink.method), [nb, y, x](int yy, int xx) { return nb[(yy - y + 1) * 3 + xx - x + 1]; });
    keys[o] = 0;  // for the next chunk's outputs
}

// ---------------------------------------------------------------------------------------------
// Windows reaching beyond the full range
// ---------------------------------------------------------------------------------------------

// The window's elements outside the computed block (shifts without overlap): exact zeros, one
// warp per output row (whole rows outside the block's rows, else the columns left and right of
// it), lanes on consecutive columns. Launched, as an ordinary launch before the transforms, only
// for a window that reaches beyond the full range; it writes no element that phase 3 writes.
constexpr int kZeroThreads = 256;
__global__ void __launch_bounds__(kZeroThreads) zero_outside_kernel(float* __restrict__ out, int64_t count,
                                                                    OutMap m) {
    const int lane = int(threadIdx.x % kWarp);
    const int64_t rows = count * m.oh, step = int64_t(gridDim.x) * (kZeroThreads / kWarp);
    for (int64_t r = (int64_t(blockIdx.x) * kZeroThreads + threadIdx.x) / kWarp; r < rows; r += step) {
        float* row = out + r * m.ow;  // output matrix r / oh, row r mod oh
        const int y = int(r % m.oh);
        const bool in_block = y >= m.oy && y < m.oy + m.cy;
        const int left_end = in_block ? m.ox : m.ow, right_begin = in_block ? m.ox + m.cx : m.ow;
        for (int x = lane; x < left_end; x += kWarp) row[x] = 0.0f;
        for (int x = right_begin + lane; x < m.ow; x += kWarp) row[x] = 0.0f;
    }
}

// ---------------------------------------------------------------------------------------------
// The instance
// ---------------------------------------------------------------------------------------------

// The instantiated transform sizes N (xcorr/dispatch.hpp): a problem takes the smallest that holds
// its output.
using Sizes = Values<32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024>;
constexpr int kMaxOneBlock = 192;  // larger transforms take the staged path
constexpr int kPairedMax = 64;     // paired_kernel's sizes: N = 32, 48 and 64
// paired_kernel's k = 1 peaks (kPeak) from this size up. Below it the map and the reduce kernels'
// peak1_kernel (a thread a map) are faster: 8192 pairs of 16 x 16 within +-8 (N = 32) 59 against
// 68 us, PIV's 32 x 32 within +-8 (N = 48) 105.5 against 108.5; at N = 64 (3969 pairs 64 x 64 with
// 32 x 32, valid) the fused 91 against 96 (H200, one process: notes/reductions.md).
constexpr int kPairedPeakMin = 64;
constexpr int64_t kStaged192Outputs = 32;  // ... and so do problems of up to this many outputs at 192
// n-to-m's pair_kernel is not instantiated at N = 48 (blocks of 128 threads): 32-to-32 of 24 x 24 ran
// in 20.0 us there against 16.7 at 64 (H200, notes/51_fft_fused.md), so n-to-m skips to 64.
template <int N>
constexpr bool kPairKernel = N != 48;
static_assert(Sizes::has(kMaxOneBlock), "the one-block path's largest size is instantiated");

template <class F>
void for_size(int n, F&& f) {
    Sizes::dispatch(n, f, "fft-fused transform size");
}

// Whether size n takes a mixed-radix plan (team_dft.cuh).
bool is_mixed(int n) {
    bool mixed = false;
    for_size(n, [&](auto nn) { mixed = TeamShape<decltype(nn)::value>::mixed; });
    return mixed;
}
// The fewest outputs for which a mixed size is chosen over the next size up (FftFused's
// constructor; measured: notes/51_fft_fused.md): at 384 (teams of 16: 13 column tiles where 512 has
// 33) few outputs leave the GPU emptier than the larger transform costs.
constexpr int64_t mixed_min_outputs(int n) { return n == 384 ? 16 : 4; }

class FftFused final : public Instance {
public:
    explicit FftFused(const Problem& p) : p_(p), full_(p.full()) {
        int dev = 0;
        XC_CUDA_CHECK(cudaGetDevice(&dev));
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
        // The window's shifts with overlap: the window clamped to the full range.
        const Window w = p.shifts();
        const int s0y = std::max(w.dy0, -(p.hR - 1)), s1y = std::min(w.dy1, p.hL - 1);
        const int s0x = std::max(w.dx0, -(p.wR - 1)), s1x = std::min(w.dx1, p.wL - 1);
        map_ = OutMap{p.out_h(), p.out_w(), 0, 0, 0, 0, 0, 0};
        if (s0y > s1y || s0x > s1x) return;  // no shift has overlap: N_ = 0, zeros only
        // A circular correlation of period P holds shift s unaliased iff the other shifts s + jP lie
        // outside the full range, i.e. P >= hL - s and P >= s + hR; over [s0, s1] that is
        // P >= max(hL - s0, s1 + hR) (the full window: hL + hR - 1, today's size). Both matrices
        // must also fit the slot unfolded (binds only for narrow windows off the centre).
        const int need = std::max({p.hL - s0y, s1y + p.hR, p.wL - s0x, s1x + p.wR, p.hL, p.wL, p.hR, p.wR});
        N_ = Sizes::at_least(need);
        // A few outputs at N = 192 take the staged path at 256: one block per matrix is then all
        // the GPU does, 12 warps on one SM for each of the two kernels. At N <= 128, and from 64
        // outputs on, the one-block path is the faster (notes/51_fft_fused.md); kStaged192Outputs
        // is the largest count measured to gain.
        if (N_ == kMaxOneBlock && p.out_count() <= kStaged192Outputs) N_ = Sizes::at_least(kMaxOneBlock + 1);
        // The mixed-radix sizes (384, 768) pay for batches, not for a few outputs (against 512
        // and 1024: notes/51_fft_fused.md): with few outputs the GPU is emptier than the larger
        // power-of-two transform costs.
        if (is_mixed(N_) && p.out_count() < mixed_min_outputs(N_)) N_ = Sizes::at_least(N_ + 1);
        if (N_ > 0 && p.form == Form::NToM)
            for_size(N_, [&](auto n) {
                if (!kPairKernel<decltype(n)::value>) N_ = Sizes::at_least(N_ + 1);
            });
        if (N_ == 0) {
            const std::string limit = "transforms go up to " + std::to_string(Sizes::max()) + " (outputs up to " +
                                      std::to_string(Sizes::max() - 1) + " x " + std::to_string(Sizes::max() - 1);
            if (p.full())
                throw UsageError("fft-fused: " + p.describe() + " has a " + std::to_string(p.out_h()) + " x " +
                                 std::to_string(p.out_w()) + " output; " + limit + "; use fft)");
            throw UsageError("fft-fused: " + p.describe() + " needs a transform of size " + std::to_string(need) +
                             " (the shifts with overlap, " + Window{s0y, s1y, s0x, s1x}.text() +
                             ", without aliasing); " + limit + " in full; use fft)");
        }
        map_ = OutMap{p.out_h(), p.out_w(), s0y - w.dy0, s0x - w.dx0, s1y - s0y + 1, s1x - s0x + 1,
                      s0y <= 0 ? -s0y : N_ - s0y, s0x <= 0 ? -s0x : N_ - s0x};
        for_size(N_, [&](auto n) {
            constexpr int NN = decltype(n)::value;
            if constexpr (NN <= kMaxOneBlock) {
                using G = Geometry<NN>;
                allow_dynamic_smem(spectrum_kernel<NN>, size_t(G::smem_bytes), "fft-fused");
                for_window([&](auto win) {
                    constexpr bool W = decltype(win)::value;
                    allow_dynamic_smem(fused_kernel<NN, W>, size_t(G::smem_bytes), "fft-fused");
                    if constexpr (kPairKernel<NN>) allow_dynamic_smem(pair_kernel<NN, W>, size_t(G::smem_bytes), "fft-fused");
                    if constexpr (NN <= kPairedMax)
                        allow_dynamic_smem(paired_kernel<NN, W>, size_t(G::paired_smem_bytes), "fft-fused");
                    if constexpr (NN <= kPairedMax && NN >= kPairedPeakMin)
                        allow_dynamic_smem(paired_kernel<NN, true, true>, size_t(G::paired_smem_bytes), "fft-fused");
                    // The persistent grid follows the kernel and instantiation that run (their
                    // registers differ; pair_kernel<128> fits two blocks an SM).
                    XC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                        &per_sm_, output_kernel<NN, W>(), G::threads, paired() ? G::paired_smem_bytes : G::smem_bytes));
                });
            } else {
                using G = Staged<NN>;
                allow_dynamic_smem(rows_kernel<NN, false>, size_t(G::row_smem), "fft-fused");
                for_window([&](auto win) {
                    allow_dynamic_smem(out_rows_kernel<NN, decltype(win)::value>, size_t(G::row_smem), "fft-fused");
                });
                allow_dynamic_smem(norm_rows_kernel<NN, false>, size_t(G::row_smem), "fft-fused");
                if constexpr (kNormTiles<NN>)
                    allow_dynamic_smem(norm_rows_kernel<NN, true>, size_t(G::row_smem), "fft-fused");
                allow_dynamic_smem(peak_rows_kernel<NN>, size_t(G::row_smem), "fft-fused");
                allow_dynamic_smem(peak_near_kernel<NN>, size_t(G::row_smem), "fft-fused");
                for (auto kernel : {cols_kernel<NN, kForward>, cols_kernel<NN, kCorrelate>, cols_kernel<NN, kPair>})
                    allow_dynamic_smem(kernel, size_t(G::col_smem), "fft-fused");
                if constexpr (TeamShape<NN>::mixed) {
                    // one-to-one (one output) never takes a mixed size: no correlate-both kernel
                    static_assert(mixed_min_outputs(NN) > 1);
                } else {
                    if constexpr (rows_take_two<NN>)
                        allow_dynamic_smem(rows_kernel<NN, true>, size_t(G::row_smem), "fft-fused");
                    if constexpr (G::T <= kWarp)
                        allow_dynamic_smem(both_kernel<NN>, size_t(Both<NN>::smem), "fft-fused");
                    else
                        allow_dynamic_smem(cols_kernel<NN, kCorrelateBoth>, size_t(G::col_smem_both()), "fft-fused");
                }
                per_sm_ = 1;
            }
        });
        if (per_sm_ < 1) throw UsageError("fft-fused: the kernel does not fit on this GPU's SMs");
        plan_memory();
    }

    // A repeated call replays its launches as one CUDA graph (GraphReplay, algorithms/common/launch.cuh):
    // a call is two to six dependent launches, and for the smallest calls launching them is most
    // of the time.
    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        graph_.run({left, right, out}, stream, [&](cudaStream_t s) { enqueue(left, right, out, s); });
    }

    // k = 1 peaks in phase 3, the map never written: window pairs in paired_kernel's block
    // (peak_output) from kPairedPeakMin up, and the staged path (peak_rows_kernel, peak_near_kernel, peak_write_kernel);
    // where the window's every shift has overlap (no zeros outside the computed block to
    // compete). The rest of the one-block path (fused_kernel, pair_kernel: N <= 192) writes its
    // maps and the reduce kernels take them.
    bool takes_peak1() const override {
        return (N_ > kMaxOneBlock || paired_peaks()) && map_.whole() &&
               p_.out_count() <= std::numeric_limits<int32_t>::max();
    }
    void run_peak1(const float* left, const float* right, const PeakSink& sink, cudaStream_t stream) override {
        if (!takes_peak1()) throw std::logic_error("fft-fused: run_peak1 where takes_peak1 is false");
        for_size(N_, [&](auto n) {
            constexpr int NN = decltype(n)::value;
            if constexpr (NN <= kPairedMax) {
                run_one_block<NN>(left, right, nullptr, stream, &sink);
            } else if constexpr (NN > kMaxOneBlock) {
                using G = Staged<NN>;
                XC_CUDA_CHECK(cudaMemsetAsync(keys_.get(), 0, keys_.bytes(), stream));
                run_staged<NN>(left, right, nullptr, stream, [&](const StagedArgs& a) {
                    launch_dependent(peak_rows_kernel<NN>, G::rows_grid(a.count * (NN / 2)), dim3(G::threads),
                                     G::row_smem, stream, a, map_, keys_.get());
                    launch_dependent(peak_near_kernel<NN>, G::rows_grid(a.count), dim3(G::threads), G::row_smem, stream,
                                     a, map_, keys_.get(), near_.get());
                    launch_dependent(peak_write_kernel, dim3(unsigned(ceil_div64(a.count, kPeakWriteThreads))),
                                     dim3(kPeakWriteThreads), 0, stream, a, map_, keys_.get(), near_.get(), sink);
                });
            }
        });
    }

    // zncc's coefficients in phase 3's store (norm_rows_kernel): the staged path, where the computed block
    // is the whole window; the Normalizer's template epilogue, a pass over the whole map, is then
    // not run. Zero-lag keeps the epilogue (not instantiated), as does the one-block path, whose
    // phase 3 has no registers to spare.
    bool takes_store_norm(Normalize mode) const override {
        return mode == Normalize::Zncc && N_ > kMaxOneBlock && !full_ && map_.whole() &&
               p_.out_count() <= std::numeric_limits<int32_t>::max();
    }
    void set_store_norm(const StoreNorm& s) override {
        if (!takes_store_norm(s.mode)) throw std::logic_error("fft-fused: set_store_norm where takes_store_norm is false");
        norm_ = s;
        graph_.forget();
    }
    // The tile maxima of a reduced plan's peaks in that same store (norm_rows_kernel<N, true>): where
    // a warp's span of columns lies in one tile (tiles of whole spans, or of the whole width).
    bool takes_tile_max(const TileSink& s) const override {
        bool ok = false;
        if (norm_.mode != Normalize::None && s.th > 0 && s.tw > 0 && s.nx > 0)
            for_size(N_, [&](auto n) {
                constexpr int NN = decltype(n)::value;
                if constexpr (NN > kMaxOneBlock && kNormTiles<NN>) ok = s.tw >= map_.cx || s.tw % kNormSpan<NN> == 0;
            });
        return ok;
    }
    void set_tile_sink(const TileSink& s) override {
        if (!takes_tile_max(s)) throw std::logic_error("fft-fused: set_tile_sink where takes_tile_max is false");
        tiles_ = s;
        graph_.forget();
    }

private:
    void enqueue(const float* left, const float* right, float* out, cudaStream_t stream) {
        const OutMap& m = map_;
        if (!m.whole()) {  // the window reaches beyond the full range
            const int64_t warps = p_.out_count() * m.oh, per_block = kZeroThreads / kWarp;
            const int64_t blocks = std::min<int64_t>(ceil_div64(warps, per_block), int64_t(sms_) * 16);
            zero_outside_kernel<<<unsigned(blocks), kZeroThreads, 0, stream>>>(out, p_.out_count(), m);
            XC_CHECK_LAUNCH();
        }
        if (N_ == 0) return;
        for_size(N_, [&](auto n) {
            constexpr int NN = decltype(n)::value;
            if constexpr (NN <= kMaxOneBlock) run_one_block<NN>(left, right, out, stream);
            else
                run_staged<NN>(left, right, out, stream, [&](const StagedArgs& a) {
                    using G = Staged<NN>;
                    for_window([&](auto win) {
                        if (norm_.mode != Normalize::None) {  // (never the full window: takes_store_norm)
                            const auto kernel = [&] {
                                if constexpr (kNormTiles<NN>)
                                    if (tiles_.key) return norm_rows_kernel<NN, true>;
                                return norm_rows_kernel<NN, false>;  // (takes_tile_max: tiles_ empty)
                            }();
                            launch_dependent(kernel, G::rows_grid(a.count * (NN / 2)), dim3(G::threads),
                                             G::row_smem, stream, a, map_, norm_, tiles_);
                        } else
                            launch_dependent(out_rows_kernel<NN, decltype(win)::value>,
                                             G::rows_grid(a.count * (NN / 2)), dim3(G::threads), G::row_smem,
                                             stream, a, map_);
                    });
                });
        });
    }

    // The staged path transforms the left's columns inside the correlate pass (both_kernel, or
    // kCorrelateBoth at N = 1024), so no left spectrum is stored: one-to-one, where each left has
    // one right.
    bool left_columns_in_correlate() const { return p_.form == Form::OneToOne; }

    // n-to-mn with one right a left at the small sizes: paired_kernel alone, no spectra stored.
    bool paired() const { return N_ <= kPairedMax && p_.form == Form::NToMn && p_.nR == p_.nL; }
    // paired_kernel takes window pairs' k = 1 peaks itself (kPeak) from kPairedPeakMin up.
    bool paired_peaks() const { return paired() && N_ >= kPairedPeakMin; }

    // The one-block path's output kernel: paired_kernel where paired(), pair_kernel for n-to-m
    // (both spectra stored), else fused_kernel. The launch and the persistent grid's occupancy
    // query both take it from here.
    template <int NN, bool W>
    auto output_kernel() const {
        if constexpr (NN <= kPairedMax)
            if (paired()) return paired_kernel<NN, W>;
        if constexpr (kPairKernel<NN>)
            if (p_.form == Form::NToM) return pair_kernel<NN, W>;
        return fused_kernel<NN, W>;
    }

    // Workspace: one-block path: the spectra (lefts; n-to-m: all). Staged path, with chunks of K
    // rights: row spectra of nL + K matrices (apart, so that the first chunk's row pass can run
    // alongside the left spectra), spectra of the lefts (n-to-m: and K rights; none when
    // left_columns_in_correlate()),
    // K * G column-inverted products (G = nL for n-to-m, else 1). K = nR when everything fits in
    // 45% of the free memory (or XCORR_FFT_MAX_CHUNK caps it), else the most that fits.
    void plan_memory() {
        const int64_t nL = p_.nL, nR = p_.nR, G = p_.form == Form::NToM ? nL : 1;
        const int64_t spec_slot = int64_t(N_) * (N_ / 2 + 1);  // N x Qh
        const int64_t row_slot = int64_t(N_) * staged_row_pitch(N_);  // N x Staged::rpitch
        const bool staged = N_ > kMaxOneBlock, ntom = p_.form == Form::NToM;
        struct Sizes {
            int64_t spec, rows, H;  // complex numbers
        };
        const auto sizes = [&](int64_t k) {
            const int64_t specs = left_columns_in_correlate() ? 0 : nL + (ntom ? k : 0);
            return staged     ? Sizes{specs * spec_slot, (nL + k) * row_slot, k * G * row_slot}
                   : paired() ? Sizes{0, 0, 0}
                              : Sizes{(ntom ? nL + nR : nL) * spec_slot, 0, 0};
        };
        const auto bytes = [&](int64_t k) {
            const Sizes z = sizes(k);
            return double(z.spec + z.rows + z.H) * sizeof(float2);
        };
        size_t free_b = 0, total_b = 0;
        XC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        const double usable = 0.45 * double(free_b);
        int64_t k = nR;
        if (staged) {
            if (const int cap = fft_max_chunk_from_env()) k = std::min<int64_t>(k, cap);
            while (k > 1 && bytes(k) > usable) k = std::max<int64_t>(1, k * 3 / 4);
        }
        if (bytes(k) > usable)
            throw UsageError("not enough GPU memory for fft-fused: " + p_.describe() + " needs " +
                             std::to_string(bytes(k) / double(1 << 30)) + " GiB of workspace, 45% of the free " +
                             std::to_string(double(free_b) / double(1 << 30)) + " GiB is usable");
        // chunk_pair's 32-bit arithmetic: a chunk's outputs (nL k for n-to-m) below 2^31.
        if (staged && ntom && int64_t(p_.nL) * k > std::numeric_limits<int32_t>::max())
            throw UsageError("fft-fused: a chunk of " + std::to_string(int64_t(p_.nL) * k) +
                             " outputs exceeds 2^31 - 1: " + p_.describe());
        K_ = int(k);
        group_ = ntom && staged ? pair_group() : 1;
        merge_rows_ = staged && merge_rows();
        const Sizes z = sizes(k);
        spec_ = DeviceBuffer<float2>(size_t(z.spec));
        rows_ = DeviceBuffer<float2>(size_t(z.rows));  // lefts, then the chunk's rights
        H_ = DeviceBuffer<float2>(size_t(z.H));
        if (staged || paired_peaks()) {  // the fused k = 1 peaks' keys and neighbourhoods (run_peak1)
            const int64_t outputs = paired() ? p_.out_count() : k * G;
            keys_ = DeviceBuffer<unsigned long long>(size_t(outputs));
            near_ = DeviceBuffer<float>(size_t(9 * outputs));
        }
    }

    // n-to-m pair groups (chunk_pair_of) pay where the chunk's spectra (nL + K of them) outgrow the
    // L2 but a group's lefts fit in a quarter of it: each right's spectrum is then read from DRAM
    // once a group rather than once a pair. Where all the spectra fit, grouping saves no DRAM and
    // its order costs; where a group's lefts do not fit beside the pass's H writes, it saves little
    // (measured: notes/51_fft_fused.md). XCORR_FFT_PAIR_GROUPS forces it.
    int pair_group() const {
        if (const int forced = env_switch("XCORR_FFT_PAIR_GROUPS"); forced >= 0) return forced ? int(kPairGroup) : 1;
        int dev = 0, l2 = 0;
        XC_CUDA_CHECK(cudaGetDevice(&dev));
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        const double spec = double(N_) * (N_ / 2 + 1) * sizeof(float2);
        // (one right: the grouped order is the left-major one)
        return K_ > 1 && (p_.nL + K_) * spec > l2 && kPairGroup * spec <= l2 / 4.0 ? int(kPairGroup) : 1;
    }

    // The first chunk's rights' rows in the lefts' row launch (rows_kernel's kTwo, where the size
    // takes it): one dependent launch fewer in the chain, but those rows no longer run beside the
    // lefts' column pass (for one-to-one there is none: both_kernel transforms the left's columns).
    // That pays while the rights' rows are few: up to 512 row pairs every staged shape is faster
    // or level with the merge, beyond it level or slower (notes/51_fft_fused.md).
    // XCORR_FFT_MERGE_ROWS forces it.
    static constexpr int64_t kMergeRowPairs = 512;
    bool merge_rows() const {
        if (const int forced = env_switch("XCORR_FFT_MERGE_ROWS"); forced >= 0) return forced;
        return int64_t(std::min(K_, p_.nR)) * ((p_.hR + 1) / 2) <= kMergeRowPairs;
    }

    // The one-block path's launches: the maps into `out`; or, `sink` given (run_peak1, where
    // paired()), each output's k = 1 peak into it and no map.
    template <int NN>
    void run_one_block(const float* left, const float* right, float* out, cudaStream_t stream,
                       const PeakSink* sink = nullptr) {
        using G = Geometry<NN>;
        Args a{left, right, out, spec_.get(), p_.hL, p_.wL, p_.hR, p_.wR,
               p_.form == Form::NToM ? int64_t(p_.nL) + p_.nR : int64_t(p_.nL), pair_map(p_),
               float(1.0 / (double(NN) * NN)), keys_.get(), near_.get()};
        if constexpr (NN <= kPairedMax)
            if (paired()) {
                a.count = p_.out_count();
                if (sink) {
                    if constexpr (NN >= kPairedPeakMin) {
                        paired_kernel<NN, true, true>
                            <<<grid(a.count), G::threads, G::paired_smem_bytes, stream>>>(a, map_);
                        XC_CHECK_LAUNCH();
                        StagedArgs w{};  // peak_write_kernel's outputs: [0, count), chunk_output(w, o) = o
                        w.count = a.count;
                        w.pairs = a.pairs;
                        launch_dependent(peak_write_kernel, dim3(unsigned(ceil_div64(a.count, kPeakWriteThreads))),
                                         dim3(kPeakWriteThreads), 0, stream, w, map_, keys_.get(), near_.get(), *sink);
                    } else {
                        throw std::logic_error("fft-fused: fused window-pair peaks below kPairedPeakMin");
                    }
                } else
                    for_window([&](auto win) {
                        paired_kernel<NN, decltype(win)::value>
                            <<<grid(a.count), G::threads, G::paired_smem_bytes, stream>>>(a, map_);
                    });
                XC_CHECK_LAUNCH();
                return;
            }
        spectrum_kernel<NN><<<grid(a.count), G::threads, G::smem_bytes, stream>>>(a);
        XC_CHECK_LAUNCH();
        a.count = p_.out_count();
        for_window([&](auto win) {
            constexpr bool W = decltype(win)::value;
            launch_dependent(output_kernel<NN, W>(), dim3(grid(a.count)),
                             dim3(G::threads), G::smem_bytes, stream, a, map_);
        });
    }

    // The staged path's kernels, phase 3 of each chunk of rights launched by `out_pass(a)` (its
    // StagedArgs: the chunk's outputs a.count, their H): the map's output rows into `out`, or the
    // fused peaks (out null).
    template <int NN, class OutPass>
    void run_staged(const float* left, const float* right, float* out, cudaStream_t stream, OutPass&& out_pass) {
        using G = Staged<NN>;
        const bool ntom = p_.form == Form::NToM;
        StagedArgs a{left, p_.hL, p_.wL, out, rows_.get(), spec_.get(), H_.get(), p_.hL, p_.wL, p_.hR, p_.wR,
                     p_.nL, 0, 0, 1, 0, pair_map(p_), float(1.0 / (double(NN) * NN))};
        const auto cols_grid = [&](int64_t count) {
            return dim3(unsigned(G::col_tiles), unsigned(std::min<int64_t>(count, 65535)));
        };
        // The left spectra (one-to-one: the left's row spectra only; its columns are transformed
        // beside the right's, both_kernel or kCorrelateBoth).
        const bool both = left_columns_in_correlate();
        // The first chunk's rights' rows in the lefts' launch (merge_rows; rows_take_two: the sizes
        // where the two-stack kernel measured faster).
        const bool merged = rows_take_two<NN> && merge_rows_;
        const int k0 = std::min(K_, p_.nR);
        const int64_t left_items = a.count * ((a.h + 1) / 2);
        if (!merged)
            rows_kernel<NN, false><<<G::rows_grid(left_items), G::threads, G::row_smem, stream>>>(a, {});
        else if constexpr (rows_take_two<NN>)
            rows_kernel<NN, true><<<G::rows_grid(left_items + int64_t(k0) * ((p_.hR + 1) / 2)), G::threads, G::row_smem,
                                    stream>>>(a, SecondStack{right, p_.hR, p_.wR, k0});
        XC_CHECK_LAUNCH();
        if (both) a.RL = rows_.get();
        else launch_dependent(cols_kernel<NN, kForward>, cols_grid(a.count), dim3(G::threads), G::col_smem, stream, a);
        for (int j0 = 0; j0 < p_.nR; j0 += K_) {
            const int kc = std::min(K_, p_.nR - j0);
            a.src = right + int64_t(j0) * p_.hR * p_.wR;
            a.R = rows_.get() + int64_t(p_.nL) * NN * G::rpitch;
            a.wait_late = j0 == 0;
            a.h = p_.hR;
            a.w = p_.wR;
            a.count = kc;
            a.j0 = j0;
            a.kc = kc;
            if (!merged || j0 > 0)
                launch_dependent(rows_kernel<NN, false>, G::rows_grid(a.count * ((a.h + 1) / 2)), dim3(G::threads), G::row_smem,
                                 stream, a, SecondStack{});
            a.wait_late = 0;
            if (ntom) {
                a.spec0 = p_.nL;
                launch_dependent(cols_kernel<NN, kForward>, cols_grid(a.count), dim3(G::threads), G::col_smem, stream,
                                 a);
                a.count = int64_t(p_.nL) * kc;
                a.group = group_;
                launch_dependent(cols_kernel<NN, kPair>, cols_grid(a.count), dim3(G::threads), G::col_smem, stream, a);
            } else if (both) {
                if constexpr (TeamShape<NN>::mixed)
                    throw std::logic_error("fft-fused: one-to-one took a mixed-radix size");  // mixed_min_outputs
                else if constexpr (G::T <= kWarp)
                    launch_dependent(both_kernel<NN>,
                                     dim3(unsigned(Both<NN>::tiles), unsigned(std::min<int64_t>(a.count, 65535))),
                                     dim3(G::threads), Both<NN>::smem, stream, a);
                else
                    launch_dependent(cols_kernel<NN, kCorrelateBoth>, cols_grid(a.count), dim3(G::threads),
                                     G::col_smem_both(), stream, a);
            } else {
                launch_dependent(cols_kernel<NN, kCorrelate>, cols_grid(a.count), dim3(G::threads), G::col_smem,
                                 stream, a);
            }
            out_pass(a);
        }
    }

    // The output kernels' instantiation, f(integral_constant<bool, kWindow>): the full output
    // (p.full()) takes kWindow = false, the code before windows (no map read); every other window
    // kWindow = true (phase 3 through OutMap). The full output's own instantiation is faster than
    // the windowed kernels on the same elements (notes/51_fft_fused.md).
    template <class F>
    void for_window(F&& f) const {
        if (full_) f(std::false_type{});
        else f(std::true_type{});
    }

    // Persistent blocks of the one-block path: as many as fit at once, each striding over the matrices.
    unsigned grid(int64_t count) const {
        return unsigned(std::max<int64_t>(1, std::min<int64_t>(count, int64_t(per_sm_) * sms_)));
    }

    Problem p_;
    bool full_ = false;  // p_.full(): kWindow = false (for_window)
    OutMap map_{};
    StoreNorm norm_{};  // mode None: the map (set_store_norm: zncc's coefficients)
    TileSink tiles_{};  // key null: no tile maxima (set_tile_sink: a reduced plan's peaks)
    int N_ = 0, K_ = 0, group_ = 1;  // N_ = 0: no shift of the window has overlap (zero_outside_kernel only)
    bool merge_rows_ = false;        // staged: merge_rows()
    int sms_ = 0, per_sm_ = 0;
    DeviceBuffer<float2> spec_, rows_, H_;
    DeviceBuffer<unsigned long long> keys_;  // staged: the fused peak's key of each output of a chunk
    DeviceBuffer<float> near_;               // and its 3 x 3 neighbourhood
    GraphReplay graph_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "fft-fused",
    .family = "hopper",
    .summary = "hand-written fused FFT: row DFTs, column DFTs + product + inverse, row inverse DFTs to the "
               "output layout; one block per matrix in shared memory up to 191 x 191 outputs, staged through "
               "global memory up to 1023 x 1023",
    .timed = "everything, from the left spectra to the output layout (2 kernels up to 191 x 191 outputs, "
             "1 for n-to-mn window pairs up to 63 x 63, 4 or more beyond)",
    .precision = "fp32",
    .tolerance = 2e-6,
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        return std::make_unique<FftFused>(p);
    },
    .pilot_batch = true,
    .replays_repeated_calls = true,
    // Any rectangle of shifts (OutMap): the named windows are rectangles too.
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    // Its transform size follows the inputs: a small window in large inputs (a template searched
    // within a few shifts) runs on the parts the window touches, often on the one-block path.
    .max_transform = Sizes::max(),
    .crop_windows = true,
});

}  // namespace
}  // namespace xcorr::fft_fused
