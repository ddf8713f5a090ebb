#include "xcorr/core.hpp"

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
    char* end = nullptr;
    const long k = std::strtol(v, &end, 10);
    if (*end != '\0' || k < 1 || k > (1L << 30))
        throw UsageError(std::string("XCORR_FFT_MAX_CHUNK must be a positive integer, got '") + v + "'");
    return int(k);
}

int param_int(const Params& params, const std::string& name) {
    auto it = params.find(name);
    if (it == params.end()) throw UsageError("missing parameter '" + name + "'");
    char* end = nullptr;
    long v = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0') throw UsageError("parameter '" + name + "' is not an integer: " + it->second);
    return int(v);
}

}  // namespace xcorr
