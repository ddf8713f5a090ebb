#include "xcorr/core.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>

namespace xcorr {

const char* form_name(Form f) {
    switch (f) {
        case Form::OneToOne: return "one-to-one";
        case Form::OneToMany: return "one-to-many";
        case Form::NToMn: return "n-to-mn";
        case Form::NToM: return "n-to-m";
    }
    return "?";
}

Form parse_form(const std::string& name) {
    for (Form f : kAllForms)
        if (name == form_name(f)) return f;
    throw UsageError("unknown form '" + name + "' (expected one-to-one, one-to-many, n-to-mn or n-to-m)");
}

int64_t Problem::out_count() const {
    switch (form) {
        case Form::OneToOne: return 1;
        case Form::OneToMany: return nR;
        case Form::NToMn: return nR;
        case Form::NToM: return int64_t(nL) * nR;
    }
    return 0;
}

void Problem::check() const {
    if (hL <= 0 || wL <= 0 || hR <= 0 || wR <= 0)
        throw UsageError("empty matrix: left is " + std::to_string(hL) + "x" + std::to_string(wL) +
                         ", right is " + std::to_string(hR) + "x" + std::to_string(wR));
    if (nL <= 0 || nR <= 0) throw UsageError("empty stack: no left or no right matrix");
    // Output sizes are held in int: keep every single matrix comfortably inside that range.
    if (int64_t(out_h()) * out_w() > (int64_t(1) << 30))
        throw UsageError("matrix too large: one output matrix would exceed 2^30 elements");
    const std::string counts = " (left stack has " + std::to_string(nL) + ", right stack " + std::to_string(nR) + ")";
    switch (form) {
        case Form::OneToOne:
            if (nL != 1 || nR != 1) throw UsageError("one-to-one takes exactly one left and one right matrix" + counts);
            break;
        case Form::OneToMany:
            if (nL != 1) throw UsageError("one-to-many takes exactly one left matrix" + counts);
            break;
        case Form::NToMn:
            if (nR % nL != 0)
                throw UsageError("n-to-mn needs a right count that is a multiple of the left count" + counts);
            break;
        case Form::NToM: break;
    }
}

std::string Problem::describe() const {
    std::ostringstream s;
    s << form_name(form) << " " << nL << "x[" << hL << "x" << wL << "] * " << nR << "x[" << hR << "x" << wR << "]";
    return s.str();
}

int fft_max_chunk_from_env() {
    const char* v = std::getenv("XCORR_FFT_MAX_CHUNK");
    if (!v || !*v) return 0;
    return int(parse_integer("XCORR_FFT_MAX_CHUNK", v, 1, int64_t(1) << 30));
}

int param_int(const Params& params, const std::string& name) {
    auto it = params.find(name);
    if (it == params.end()) throw UsageError("missing parameter '" + name + "'");
    return int(parse_integer("parameter '" + name + "'", it->second, INT32_MIN, INT32_MAX));
}

int64_t parse_integer(const std::string& what, const std::string& text, int64_t lo, int64_t hi) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    // strtoll skips leading blanks and takes a sign: only a plain optional '-' and digits pass.
    const bool digits = !text.empty() && text.find_first_not_of("-0123456789") == std::string::npos;
    if (!digits || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        throw UsageError(what + ": not an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ": '" +
                         text + "'");
    return v;
}

double parse_positive(const std::string& what, const std::string& text, bool zero_ok) {
    char* end = nullptr;
    const bool blank = text.empty() || std::isspace(static_cast<unsigned char>(text[0]));
    const double x = blank ? NAN : std::strtod(text.c_str(), &end);
    if (blank || *end != '\0' || !std::isfinite(x) || x < 0 || (x == 0 && !zero_ok))
        throw UsageError(what + " needs a " + (zero_ok ? "finite number >= 0" : "positive number") + ", got '" + text + "'");
    return x;
}

}  // namespace xcorr
