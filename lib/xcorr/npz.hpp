// Writing NumPy .npz files: a zip archive of .npy members, stored (no compression), as np.savez
// writes it and np.load reads it (the zip format: PKWARE's APPNOTE.TXT, local headers, the
// central directory, its end record; each member's CRC-32). xcorr run's reductions write their
// arrays so (value, shift, subpixel; value, index, sum, sumsq). Members of float32, float64 or
// int32, little-endian, C order.
//
// The file follows the rules of write_npy_atomic (npy.hpp): through a symbolic link to its target;
// a regular file appears completely or not at all (a temporary file beside it, renamed over it);
// a device or a FIFO is written in place; a directory is refused. Every failure is a UsageError
// naming the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xcorr {

enum class NpyType { Float32, Float64, Int32 };

struct NpzMember {
    std::string name;              // the array's key in np.load's result ("value"); stored as name.npy
    NpyType type;
    std::vector<int64_t> shape;
    const void* data;              // prod(shape) elements of `type`, row-major
};

// The CRC-32 of zip (and zlib.crc32): polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF.
// `crc` continues an earlier call's value (0 to start).
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

// The .npy header (magic, version 1.0, the dict, padding to 64 bytes) of an array.
std::string npy_header(NpyType type, const std::vector<int64_t>& shape);

// Writes the members into one .npz (at most 65535 members, each under 4 GiB: no zip64).
void write_npz_atomic(const std::string& path, const std::vector<NpzMember>& members);

}  // namespace xcorr
