// Provenance recorded beside every measurement: the GPU, its clocks, the driver, CUDA runtime and
// cuFFT versions, the git revision and the build options.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "xcorr/gpu.hpp"

namespace xcorr {

std::vector<std::pair<std::string, std::string>> context_entries(const GpuInfo& gpu);
std::string git_revision();

}  // namespace xcorr
