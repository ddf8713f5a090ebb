// Reading and writing NumPy .npy files (CONVENTIONS.md, "Files"): float32 or float64 input
// (converted to float32), C order, rank 2 (one matrix) or 3 (a stack). Every malformed file is a
// UsageError with a message that names the file and what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xcorr {

struct Stack {
    int count = 0, h = 0, w = 0;
    std::vector<float> data;  // count * h * w, row-major
    std::string source_dtype; // "float32" or "float64"
};

Stack read_npy_stack(const std::string& path);

// Writes a float32 array of the given shape. The file appears completely or not at all:
// the data go to a temporary file in the same directory, which is renamed over `path`.
void write_npy_atomic(const std::string& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace xcorr
