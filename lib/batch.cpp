// A batch split across GPUs and into pieces that fit (batch.hpp explains the split), each device's
// pieces pipelined so that their copies overlap their kernels.
//
// Pipeline (one per device, run by that device's host thread). run_pipeline below is the schedule,
// every wait and record included; it drives the GPU (GpuSteps) and the CPU reference (CpuSteps: an
// emulated asynchronous machine whose queues run behind the host in random orders the waits allow),
// which is how the CPU tests check it: a missing wait, copy or drain changes the chunked reference.
//   Slots. kSlots sets of buffers: device left/right/output buffers and a pinned host staging
//   buffer for the output, each sized for the device's largest piece, built with the plans and
//   streams into a DeviceKit that the device keeps for its next run of the same problem (the
//   staging itself from a pool kept between runs: StagingPool).
//   Piece i uses slot i mod kSlots, so piece i reuses what piece i - kSlots used.
//   Streams. H2D copies on `up`, plan.execute on `compute`, D2H copies on `down`; per slot three
//   events: uploaded (its inputs are on the device), computed (its kernels are done: inputs free,
//   output ready), downloaded (its output is in the pinned staging: device output free).
//   Issue order for piece i in slot s (host thread):
//     upload(i)          `up` waits on computed[s] (piece i - kSlots no longer reads the inputs),
//                        copies the inputs the slot does not already hold, records uploaded[s];
//     compute(i)         `compute` waits on uploaded[s] and downloaded[s] (piece i - kSlots's output
//                        copied out of the device buffer), executes, records computed[s];
//     drain(i - kSlots)  host waits on downloaded[s], then copies staging[s] into the caller's
//                        output (memcpy, split over up to 8 threads when large): staging[s] free;
//     download(i)        `down` waits on computed[s], copies into staging[s], records downloaded[s].
//   After the last piece, the pieces still in slots are drained, oldest first.
//   So while the host copies piece i - 2 out of staging, the GPU runs piece i - 1's download and
//   piece i's upload and kernels. Each event is waited on only after the record it is meant to see
//   and before the next record of it (host issue order: drain(i - kSlots) comes before download(i)
//   records downloaded[s] again), so every wait sees the right piece. Plans run on one stream, one
//   piece after the other (a plan's workspace is one). With a given chunk (max_outputs) the pieces
//   and plans are those of the unpipelined version, so every output is computed by the same kernels
//   on the same data: only the scheduling changed.
//   Inputs are copied from the caller's stacks once: a slot that already holds a piece's left or
//   right matrices (n-to-m pieces of whole lefts all take every right) does not copy them again,
//   and one whose neighbour holds them copies them from its buffer (device to device, on `up`).
//   A piece's pageable inputs, where they are large together, go through two pinned bounce buffers
//   (Bounce: the driver's own way runs at a sixth of the link's rate), in parts whose uploads
//   overlap the next part's host copy; small or page-locked ones go directly.
//   Direct. Where the caller's output is page-locked itself (page_locked), download(i) writes piece
//   i straight into it and drain only waits: no staging, no host copy (the schedule is the same).
//   On any exception the kit is dropped: its streams are synchronised before its buffers are freed.
#include "xcorr/batch.hpp"
#include "xcorr/gpu.hpp"

#include <cuda_runtime.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <array>
#include <deque>
#include <functional>
#include <random>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/reference.hpp"

namespace xcorr {

namespace {

Piece make_piece(const Problem& p, Form form, int64_t nL, int64_t nR, int64_t left0, int64_t right0, int64_t out0,
                 int device) {
    Piece c;
    c.problem = p;
    c.problem.form = form;
    c.problem.nL = int(nL);
    c.problem.nR = int(nR);
    c.left0 = left0, c.right0 = right0, c.out0 = out0, c.device = device;
    return c;
}

// More pieces than this is a chunk far too small for its batch: each piece costs launches and
// copies of its own, and the list alone would take gigabytes (a bad_alloc, not an answer).
constexpr size_t kMaxPieces = size_t(1) << 20;

// The pieces of outputs [k0, k1) of `p`, each at most m outputs (m >= 1), appended to `out`.
void split_range(const Problem& p, int64_t k0, int64_t k1, int64_t m, int device, Split split,
                 std::vector<Piece>& out) {
    int64_t k = k0;
    while (k < k1) {
        if (out.size() >= kMaxPieces)
            throw UsageError("pieces of at most " + std::to_string(m) + " output matrices cut " + p.describe() +
                             " into more than 2^20 pieces: allow more outputs a piece (--chunk, chunk=)");
        const int64_t left = k1 - k;
        switch (p.form) {
            case Form::OneToOne:
                out.push_back(make_piece(p, Form::OneToOne, 1, 1, 0, 0, 0, device));
                k = k1;
                break;
            case Form::OneToMany: {
                const int64_t n = std::min(left, m);
                out.push_back(make_piece(p, Form::OneToMany, 1, n, 0, k, k, device));
                k += n;
                break;
            }
            case Form::NToM: {  // output k = l·M + q
                const int64_t M = p.nR, l = k / M, q = k % M, whole = left / M;
                // Blocks: all `whole` lefts with runs of `run` rights, where they take more than one
                // piece and a block takes at least as many rights as lefts (batch.hpp).
                const int64_t run = whole > 0 ? m / whole : 0;
                if (split == Split::Blocks && q == 0 && whole * M > m && run >= whole) {
                    for (int64_t r0 = 0; r0 < M; r0 += run)
                        out.push_back(make_piece(p, Form::NToM, whole, std::min(run, M - r0), l, r0, k + r0, device));
                    k += whole * M;
                } else if (q == 0 && left >= M && M <= m) {
                    const int64_t lefts = std::min(left / M, m / M);
                    out.push_back(make_piece(p, Form::NToM, lefts, M, l, 0, k, device));
                    k += lefts * M;
                } else {
                    const int64_t n = std::min({M - q, left, m});
                    out.push_back(make_piece(p, Form::OneToMany, 1, n, l, q, k, device));
                    k += n;
                }
                break;
            }
            case Form::NToMn: {  // output k pairs L[k mod N] with R[k]
                const int64_t N = p.nL, a = k % N;
                if (a == 0 && left >= N && N <= m) {
                    const int64_t groups = std::min(left / N, m / N);
                    out.push_back(make_piece(p, Form::NToMn, N, groups * N, 0, k, k, device));
                    k += groups * N;
                } else {
                    const int64_t n = std::min({N - a, left, m});
                    out.push_back(make_piece(p, Form::NToMn, n, n, a, k, k, device));
                    k += n;
                }
                break;
            }
        }
    }
}

// Device d's run of the batch's outputs: equal contiguous runs, the first devices one longer.
std::pair<int64_t, int64_t> device_run(int64_t total, int devices, int d) {
    const int64_t base = total / devices, extra = total % devices;
    const int64_t begin = d * base + std::min<int64_t>(d, extra);
    return {begin, begin + base + (d < extra ? 1 : 0)};
}

// A device's share of the batch (batch.hpp, Split): a run [k0, k1) of the outputs, or, for an
// n-to-m batch divided by rights, every left with the rights [k0, k1).
struct Share {
    int64_t k0 = 0, k1 = 0;
    bool by_rights = false;
    bool empty() const { return k0 >= k1; }
    // The first output matrix and one past the last that the share writes (with the other devices'
    // outputs between its rows, where by rights).
    std::pair<int64_t, int64_t> span(const Problem& p) const {
        if (!by_rights) return {k0, k1};
        return {k0, int64_t(p.nL - 1) * p.nR + k1};
    }
    std::string key() const { return (by_rights ? "rights " : "") + std::to_string(k0) + ":" + std::to_string(k1); }
};

// The devices divide an n-to-m batch cut as blocks by its rights where rights_divide (batch.hpp):
// each uploads its part of the rights and all of the (smaller) lefts, not all of the rights.
Share device_share(const Problem& p, int devices, int d, Split split) {
    const bool by_rights = split == Split::Blocks && rights_divide(p, devices);
    const auto [k0, k1] = device_run(by_rights ? p.nR : p.out_count(), devices, d);
    return {k0, k1, by_rights};
}

// The pieces of share `s` of `p`, each at most m outputs, appended to `out`; by rights, the
// pieces of the n-to-m problem of every left and the share's rights, placed in the batch.
void share_pieces(const Problem& p, const Share& s, int64_t m, int device, Split split, std::vector<Piece>& out) {
    if (!s.by_rights) return split_range(p, s.k0, s.k1, m, device, split, out);
    Problem part = p;
    part.nR = int(s.k1 - s.k0);
    const size_t first = out.size();
    split_range(part, 0, part.out_count(), m, device, split, out);
    for (size_t i = first; i < out.size(); ++i) {
        Piece& c = out[i];
        const int64_t l = c.out0 / part.nR, q = c.out0 % part.nR;
        c.right0 += s.k0;
        c.out0 = l * p.nR + s.k0 + q;
    }
}

// Pieces in flight per device (the pipeline's slots; see the header comment).
constexpr int kSlots = 2;

// Output matrices that plausibly fit in `free_bytes` at once: kSlots pieces' stacks and outputs,
// and about as much again as one piece for the algorithm's workspace (FFT spectra), in 80% of the
// free memory; halved on failure after that.
int64_t fitting_outputs(const Problem& p, size_t free_bytes) {
    const double per_output =
        4.0 * (double(p.out_h()) * p.out_w() + double(p.hR) * p.wR + (p.form == Form::NToMn ? double(p.hL) * p.wL : 0));
    const double fixed = 4.0 * double(p.hL) * p.wL * (p.form == Form::NToMn ? 0 : 1);
    const double usable = 0.8 / (kSlots + 1) * double(free_bytes) - fixed;
    return std::max<int64_t>(1, int64_t(usable / per_output));
}

// About this many bytes of output per piece by default: pieces small enough that a device's run is
// several of them (their copies overlap their neighbours' kernels) and the pinned staging
// (kSlots pieces' outputs per device, kept between runs) stays small, large enough that a
// piece's fixed costs (launches, n-to-m's transforms of every right) are spread over many outputs.
constexpr double kPieceOutputBytes = 64.0 * (1 << 20);

// The default piece size (outputs) for pipelining: kPieceOutputBytes of output, rounded to whole
// lefts of n-to-m (whole groups of n-to-mn) when one of them is no more than 4x that, so pieces
// keep the batch's form (the plan of a whole left is the one the unpipelined run used for more).
int64_t pipelined_outputs(const Problem& p) {
    const double out_bytes = 4.0 * double(p.out_h()) * p.out_w();
    int64_t n = std::max<int64_t>(1, int64_t(kPieceOutputBytes / out_bytes));
    const int64_t unit = p.form == Form::NToM ? p.nR : p.form == Form::NToMn ? p.nL : 1;
    if (unit > 1 && double(unit) * out_bytes <= 4 * kPieceOutputBytes) n = std::max(unit, n / unit * unit);
    return n;
}

size_t matrix_elems(int h, int w) { return size_t(h) * size_t(w); }

// Where piece c's stacks and output sit in the batch's (host) stacks.
struct PieceData {
    const float* left;
    const float* right;
    float* out;
};
PieceData data_of(const Problem& p, const Piece& c, const float* left, const float* right, float* out) {
    return {left + c.left0 * matrix_elems(p.hL, p.wL), right + c.right0 * matrix_elems(p.hR, p.wR),
            out + c.out0 * matrix_elems(p.out_h(), p.out_w())};
}

// Pieces in the order of their first output (devices dividing an n-to-m batch by rights each
// have a block in every row of the output).
std::vector<Piece> in_output_order(std::vector<Piece> pieces) {
    std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.out0 < b.out0; });
    return pieces;
}

// Pieces of one shape share a plan.
std::tuple<int, int, int> shape_key(const Piece& c) {
    return {int(c.problem.form), c.problem.nL, c.problem.nR};
}

// Where upload() takes a piece's left (right) matrices from: nowhere (the slot's buffer already
// holds exactly those, from piece i - slots), the caller's host stack, or slot t >= 0's buffer
// (holding exactly those: a device-to-device copy, on the same stream as every upload, so it reads
// them after they arrived and before anything overwrites them).
constexpr int kHeld = -1, kFromHost = -2;

// The pipeline's queues (CUDA streams on the GPU) and per-slot events (header comment).
enum Queue { kUp, kCompute, kDown, kQueues };
enum EventKind { kUploaded, kComputed, kDownloaded, kEventKinds };

// The pipeline's schedule (header comment), in the host's issue order, piece i in slot i mod
// `slots`: ops.upload/compute/download(i, slot) enqueue a step on their queue (kUp, kCompute,
// kDown), ops.wait(queue, event, slot) makes the queue's next steps wait for the event's latest
// record, ops.record(queue, event, slot) records it, ops.host_wait(event, slot) blocks the host
// until its latest record, and ops.drain(j, slot) copies piece j out of the slot's staging (host).
// The waits and records are made here only, for the GPU and for the CPU reference alike. Every piece
// is drained exactly once, after its download and before its slot's staging is downloaded into
// again (checked: std::logic_error).
template <typename Ops>
void run_pipeline(const std::vector<Piece>& pieces, int slots, Ops& ops) {
    struct Held {  // matrices [first, first + count) of one stack
        int64_t first = -1, count = 0;
        bool operator==(const Held& o) const { return first == o.first && count == o.count; }
    };
    const int n = int(pieces.size());
    std::vector<Held> lefts(static_cast<size_t>(slots)), rights(static_cast<size_t>(slots));
    std::vector<int> pending(static_cast<size_t>(slots), -1);  // per slot: the piece downloaded and not drained yet
    std::vector<char> drained(static_cast<size_t>(n), 0);
    auto drain = [&](int s) {
        const int j = pending[size_t(s)];
        if (j < 0) return;
        if (drained[size_t(j)]) throw std::logic_error("batch pipeline: piece " + std::to_string(j) + " drained twice");
        ops.host_wait(kDownloaded, s);  // piece j's output is in the staging
        ops.drain(j, s);
        drained[size_t(j)] = 1;
        pending[size_t(s)] = -1;
    };
    auto from = [&](const std::vector<Held>& held, const Held& want, int s) {
        if (held[size_t(s)] == want) return kHeld;
        for (int t = 0; t < slots; ++t)
            if (held[size_t(t)] == want) return t;
        return kFromHost;
    };
    for (int i = 0; i < n; ++i) {
        const int s = i % slots;
        const Piece& c = pieces[size_t(i)];
        const Held l{c.left0, c.problem.nL}, r{c.right0, c.problem.nR};
        ops.wait(kUp, kComputed, s);  // piece i - slots no longer reads the slot's inputs
        ops.upload(i, s, from(lefts, l, s), from(rights, r, s));
        ops.record(kUp, kUploaded, s);
        lefts[size_t(s)] = l, rights[size_t(s)] = r;
        ops.wait(kCompute, kUploaded, s);    // piece i's inputs
        ops.wait(kCompute, kDownloaded, s);  // piece i - slots's output is out of the device buffer
        ops.compute(i, s);
        ops.record(kCompute, kComputed, s);
        drain(s);  // piece i - slots: the host copies it out while the GPU runs piece i
        if (pending[size_t(s)] >= 0) throw std::logic_error("batch pipeline: slot reused before it was drained");
        ops.wait(kDown, kComputed, s);  // piece i's output
        ops.download(i, s);
        ops.record(kDown, kDownloaded, s);
        pending[size_t(s)] = i;
    }
    for (int k = 0; k < slots; ++k) drain((n + k) % slots);  // the last pieces, oldest first
    for (int j = 0; j < n; ++j)
        if (!drained[size_t(j)]) throw std::logic_error("batch pipeline: piece " + std::to_string(j) + " never drained");
}

// Host threads kept between calls: for in_parallel's parts and for each device's run of a batch
// (run_batch). Starting and joining a thread costs tens of microseconds, and a batch asks for parts
// often: each 4 MB bounce part and each piece drained out of a pageable staging (up to 32 threads
// each), per device. A job's parts are claimed through an atomic counter by the caller and by the
// workers that pick its job up, so the caller never waits for a worker to become free: with none
// free it runs every part itself. Workers are started as the queued demand needs them, up to the
// host's cores, and are never stopped (leaked at exit, as the StagingPool is).
// A device's run is a job that must not wait behind copies or run after another device's on the
// caller's thread: `own_threads` jobs go to the front of the queue and start as many workers as
// needed (past the cores) for every part to find an idle one.
// An idle worker spins for kSpinMicroseconds before it sleeps: a batch's parts come every few
// hundred microseconds per device, and waking a sleeping thread takes tens of them, as long as a
// 256 KB part's copy. So only sleeping workers are woken, one per part queued (a notify_all would
// wake every idle one in turn, on the caller's time). Kept workers against a thread started per
// part, and 200 us against 0, 50 and 500: notes/multi-gpu.md, "2026-11-28: the batch's A/B
// switches removed".
constexpr int64_t kSpinMicroseconds = 200;
class Workers {
public:
    static Workers& get() { return *instance(); }
    void run(size_t parts, const std::function<void(size_t)>& part, bool own_threads = false) {
        auto job = std::make_shared<Job>(parts, part);
        size_t wake = 0;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (size_t h = 1; h < parts; ++h) {  // one entry per helper wanted
                if (own_threads) queue_.push_front(job);
                else queue_.push_back(job);
            }
            queued_.store(queue_.size());
            const size_t cap = std::max<size_t>(1, std::thread::hardware_concurrency());
            // Own threads: idle workers take the front entries first, so parts - 1 of them suffice.
            const size_t need = own_threads ? parts - 1 : queue_.size();
            try {
                while (idle_ < need && (own_threads || started_ < cap)) {
                    std::thread([this] { serve(); }).detach();
                    ++started_, ++idle_, ++sleeping_;  // asleep until the queue is read
                }
            } catch (const std::system_error&) {  // no thread to spare: the caller runs the parts left
            }
            const size_t spinning = idle_ - sleeping_;  // they find the entries without a wake-up
            wake = std::min(sleeping_, parts - 1 > spinning ? parts - 1 - spinning : 0);
        }
        for (size_t w = 0; w < wake; ++w) ready_.notify_one();
        job->work();
        job->wait();
    }

private:
    struct Job {
        Job(size_t n, const std::function<void(size_t)>& f) : parts(n), part(f) {}
        const size_t parts;
        // The caller's: called only for parts not yet done, and the caller returns only when all
        // are, so a worker that picks the job up later finds nothing to claim and never calls it.
        const std::function<void(size_t)>& part;
        std::atomic<size_t> next{0}, done{0};
        std::mutex mutex;
        std::condition_variable finished;
        void work() {
            for (size_t k; (k = next.fetch_add(1)) < parts;) {
                part(k);
                if (done.fetch_add(1) + 1 == parts) {  // the last part: wake the caller
                    std::lock_guard<std::mutex> lock(mutex);
                    finished.notify_all();
                }
            }
        }
        void wait() {
            std::unique_lock<std::mutex> lock(mutex);
            finished.wait(lock, [this] { return done.load() == parts; });
        }
    };
    static void pause() {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }
    void serve() {
        bool asleep = true;  // as counted by run(): a new worker
        for (;;) {
            if (!asleep) {  // spin a while for the next part before sleeping
                const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicroseconds);
                while (queued_.load(std::memory_order_relaxed) == 0 && std::chrono::steady_clock::now() < until)
                    for (int i = 0; i < 32; ++i) pause();
            }
            std::shared_ptr<Job> job;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                if (queue_.empty()) {
                    if (!asleep) ++sleeping_;
                    ready_.wait(lock, [this] { return !queue_.empty(); });
                    asleep = true;
                }
                if (asleep) --sleeping_;
                asleep = false;
                job = std::move(queue_.front());
                queue_.pop_front();
                queued_.store(queue_.size());
                --idle_;
            }
            job->work();
            std::lock_guard<std::mutex> lock(mutex_);
            ++idle_;
        }
    }
    // A forked child has none of the parent's threads (and perhaps a mutex held by one): it starts
    // afresh, the parent's state leaked.
    static Workers*& instance() {
        static Workers* workers = [] {
            pthread_atfork(nullptr, nullptr, [] { instance() = new Workers; });
            return new Workers;
        }();
        return workers;
    }
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::atomic<size_t> queued_{0};  // queue_.size(), for spinning workers to read without the lock
    size_t started_ = 0, idle_ = 0, sleeping_ = 0;  // idle: not running a job; sleeping: idle and waiting on ready_
};

// Runs part(0) .. part(parts - 1) on the calling thread and the Workers (`own_threads`: each on a
// thread of its own, Workers::run), and returns when all are done.
template <class Part>
void in_parallel(size_t parts, const Part& part, bool own_threads = false) {
    if (parts <= 1) {
        if (parts == 1) part(0);
        return;
    }
    Workers::get().run(parts, part, own_threads);
}

// Copies `n` floats between host buffers, in up to `threads` threads (the calling one included) of
// at least kCopyPerThread floats each: the copy out of the pinned staging into the caller's output
// is where a fresh output's first-touch page faults are paid, and one thread pays them serially;
// with several devices draining at once, a few threads each are what keeps the host's memory busy.
// A part for a kept worker can be small (waking one costs microseconds), so a 4 MB bounce part is
// spread over all the threads.
constexpr size_t kCopyPerThread = size_t(1) << 16;  // floats (256 KB)
void host_copy_bytes(void* dst, const void* src, size_t bytes, int threads) {
    const size_t parts = std::clamp<size_t>(bytes / (kCopyPerThread * sizeof(float)), 1, size_t(std::max(threads, 1)));
    in_parallel(parts, [=](size_t k) {
        const size_t a = bytes * k / parts, b = bytes * (k + 1) / parts;
        std::memcpy(static_cast<char*>(dst) + a, static_cast<const char*>(src) + a, b - a);
    });
}
void host_copy(float* dst, const float* src, size_t n, int threads) { host_copy_bytes(dst, src, n * sizeof(float), threads); }

// Copies piece c's outputs, `staged` in the piece's own (contiguous) layout, to where they sit in
// the batch's output (`at`: its first output; PieceLayout): one host_copy, or, for an n-to-m block,
// its rows split over the threads.
void copy_out(const Problem& p, const Piece& c, float* at, const float* staged, int threads) {
    const PieceLayout L = layout_of(p, c);
    const size_t e = size_t(p.out_h()) * size_t(p.out_w()), row = size_t(L.row) * e, pitch = size_t(L.pitch) * e;
    if (L.rows == 1) return host_copy(at, staged, row, threads);
    const size_t rows = size_t(L.rows), parts = std::clamp<size_t>(rows, 1, size_t(std::max(threads, 1)));
    in_parallel(parts, [=](size_t k) {
        for (size_t r = rows * k / parts; r < rows * (k + 1) / parts; ++r)
            std::memcpy(at + r * pitch, staged + r * row, row * sizeof(float));
    });
}

// Host threads per device for host_copy: half as many again as the device's share of the host's
// cores (a device's copies come in bursts between its downloads, so the devices' bursts interleave
// on the shared Workers), at most the cores and at most 32. The staged route's floor is the host's
// memory, which the GPUs' copies into the staging and the copy out of it share. On the two-H200
// host (32 cores) the rule's 32 threads for one GPU and 24 each for two were the fastest of those
// tried for pageable and fresh outputs (notes/multi-gpu.md has the numbers); scripts/batch-scaling's
// probe_threads mirrors the rule (on other hosts: measure).
int copy_threads(int devices) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    return std::min({cores, 32, std::max(1, 3 * cores / (2 * std::max(devices, 1)))});
}

// Whether the `bytes` at `p` are page-locked host memory (cudaMallocHost, cudaHostAlloc,
// cudaHostRegister: PyTorch's pin_memory=True, cupyx.empty_pinned): then the GPU downloads a
// piece straight into the caller's output and no staging copy is needed. Both ends are asked (a
// pointer's attributes say nothing about the bytes after it); any doubt means the staged path.
bool page_locked(const void* p, size_t bytes) {
    auto locked = [](const void* q) {
        cudaPointerAttributes a{};
        if (cudaPointerGetAttributes(&a, q) != cudaSuccess) {
            cudaGetLastError();  // not sticky; the staged path is always right
            return false;
        }
        return a.type == cudaMemoryTypeHost;
    };
    return bytes > 0 && locked(p) && locked(static_cast<const char*>(p) + bytes - 1);
}

// Owning pinned host memory (RAII), `count` floats at least (size() says how many).
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(size_t count) : count_(count) {
        if (count) XC_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&ptr_), count * sizeof(float)));
    }
    ~PinnedBuffer() {
        if (ptr_) cudaFreeHost(ptr_);
    }
    PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
        std::swap(ptr_, o.ptr_);
        std::swap(count_, o.count_);
        return *this;
    }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    float* get() const { return ptr_; }
    size_t size() const { return count_; }

private:
    float* ptr_ = nullptr;
    size_t count_ = 0;
};

// The pinned staging kept from one run_batch call to the next, per device: pinning and unpinning
// host memory is page-table work in the driver and the kernel (cudaFreeHost may also wait for the
// GPUs), paid per call and per device when every call allocated its own. A run takes buffers out
// (the smallest that is large enough, else a new one) and gives them back when its streams are done
// with them; at most kSlots stay per device (the largest), the rest are freed. Calls on one device
// from several threads at once each get buffers of their own. release_batch_buffers() frees them
// all. Leaked at exit on purpose: freeing pinned memory after the CUDA runtime has shut down fails.
// Keyed by device for the output staging, by bounce_key(device) for the upload bounce buffers.
class StagingPool {
public:
    static StagingPool& get() {
        static StagingPool* pool = new StagingPool;
        return *pool;
    }
    PinnedBuffer take(int device, size_t count) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            std::vector<PinnedBuffer>& kept = kept_[device];
            auto best = kept.end();
            for (auto it = kept.begin(); it != kept.end(); ++it)
                if (it->size() >= count && (best == kept.end() || it->size() < best->size())) best = it;
            if (best != kept.end()) {
                PinnedBuffer b = std::move(*best);
                kept.erase(best);
                return b;
            }
        }
        return PinnedBuffer(count);  // outside the lock: pinning takes time
    }
    void give_back(int device, PinnedBuffer b) {
        if (!b.get()) return;
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<PinnedBuffer>& kept = kept_[device];
        kept.push_back(std::move(b));
        std::sort(kept.begin(), kept.end(), [](const PinnedBuffer& x, const PinnedBuffer& y) { return x.size() > y.size(); });
        while (kept.size() > size_t(kSlots)) kept.pop_back();  // frees the smallest
    }
    size_t bytes() {
        std::lock_guard<std::mutex> lock(mutex_);
        size_t b = 0;
        for (const auto& [device, kept] : kept_)
            for (const PinnedBuffer& x : kept) b += x.size() * sizeof(float);
        return b;
    }
    void release() {
        std::map<int, std::vector<PinnedBuffer>> gone;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            gone.swap(kept_);
        }
    }

private:
    std::mutex mutex_;
    std::map<int, std::vector<PinnedBuffer>> kept_;
};

int bounce_key(int device) { return -1 - device; }

// One slot's buffers and events (header comment).
// The staging comes from the StagingPool and goes back to it when the slot is destroyed, which is
// after the streams that use it (DeviceKit declares the slots first).
struct Slot {
    DeviceBuffer<float> left, right, out;
    PinnedBuffer staging;
    Event uploaded, computed, downloaded;
    int device;
    Slot(size_t l, size_t r, size_t o, int dev, bool staged)
        : left(l), right(r), out(o), staging(staged ? StagingPool::get().take(dev, o) : PinnedBuffer()), device(dev) {}
    ~Slot() { StagingPool::get().give_back(device, std::move(staging)); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
};

// Pageable host memory reaches a GPU at a fraction of the link's rate: the driver bounces it through
// small pinned buffers of its own, on one thread that it holds for the whole copy (on the H200
// hosts: ~8 GB/s from one GPU, ~5 each from two at once, against ~54 from page-locked memory). So a
// piece's pageable inputs, where they are large together (n-to-m's runs of rights, and with the
// first piece the lefts beside them), are bounced here: the host copies a part into one of two
// pinned buffers (host_copy, copy_threads threads) while the other's upload runs. The parts are
// small so that a piece's upload ends one part's DMA after its host copy: the first piece's upload
// is the pipeline's fill, which nothing else overlaps. From the StagingPool (bounce_key); given back
// when destroyed, which is after the streams (DeviceKit declares it first). 4 MB parts of all the
// large piece's inputs against each input bounced alone in 32 MB parts: notes/multi-gpu.md
// ("2026-11-28: the batch's A/B switches removed").
constexpr size_t kBounceFloats = size_t(1) << 20;  // 4 MB per buffer: one part
constexpr size_t kBounceFrom = size_t(1) << 20;    // floats of a piece: smaller inputs go the driver's way
struct Bounce {
    PinnedBuffer buffer;
    Event done;  // recorded on `up` after the upload that read the buffer
    int device = 0;
    ~Bounce() { StagingPool::get().give_back(bounce_key(device), std::move(buffer)); }
};

// copy_to_device / copy_to_host (batch.hpp): one large array between the host and a device, bounced
// like a piece's inputs where the host memory is pageable. Two pinned parts from the StagingPool
// (bounce_key: the upload bounce buffers' entries, part for part), the DMA of one overlapping the
// host's copy of the other over copy_threads(1) threads; a fresh array's first-touch page faults are
// then paid by those threads together, not by the one thread of the driver's pageable copy (on the
// H200 hosts 403 MB into a fresh NumPy array: 154 ms through the driver, 8 ms of it the DMA).
// Page-locked memory, and arrays too small to gain, are copied straight. Both return once the copy
// is complete on `stream` (the work enqueued before it first).
constexpr size_t kOneCopyPart = size_t(4) << 20;  // floats (16 MB) a part
bool copied_straight(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    const void* host = kind == cudaMemcpyHostToDevice ? src : dst;
    if (bytes >= 2 * kBounceFrom * sizeof(float) && !page_locked(host, bytes)) return false;
    XC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
    XC_CUDA_CHECK(cudaStreamSynchronize(stream));
    return true;
}

// `bytes` of pageable host memory up to `dst` on `stream` through two bounce parts of `part` bytes,
// alternating (`next` carries the alternation from one call to the next: a piece's inputs one after
// the other): a part is refilled once its last upload has read it (its event; a part not yet used
// has none to wait for, and takes its buffer from the StagingPool), by a host copy over `threads`
// threads, while the other part's DMA runs. `step(name, f)` runs each of the two host steps, which a
// batch's trace times ("bounce_wait", "bounce_copy").
template <class Step>
void bounce_upload(std::array<Bounce, 2>& parts, size_t& next, void* dst, const void* host, size_t bytes, size_t part,
                   int threads, cudaStream_t stream, Step&& step) {
    const size_t part_floats = (part + sizeof(float) - 1) / sizeof(float);
    for (size_t a = 0; a < bytes; a += part) {
        Bounce& b = parts[next++ % parts.size()];
        const size_t m = std::min(part, bytes - a);
        if (b.buffer.get()) step("bounce_wait", [&] { XC_CUDA_CHECK(cudaEventSynchronize(b.done.e)); });
        if (b.buffer.size() < part_floats) {  // none yet (or a smaller one: another call's part)
            StagingPool::get().give_back(bounce_key(b.device), std::move(b.buffer));
            b.buffer = StagingPool::get().take(bounce_key(b.device), part_floats);
        }
        step("bounce_copy", [&] { host_copy_bytes(b.buffer.get(), static_cast<const char*>(host) + a, m, threads); });
        XC_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + a, b.buffer.get(), m, cudaMemcpyHostToDevice, stream));
        XC_CUDA_CHECK(cudaEventRecord(b.done.e, stream));
    }
}

// The two parts, given back to the pool only after `stream` has finished with them (a copy that
// throws part-way leaves none of its DMAs reading or writing a buffer the pool hands out again).
struct CopyParts {
    std::array<Bounce, 2> part;
    cudaStream_t stream;
    CopyParts(int device, cudaStream_t s) : stream(s) {
        for (Bounce& b : part) b.device = device, b.buffer = StagingPool::get().take(bounce_key(device), kOneCopyPart);
    }
    ~CopyParts() { cudaStreamSynchronize(stream); }  // before the members give the parts back
    CopyParts(const CopyParts&) = delete;
    CopyParts& operator=(const CopyParts&) = delete;
};

}  // namespace (the two public functions of batch.hpp, here beside their parts)

void copy_to_device(int device, void* dst, const void* host, size_t bytes, cudaStream_t stream) {
    if (copied_straight(dst, host, bytes, cudaMemcpyHostToDevice, stream)) return;
    CopyParts parts(device, stream);
    size_t next = 0;
    bounce_upload(parts.part, next, dst, host, bytes, kOneCopyPart * sizeof(float), copy_threads(1), stream,
                  [](const char*, auto&& f) { f(); });
    XC_CUDA_CHECK(cudaStreamSynchronize(stream));  // complete on return, its errors thrown here
}

void copy_to_host(int device, void* host, const void* src, size_t bytes, cudaStream_t stream) {
    if (copied_straight(host, src, bytes, cudaMemcpyDeviceToHost, stream)) return;
    CopyParts parts(device, stream);
    const int threads = copy_threads(1);
    const size_t part = kOneCopyPart * sizeof(float), count = (bytes + part - 1) / part;
    auto dma = [&](size_t k) {  // part k into its buffer
        Bounce& b = parts.part[k % 2];
        XC_CUDA_CHECK(cudaMemcpyAsync(b.buffer.get(), static_cast<const char*>(src) + k * part,
                                      std::min(part, bytes - k * part), cudaMemcpyDeviceToHost, stream));
        XC_CUDA_CHECK(cudaEventRecord(b.done.e, stream));
    };
    for (size_t k = 0; k < std::min<size_t>(count, 2); ++k) dma(k);
    for (size_t k = 0; k < count; ++k) {
        Bounce& b = parts.part[k % 2];
        XC_CUDA_CHECK(cudaEventSynchronize(b.done.e));
        host_copy_bytes(static_cast<char*>(host) + k * part, b.buffer.get(), std::min(part, bytes - k * part), threads);
        if (k + 2 < count) dma(k + 2);
    }
}

namespace {

// A timeline of one device's pipeline (XCORR_BATCH_TRACE=1), to see which queue or host step a
// batch waits on: each GPU step between two timing events on its queue (so from when the queue
// reaches it, after its waits), each host step (a bounce's copy, a drain's wait and copy) by the
// host's clock, both in ms from the pipeline's start; one line per step on stderr after the run.
class PipelineTrace {
public:
    PipelineTrace(int device, cudaStream_t s) : device_(device), t0_(std::chrono::steady_clock::now()) {
        origin_ = mark(s);
    }
    ~PipelineTrace() {
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
    }
    PipelineTrace(const PipelineTrace&) = delete;
    PipelineTrace& operator=(const PipelineTrace&) = delete;
    template <class F>
    void gpu(int piece, const char* step, cudaStream_t s, F&& f) {
        const cudaEvent_t a = mark(s);
        f();
        gpu_.push_back({piece, step, a, mark(s)});
    }
    template <class F>
    void host(int piece, const char* step, F&& f) {
        const double a = ms();
        f();
        host_.push_back({piece, step, a, ms()});
    }
    // After the queues are synchronised.
    void print() const {
        for (const Step<cudaEvent_t>& g : gpu_) {
            float a = 0, b = 0;
            XC_CUDA_CHECK(cudaEventElapsedTime(&a, origin_, g.a));
            XC_CUDA_CHECK(cudaEventElapsedTime(&b, origin_, g.b));
            std::fprintf(stderr, "batch trace: device %d piece %d %s gpu %.3f %.3f\n", device_, g.piece, g.step, a, b);
        }
        for (const Step<double>& h : host_)
            std::fprintf(stderr, "batch trace: device %d piece %d %s host %.3f %.3f\n", device_, h.piece, h.step, h.a,
                         h.b);
    }

private:
    template <class T>
    struct Step {
        int piece;
        const char* step;
        T a, b;
    };
    cudaEvent_t mark(cudaStream_t s) {
        cudaEvent_t e = nullptr;
        XC_CUDA_CHECK(cudaEventCreate(&e));
        events_.push_back(e);
        XC_CUDA_CHECK(cudaEventRecord(e, s));
        return e;
    }
    double ms() const {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    }
    int device_;
    std::chrono::steady_clock::time_point t0_;
    cudaEvent_t origin_ = nullptr;
    std::vector<cudaEvent_t> events_;
    std::vector<Step<cudaEvent_t>> gpu_;
    std::vector<Step<double>> host_;
};

// The pipeline's steps on a GPU (the header comment says which event guards what).
struct GpuSteps {
    const Problem& p;
    const std::vector<Piece>& pieces;
    std::map<std::tuple<int, int, int>, Plan>& plans;
    const float *left, *right;
    float* out;
    std::vector<std::unique_ptr<Slot>>& slots;
    cudaStream_t streams[kQueues];
    bool direct;       // `out` is page-locked: download into it, nothing to drain
    int copy_threads;  // host threads of a drain or a bounce
    std::array<Bounce, 2>& bounces;
    PipelineTrace* trace = nullptr;  // XCORR_BATCH_TRACE
    size_t next_bounce = 0;  // the buffers alternate across uploads too (an n-to-m block's run of rights)

    // f() on queue q (or the host), in the trace where there is one.
    template <class F>
    void on_queue(int i, const char* step, Queue q, F&& f) {
        if (!trace) return f();
        trace->gpu(i, step, streams[q], f);
    }
    template <class F>
    void on_host(int i, const char* step, F&& f) {
        if (!trace) return f();
        trace->host(i, step, f);
    }

    cudaEvent_t event(EventKind e, int s) const {
        const Slot& b = *slots[size_t(s)];
        return e == kUploaded ? b.uploaded.e : e == kComputed ? b.computed.e : b.downloaded.e;
    }
    void wait(Queue q, EventKind e, int s) { XC_CUDA_CHECK(cudaStreamWaitEvent(streams[q], event(e, s), 0)); }
    void record(Queue q, EventKind e, int s) { XC_CUDA_CHECK(cudaEventRecord(event(e, s), streams[q])); }
    void host_wait(EventKind e, int s) {
        on_host(-1, "host_wait", [&] { XC_CUDA_CHECK(cudaEventSynchronize(event(e, s))); });
    }

    void upload(int i, int s, int left_from, int right_from) {
        on_queue(i, "upload", kUp, [&] { upload_inputs(i, s, left_from, right_from); });
    }
    void upload_inputs(int i, int s, int left_from, int right_from) {
        const Piece& c = pieces[size_t(i)];
        const PieceData d = data_of(p, c, left, right, out);
        Slot& b = *slots[size_t(s)];
        // Which of the inputs come from pageable host memory, and whether those are large together:
        // then all of them are bounced (Bounce), the small left stack of a first piece too.
        const size_t nl = size_t(c.problem.left_elems()), nr = size_t(c.problem.right_elems());
        const bool pl = left_from == kFromHost && !page_locked(d.left, nl * sizeof(float));
        const bool pr = right_from == kFromHost && !page_locked(d.right, nr * sizeof(float));
        const bool bounce = (pl ? nl : 0) + (pr ? nr : 0) >= kBounceFrom;
        auto put = [&](float* dst, const float* host, int from, bool pageable, DeviceBuffer<float> Slot::*buffer,
                       size_t elems) {
            if (from == kHeld) return;
            if (from == kFromHost)
                from_host(i, dst, host, elems, pageable && bounce);
            else
                XC_CUDA_CHECK(cudaMemcpyAsync(dst, ((*slots[size_t(from)]).*buffer).get(), sizeof(float) * elems,
                                              cudaMemcpyDeviceToDevice, streams[kUp]));
        };
        put(b.left.get(), d.left, left_from, pl, &Slot::left, nl);
        put(b.right.get(), d.right, right_from, pr, &Slot::right, nr);
    }
    // Piece i's upload of n floats on `up`: bounced (Bounce), part by part, or directly.
    void from_host(int i, float* dst, const float* host, size_t n, bool bounce) {
        if (!bounce) {
            XC_CUDA_CHECK(cudaMemcpyAsync(dst, host, sizeof(float) * n, cudaMemcpyHostToDevice, streams[kUp]));
            return;
        }
        bounce_upload(bounces, next_bounce, dst, host, sizeof(float) * n, sizeof(float) * kBounceFloats, copy_threads,
                      streams[kUp], [&](const char* step, auto&& f) { on_host(i, step, f); });
    }
    void compute(int i, int s) {
        Slot& b = *slots[size_t(s)];
        on_queue(i, "compute", kCompute, [&] {
            plans.at(shape_key(pieces[size_t(i)])).execute(b.left.get(), b.right.get(), b.out.get(), streams[kCompute]);
        });
    }
    void download(int i, int s) {
        on_queue(i, "download", kDown, [&] { download_output(i, s); });
    }
    void download_output(int i, int s) {
        Slot& b = *slots[size_t(s)];
        const Piece& c = pieces[size_t(i)];
        const PieceLayout L = layout_of(p, c);
        if (direct && L.rows > 1) {  // a block: its rows to their places in the caller's output
            const size_t e = sizeof(float) * size_t(p.out_h()) * size_t(p.out_w());
            XC_CUDA_CHECK(cudaMemcpy2DAsync(data_of(p, c, left, right, out).out, L.pitch * e, b.out.get(), L.row * e,
                                            L.row * e, size_t(L.rows), cudaMemcpyDeviceToHost, streams[kDown]));
            return;
        }
        float* to = direct ? data_of(p, c, left, right, out).out : b.staging.get();
        XC_CUDA_CHECK(cudaMemcpyAsync(to, b.out.get(), sizeof(float) * c.problem.out_elems(), cudaMemcpyDeviceToHost,
                                      streams[kDown]));
    }
    void drain(int j, int s) {
        if (direct) return;  // the download wrote the caller's output (the host waited for it)
        const Piece& c = pieces[size_t(j)];
        on_host(j, "drain", [&] {
            copy_out(p, c, data_of(p, c, left, right, out).out, slots[size_t(s)]->staging.get(), copy_threads);
        });
    }
};

// The same schedule on the CPU for the reference (float64, rounded to float32 into the staging),
// on an emulated asynchronous machine: slots of host buffers, and queues whose steps run later, in
// an order drawn at random among those the waits allow (a queue's steps in order, a wait only past
// the event's record it saw when issued), the host blocking only where it waits. So a schedule
// that lacked a wait, skipped a needed copy, or drained a slot before its piece's download or
// twice would change the output of the CPU tests (the chunked reference equal to the whole).
class CpuSteps {
public:
    CpuSteps(const Problem& p, const std::vector<Piece>& pieces, const float* left, const float* right, float* out,
             int slots)
        : p_(p), pieces_(pieces), left_(left), right_(right), out_(out), lefts_(size_t(slots)),
          rights_(size_t(slots)), staging_(size_t(slots)), outs_(size_t(slots)),
          issued_(size_t(slots)), done_(size_t(slots)), random_(uint32_t(pieces.size()) * 2654435761u + 1) {}

    void wait(Queue q, EventKind e, int s) {
        queues_[q].push_back({nullptr, e, s, issued_[size_t(s)][e]});
        progress();
    }
    void record(Queue q, EventKind e, int s) {
        queues_[q].push_back({nullptr, e, s, ++issued_[size_t(s)][e], true});
        progress();
    }
    void host_wait(EventKind e, int s) {
        while (done_[size_t(s)][e] < issued_[size_t(s)][e])
            if (!step()) throw std::logic_error("batch pipeline: the host waits on an event no queue can reach");
    }
    void upload(int i, int s, int left_from, int right_from) {
        const Piece& c = pieces_[size_t(i)];
        const PieceData d = data_of(p_, c, left_, right_, out_);
        auto put = [this, s](std::vector<std::vector<float>>& slot, const float* host, int from, int64_t elems) {
            if (from == kFromHost) slot[size_t(s)].assign(host, host + elems);
            if (from >= 0) slot[size_t(s)].assign(slot[size_t(from)].begin(), slot[size_t(from)].begin() + elems);
        };
        enqueue(kUp, [this, put, d, left_from, right_from, &c] {
            put(lefts_, d.left, left_from, c.problem.left_elems());
            put(rights_, d.right, right_from, c.problem.right_elems());
        });
    }
    void compute(int i, int s) {
        const Piece& c = pieces_[size_t(i)];
        enqueue(kCompute, [this, s, &c] {
            outs_[size_t(s)].assign(size_t(c.problem.out_elems()), 0.0);
            reference_cpu(c.problem, lefts_[size_t(s)].data(), rights_[size_t(s)].data(), outs_[size_t(s)].data());
        });
    }
    void download(int, int s) {
        enqueue(kDown, [this, s] {
            const std::vector<double>& o = outs_[size_t(s)];
            staging_[size_t(s)].resize(o.size());
            for (size_t k = 0; k < o.size(); ++k) staging_[size_t(s)][k] = float(o[k]);
        });
    }
    void drain(int j, int s) {
        const Piece& c = pieces_[size_t(j)];
        const std::vector<float>& st = staging_[size_t(s)];
        if (st.size() != size_t(c.problem.out_elems())) throw std::logic_error("batch pipeline: slot holds another piece");
        copy_out(p_, c, data_of(p_, c, left_, right_, out_).out, st.data(), copy_threads(1));
    }
    // Runs what is left in the queues (at the end of a run, as the GPU path synchronises).
    void finish() {
        while (step()) {
        }
        for (const auto& q : queues_)
            if (!q.empty()) throw std::logic_error("batch pipeline: a queue waits on an event never reached");
    }

private:
    struct Item {
        std::function<void()> run;  // a step; or, without one, a wait (for `gen`) or a record (`gen`)
        EventKind event;
        int slot;
        int64_t gen;
        bool record = false;
    };
    void enqueue(Queue q, std::function<void()> f) {
        queues_[q].push_back({std::move(f), kUploaded, 0, 0});
        progress();
    }
    // A step after one call in four: the queues fall behind the host (as a GPU's do) until the host
    // waits, and then run in a random order, so steps the waits leave unordered do overtake each other.
    void progress() {
        if (random_() % 4 == 0) step();
    }
    bool ready(const Item& it) const {
        return it.run || it.record || done_[size_t(it.slot)][it.event] >= it.gen;
    }
    // Runs the head of a random queue that can run, and up to 7 more of its items while they can
    // (bursts: one queue running ahead of another); false when none can.
    bool step() {
        int heads[kQueues], n = 0;
        for (int q = 0; q < kQueues; ++q)
            if (!queues_[q].empty() && ready(queues_[q].front())) heads[n++] = q;
        if (n == 0) return false;
        std::deque<Item>& q = queues_[heads[random_() % uint32_t(n)]];
        for (int burst = 1 + int(random_() % 8); burst > 0 && !q.empty() && ready(q.front()); --burst) {
            Item it = std::move(q.front());
            q.pop_front();
            if (it.run) it.run();
            if (it.record) done_[size_t(it.slot)][it.event] = it.gen;
        }
        return true;
    }

    const Problem& p_;
    const std::vector<Piece>& pieces_;
    const float *left_, *right_;
    float* out_;
    std::vector<std::vector<float>> lefts_, rights_, staging_;
    std::vector<std::vector<double>> outs_;
    std::deque<Item> queues_[kQueues];
    std::vector<std::array<int64_t, kEventKinds>> issued_, done_;  // per slot and event: records issued, run
    std::minstd_rand random_;
};

// What a device's run builds before its pipeline (plans per piece shape, the slots' buffers, the
// bounce buffers, streams: ~3 ms per device and call on an H200, as much again to free) is kept
// from one run_batch call to the next, one per device, and reused when the next call on that device
// is the same problem, split and output kind (key): a loop of batches pays it once. Another
// problem frees the kept one first (its memory may be what the new one needs).
// release_batch_buffers() frees them all. Leaked at exit on purpose, like the StagingPool.
struct DeviceKit {
    std::string key;
    int64_t m;  // outputs per piece it was built for
    std::map<std::tuple<int, int, int>, Plan> plans;
    std::vector<std::unique_ptr<Slot>> slots;
    std::array<Bounce, 2> bounces;
    Stream up, compute, down;  // declared last: destroyed (synchronised) first
    DeviceKit(std::string k, int64_t m_, int device) : key(std::move(k)), m(m_) {
        for (Bounce& b : bounces) b.device = device;
    }
};

// Frees `kit` on its device (cudaFree, cufftDestroy and stream destruction want it current), the
// caller's current device restored.
void free_on_device(std::unique_ptr<DeviceKit> kit, int device) {
    if (!kit) return;
    int current = -1;
    const bool known = cudaGetDevice(&current) == cudaSuccess;
    if (!known || current != device) cudaSetDevice(device);
    kit.reset();
    if (known && current != device) cudaSetDevice(current);
    cudaGetLastError();  // teardown is best effort; nothing to report to a caller
}

class KitCache {
public:
    static KitCache& get() {
        static KitCache* cache = new KitCache;
        return *cache;
    }
    // The kit kept for `device` if it was built for `key` (taken out: a concurrent run on the device
    // builds its own), else nothing (a kept one for another key is freed).
    std::unique_ptr<DeviceKit> take(int device, const std::string& key) {
        std::unique_ptr<DeviceKit> kit;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = kept_.find(device);
            if (it == kept_.end()) return nullptr;
            kit = std::move(it->second);
            kept_.erase(it);
        }
        if (kit && kit->key == key) return kit;
        free_on_device(std::move(kit), device);
        return nullptr;
    }
    void give_back(int device, std::unique_ptr<DeviceKit> kit) {
        std::unique_ptr<DeviceKit> older;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            older = std::exchange(kept_[device], std::move(kit));
        }
        free_on_device(std::move(older), device);
    }
    size_t pinned_bytes() {
        std::lock_guard<std::mutex> lock(mutex_);
        size_t b = 0;
        for (const auto& [device, kit] : kept_) {
            if (!kit) continue;
            for (const auto& slot : kit->slots) b += slot->staging.size() * sizeof(float);
            for (const Bounce& x : kit->bounces) b += x.buffer.size() * sizeof(float);
        }
        return b;
    }
    void release() {
        std::map<int, std::unique_ptr<DeviceKit>> gone;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            gone.swap(kept_);
        }
        for (auto& [device, kit] : gone) free_on_device(std::move(kit), device);
    }

private:
    std::mutex mutex_;
    std::map<int, std::unique_ptr<DeviceKit>> kept_;
};

// What a kit is reused for: the problem, how it is computed, this device's share and split, and
// whether the output is page-locked (no staging) or not.
std::string kit_key(const PlanSpec& spec, const Problem& p, const Share& share, int64_t max_outputs, Split split,
                    bool direct) {
    std::string key = p.describe() + "|" + spec.algorithm + "|" + spec.precision + "|" + spec.normalize + "|";
    for (const auto& [k, v] : spec.params) key += k + "=" + v + ",";
    return key + "|" + share.key() + "|" + std::to_string(max_outputs) + "|" +
           split_name(split) + "|" + (direct ? "direct" : "staged");
}

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// What one device's run did (BatchReport's entries for it).
struct DeviceRun {
    Clock::time_point ended;    // when its host thread was done with it (its locals freed)
    std::vector<Piece> pieces;  // as run (after any halving)
    std::string algorithm;      // of its first plan
    DeviceSeconds seconds;
    bool direct = false, reused = false;
    Split split = Split::Lefts;  // as resolved
};

// One device's run: pieces of at most m outputs (halving m while the GPU runs out of memory),
// a plan per piece shape, kSlots slots of buffers for the largest piece (a DeviceKit, kept for the
// next call), pipelined (header comment).
// `run.seconds`: its phases by the host's clock (BatchReport::seconds).
void run_device(const PlanSpec& spec, const Problem& p, const float* left, const float* right, float* out, int device,
                int index, int devices, const Share& share, const BatchOptions& options, Clock::time_point called,
                DeviceRun& run) {
    auto since = [](Clock::time_point t) { return seconds_between(t, Clock::now()); };
    XC_CUDA_CHECK(cudaSetDevice(device));
    if (share.empty()) return;
    const size_t out_elems = matrix_elems(p.out_h(), p.out_w());
    const auto [o0, o1] = share.span(p);
    const bool direct = page_locked(out + size_t(o0) * out_elems, sizeof(float) * size_t(o1 - o0) * out_elems);
    // A share by rights was cut so because the batch's split is blocks (run_batch).
    const Split split = share.by_rights ? Split::Blocks
                                        : resolve_split(options.split, direct,
                                                        page_locked(right, sizeof(float) * size_t(p.right_elems())));
    const std::string key = kit_key(spec, p, share, options.max_outputs, split, direct);
    std::unique_ptr<DeviceKit> kit = KitCache::get().take(device, key);  // before the free memory is read
    run.direct = direct;
    run.reused = kit != nullptr;
    run.split = split;
    int64_t m = kit ? kit->m : options.max_outputs;
    if (m <= 0) {
        size_t free_b = 0, total_b = 0;
        XC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        m = std::min(fitting_outputs(p, free_b), pipelined_outputs(p));
    }
    run.seconds.start = since(called);
    for (;;) {
        std::vector<Piece> pieces;
        share_pieces(p, share, m, index, split, pieces);
        const Clock::time_point t0 = Clock::now();
        try {
            if (!kit) {
                kit = std::make_unique<DeviceKit>(key, m, device);
                size_t most_l = 0, most_r = 0, most_o = 0;
                for (const Piece& c : pieces) {
                    const auto shape = shape_key(c);
                    if (!kit->plans.count(shape))
                        kit->plans.emplace(shape, Plan(spec_of(c.problem, spec.algorithm, spec.params, spec.precision)));
                    most_l = std::max(most_l, size_t(c.problem.left_elems()));
                    most_r = std::max(most_r, size_t(c.problem.right_elems()));
                    most_o = std::max(most_o, size_t(c.problem.out_elems()));
                }
                // A run of one piece needs one slot.
                for (size_t s = 0; s < std::min<size_t>(kSlots, pieces.size()); ++s)
                    kit->slots.push_back(std::make_unique<Slot>(most_l, most_r, most_o, device, !direct));
            }
            run.algorithm = kit->plans.begin()->second.algorithm();
            GpuSteps steps{p,           pieces, kit->plans, left, right, out, kit->slots,
                           {kit->up.s, kit->compute.s, kit->down.s}, direct, copy_threads(devices), kit->bounces};
            const double setup = since(t0);
            std::unique_ptr<PipelineTrace> trace;
            if (env_on("XCORR_BATCH_TRACE")) {
                trace = std::make_unique<PipelineTrace>(device, kit->compute.s);
                steps.trace = trace.get();
            }
            const Clock::time_point t1 = Clock::now();
            run_pipeline(pieces, int(kit->slots.size()), steps);
            for (cudaStream_t st : steps.streams) XC_CUDA_CHECK(cudaStreamSynchronize(st));  // surfaces a fault here
            const double pipeline = since(t1);
            if (trace) trace->print();
            const Clock::time_point t_end = Clock::now();
            KitCache::get().give_back(device, std::move(kit));  // for the next call (an older kit freed)
            run.seconds.setup += setup;
            run.seconds.pipeline += pipeline;
            run.seconds.teardown += since(t_end);
            run.pieces = std::move(pieces);
            return;
        } catch (const std::exception& e) {
            kit.reset();  // streams synchronised first, then the buffers and plans freed
            if (!out_of_memory(e)) throw;
            cudaGetLastError();  // an allocation failure is not sticky; clear it before retrying
            if (m == 1)
                throw UsageError("not enough GPU memory on device " + std::to_string(device) +
                                 " for one output matrix of " + p.describe() + ": " + e.what());
            m = std::max<int64_t>(1, m / 2);
            run.seconds.setup += since(t0);  // the whole failed attempt counts as setup, once
        }
    }
}

}  // namespace

PieceLayout layout_of(const Problem& batch, const Piece& c) {
    if (batch.form == Form::NToM && c.problem.form == Form::NToM && c.problem.nR < batch.nR)
        return {c.problem.nL, c.problem.nR, batch.nR};  // a block: a row of its rights per left
    return {1, c.problem.out_count(), c.problem.out_count()};
}

Split parse_split(const std::string& text) {
    if (text == "auto") return Split::Auto;
    if (text == "lefts") return Split::Lefts;
    if (text == "blocks") return Split::Blocks;
    throw UsageError("--split '" + text + "': expected auto, lefts or blocks");
}

const char* split_name(Split split) {
    return split == Split::Auto ? "auto" : split == Split::Blocks ? "blocks" : "lefts";
}

bool rights_divide(const Problem& p, int devices) {
    return p.form == Form::NToM && devices > 1 && p.nR >= devices &&
           double(p.nR) * p.hR * p.wR > double(p.nL) * p.hL * p.wL;
}

Split resolve_split(Split split, bool out_locked, bool rights_locked, bool by_rights) {
    if (split != Split::Auto) return split;
    return out_locked || rights_locked || by_rights ? Split::Blocks : Split::Lefts;
}

std::vector<Piece> split_batch(const Problem& p, int devices, int64_t max_outputs, Split split) {
    if (devices < 1) throw UsageError("split_batch: at least one device");
    if (max_outputs < 0) throw UsageError("split_batch: max_outputs must be positive or 0 (no limit)");
    p.check();
    const int64_t total = p.out_count(), m = max_outputs ? max_outputs : total;
    std::vector<Piece> pieces;
    const Split resolved = resolve_split(split, false, false, rights_divide(p, devices));
    for (int d = 0; d < devices; ++d) share_pieces(p, device_share(p, devices, d, resolved), m, d, resolved, pieces);
    return in_output_order(std::move(pieces));
}

namespace {
// UsageError (starting with `prefix`) for an ordinal of `devices` that no visible GPU has;
// NoGpuError where none is visible.
void require_devices_exist(const std::vector<int>& devices, const std::string& prefix) {
    const int count = visible_gpu_count();
    for (int d : devices)
        if (d < 0 || d >= count)
            throw UsageError(prefix + "device " + std::to_string(d) + " does not exist (" + std::to_string(count) +
                             " visible)");
}
}  // namespace

std::vector<int> parse_devices(const std::string& text, bool check, const std::string& what) {
    std::vector<int> out;
    if (text == "all") {
        const int count = visible_gpu_count();
        for (int i = 0; i < count; ++i) out.push_back(i);
        return out;
    }
    std::set<int> seen;
    size_t pos = 0;
    while (pos <= text.size()) {
        const size_t comma = std::min(text.find(',', pos), text.size());
        const std::string item = text.substr(pos, comma - pos);
        const bool digits = !item.empty() && item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
        if (!digits)
            throw UsageError(what + " '" + text + "': expected all or device ordinals separated by commas, e.g. 0,1");
        const int d = std::stoi(item);
        if (!seen.insert(d).second) throw UsageError(what + " '" + text + "': device " + item + " is given twice");
        out.push_back(d);
        pos = comma + 1;
    }
    if (check) require_devices_exist(out, what + " '" + text + "': ");
    return out;
}

BatchReport run_batch(const PlanSpec& spec, const float* left, const float* right, float* out,
                      const BatchOptions& options) {
    if (options.max_outputs < 0) throw UsageError("the most outputs per piece must be positive (or 0: what fits)");
    const Problem p = problem_of(spec);
    if (spec.reduce.kind != ReductionKind::Map)
        throw UsageError("a batch writes maps into a host array: reduce with a plan (Plan::execute with "
                         "ReducedOutputs), which keeps its memory bounded itself");
    const Clock::time_point called = Clock::now();
    BatchReport report;
    if (spec.algorithm == "reference") {
        if (!options.devices.empty()) throw UsageError("the reference runs on the CPU: it takes no GPUs");
        report.pieces = split_batch(p, 1, options.max_outputs, options.split);
        // Through the GPU's schedule (run_pipeline): the CPU tests of the chunked reference check it.
        CpuSteps steps(p, report.pieces, left, right, out, kSlots);
        run_pipeline(report.pieces, kSlots, steps);
        steps.finish();
        report.algorithms = {"reference"};
        return report;
    }
    std::vector<int> devices = options.devices;
    // No GPU: NoGpuError with the reason, not cudaGetDevice's bare error; an ordinal that does not
    // exist (the C API takes them as numbers) is bad usage, not a CUDA error.
    require_devices_exist(devices, "");
    int current = 0;
    XC_CUDA_CHECK(cudaGetDevice(&current));
    if (devices.empty()) devices = {current};
    const int n = int(devices.size());
    std::vector<DeviceRun> runs(n);
    std::vector<std::exception_ptr> errors(n);
    // The division among the devices follows the split the whole batch resolves to (a device's
    // own part of the output may be page-locked where the whole is not: run_device resolves
    // its pieces' split for itself).
    const Split split = resolve_split(options.split, page_locked(out, sizeof(float) * size_t(p.out_elems())),
                                      page_locked(right, sizeof(float) * size_t(p.right_elems())),
                                      rights_divide(p, n));
    auto run_one = [&](size_t i) {
        try {
            run_device(spec, p, left, right, out, devices[i], int(i), n, device_share(p, n, int(i), split), options,
                       called, runs[i]);
        } catch (...) {
            errors[i] = std::current_exception();
        }
        runs[i].ended = Clock::now();
    };
    // One host thread per device: the calling thread and kept workers (in_parallel's own threads;
    // against a thread started per device per call: notes/multi-gpu.md, the same section). The calling
    // thread's current device is put back after its run chose its own.
    in_parallel(size_t(n), run_one, true);
    cudaSetDevice(current);  // best effort: it was current before the call
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    for (DeviceRun& r : runs) {
        report.pieces.insert(report.pieces.end(), r.pieces.begin(), r.pieces.end());
        report.algorithms.push_back(r.algorithm);
        report.seconds.push_back(r.seconds);
        report.direct.push_back(r.direct);
        report.reused.push_back(r.reused);
        report.split.push_back(r.split);
    }
    report.pieces = in_output_order(std::move(report.pieces));
    const Clock::time_point done = Clock::now();
    for (int i = 0; i < n; ++i) report.seconds[size_t(i)].finish = seconds_between(runs[size_t(i)].ended, done);
    return report;
}

void release_batch_buffers() {
    KitCache::get().release();  // first: its slots give their staging back to the pool
    StagingPool::get().release();
}
size_t batch_buffer_bytes() { return StagingPool::get().bytes() + KitCache::get().pinned_bytes(); }

}  // namespace xcorr
