// Reading and writing NumPy .npy files (CONVENTIONS.md, "Files"): float32 or float64 input
// (converted to float32), C order, rank 2 (one matrix) or 3 (a stack); for signals (dims 1) rank 1
// (one signal) or 2 (a stack). Every malformed file is a
// UsageError with a one-line message that names the file and what is wrong.
//
// The reader follows numpy's format (numpy/lib/format.py, versions 1.0, 2.0 and 3.0, the header
// read as np.load reads it) and refuses every file np.load refuses, before allocating anything
// for the data. Beyond that it refuses by design: other dtypes, ranks and Fortran order, empty
// dimensions, bytes after the data (np.load ignores them; here they mean that the shape does not
// match the data), and header spellings numpy never writes (escapes or prefixes in strings,
// adjacent strings, 0x/0o/0b integers, True/False as a dimension). tests/test_npy.py checks it
// against np.load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace xcorr {

struct Stack {
    int count = 0, h = 0, w = 0;
    std::vector<float> data;  // count * h * w, row-major
    std::string source_dtype; // "float32" or "float64"
};

// dims 2: (h, w) or (count, h, w). dims 1 (signals): (n) or (count, n), read as count matrices 1 x n.
Stack read_npy_stack(const std::string& path, int dims = 2);

// Writes a float32 array of the given shape, as np.save would: through a symbolic link to its
// target (created if the link dangles). A regular file appears completely or not at all: the data
// go to a temporary file in the target's directory, which is renamed over the target. A device or
// a FIFO (/dev/null, a pipe) is written in place, never replaced; a directory is refused.
void write_npy_atomic(const std::string& path, const std::vector<int64_t>& shape, const float* data);

// The file rules above for any format (write_npy_atomic, write_npz_atomic: npz.hpp): `write`
// writes the whole content to the descriptor it is given and returns false with errno set on a
// failure; the path is followed through links, a device or FIFO written in place, a regular file
// replaced only once complete. Every failure is a UsageError naming the path.
void write_file_atomic(const std::string& path, const std::function<bool(int fd)>& write);
// Writes all of [data, data + len) to fd (retrying short writes and EINTR); false with errno set.
bool write_all(int fd, const void* data, size_t len);
// The file `path` names once its symbolic links are followed, as open() follows them.
std::string follow_links(const std::string& path);

}  // namespace xcorr
