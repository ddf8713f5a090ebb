#include "xcorr/npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>

#include "xcorr/core.hpp"

namespace xcorr {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) { throw UsageError(path + ": " + what); }

std::string field(const std::string& header, const std::string& key) {
    // The header is a Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
    std::smatch m;
    if (key == "shape") {
        if (std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)"))) return m[1];
    } else if (std::regex_search(header, m, std::regex("'" + key + "'\\s*:\\s*('([^']*)'|True|False)"))) {
        return m[2].matched ? std::string(m[2]) : std::string(m[1]);
    }
    return "\x01";  // absent
}

}  // namespace

Stack read_npy_stack(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) bad(path, std::string("cannot open file (") + std::strerror(errno) + ")");
    char magic[8] = {};
    f.read(magic, 8);
    if (f.gcount() != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0) bad(path, "not a .npy file (bad magic)");
    const int major = static_cast<unsigned char>(magic[6]);
    uint32_t hlen = 0;
    if (major == 1) {
        unsigned char b[2];
        f.read(reinterpret_cast<char*>(b), 2);
        hlen = b[0] | (b[1] << 8);
    } else if (major == 2 || major == 3) {
        unsigned char b[4];
        f.read(reinterpret_cast<char*>(b), 4);
        hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
    } else {
        bad(path, "unsupported .npy version " + std::to_string(major));
    }
    if (!f || hlen > (1u << 20)) bad(path, "truncated or corrupt .npy header");
    std::string header(hlen, '\0');
    f.read(header.data(), hlen);
    if (!f) bad(path, "truncated .npy header");

    const std::string descr = field(header, "descr"), order = field(header, "fortran_order"),
                      shape_text = field(header, "shape");
    if (descr == "\x01" || order == "\x01" || shape_text == "\x01") bad(path, "malformed .npy header: " + header);
    int elem = 0;
    bool swap = false;
    Stack s;
    if (descr == "<f4" || descr == "=f4" || descr == ">f4") {
        elem = 4, s.source_dtype = "float32", swap = descr[0] == '>';
    } else if (descr == "<f8" || descr == "=f8" || descr == ">f8") {
        elem = 8, s.source_dtype = "float64", swap = descr[0] == '>';
    } else {
        bad(path, "wrong dtype '" + descr + "': expected float32 or float64");
    }
    if (order != "False") bad(path, "Fortran-ordered arrays are not supported: save a C-ordered array");

    std::vector<int64_t> shape;
    std::regex num("\\s*(\\d+)\\s*");
    for (std::sregex_iterator it(shape_text.begin(), shape_text.end(), num), end; it != end; ++it)
        shape.push_back(std::stoll((*it)[1]));
    if (shape.size() != 2 && shape.size() != 3)
        bad(path, "wrong rank " + std::to_string(shape.size()) + ": expected a matrix (h, w) or a stack (count, h, w)");
    if (shape.size() == 2) shape.insert(shape.begin(), 1);
    for (int64_t d : shape)
        if (d == 0) bad(path, "empty array (a dimension is 0)");
    for (int64_t d : shape)
        if (d > (1 << 30)) bad(path, "dimension too large");
    const int64_t n = shape[0] * shape[1] * shape[2];
    if (n > (int64_t(1) << 34)) bad(path, "array too large");
    s.count = int(shape[0]), s.h = int(shape[1]), s.w = int(shape[2]);

    std::vector<char> raw(size_t(n) * elem);
    f.read(raw.data(), std::streamsize(raw.size()));
    if (f.gcount() != std::streamsize(raw.size()))
        bad(path, "truncated data: expected " + std::to_string(raw.size()) + " bytes after the header");
    if (swap)
        for (size_t i = 0; i < raw.size(); i += elem) std::reverse(raw.begin() + i, raw.begin() + i + elem);
    s.data.resize(size_t(n));
    if (elem == 4) {
        std::memcpy(s.data.data(), raw.data(), raw.size());
    } else {
        for (int64_t i = 0; i < n; ++i) {
            double d;
            std::memcpy(&d, raw.data() + i * 8, 8);
            s.data[size_t(i)] = float(d);
        }
    }
    return s;
}

void write_npy_atomic(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
    std::string dims;
    int64_t n = 1;
    for (int64_t d : shape) dims += std::to_string(d) + ", ", n *= d;
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    const size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';

    std::string tmp = path + ".tmp.XXXXXX";
    int fd = mkstemp(tmp.data());
    if (fd < 0) throw UsageError(path + ": cannot create output file (" + std::strerror(errno) + ")");
    auto fail = [&](const char* what) {
        int e = errno;
        close(fd);
        std::remove(tmp.c_str());
        throw UsageError(path + ": " + what + " (" + std::strerror(e) + ")");
    };
    auto put = [&](const void* p, size_t len) {
        const char* c = static_cast<const char*>(p);
        while (len) {
            ssize_t w = ::write(fd, c, len);
            if (w < 0) {
                if (errno == EINTR) continue;
                fail("write failed");
            }
            c += w, len -= size_t(w);
        }
    };
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                   static_cast<unsigned char>(header.size() & 0xff),
                                   static_cast<unsigned char>(header.size() >> 8)};
    put(pre, 10);
    put(header.data(), header.size());
    put(data, size_t(n) * sizeof(float));
    if (fsync(fd) != 0) fail("fsync failed");
    fchmod(fd, 0644);
    if (close(fd) != 0) {
        std::remove(tmp.c_str());
        throw UsageError(path + ": close failed");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        std::remove(tmp.c_str());
        throw UsageError(path + ": cannot move output into place (" + std::strerror(e) + ")");
    }
}

}  // namespace xcorr
