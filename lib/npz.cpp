#include "xcorr/npz.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "xcorr/core.hpp"
#include "xcorr/npy.hpp"

namespace xcorr {
namespace {

const std::array<uint32_t, 256>& crc_table() {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    return table;
}

size_t elem_size(NpyType t) { return t == NpyType::Float64 ? 8 : 4; }
const char* descr(NpyType t) { return t == NpyType::Float32 ? "<f4" : t == NpyType::Float64 ? "<f8" : "<i4"; }

void put16(std::string& s, uint32_t v) {
    s += char(v & 0xff), s += char((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
    put16(s, v & 0xffff), put16(s, v >> 16);
}

// One member as laid out in the archive: its file name, its .npy header, data and their CRC.
struct Entry {
    std::string file, header;
    const void* data;
    size_t data_bytes;
    uint32_t crc;
    uint32_t size() const { return uint32_t(header.size() + data_bytes); }
};

// MS-DOS time and date of 1980-01-01 00:00 (the earliest zip can say): the same bytes every run.
constexpr uint32_t kDosTime = 0, kDosDate = (0 << 9) | (1 << 5) | 1;

std::string local_header(const Entry& e) {
    std::string s;
    put32(s, 0x04034b50);
    put16(s, 20);  // version needed: 2.0
    put16(s, 0);   // flags
    put16(s, 0);   // method: stored
    put16(s, kDosTime), put16(s, kDosDate);
    put32(s, e.crc), put32(s, e.size()), put32(s, e.size());
    put16(s, uint32_t(e.file.size())), put16(s, 0);
    return s + e.file;
}

std::string central_header(const Entry& e, uint32_t offset) {
    std::string s;
    put32(s, 0x02014b50);
    put16(s, (3 << 8) | 20);  // made by: Unix, 2.0 (the external attributes below are Unix modes)
    put16(s, 20);
    put16(s, 0), put16(s, 0);
    put16(s, kDosTime), put16(s, kDosDate);
    put32(s, e.crc), put32(s, e.size()), put32(s, e.size());
    put16(s, uint32_t(e.file.size()));
    put16(s, 0), put16(s, 0);  // extra, comment
    put16(s, 0), put16(s, 0);  // disk, internal attributes
    put32(s, uint32_t(0100644) << 16);
    put32(s, offset);
    return s + e.file;
}

}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
    const auto& t = crc_table();
    const unsigned char* p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

std::string npy_header(NpyType type, const std::vector<int64_t>& shape) {
    std::string dims;
    for (int64_t d : shape) dims += std::to_string(d) + ", ";
    if (shape.size() == 1) dims.pop_back();  // "(5,)"
    else if (!dims.empty()) dims.resize(dims.size() - 2);
    std::string header = std::string("{'descr': '") + descr(type) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    const size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    const char pre[10] = {char(0x93), 'N', 'U', 'M', 'P', 'Y', 1, 0, char(header.size() & 0xff), char(header.size() >> 8)};
    return std::string(pre, 10) + header;
}

void write_npz_atomic(const std::string& path, const std::vector<NpzMember>& members) {
    if (members.size() > 0xffff) throw UsageError(path + ": more than 65535 arrays for one .npz");
    std::vector<Entry> entries;
    uint64_t offset = 0;
    std::string central;
    for (const NpzMember& m : members) {
        int64_t n = 1;
        for (int64_t d : m.shape) n *= d;
        Entry e{m.name + ".npy", npy_header(m.type, m.shape), m.data, size_t(n) * elem_size(m.type), 0};
        if (e.header.size() + e.data_bytes >= 0xffffffffull || offset >= 0xffffffffull)
            throw UsageError(path + ": array " + m.name + " takes 4 GiB or more: beyond a .npz without zip64");
        e.crc = crc32(e.data, e.data_bytes, crc32(e.header.data(), e.header.size()));
        central += central_header(e, uint32_t(offset));
        offset += local_header(e).size() + e.size();
        entries.push_back(std::move(e));
    }
    if (offset >= 0xffffffffull) throw UsageError(path + ": the arrays take 4 GiB or more: beyond a .npz without zip64");
    std::string end;
    put32(end, 0x06054b50);
    put16(end, 0), put16(end, 0);
    put16(end, uint32_t(entries.size())), put16(end, uint32_t(entries.size()));
    put32(end, uint32_t(central.size())), put32(end, uint32_t(offset));
    put16(end, 0);  // comment

    auto write_to = [&](int fd) {
        for (const Entry& e : entries) {
            const std::string lh = local_header(e);
            if (!write_all(fd, lh.data(), lh.size()) || !write_all(fd, e.header.data(), e.header.size()) ||
                !write_all(fd, e.data, e.data_bytes))
                return false;
        }
        return write_all(fd, central.data(), central.size()) && write_all(fd, end.data(), end.size());
    };

    write_file_atomic(path, write_to);
}

}  // namespace xcorr
