#include "harness/check.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "xcorr/cuda_check.hpp"
#include "xcorr/gpu.hpp"
#include "xcorr/reference_element.hpp"

namespace xcorr {

void fill_inputs(const Problem& p, float* left, float* right, uint64_t seed, InputRange range, cudaStream_t stream) {
    fill_uniform(left, size_t(p.left_elems()), seed, stream, range.lo, range.hi);
    fill_uniform(right, size_t(p.right_elems()), seed + 1, stream, range.lo, range.hi);
}

namespace {
std::vector<double> to_host(const DeviceBuffer<double>& d, cudaStream_t stream) {
    std::vector<double> h(d.size());
    XC_CUDA_CHECK(cudaMemcpyAsync(h.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost, stream));
    XC_CUDA_CHECK(cudaStreamSynchronize(stream));
    return h;
}
}  // namespace

Reference full_reference(const Problem& p, const float* left, const float* right, cudaStream_t stream) {
    Reference ref;
    ref.problem = p;
    ref.out_elems = size_t(p.out_elems());
    require_host_memory(ref.out_elems * (sizeof(double) + sizeof(float)), "the full reference");
    DeviceBuffer<double> d(ref.out_elems);
    reference_gpu(p, left, right, d.get(), stream);
    ref.values = to_host(d, stream);
    return ref;
}

Reference sampled_reference(const Problem& p, const float* left, const float* right,
                            const std::vector<int64_t>& positions, cudaStream_t stream) {
    if (positions.empty()) throw UsageError("sampled_reference: no positions (full_reference checks every element)");
    Reference ref;
    ref.problem = p;
    ref.out_elems = size_t(p.out_elems());
    ref.positions = DeviceBuffer<int64_t>(positions.size());
    XC_CUDA_CHECK(cudaMemcpyAsync(ref.positions.get(), positions.data(), ref.positions.bytes(),
                                  cudaMemcpyHostToDevice, stream));
    DeviceBuffer<double> d(positions.size());
    reference_gpu_at(p, left, right, ref.positions.get(), positions.size(), d.get(), stream);
    ref.values = to_host(d, stream);  // synchronises: `positions` may go out of scope after this
    return ref;
}

std::vector<int64_t> sample_positions(const Problem& p, size_t max_samples, uint64_t seed) {
    const int64_t total = p.out_elems();
    std::vector<int64_t> out;
    if (total <= int64_t(max_samples)) {
        out.resize(size_t(total));
        std::iota(out.begin(), out.end(), int64_t(0));
        return out;
    }
    const int oh = p.out_h(), ow = p.out_w();
    const int64_t count = p.out_count(), per_matrix = int64_t(oh) * ow;
    // Rows (and columns) where the overlap's extent changes, those the window holds: the shifts
    // -(hR - 1) and hL - 1 (one-element overlaps), 0 and hL - hR (the two ends of the plateau);
    // and the window's first, last and centre row. For the full output: 0, hR - 1, hL - 1, the
    // centre and the last.
    const Window win = p.shifts();
    const auto marks = [](int h_left, int h_right, int first_shift, int n) {
        std::vector<int> m = {0, n / 2, n - 1};
        for (int s : {1 - h_right, 0, h_left - h_right, h_left - 1}) {
            const int64_t row = int64_t(s) - first_shift;
            if (row >= 0 && row < n) m.push_back(int(row));
        }
        std::sort(m.begin(), m.end());
        m.erase(std::unique(m.begin(), m.end()), m.end());
        return m;
    };
    const std::vector<int> ys = marks(p.hL, p.hR, win.dy0, oh), xs = marks(p.wL, p.wR, win.dx0, ow);
    std::vector<std::pair<int, int>> grid, corners;
    for (int y : ys)
        for (int x : xs) {
            grid.emplace_back(y, x);
            if ((y == 0 || y == oh - 1) && (x == 0 || x == ow - 1)) corners.emplace_back(y, x);
        }
    const int64_t budget = int64_t(max_samples) / 2;
    const auto& points = count * int64_t(grid.size()) <= budget ? grid : corners;
    const int64_t matrices = std::clamp<int64_t>(budget / int64_t(points.size()), 1, count);
    out.reserve(max_samples);
    for (int64_t i = 0; i < matrices; ++i) {
        const int64_t k = matrices == 1 ? 0 : i * (count - 1) / (matrices - 1);  // first and last included
        for (const auto& [y, x] : points) out.push_back(k * per_matrix + int64_t(y) * ow + x);
    }
    std::mt19937_64 rng(seed);
    // A window reaching beyond the full range is 0 there: half the random positions go to its part
    // within the full range (where the sums are), if it has one. The full window draws as before.
    const Window full = full_window(p);
    const Window in{std::max(win.dy0, full.dy0), std::min(win.dy1, full.dy1), std::max(win.dx0, full.dx0),
                    std::min(win.dx1, full.dx1)};
    if (!(in == win) && in.dy0 <= in.dy1 && in.dx0 <= in.dx1) {
        std::uniform_int_distribution<int64_t> matrix(0, count - 1);
        std::uniform_int_distribution<int> row(in.dy0 - win.dy0, in.dy1 - win.dy0), col(in.dx0 - win.dx0, in.dx1 - win.dx0);
        for (size_t half = out.size() + (max_samples - out.size()) / 2; out.size() < half;) {
            const int64_t k = matrix(rng);
            const int y = row(rng), x = col(rng);
            out.push_back(k * per_matrix + int64_t(y) * ow + x);
        }
    }
    std::uniform_int_distribution<int64_t> anywhere(0, total - 1);
    while (out.size() < max_samples) out.push_back(anywhere(rng));
    std::sort(out.begin(), out.end());  // also puts neighbouring positions in neighbouring threads
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

Reference check_reference(const Problem& p, const float* left, const float* right, uint64_t seed,
                          cudaStream_t stream) {
    if (p.fmas() <= kFullCheckFmas && p.out_elems() <= kFullCheckElems) return full_reference(p, left, right, stream);
    return sampled_reference(p, left, right, sample_positions(p, kCheckSamples, seed), stream);
}

namespace {
// zncc's elements on the constant rule's border (reference_element.hpp, zncc_other_at), where
// either answer is right: `ref` with the other right answer wherever it is nearer to `got`. The
// other answer is the coefficient where the reference gave 0 (the rule), else 0; so only elements
// off the reference by more than the contract's bound and either 0 in the reference or nearer to 0
// than to it are looked at (the inputs then come to the host once, and each matrix's variance is
// taken once), and a check where every element is near its reference costs one pass over it.
// False (and `out` untouched) where none changed.
bool take_border_answers(const Reference& ref, const float* left, const float* right, const std::vector<float>& got,
                         std::vector<double>& out, cudaStream_t stream) {
    const Problem& p = ref.problem;
    std::vector<size_t> far;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], d = std::fabs(g - ref.values[i]);
        if (std::isfinite(g) && d > kNormalizedBound && (ref.values[i] == 0 || std::fabs(g) < d)) far.push_back(i);
    }
    if (far.empty()) return false;
    std::vector<float> L(size_t(p.left_elems())), R(size_t(p.right_elems()));
    std::vector<int64_t> at(ref.full() ? 0 : ref.positions.size());
    XC_CUDA_CHECK(cudaMemcpyAsync(L.data(), left, L.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    XC_CUDA_CHECK(cudaMemcpyAsync(R.data(), right, R.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    if (!at.empty())
        XC_CUDA_CHECK(cudaMemcpyAsync(at.data(), ref.positions.get(), ref.positions.bytes(), cudaMemcpyDeviceToHost,
                                      stream));
    XC_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int64_t lelems = int64_t(p.hL) * p.wL, relems = int64_t(p.hR) * p.wR;
    const PairMap pm = pair_map(p);
    std::vector<double> lvar(size_t(p.nL), std::nan("")), rvar(size_t(p.nR), std::nan(""));  // NaN: not yet
    const auto variance = [](std::vector<double>& v, int m, const float* x, int64_t elems) {
        if (std::isnan(v[size_t(m)])) v[size_t(m)] = matrix_variance(x, elems);
        return v[size_t(m)];
    };
    bool changed = false;
    for (size_t i : far) {
        const OutputElement e = element_of(p, at.empty() ? int64_t(i) : at[i]);
        const int li = pm.left_of(e.k), ri = pm.right_of(e.k);
        const float* l = L.data() + li * lelems;
        const float* r = R.data() + ri * relems;
        const double other = zncc_other_at(l, r, p.hL, p.wL, p.hR, p.wR, e.dy, e.dx, variance(lvar, li, l, lelems),
                                           variance(rvar, ri, r, relems));
        if (std::isnan(other) || !(std::fabs(double(got[i]) - other) < std::fabs(double(got[i]) - ref.values[i])))
            continue;
        if (!changed) out = ref.values;
        out[i] = other;
        changed = true;
    }
    return changed;
}
}  // namespace

Comparison run_and_compare(Instance& inst, const float* left, const float* right, float* out, const Reference& ref,
                           cudaStream_t stream) {
    poison(out, ref.out_elems, stream);
    inst.run(left, right, out, stream);
    if (inst.has_finish()) inst.finish(out, stream);
    std::vector<float> got(ref.values.size());
    DeviceBuffer<float> picked;
    const float* from = out;
    if (!ref.full()) {
        picked = DeviceBuffer<float>(got.size());
        gather(out, ref.positions.get(), got.size(), picked.get(), stream);
        from = picked.get();
    }
    XC_CUDA_CHECK(cudaMemcpyAsync(got.data(), from, got.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    XC_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> border;  // the reference with the border's other answers, where one is nearer
    const bool zncc = ref.problem.normalize == Normalize::Zncc;
    if (zncc && take_border_answers(ref, left, right, got, border, stream))
        return compare_to_reference(got.data(), border.data(), got.size());
    return compare_to_reference(got.data(), ref.values.data(), got.size());
}

}  // namespace xcorr
