#include "xcorr/npy.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>

#include "xcorr/core.hpp"

namespace xcorr {
namespace {

// Text from a file or the command line, made safe for a one-line message: control characters
// (and, with `ascii_only`, every byte outside ASCII) as \xNN, cut to `max` characters.
std::string printable(const std::string& s, bool ascii_only, size_t max = 200) {
    std::string o;
    for (unsigned char c : s) {
        if (o.size() >= max) return o + "...";
        if (c < 0x20 || c == 0x7f || (ascii_only && c >= 0x80)) {
            char esc[5];
            std::snprintf(esc, sizeof esc, "\\x%02x", c);
            o += esc;
        } else {
            o += char(c);
        }
    }
    return o;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
    throw UsageError(printable(path, false, 4096) + ": " + what);
}

// --- the header: a Python dict literal, read as numpy reads it (ast.literal_eval) -------------
//
// numpy writes {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } and reads any Python
// literal with exactly these three keys. This parser takes Python's syntax for what such a dict
// can hold: strings in ' or ", True and False, decimal integers with an optional sign (and
// Python's rules: no leading zeros, single underscores between digits), tuples with an optional
// trailing comma, redundant parentheses, whitespace and comments between tokens, a duplicated
// key keeping its last value. It refuses the rest, including Python spellings numpy never writes
// (escapes and prefixes in strings, 0x/0o/0b integers): numpy accepts those, the tool does not.

struct HeaderError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Value {
    enum Kind { Str, Bool, Int, Tuple } kind = Int;
    std::string str;
    bool flag = false;        // Bool
    int64_t num = 0;          // Int, when it fits
    bool huge = false;        // Int beyond int64
    bool signed_ = false;     // Int written with a sign (Python takes one sign, not two)
    std::vector<Value> items; // Tuple
};

class HeaderParser {
public:
    explicit HeaderParser(const std::string& text) : t_(text) {}

    std::map<std::string, Value> dict() {
        if (t_.find('\0') != std::string::npos) fail("a NUL byte");
        leading_space();
        expect('{');
        std::map<std::string, Value> d;
        skip_space();
        while (peek() != '}') {
            const Value key = value();
            if (key.kind != Value::Str) fail("a key that is not a string");
            skip_space();
            expect(':');
            d[key.str] = value();  // a repeated key keeps its last value, as in Python
            skip_space();
            if (peek() == ',') ++i_, skip_space();
            else if (peek() != '}') fail("expected ',' or '}'");
        }
        ++i_;
        skip_space();
        if (i_ != t_.size()) fail("text after the dict");
        return d;
    }

private:
    const std::string& t_;
    size_t i_ = 0;
    int depth_ = 0;  // parentheses open

    [[noreturn]] void fail(const std::string& what) const {
        throw HeaderError(what + " at character " + std::to_string(i_));
    }
    char peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }  // NUL is refused up front
    void expect(char c) {
        if (peek() != c) fail(std::string("expected '") + c + "'");
        ++i_;
    }
    static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\n' || c == '\r'; }
    void skip_comment() {
        if (peek() == '#')
            while (i_ < t_.size() && t_[i_] != '\n' && t_[i_] != '\r') ++i_;
    }
    // Between tokens: whitespace, newlines and comments (Python, inside brackets and after them).
    void skip_space() {
        for (;;) {
            while (is_space(peek())) ++i_;
            if (peek() != '#') return;
            skip_comment();
        }
    }
    // Before the dict: literal_eval strips leading spaces and tabs; blank and comment lines may
    // follow, but the line holding '{' may not be indented (Python: "unexpected indent").
    void leading_space() {
        while (peek() == ' ' || peek() == '\t') ++i_;
        size_t indent_from = i_;
        for (;;) {
            while (peek() == ' ' || peek() == '\t' || peek() == '\f')
                if (t_[i_++] == '\f') indent_from = i_;  // a form feed resets the column
            skip_comment();
            if (peek() != '\n' && peek() != '\r') break;
            indent_from = ++i_;
        }
        if (indent_from != i_) fail("an indented line");
    }

    Value value() {
        skip_space();
        const char c = peek();
        if (c == '+' || c == '-') {
            ++i_;
            Value v = value();
            if (v.kind != Value::Int || v.signed_) fail("a sign before something other than a number");
            v.signed_ = true;
            if (c == '-') v.num = -v.num;
            return v;
        }
        if (c == '(') return parenthesized();
        if (c == '\'' || c == '"') return string();
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') return word();
        fail("unexpected character");
    }

    // "()" is an empty tuple, "(x)" is x, "(x,)" and "(x, y)" are tuples.
    Value parenthesized() {
        // Python's parser (numpy's ast.literal_eval) stops at 200 nested brackets, the header's
        // dict one of them; the recursion here must not run the stack out on a crafted file.
        if (++depth_ > 199) fail("parentheses nested over 199 deep");
        ++i_;
        skip_space();
        Value tuple;
        tuple.kind = Value::Tuple;
        if (peek() == ')') return ++i_, tuple;
        tuple.items.push_back(value());
        bool comma = false;
        for (skip_space(); peek() == ','; skip_space()) {
            ++i_, comma = true;
            skip_space();
            if (peek() == ')') break;
            tuple.items.push_back(value());
        }
        expect(')');
        --depth_;
        return comma ? tuple : tuple.items.front();
    }

    Value string() {
        const char quote = t_[i_++];
        Value v;
        v.kind = Value::Str;
        for (;; ++i_) {
            const char c = peek();
            if (c == quote) break;
            if (c == '\\') fail("an escape sequence (not supported)");
            if (c == '\0' || c == '\n' || c == '\r') fail("an unterminated string");
            v.str += c;
        }
        ++i_;
        return v;
    }

    // True, False or a decimal integer (digits, single underscores between them, no leading zero).
    Value word() {
        const size_t start = i_;
        while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_' || peek() == '.') ++i_;
        const std::string w = t_.substr(start, i_ - start);
        Value v;
        if (w == "True" || w == "False") {
            v.kind = Value::Bool, v.flag = w == "True";
            return v;
        }
        const bool zeros_only = w.find_first_not_of("0_") == std::string::npos;
        bool ok = std::isdigit(static_cast<unsigned char>(w[0])) && w.back() != '_' &&
                  w.find("__") == std::string::npos && (w[0] != '0' || zeros_only);
        for (char c : w) {
            if (c == '_') continue;
            ok = ok && std::isdigit(static_cast<unsigned char>(c));
            if (ok && !v.huge && (__builtin_mul_overflow(v.num, 10, &v.num) || __builtin_add_overflow(v.num, c - '0', &v.num)))
                v.huge = true;
        }
        i_ = start;
        if (!ok) fail("'" + printable(w, true, 40) + "', which is not a decimal integer, True or False");
        i_ += w.size();
        return v;
    }
};

// The dtype strings numpy reads as float32 or float64 (np.dtype(descr)): numpy's names, or an
// optional byte order (<, >, = or |) and 'f' or 'd' alone, or 'f' and a size that C's strtol reads
// as 4 or 8 ('f4', 'f 4', 'f04' all are float32 to numpy). Returns the element size, 0 otherwise.
int float_size(const std::string& descr, bool& big_endian) {
    big_endian = false;
    if (descr == "float32" || descr == "single") return 4;
    if (descr == "float64" || descr == "double" || descr == "float") return 8;
    std::string code = descr;
    if (!code.empty() && std::strchr("<>=|", code[0])) big_endian = code[0] == '>', code.erase(0, 1);
    if (code == "f") return 4;
    if (code == "d") return 8;
    if (code.size() < 2 || code[0] != 'f') return 0;
    char* end = nullptr;
    const long size = std::strtol(code.c_str() + 1, &end, 10);
    return end == code.c_str() + code.size() && (size == 4 || size == 8) ? int(size) : 0;
}

// Closes the file descriptor on every path out of read_npy_stack.
struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

// Reads up to `n` bytes; returns how many the file had.
size_t read_some(int fd, void* buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(fd, static_cast<char*>(buf) + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += size_t(r);
    }
    return got;
}

// What a path that is not a regular file is, for messages.
std::string file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

constexpr size_t kMaxHeader = 10000;  // np.load's max_header_size: it refuses longer headers

}  // namespace

Stack read_npy_stack(const std::string& path, int dims) {
    // The size check below needs a regular file's size before anything is allocated. Checked
    // before opening too: opening a FIFO for reading blocks until a writer comes, which may be
    // never. O_NONBLOCK covers a file swapped for a FIFO in between (fstat then refuses it).
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) bad(path, std::string("cannot open file (") + std::strerror(errno) + ")");
    if (!S_ISREG(st.st_mode)) bad(path, "is " + file_kind(st.st_mode) + ", not a regular .npy file");
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (f.fd < 0) bad(path, std::string("cannot open file (") + std::strerror(errno) + ")");
    if (fstat(f.fd, &st) != 0) bad(path, std::string("cannot read file (") + std::strerror(errno) + ")");
    if (!S_ISREG(st.st_mode)) bad(path, "is " + file_kind(st.st_mode) + ", not a regular .npy file");

    // Magic, version (1.0: 2-byte header length; 2.0 and 3.0: 4 bytes), header, data.
    unsigned char pre[12] = {};
    if (read_some(f.fd, pre, 8) < 8 || std::memcmp(pre, "\x93NUMPY", 6) != 0) bad(path, "not a .npy file (bad magic)");
    const int major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        bad(path, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                      " (numpy reads 1.0, 2.0 and 3.0)");
    const size_t prefix = major == 1 ? 10 : 12;
    if (read_some(f.fd, pre + 8, prefix - 8) < prefix - 8) bad(path, "truncated .npy header");
    const size_t hlen = pre[8] | pre[9] << 8 | (major == 1 ? 0 : pre[10] << 16 | size_t(pre[11]) << 24);
    if (hlen > kMaxHeader)
        bad(path, "a .npy header of " + std::to_string(hlen) + " bytes (numpy reads at most " +
                      std::to_string(kMaxHeader) + ")");
    std::string header(hlen, '\0');
    if (read_some(f.fd, header.data(), hlen) < hlen) bad(path, "truncated .npy header");
    // Version 3.0 headers are UTF-8 (1.0 and 2.0 latin-1); only comments may hold non-ASCII text,
    // and in 3.0 the tool takes none (a byte flipped into one is never valid UTF-8 anyway).
    if (major == 3)
        for (unsigned char c : header)
            if (c >= 0x80) bad(path, "non-ASCII byte in a version 3.0 .npy header");

    std::map<std::string, Value> d;
    try {
        d = HeaderParser(header).dict();
    } catch (const HeaderError& e) {
        bad(path, std::string("malformed .npy header (") + e.what() + "): " + printable(header, true, 120));
    }
    if (d.size() != 3 || !d.count("descr") || !d.count("fortran_order") || !d.count("shape"))
        bad(path, "malformed .npy header: the keys must be exactly 'descr', 'fortran_order' and 'shape': " +
                      printable(header, true, 120));
    const Value &descr = d["descr"], &order = d["fortran_order"], &shape_v = d["shape"];
    if (order.kind != Value::Bool) bad(path, "malformed .npy header: fortran_order is not True or False");
    if (shape_v.kind != Value::Tuple) bad(path, "malformed .npy header: the shape is not a tuple");
    std::vector<int64_t> shape;
    for (const Value& dim : shape_v.items) {
        if (dim.kind != Value::Int) bad(path, "malformed .npy header: the shape holds something other than integers");
        if (dim.num < 0 && !dim.huge) bad(path, "negative dimension in the shape");
        if (dim.huge || dim.num > (1 << 30)) bad(path, "dimension too large (over 2^30)");
        shape.push_back(dim.num);
    }

    if (descr.kind != Value::Str) bad(path, "wrong dtype (descr is not a string): expected float32 or float64");
    bool swap = false;
    const int elem = float_size(descr.str, swap);
    if (!elem) bad(path, "wrong dtype '" + printable(descr.str, true, 40) + "': expected float32 or float64");
    Stack s;
    s.source_dtype = elem == 4 ? "float32" : "float64";
    if (order.flag) bad(path, "Fortran-ordered arrays are not supported: save a C-ordered array");
    if (dims == 1) {
        // Signals (CONVENTIONS.md, "One-dimensional signals"): (n) is one, (count, n) a stack;
        // either is read as 1 x n matrices.
        if (shape.size() != 1 && shape.size() != 2)
            bad(path, "wrong rank " + std::to_string(shape.size()) +
                          " for --dims 1: expected a signal (n) or a stack of signals (count, n)");
        shape.insert(shape.end() - 1, 1);
        if (shape.size() == 2) shape.insert(shape.begin(), 1);
    } else {
        if (shape.size() != 2 && shape.size() != 3)
            bad(path, "wrong rank " + std::to_string(shape.size()) + ": expected a matrix (h, w) or a stack (count, h, w)" +
                          (shape.size() == 1 ? " (a 1-D signal: give --dims 1)" : ""));
        if (shape.size() == 2) shape.insert(shape.begin(), 1);
    }
    for (int64_t dim : shape)
        if (dim == 0) bad(path, "empty array (a dimension is 0)");
    // Dimensions are at most 2^30: 3 of them may overflow int64, so every product is checked.
    int64_t n = 1;
    for (int64_t dim : shape)
        if (__builtin_mul_overflow(n, dim, &n)) n = INT64_MAX;
    if (n > (int64_t(1) << 34)) bad(path, "array too large (over 2^34 elements)");
    const int64_t bytes = n * elem;

    // Compare with the file's size before allocating: a 193-byte file may declare 40 GB. np.load
    // reads the declared count and ignores what follows; the tool refuses trailing bytes, which
    // mean that the shape does not match the data (or that the file holds more than one array).
    const int64_t offset = int64_t(prefix + hlen), have = int64_t(st.st_size) - offset;
    if (have < bytes)
        bad(path, "truncated data: the header declares " + std::to_string(bytes) + " bytes of data, the file holds " +
                      std::to_string(have));
    if (have > bytes)
        bad(path, std::to_string(have - bytes) + " bytes after the " + std::to_string(bytes) +
                      " bytes of data the header declares (a shape that does not match the data?)");
    s.count = int(shape[0]), s.h = int(shape[1]), s.w = int(shape[2]);

    std::vector<char> raw(static_cast<size_t>(bytes));
    if (read_some(f.fd, raw.data(), raw.size()) != raw.size())
        bad(path, "truncated data (the file changed while it was read)");
    if (swap)
        for (size_t i = 0; i < raw.size(); i += elem) std::reverse(raw.begin() + i, raw.begin() + i + elem);
    s.data.resize(size_t(n));
    if (elem == 4) {
        std::memcpy(s.data.data(), raw.data(), raw.size());
    } else {
        for (int64_t i = 0; i < n; ++i) {
            double v;
            std::memcpy(&v, raw.data() + i * 8, 8);
            s.data[size_t(i)] = float(v);
            // A finite float64 beyond float32's range would become inf: refused, not computed with.
            if (std::isfinite(v) && !std::isfinite(s.data[size_t(i)])) {
                std::ostringstream m;
                m << "element " << i << " (" << v << ") is outside float32's range (about 3.4e38): the data is "
                  << "correlated in float32";
                bad(path, m.str());
            }
        }
    }
    return s;
}

// The file `path` names once its symbolic links are followed, as open() follows them: the path
// itself if it is no link, else the final target, which need not exist (a dangling link's target
// is what np.save creates). Links in the directories above need no resolving: the temporary
// file and the rename go through them alike.
std::string follow_links(const std::string& path) {
    std::string p = path;
    for (int hops = 0;; ++hops) {
        struct stat st{};
        if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
        if (hops == 40) throw UsageError(path + ": cannot write output (" + std::strerror(ELOOP) + ")");
        std::vector<char> buf(PATH_MAX);
        const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size());
        if (n < 0) throw UsageError(path + ": cannot read the link (" + std::strerror(errno) + ")");
        const std::string target(buf.data(), size_t(n));
        if (target.empty()) throw UsageError(path + ": cannot read the link (it is empty)");
        const size_t slash = p.rfind('/');
        p = target[0] == '/' || slash == std::string::npos ? target : p.substr(0, slash + 1) + target;
    }
}

// Writes all of [data, data + len) to fd; false with errno set on failure.
bool write_all(int fd, const void* data, size_t len) {
    const char* c = static_cast<const char*>(data);
    while (len) {
        const ssize_t w = ::write(fd, c, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        c += w, len -= size_t(w);
    }
    return true;
}

void write_npy_atomic(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
    std::string dims;
    int64_t n = 1;
    for (int64_t d : shape) dims += std::to_string(d) + ", ", n *= d;
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    const size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                   static_cast<unsigned char>(header.size() & 0xff),
                                   static_cast<unsigned char>(header.size() >> 8)};
    const size_t data_bytes = size_t(n) * sizeof(float);
    write_file_atomic(path, [&](int fd) {
        return write_all(fd, pre, 10) && write_all(fd, header.data(), header.size()) && write_all(fd, data, data_bytes);
    });
}

void write_file_atomic(const std::string& path, const std::function<bool(int)>& write) {
    // Through a symbolic link, as np.save writes: the link stays, its target gets the output.
    const std::string target = follow_links(path);
    struct stat st{};
    if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) throw UsageError(path + ": cannot write output (it is a directory)");
        // A device or a FIFO (/dev/null, a pipe to a reader) is written in place, as np.save
        // does: a rename would replace it with a regular file. Such a stream is not atomic anyway,
        // and there is nothing to fsync.
        const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) throw UsageError(path + ": cannot open output (" + std::strerror(errno) + ")");
        const bool ok = write(fd);
        const int e = errno;
        if (close(fd) != 0 && ok) throw UsageError(path + ": close failed (" + std::strerror(errno) + ")");
        if (!ok) throw UsageError(path + ": write failed (" + std::strerror(e) + ")");
        return;
    }
    // A new file beside the output, mode 0666 less the umask as np.save's (mkstemp's is 0600,
    // and a fixed mode would ignore the umask).
    std::string tmp;
    int fd = -1;
    std::random_device entropy;
    for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
        char suffix[16];
        std::snprintf(suffix, sizeof suffix, "%08x", unsigned(entropy()));
        tmp = target + ".tmp." + suffix;
        fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) throw UsageError(path + ": cannot create output file (" + std::strerror(errno) + ")");
    auto fail = [&](const char* what) {
        int e = errno;
        close(fd);
        std::remove(tmp.c_str());
        throw UsageError(path + ": " + what + " (" + std::strerror(e) + ")");
    };
    if (!write(fd)) fail("write failed");
    if (fsync(fd) != 0) fail("fsync failed");
    if (close(fd) != 0) {
        std::remove(tmp.c_str());
        throw UsageError(path + ": close failed");
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        int e = errno;
        std::remove(tmp.c_str());
        throw UsageError(path + ": cannot move output into place (" + std::strerror(e) + ")");
    }
}

}  // namespace xcorr
