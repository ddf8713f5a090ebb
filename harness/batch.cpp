// A batch split across GPUs and into pieces that fit (batch.hpp explains the split).
#include "xcorr/batch.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <map>
#include <set>
#include <thread>
#include <tuple>

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

// The pieces of outputs [k0, k1) of `p`, each at most m outputs (m >= 1), appended to `out`.
void split_range(const Problem& p, int64_t k0, int64_t k1, int64_t m, int device, std::vector<Piece>& out) {
    int64_t k = k0;
    while (k < k1) {
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
                const int64_t M = p.nR, l = k / M, q = k % M;
                if (q == 0 && left >= M && M <= m) {
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

bool out_of_memory(const std::exception& e) {
    const std::string w = e.what();
    return w.find("out of memory") != std::string::npos || w.find("not enough GPU memory") != std::string::npos ||
           w.find("ALLOC_FAILED") != std::string::npos;
}

// Output matrices that plausibly fit in `free_bytes` at once: the piece's stacks and output, and
// about as much again for the algorithm's workspace (FFT spectra); halved on failure after that.
int64_t fitting_outputs(const Problem& p, size_t free_bytes) {
    const double per_output =
        4.0 * (double(p.out_h()) * p.out_w() + double(p.hR) * p.wR + (p.form == Form::NToMn ? double(p.hL) * p.wL : 0));
    const double fixed = 4.0 * double(p.hL) * p.wL * (p.form == Form::NToMn ? 0 : 1);
    const double usable = 0.4 * double(free_bytes) - fixed;
    return std::max<int64_t>(1, int64_t(usable / per_output));
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

// Pieces of one shape share a plan.
std::tuple<int, int, int> shape_key(const Piece& c) {
    return {int(c.problem.form), c.problem.nL, c.problem.nR};
}

// One device's run: pieces of at most m outputs (halving m while the GPU runs out of memory),
// a plan per piece shape, buffers for the largest piece, copies on one stream.
void run_device(const PlanSpec& spec, const Problem& p, const float* left, const float* right, float* out, int device,
                int index, int64_t k0, int64_t k1, int64_t max_outputs, std::vector<Piece>& done, std::string& algorithm) {
    XC_CUDA_CHECK(cudaSetDevice(device));
    if (k0 >= k1) return;
    int64_t m = max_outputs;
    if (m <= 0) {
        size_t free_b = 0, total_b = 0;
        XC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        m = fitting_outputs(p, free_b);
    }
    for (;;) {
        std::vector<Piece> pieces;
        split_range(p, k0, k1, m, index, pieces);
        try {
            std::map<std::tuple<int, int, int>, Plan> plans;
            size_t most_l = 0, most_r = 0, most_o = 0;
            for (const Piece& c : pieces) {
                const auto key = shape_key(c);
                if (!plans.count(key))
                    plans.emplace(key, Plan(spec_of(c.problem, spec.algorithm, spec.params, spec.precision)));
                most_l = std::max(most_l, size_t(c.problem.left_elems()));
                most_r = std::max(most_r, size_t(c.problem.right_elems()));
                most_o = std::max(most_o, size_t(c.problem.out_elems()));
            }
            DeviceBuffer<float> dl(most_l), dr(most_r), dout(most_o);
            cudaStream_t stream = nullptr;
            XC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
            struct StreamGuard {
                cudaStream_t s;
                ~StreamGuard() { cudaStreamDestroy(s); }
            } guard{stream};
            algorithm = plans.begin()->second.algorithm();
            for (const Piece& c : pieces) {
                const PieceData d = data_of(p, c, left, right, out);
                XC_CUDA_CHECK(cudaMemcpyAsync(dl.get(), d.left, sizeof(float) * c.problem.left_elems(),
                                              cudaMemcpyHostToDevice, stream));
                XC_CUDA_CHECK(cudaMemcpyAsync(dr.get(), d.right, sizeof(float) * c.problem.right_elems(),
                                              cudaMemcpyHostToDevice, stream));
                plans.at(shape_key(c)).execute(dl.get(), dr.get(), dout.get(), stream);
                XC_CUDA_CHECK(cudaMemcpyAsync(d.out, dout.get(), sizeof(float) * c.problem.out_elems(),
                                              cudaMemcpyDeviceToHost, stream));
                XC_CUDA_CHECK(cudaStreamSynchronize(stream));
            }
            done = std::move(pieces);
            return;
        } catch (const std::exception& e) {
            if (!out_of_memory(e)) throw;
            cudaGetLastError();  // an allocation failure is not sticky; clear it before retrying
            if (m == 1)
                throw UsageError("not enough GPU memory on device " + std::to_string(device) +
                                 " for one output matrix of " + p.describe() + ": " + e.what());
            m = std::max<int64_t>(1, m / 2);
        }
    }
}

}  // namespace

std::vector<Piece> split_batch(const Problem& p, int devices, int64_t max_outputs) {
    if (devices < 1) throw UsageError("split_batch: at least one device");
    if (max_outputs < 0) throw UsageError("split_batch: max_outputs must be positive or 0 (no limit)");
    p.check();
    const int64_t total = p.out_count(), m = max_outputs ? max_outputs : total;
    std::vector<Piece> pieces;
    for (int d = 0; d < devices; ++d) {
        const auto [k0, k1] = device_run(total, devices, d);
        split_range(p, k0, k1, m, d, pieces);
    }
    return pieces;
}

std::vector<int> parse_devices(const std::string& text, bool check) {
    auto visible = [&] {
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
            cudaGetLastError();
            throw NoGpuError("--gpus " + text + ": no CUDA device is visible");
        }
        return count;
    };
    std::vector<int> out;
    if (text == "all") {
        const int count = visible();
        for (int i = 0; i < count; ++i) out.push_back(i);
        return out;
    }
    std::set<int> seen;
    size_t pos = 0;
    while (pos <= text.size()) {
        const size_t comma = std::min(text.find(',', pos), text.size());
        const std::string item = text.substr(pos, comma - pos);
        const bool digits = !item.empty() && item.size() <= 4 && item.find_first_not_of("0123456789") == std::string::npos;
        if (!digits)
            throw UsageError("--gpus '" + text + "': expected all or device ordinals separated by commas, e.g. 0,1");
        const int d = std::stoi(item);
        if (!seen.insert(d).second) throw UsageError("--gpus '" + text + "': device " + item + " is given twice");
        out.push_back(d);
        pos = comma + 1;
    }
    if (check) {
        const int count = visible();
        for (int d : out)
            if (d >= count)
                throw UsageError("--gpus '" + text + "': device " + std::to_string(d) + " does not exist (" +
                                 std::to_string(count) + " visible)");
    }
    return out;
}

BatchReport run_batch(const PlanSpec& spec, const float* left, const float* right, float* out,
                      const BatchOptions& options) {
    if (options.max_outputs < 0) throw UsageError("the most outputs per piece must be positive (or 0: what fits)");
    const Problem p = problem_of(spec);
    BatchReport report;
    if (spec.algorithm == "reference") {
        if (!options.devices.empty()) throw UsageError("the reference runs on the CPU: it takes no GPUs");
        report.pieces = split_batch(p, 1, options.max_outputs);
        for (const Piece& c : report.pieces) {
            const PieceData d = data_of(p, c, left, right, out);
            std::vector<double> ref(size_t(c.problem.out_elems()));
            reference_cpu(c.problem, d.left, d.right, ref.data());
            for (size_t i = 0; i < ref.size(); ++i) d.out[i] = float(ref[i]);
        }
        report.algorithms = {"reference"};
        return report;
    }
    std::vector<int> devices = options.devices;
    if (devices.empty()) {
        int current = 0;
        XC_CUDA_CHECK(cudaGetDevice(&current));
        devices = {current};
    }
    const int n = int(devices.size());
    std::vector<std::vector<Piece>> done(n);
    std::vector<std::string> algorithms(n);
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
        const auto [k0, k1] = device_run(p.out_count(), n, i);
        threads.emplace_back([&, i, k0 = k0, k1 = k1] {
            try {
                run_device(spec, p, left, right, out, devices[i], i, k0, k1, options.max_outputs, done[i], algorithms[i]);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    for (auto& d : done) report.pieces.insert(report.pieces.end(), d.begin(), d.end());
    report.algorithms = algorithms;
    return report;
}

}  // namespace xcorr
