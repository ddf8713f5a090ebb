// xcorr_validate: every registered variant x every form it supports x its parameter combinations
// x random odd and unequal sizes (1x1, 1xN, Nx1, odd, unequal left and right, up to 512 x 512),
// against the float64 reference, with the output poisoned (NaN) before every run and every run
// made twice (an error that moves between runs is a race). The second run reads copies of the
// inputs and writes an output that start 4 bytes into their allocations: a variant must not assume
// 16-byte-aligned stacks (a caller may pass a sub-stack), and an instance that keeps state between
// calls (fft's captured graph, its padded slots) must follow its caller's pointers.
//
//   xcorr_validate [--variant NAME]... [--form FORM]... [--quick] [--seed N]
//
// Prints one line per case (PASS / FAIL / SKIP) and closes with "N passed, N failed, N skipped".
// Exit status: 0 all passed, 1 any failure, 2 bad usage, 3 no GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/gpu.hpp"
#include "xcorr/reference.hpp"
#include "xcorr/registry.hpp"

using namespace xcorr;

namespace {

struct Shape {
    int hL, wL, hR, wR;
};

// Tiers: small shapes run every parameter combination; medium ones the combinations if there are
// few, else a covering set; large ones the covering set only (every value of every parameter once).
const std::vector<Shape> kSmall = {
    {1, 1, 1, 1},   {1, 1, 4, 3},    {3, 5, 1, 1},    {1, 17, 1, 9},   {13, 1, 7, 1},   {5, 7, 3, 2},
    {16, 16, 16, 16}, {17, 23, 9, 31}, {31, 33, 31, 33}, {33, 7, 5, 40}, {24, 24, 40, 37},
};
const std::vector<Shape> kMedium = {{64, 64, 64, 64}, {100, 61, 37, 80}, {129, 127, 120, 131}, {96, 96, 96, 96}};
const std::vector<Shape> kLarge = {{256, 256, 256, 256}, {200, 300, 190, 310}, {512, 512, 512, 512}};

struct Counts {
    int nL, nR;
};
Counts counts_for(Form f, bool large) {
    switch (f) {
        case Form::OneToOne: return {1, 1};
        case Form::OneToMany: return large ? Counts{1, 3} : Counts{1, 13};
        case Form::NToMn: return large ? Counts{2, 4} : Counts{3, 15};
        case Form::NToM: return large ? Counts{2, 3} : Counts{3, 5};
    }
    return {1, 1};
}

std::vector<Params> all_combinations(const Variant& v) {
    std::vector<Params> out{Params{}};
    for (const auto& spec : v.params) {
        std::vector<Params> next;
        for (const auto& partial : out)
            for (const auto& value : spec.values) {
                Params p = partial;
                p[spec.name] = value;
                next.push_back(p);
            }
        out = std::move(next);
    }
    return out;
}

std::vector<Params> covering_set(const Variant& v) {
    Params base;
    for (const auto& spec : v.params) base[spec.name] = spec.values.front();
    std::vector<Params> out{base};
    for (const auto& spec : v.params)
        for (size_t i = 1; i < spec.values.size(); ++i) {
            Params p = base;
            p[spec.name] = spec.values[i];
            out.push_back(p);
        }
    return out;
}

std::string params_text(const Params& p) {
    std::string s;
    for (const auto& [k, v] : p) s += (s.empty() ? "" : ",") + k + "=" + v;
    return s.empty() ? "-" : s;
}

struct Tally {
    int passed = 0, failed = 0, skipped = 0;
};

}  // namespace

int main(int argc, char** argv) {
    std::set<std::string> only_variants;
    std::set<Form> only_forms;
    bool quick = false;
    uint64_t seed = 12345;
    try {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            auto next = [&]() -> std::string {
                if (i + 1 >= argc) throw UsageError(a + " needs a value");
                return argv[++i];
            };
            if (a == "--variant") only_variants.insert(find_variant(next()).name);
            else if (a == "--form") only_forms.insert(parse_form(next()));
            else if (a == "--quick") quick = true;
            else if (a == "--seed") seed = std::stoull(next());
            else if (a == "--help" || a == "-h") {
                std::printf("usage: xcorr_validate [--variant NAME]... [--form FORM]... [--quick] [--seed N]\n");
                return 0;
            } else throw UsageError("unknown argument " + a);
        }
        GpuInfo gpu = require_gpu();
        std::printf("# %s (cc %d.%d, %d SMs), seed %llu%s\n", gpu.name.c_str(), gpu.cc_major, gpu.cc_minor,
                    gpu.sm_count, (unsigned long long)seed, quick ? ", quick" : "");
    } catch (const UsageError& e) {
        std::fprintf(stderr, "xcorr_validate: error: %s\n", e.what());
        return 2;
    } catch (const NoGpuError& e) {
        std::fprintf(stderr, "xcorr_validate: no GPU: %s\n", e.what());
        return 3;
    }

    Tally tally;
    std::map<std::string, int> passes_per_variant_form;
    uint64_t case_seed = seed;
    try {
        cudaStream_t stream;
        XC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        const std::vector<std::pair<const std::vector<Shape>*, int>> tiers = {
            {&kSmall, 0}, {&kMedium, 1}, {&kLarge, 2}};
        for (const auto& [shapes, tier] : tiers) {
            if (quick && tier > 0) break;
            for (const Shape& s : *shapes) {
                for (Form form : kAllForms) {
                    if (!only_forms.empty() && !only_forms.count(form)) continue;
                    // 512 x 512 only one-to-one: the other forms multiply its reference cost.
                    if (s.hL >= 512 && form != Form::OneToOne) continue;
                    const Counts c = counts_for(form, tier == 2);
                    Problem p{form, s.hL, s.wL, s.hR, s.wR, c.nL, c.nR};
                    p.check();
                    bool any = false;
                    for (const auto& v : variants())
                        any |= v.supports(form) && (only_variants.empty() || only_variants.count(v.name));
                    if (!any) continue;

                    DeviceBuffer<float> dl(size_t(p.left_elems())), dr(size_t(p.right_elems())),
                        dout(size_t(p.out_elems()));
                    DeviceBuffer<double> dref(size_t(p.out_elems()));
                    fill_uniform(dl.get(), dl.size(), ++case_seed, stream);
                    fill_uniform(dr.get(), dr.size(), ++case_seed, stream);
                    reference_gpu(p, dl.get(), dr.get(), dref.get(), stream);
                    // The second run's misaligned copies (one float into an allocation one longer).
                    DeviceBuffer<float> dl_off(dl.size() + 1), dr_off(dr.size() + 1), dout_off(dout.size() + 1);
                    XC_CUDA_CHECK(cudaMemcpyAsync(dl_off.get() + 1, dl.get(), dl.bytes(), cudaMemcpyDeviceToDevice, stream));
                    XC_CUDA_CHECK(cudaMemcpyAsync(dr_off.get() + 1, dr.get(), dr.bytes(), cudaMemcpyDeviceToDevice, stream));
                    std::vector<double> ref(dref.size());
                    XC_CUDA_CHECK(cudaMemcpyAsync(ref.data(), dref.get(), dref.bytes(), cudaMemcpyDeviceToHost, stream));
                    XC_CUDA_CHECK(cudaStreamSynchronize(stream));

                    // The GPU reference must agree with the CPU one wherever the CPU one is quick.
                    if (p.fmas() < 5e7) {
                        std::vector<float> hl(dl.size()), hr(dr.size());
                        XC_CUDA_CHECK(cudaMemcpy(hl.data(), dl.get(), dl.bytes(), cudaMemcpyDeviceToHost));
                        XC_CUDA_CHECK(cudaMemcpy(hr.data(), dr.get(), dr.bytes(), cudaMemcpyDeviceToHost));
                        std::vector<double> cpu(ref.size());
                        reference_cpu(p, hl.data(), hr.data(), cpu.data());
                        const auto [err, nonfinite] = compare_to_reference(ref.data(), cpu.data(), cpu.size());
                        const bool ok = nonfinite == 0 && err < 1e-12;
                        std::printf("%s  reference-gpu  %s  vs reference-cpu  err=%.2e\n", ok ? "PASS" : "FAIL",
                                    p.describe().c_str(), err);
                        ok ? ++tally.passed : ++tally.failed;
                    }

                    for (const auto& v : variants()) {
                        if (!v.supports(form) || (!only_variants.empty() && !only_variants.count(v.name))) continue;
                        const auto all = all_combinations(v);
                        const bool everything = tier == 0 ? !quick : (tier == 1 && all.size() <= 16);
                        const auto combos = everything ? all : covering_set(v);
                        for (const Params& params : combos) {
                            std::unique_ptr<Instance> inst;
                            try {
                                inst = v.make(p, v.resolve(params));
                            } catch (const UsageError& e) {
                                // A combination the variant refuses for this problem (not instantiated,
                                // or beyond a documented limit): printed with the variant's reason.
                                ++tally.skipped;
                                std::printf("SKIP  %s  %s  %s  %s\n", v.name.c_str(), p.describe().c_str(),
                                            params_text(params).c_str(), e.what());
                                continue;
                            }
                            double worst = 0;
                            size_t worst_nonfinite = 0;
                            for (int rep = 0; rep < 2; ++rep) {
                                const float* in_l = rep ? dl_off.get() + 1 : dl.get();
                                const float* in_r = rep ? dr_off.get() + 1 : dr.get();
                                float* o = rep ? dout_off.get() + 1 : dout.get();
                                poison(o, dout.size(), stream);
                                inst->run(in_l, in_r, o, stream);
                                if (inst->has_finish()) inst->finish(o, stream);
                                std::vector<float> out(dout.size());
                                XC_CUDA_CHECK(cudaMemcpyAsync(out.data(), o, dout.bytes(), cudaMemcpyDeviceToHost, stream));
                                XC_CUDA_CHECK(cudaStreamSynchronize(stream));
                                const auto [err, nonfinite] = compare_to_reference(out.data(), ref.data(), out.size());
                                if (!(err <= worst)) worst = err;  // a NaN error sticks (std::max drops it)
                                worst_nonfinite = std::max(worst_nonfinite, nonfinite);
                            }
                            const bool ok = within_bound({worst, worst_nonfinite}, v.tolerance);
                            std::printf("%s  %s  %s  %s  err=%.2e%s\n", ok ? "PASS" : "FAIL", v.name.c_str(),
                                        p.describe().c_str(), params_text(params).c_str(), worst,
                                        worst_nonfinite ? (" unwritten=" + std::to_string(worst_nonfinite)).c_str() : "");
                            if (ok) {
                                ++tally.passed;
                                ++passes_per_variant_form[v.name + " " + form_name(form)];
                            } else {
                                ++tally.failed;
                            }
                        }
                    }
                    std::fflush(stdout);
                }
            }
        }
        // A variant that skipped every case of a form it declares has not been validated at all.
        for (const auto& v : variants()) {
            if (!only_variants.empty() && !only_variants.count(v.name)) continue;
            for (Form f : v.forms) {
                if (!only_forms.empty() && !only_forms.count(f)) continue;
                if (!passes_per_variant_form[v.name + " " + form_name(f)]) {
                    std::printf("FAIL  %s  %s  no case passed (every combination was rejected or failed)\n",
                                v.name.c_str(), form_name(f));
                    ++tally.failed;
                }
            }
        }
        XC_CUDA_CHECK(cudaStreamDestroy(stream));
    } catch (const std::exception& e) {
        // A CUDA fault (illegal address, ...) leaves the context unusable: stop here, loudly.
        std::printf("FAIL  aborted: %s\n", e.what());
        ++tally.failed;
    }
    std::printf("%d passed, %d failed, %d skipped\n", tally.passed, tally.failed, tally.skipped);
    return tally.failed ? 1 : 0;
}
