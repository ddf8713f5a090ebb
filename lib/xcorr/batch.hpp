// A batch of pairs split across the GPUs of a host and into pieces that fit each GPU's memory:
// the inputs and the output live in host memory; every piece is an ordinary problem
// of its own (a Plan on one device), and its outputs are a contiguous run of the batch's (or, for
// n-to-m blocks, rows of one: PieceLayout).
//
// Split. The output matrices of the batch are dealt to the devices as contiguous, equal runs
// (every pair costs the same: the sizes and the window are the batch's), except that an n-to-m
// batch cut as blocks whose right stack holds more data than its left one is divided by rights:
// each device takes every left with an equal run of the rights (an n-to-m batch of its own, cut as
// below and placed in the batch's rows), so that no right is uploaded to two devices. Each
// device's run is cut into pieces of at most `max_outputs` matrices that are problems of the
// contract's forms:
//   one-to-one   the one pair (nothing to split);
//   one-to-many  a run of rights: one-to-many with the left and those rights;
//   n-to-m       output k = l·M + q: whole lefts (n-to-m with those lefts and every right), or part
//                of one left's M outputs (one-to-many with that left and a run of rights); with
//                Split::Blocks, a device's whole lefts that take more than one piece are cut the
//                other way instead: blocks of all those lefts (at most max_outputs of them) and a
//                run of the rights, so that each right is uploaded once per device and each piece
//                needs a part of the right stack, not all of it (a block's outputs are one row of
//                its rights per left: PieceLayout); only where a block takes at least as many
//                rights as lefts, else the whole-left pieces.
//   n-to-mn      output k = corr(L[k mod N], R[k]): whole groups of N rights (n-to-mn with every
//                left), or part of one group (n-to-mn with the lefts a..b-1 and rights k0..k0+b-a-1,
//                M = 1: output j pairs L[a + j] with R[k0 + j], and k0 mod N = a).
// Pairs are independent in every normalization (means, tables and C(0, 0) are per matrix or per
// pair), so a piece's output equals that part of the whole batch's output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "xcorr/core.hpp"
#include "xcorr/plan.hpp"

namespace xcorr {

struct Piece {
    Problem problem;                 // the piece's own problem (same sizes, window, normalization)
    int64_t left0 = 0, right0 = 0;   // its first left and right matrix in the batch's stacks
    int64_t out0 = 0;                // its first output matrix in the batch's output
    int device = 0;                  // index into the device list it runs on
};

// Where a piece's outputs sit in the batch's output: `rows` rows of `row` consecutive output
// matrices, the first at out0, each `pitch` matrices after the one before. One row of all its
// outputs, except an n-to-m block: a row of its rights per left, the batch's M apart.
struct PieceLayout {
    int64_t rows = 1, row = 0, pitch = 0;
};
PieceLayout layout_of(const Problem& batch, const Piece& c);

// How a device's n-to-m run is cut when its whole lefts take more than one piece (header comment):
// Lefts, pieces of whole lefts with every right; Blocks, all the lefts with a run of the rights;
// Auto, per device (resolve_split): Blocks where its output range or the right stack is page-locked
// host memory, or where the devices divide the batch by rights (several GPUs, the right stack the
// larger: rights_divide), Lefts otherwise. Why: a block waits for its own run of rights only and
// each right's spectrum is made once, which wins when the copies run at the link's rate; with both
// pageable on one GPU, every block's rights are bounced through host memory on the thread that also
// drains the outputs, and whole lefts (one bounce of the right stack, at the start) win (measured:
// notes/probes.md, the multi-gpu probe, items 5 to 7); on two GPUs dividing the rights halves each
// one's bounce, and blocks win again (notes/multi-gpu.md, "the GPUs dividing the rights").
enum class Split { Auto, Lefts, Blocks };
Split parse_split(const std::string& text);  // "auto", "lefts" or "blocks"; UsageError otherwise
const char* split_name(Split split);
// Whether `devices` GPUs running `p` as blocks divide it by rights (Split, above): n-to-m, more than
// one device, at least one right each, more data in the right stack than in the left one (against
// dividing the lefts there: notes/multi-gpu.md, "the GPUs dividing the rights").
bool rights_divide(const Problem& p, int devices);
// Auto's choice for a device whose output range is page-locked (`out_locked`) or not, with a
// page-locked right stack or not, in a batch the devices divide by rights as blocks (`by_rights`:
// rights_divide) or not; Lefts and Blocks as they are.
Split resolve_split(Split split, bool out_locked, bool rights_locked, bool by_rights = false);

// The pieces of `p` over `devices` devices, each at most `max_outputs` output matrices (0: no
// limit), in output order (rows of blocks: by their first output). Devices get equal contiguous
// runs of outputs (a device with nothing to do gets no piece). Pure: no GPU needed (xcorr explain
// --gpus shows it; tests check it). Auto is resolved as for pageable memory (what xcorr run uses).
std::vector<Piece> split_batch(const Problem& p, int devices, int64_t max_outputs = 0, Split split = Split::Auto);

struct BatchOptions {
    // CUDA device ordinals to spread the batch over; empty: the current device alone.
    std::vector<int> devices;
    // At most this many output matrices per piece; 0: about 64 MB of output per piece (whole lefts
    // of n-to-m, whole groups of n-to-mn; so that a device's pieces overlap each other's copies and
    // kernels) or fewer if that does not fit the device's memory next to a second piece in flight
    // (the plan's workspace included), found by building the plan and halving on out-of-memory.
    int64_t max_outputs = 0;
    // How n-to-m runs of whole lefts are cut (Split).
    Split split = Split::Auto;
};

// One device's part of a run, in seconds by the host's clock: start (from the call's start to the
// device's setup: its host thread reached, its output's memory asked whether page-locked, what it
// kept from the last call looked up), setup (plans, device buffers, the pinned staging, streams,
// unless the device kept them from a call on the same problem; a failed attempt that halved the
// pieces included), pipeline (the first upload to the last output copied into the caller's array),
// teardown (keeping them for the next call; freeing what was kept before), finish (from the
// device's run done to the call's end: waiting for the other devices, the report assembled).
struct DeviceSeconds {
    double start = 0, setup = 0, pipeline = 0, teardown = 0, finish = 0;
};

// What a run did: the pieces as run (after any halving), the algorithm of each device's first
// plan ("reference" on the CPU path) and each device's phases (empty on the CPU path).
struct BatchReport {
    std::vector<Piece> pieces;
    std::vector<std::string> algorithms;  // per device in BatchOptions::devices order
    std::vector<DeviceSeconds> seconds;   // likewise
    // Likewise: whether the device downloaded its pieces straight into `out` (page-locked host
    // memory: cudaMallocHost, cudaHostRegister, PyTorch's pin_memory) instead of through the staging.
    std::vector<bool> direct;
    // Likewise: whether the device reused what it kept from the previous call (release_batch_buffers).
    std::vector<bool> reused;
    // Likewise: how the device's run was cut (BatchOptions::split resolved: Lefts or Blocks).
    std::vector<Split> split;
};

// Computes the whole output of `spec` from host stacks into the host output `out` (laid out as the
// contract says), piece by piece, one host thread per device, each device's pieces pipelined: piece
// i's upload and piece i-1's download overlap piece i's kernels, the outputs staged in pinned memory
// and copied into `out` by the host while the GPU runs the next piece (batch.cpp's header says how),
// or, where `out` is page-locked host memory itself, downloaded straight into it (no host copy: the
// fastest way to run a loop of batches is one page-locked `out` reused). With spec.algorithm "reference" the
// pieces run on the CPU in float64 (rounded to float32) one after another and `devices` must be
// empty: the split and assembly, checked without a GPU. Throws what Plan throws; a piece that does
// not fit even alone (one output matrix) is a UsageError naming it.
BatchReport run_batch(const PlanSpec& spec, const float* left, const float* right, float* out,
                      const BatchOptions& options = {});

// Frees what run_batch keeps between calls so that a loop of batch calls does not pay it every
// call: per device it ran on, the last problem's plans, device buffers (two pieces' inputs and
// outputs) and streams, and the pinned host staging (two output pieces of ~64 MB, two upload bounce
// buffers: 4 MB, or the 16 MB parts of copy_to_device / copy_to_host once those have run). Safe at
// any time: a run in progress keeps what it holds and gives it back when it ends. Call it before
// cudaDeviceReset, which frees them under the pool (as it does plans' memory).
void release_batch_buffers();
// The bytes of pinned host memory kept now (0 after release_batch_buffers or before the first run).
size_t batch_buffer_bytes();

// One array of `bytes` between host memory and device memory, the copy enqueued on `stream` (after
// the work before it) and complete when the call returns. Where the host memory is pageable and
// the array large, it goes through two pinned parts kept between calls (as run_batch's inputs do),
// the host's side of each part copied by several threads while the other part's DMA runs: the
// driver's own pageable copy holds one host thread (~8 GB/s on the H200 hosts, and a fresh array's
// first-touch page faults serial in it). `device` is the device of `stream` (the current one).
void copy_to_device(int device, void* dst, const void* host, size_t bytes, cudaStream_t stream);
void copy_to_host(int device, void* host, const void* src, size_t bytes, cudaStream_t stream);

// "all" -> every visible device; "0,2" -> those ordinals (checked against the device count when
// `check` is set). UsageError on anything else, naming the option `what` the text came from.
std::vector<int> parse_devices(const std::string& text, bool check = true, const std::string& what = "--gpus");

}  // namespace xcorr
