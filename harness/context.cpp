#include "harness/context.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

#include "build_info.hpp"
#include "xcorr/core.hpp"
#include "version.hpp"

namespace xcorr {

std::string git_revision() { return XCORR_GIT_REVISION; }

namespace {
// The kernel driver's own version (e.g. 580.159.04); the CUDA API reports only 13.0.
std::string kernel_driver_version() {
    // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
    std::ifstream f("/proc/driver/nvidia/version");
    std::string line, word;
    if (f && std::getline(f, line)) {
        std::istringstream in(line);
        while (in >> word)
            if (word.find('.') != std::string::npos && std::isdigit(static_cast<unsigned char>(word[0])) &&
                word.find_first_not_of("0123456789.") == std::string::npos)
                return word;
    }
    return "unknown";
}
}  // namespace

std::vector<std::pair<std::string, std::string>> build_entries() {
    return {
        {"xcorr_git_revision", git_revision()},
        {"xcorr_build_archs", XCORR_BUILD_ARCHS},
        {"xcorr_build_type", XCORR_BUILD_TYPE},
        {"xcorr_nvcc_version", XCORR_NVCC_VERSION},
        {"xcorr_cuda_flags", XCORR_CUDA_FLAGS},
    };
}

std::vector<std::pair<std::string, std::string>> environment_context() {
    std::string set;
    for (const auto& [name, value] : environment_entries()) set += (set.empty() ? "" : " ") + name + "=" + value;
    if (set.empty()) return {};
    return {{"xcorr_environment", set}};
}

std::vector<std::pair<std::string, std::string>> context_entries(const GpuInfo& g) {
    auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    std::vector<std::pair<std::string, std::string>> entries{
        {"xcorr_gpu_name", g.name},
        {"xcorr_compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
        {"xcorr_sm_count", std::to_string(g.sm_count)},
        {"xcorr_sm_clock_mhz", std::to_string(g.sm_clock_mhz)},
        {"xcorr_mem_clock_mhz", std::to_string(g.mem_clock_mhz)},
        {"xcorr_l2_bytes", std::to_string(g.l2_bytes)},
        {"xcorr_total_mem_bytes", std::to_string(g.total_mem)},
        {"xcorr_fp32_peak_flops", std::to_string(g.fp32_peak_flops())},
        {"xcorr_driver_version", kernel_driver_version()},
        {"xcorr_cuda_driver_api_version", ver(g.driver_version)},
        {"xcorr_cuda_runtime_version", ver(g.runtime_version)},
        {"xcorr_cufft_version", std::to_string(g.cufft_version)},
    };
    for (auto& e : build_entries()) entries.push_back(std::move(e));
    for (auto& e : environment_context()) entries.push_back(std::move(e));
    return entries;
}

}  // namespace xcorr
