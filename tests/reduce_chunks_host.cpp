// The chunks of a reduced plan (lib/reduce/reducer.hpp, chunks_of) on the CPU: for every form,
// counts and chunk budget, and both reductions, the chunks' inner problems must cover each pair of
// the whole problem exactly once, with the inner problem's own pair map naming the same left and
// right matrices as the whole problem's does (through the chunk's input offsets), in the order the
// answer is written (peaks: outputs in order; the maximum over the rights: each left's rights in
// increasing order, which the fold's "ties to the smallest index" relies on), and no chunk larger
// than its budget where the form allows. tests/test_reduce_chunks.py runs it (no GPU needed).
// Prints one FAIL line per broken case and "N cases, N failed".
#include <cstdio>
#include <string>
#include <vector>

#include "lib/reduce/reducer.hpp"

using namespace xcorr;

namespace {
int failed = 0, cases = 0;

void fail(const std::string& what, const std::string& why) {
    if (++failed <= 20) std::printf("FAIL  %s: %s\n", what.c_str(), why.c_str());
}

// The right matrix of left i's j-th right in the whole problem (reduce.hpp's numbering).
int64_t right_of(const Problem& p, int64_t i, int64_t j) {
    return p.form == Form::NToMn ? i + int64_t(p.nL) * j : j;
}

void check(Form form, int nL, int nR, ReductionKind kind, int64_t cap) {
    ++cases;
    Problem p{form, 3, 4, 2, 3, nL, nR};
    p.check();
    const int64_t L = int64_t(p.hL) * p.wL, R = int64_t(p.hR) * p.wR;
    const std::string what = std::string(form_name(form)) + " " + std::to_string(nL) + "x" + std::to_string(nR) +
                             " " + reduction_name(kind) + " cap " + std::to_string(cap);
    const std::vector<reduce::Chunk> chunks = reduce::chunks_of(p, kind, cap);
    const PairMap whole = pair_map(p);
    const int64_t lefts = reduced_lefts(p), rights = rights_per_left(p);
    const int64_t unit = form == Form::NToMn ? nL : 1;  // the fewest maps a chunk can hold
    std::vector<int> seen(size_t(kind == ReductionKind::Peaks ? p.out_count() : lefts * rights), 0);
    int64_t next_out = 0, next_j = 0;
    for (const reduce::Chunk& c : chunks) {
        Problem q{c.form, p.hL, p.wL, p.hR, p.wR, c.nL, c.nR};
        try {
            q.check();
        } catch (const UsageError& e) {
            return fail(what, std::string("an inner problem is malformed: ") + e.what());
        }
        if (q.out_count() != c.pairs) return fail(what, "a chunk's pairs are not its problem's outputs");
        if (c.pairs > std::max(cap, unit) && !(form == Form::NToM && kind == ReductionKind::MaxOverRights && c.rights == 1))
            return fail(what, "a chunk of " + std::to_string(c.pairs) + " maps passes the budget");
        if (c.left_off % L || c.right_off % R) return fail(what, "an input offset is not a whole matrix");
        const PairMap inner = pair_map(q);
        if (kind == ReductionKind::Peaks) {
            if (c.out0 != next_out) return fail(what, "the chunks' outputs are not in order");
            for (int64_t k = 0; k < c.pairs; ++k) {
                const int64_t g = c.out0 + k;
                if (c.left_off / L + inner.left_of(k) != whole.left_of(g) ||
                    c.right_off / R + inner.right_of(k) != whole.right_of(g))
                    return fail(what, "output " + std::to_string(g) + " correlates the wrong pair");
                ++seen[size_t(g)];
            }
            next_out += c.pairs;
        } else {
            if (c.j0 != next_j) return fail(what, "the chunks' rights are not in increasing order");
            if (c.pairs != lefts * c.rights) return fail(what, "a chunk does not hold every left's rights");
            for (int64_t i = 0; i < lefts; ++i)
                for (int64_t jj = 0; jj < c.rights; ++jj) {
                    const int64_t m = i * c.si + jj * c.sj, j = c.j0 + jj;
                    if (m < 0 || m >= c.pairs) return fail(what, "a map index outside the chunk");
                    if (c.left_off / L + inner.left_of(m) != (form == Form::OneToMany ? 0 : i) ||
                        c.right_off / R + inner.right_of(m) != right_of(p, i, j))
                        return fail(what, "left " + std::to_string(i) + "'s right " + std::to_string(j) +
                                              " is read from the wrong map");
                    ++seen[size_t(i * rights + j)];
                }
            next_j += c.rights;
        }
    }
    for (size_t e = 0; e < seen.size(); ++e)
        if (seen[e] != 1) return fail(what, "pair " + std::to_string(e) + " covered " + std::to_string(seen[e]) + " times");
}
}  // namespace

int main() {
    const int64_t caps[] = {1, 2, 3, 5, 7, 12, 1000};
    for (int64_t cap : caps)
        for (ReductionKind kind : {ReductionKind::Peaks, ReductionKind::MaxOverRights}) {
            if (kind == ReductionKind::Peaks) check(Form::OneToOne, 1, 1, kind, cap);
            for (int m : {1, 2, 5, 11}) check(Form::OneToMany, 1, m, kind, cap);
            for (int n : {1, 2, 3, 4})
                for (int g : {1, 2, 5}) check(Form::NToMn, n, n * g, kind, cap);
            for (int n : {1, 2, 3, 6})
                for (int m : {1, 2, 5, 13}) check(Form::NToM, n, m, kind, cap);
        }
    std::printf("%d cases, %d failed\n", cases, failed);
    return failed != 0;
}
