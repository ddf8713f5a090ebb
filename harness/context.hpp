// Provenance recorded beside every measurement: the GPU, its clocks, the driver, CUDA runtime and
// cuFFT versions, the git revision and the build options.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "xcorr/gpu.hpp"

namespace xcorr {

// The GPU's entries followed by build_entries() and environment_context().
std::vector<std::pair<std::string, std::string>> context_entries(const GpuInfo& gpu);
// {"xcorr_environment", "NAME=VALUE ..."} when any of the library's switches (env_settings(),
// core.hpp) is set, so that a measurement taken under one says so; else nothing.
std::vector<std::pair<std::string, std::string>> environment_context();
// This build alone (git revision, architectures, build type, nvcc version, CUDA flags): no GPU needed.
std::vector<std::pair<std::string, std::string>> build_entries();
std::string git_revision();

}  // namespace xcorr
