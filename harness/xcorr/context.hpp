// Provenance recorded beside every measurement: the GPU, its clocks, the driver, CUDA runtime and
// cuFFT versions, the git revision and the build options.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "xcorr/gpu.hpp"

namespace xcorr {

// The GPU's entries followed by build_entries().
std::vector<std::pair<std::string, std::string>> context_entries(const GpuInfo& gpu);
// This build alone (git revision, architectures, build type, nvcc version, CUDA flags): no GPU needed.
std::vector<std::pair<std::string, std::string>> build_entries();
std::string git_revision();

}  // namespace xcorr
