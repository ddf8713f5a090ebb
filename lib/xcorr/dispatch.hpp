// A tuning parameter's instantiated values, declared once: the registry's value list and the
// template dispatch that turns a run-time value into a compile-time template argument both come
// from one type, so they cannot disagree (compile time is a feature: nothing else is instantiated).
//
//   using Warps = Values<4, 8>;                                 // the first value is the default
//   .params = {Warps::param("warps", "warps per block")},        // "warps": "4", "8"
//   Warps::dispatch(warps_, [&](auto w) { kernel<decltype(w)::value><<<...>>>(...); }, "warps");
//
// dispatch<1, 2, 4, 8>(value, f) is the same without a parameter (a value derived at run time,
// such as a transform size).
//
// Parameters instantiated only in some combinations (Combos: one row per instantiation) and
// parameters whose values are names (Choices: an enumeration with its names in one table) are
// declared once the same way; see each below.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "xcorr/core.hpp"
#include "xcorr/registry.hpp"

namespace xcorr {

template <int... Vs, typename F>
void dispatch(int value, F&& f, const char* what = "parameter") {
    bool done = ((value == Vs ? (f(std::integral_constant<int, Vs>{}), true) : false) || ...);
    if (!done)
        throw UsageError(std::string(what) + " value " + std::to_string(value) + " is not instantiated");
}

template <int... Vs>
struct Values {
    static_assert(sizeof...(Vs) > 0, "a parameter needs at least one value");
    static constexpr std::array<int, sizeof...(Vs)> list{Vs...};
    static constexpr bool distinct() {
        for (std::size_t a = 0; a < list.size(); ++a)
            for (std::size_t b = a + 1; b < list.size(); ++b)
                if (list[a] == list[b]) return false;
        return true;
    }
    static_assert(distinct(), "a value is listed twice");

    static constexpr int first = list[0];  // the default
    static constexpr bool has(int v) { return ((v == Vs) || ...); }
    static constexpr int max() {
        int m = list[0];
        for (int v : list) m = v > m ? v : m;
        return m;
    }
    // The smallest value >= n, or 0 when none is.
    static constexpr int at_least(int n) {
        int best = 0;
        for (int v : list)
            if (v >= n && (best == 0 || v < best)) best = v;
        return best;
    }
    // The values from the largest down (cut() in multi_matrix_launch.cuh takes them so).
    static constexpr std::array<int, sizeof...(Vs)> descending() {
        std::array<int, sizeof...(Vs)> d = list;
        for (std::size_t a = 0; a < d.size(); ++a)
            for (std::size_t b = a + 1; b < d.size(); ++b)
                if (d[b] > d[a]) std::swap(d[a], d[b]);
        return d;
    }
    // The registry entry: the values as text, in the declared order.
    static ParamSpec param(std::string name, std::string help) {
        return ParamSpec{std::move(name), {std::to_string(Vs)...}, std::move(help)};
    }
    // The same with a named value before the numbers (such as "auto", resolved by the factory).
    static ParamSpec param(std::string name, std::string help, const char* word) {
        return ParamSpec{std::move(name), {word, std::to_string(Vs)...}, std::move(help)};
    }
    template <typename F>
    static void dispatch(int value, F&& f, const char* what = "parameter") {
        xcorr::dispatch<Vs...>(value, std::forward<F>(f), what);
    }
};

// Several parameters instantiated together, one row per instantiated combination; a row may
// carry more columns than there are parameters (values that follow from the combination, such
// as an unroll factor). The registry lists each parameter's values as they first appear, the
// default row's first:
//
//   using Groupings = Combos<Row<1, 1>, Row<2, 2>, Default<8, 8>>;
//   Groupings::param(0, "overlaps", "..."), Groupings::param(1, "left_rows", "...")  // "8", "1", "2"
//   Groupings::dispatch({s, l}, [&](auto row) { kernel<decltype(row)::at(0), ...>; }, "what")
template <int... Vs>
struct Row {
    static constexpr std::array<int, sizeof...(Vs)> list{Vs...};
    static constexpr bool is_default = false;
    static constexpr int at(std::size_t i) { return list[i]; }
};
template <int... Vs>
struct Default : Row<Vs...> {
    static constexpr bool is_default = true;
};

template <typename... Rows>
struct Combos {
    static_assert(sizeof...(Rows) > 0, "a combination table needs at least one row");
    static_assert((int(Rows::is_default) + ... + 0) <= 1, "at most one row is the default");
    static constexpr std::size_t rows = sizeof...(Rows);
    static constexpr std::array<std::size_t, rows> widths{Rows::list.size()...};
    static constexpr std::size_t width() {
        std::size_t w = widths[0];
        for (std::size_t x : widths) w = x < w ? x : w;
        return w;
    }
    static constexpr int cell(std::size_t r, std::size_t c) {
        std::size_t i = 0;
        int v = 0;
        ((i++ == r ? (v = Rows::list[c], true) : false) || ...);
        return v;
    }
    static constexpr std::size_t default_row() {
        constexpr std::array<bool, rows> flags{Rows::is_default...};
        for (std::size_t r = 0; r < rows; ++r)
            if (flags[r]) return r;
        return 0;
    }

    // Parameter i (column i): its values as text, the default row's first, then as they appear.
    static ParamSpec param(std::size_t i, std::string name, std::string help) {
        std::vector<int> seen{cell(default_row(), i)};
        for (std::size_t r = 0; r < rows; ++r)
            if (std::find(seen.begin(), seen.end(), cell(r, i)) == seen.end()) seen.push_back(cell(r, i));
        ParamSpec spec{std::move(name), {}, std::move(help)};
        for (int v : seen) spec.values.push_back(std::to_string(v));
        return spec;
    }
    // The rows' first n columns as text, e.g. listing(2, "(", ",", ")") = "(1,1) (2,2) (8,8)".
    static std::string listing(std::size_t n, const char* open, const char* sep, const char* close) {
        std::string s;
        for (std::size_t r = 0; r < rows; ++r) {
            // Appends only: GCC 12 warns (-Wrestrict, a false positive) on const char* + string here.
            if (r) s += ' ';
            s += open;
            for (std::size_t c = 0; c < n; ++c) {
                if (c) s += sep;
                s += std::to_string(cell(r, c));
            }
            s += close;
        }
        return s;
    }
    template <std::size_t N>
    static constexpr bool has(const std::array<int, N>& key) {
        return ((std::equal(key.begin(), key.end(), Rows::list.begin())) || ...);
    }
    // Calls f(Row<...>{}) for the row whose first N columns are key; UsageError when none is.
    template <std::size_t N, typename F>
    static void dispatch(const std::array<int, N>& key, F&& f, const char* what = "combination") {
        static_assert(N <= width(), "more parameters than columns");
        const bool done = ((std::equal(key.begin(), key.end(), Rows::list.begin()) ? (f(Rows{}), true) : false) || ...);
        if (!done) throw UsageError(std::string(what) + " is not instantiated");
    }
};

// A parameter whose values are names: an enumeration and its names in one table, the first the
// default. The registry entry, the reading of the run-time text and a value's name come from it.
//
//   enum class Layout { OutOfPlace, InPlace };
//   constexpr auto kLayouts = choices<Layout>({{Layout::OutOfPlace, "outofplace"}, {Layout::InPlace, "inplace"}});
//   kLayouts.param("layout", "...")                   // "outofplace", "inplace"
//   kLayouts.param("layout", "...", Layout::InPlace)  // "inplace", "outofplace" (another default)
//   kLayouts.parse(ps.at("layout"), "layout")         // Layout::InPlace, or UsageError
template <typename E>
struct Choice {
    E value{};
    const char* name = nullptr;
};

template <typename E, std::size_t N>
struct Choices {
    std::array<Choice<E>, N> table{};

    constexpr bool valid() const {
        for (std::size_t a = 0; a < N; ++a)
            for (std::size_t b = a + 1; b < N; ++b)
                if (table[a].value == table[b].value || std::string_view(table[a].name) == table[b].name)
                    return false;
        return true;
    }
    constexpr const char* name(E v) const {
        for (const Choice<E>& c : table)
            if (c.value == v) return c.name;
        return "?";
    }
    ParamSpec param(std::string pname, std::string help) const { return param(std::move(pname), std::move(help), table[0].value); }
    // The same names with another default (listed first), the others in table order.
    ParamSpec param(std::string pname, std::string help, E first) const {
        ParamSpec spec{std::move(pname), {name(first)}, std::move(help)};
        for (const Choice<E>& c : table)
            if (c.value != first) spec.values.push_back(c.name);
        return spec;
    }
    E parse(const std::string& text, const char* what) const {
        std::string names;
        for (const Choice<E>& c : table) {
            if (text == c.name) return c.value;
            names += (names.empty() ? "" : ", ") + std::string(c.name);
        }
        throw UsageError(std::string(what) + " must be one of " + names + ", not " + text);
    }
};

// Compile time only: a value or name listed twice does not compile.
template <typename E, std::size_t N>
consteval Choices<E, N> choices(const Choice<E> (&t)[N]) {
    Choices<E, N> c;
    for (std::size_t i = 0; i < N; ++i) c.table[i] = t[i];
    if (!c.valid()) throw "a value or a name is listed twice";
    return c;
}

// dispatch_choice<kChoices>(value, f): f(std::integral_constant<E, value>{}) for an enumeration declared
// with choices(), so that a named value can select a template argument.
template <const auto& C, typename E, typename F>
void dispatch_choice(E value, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((value == C.table[I].value ? (f(std::integral_constant<E, C.table[I].value>{}), true) : false) || ...);
    }(std::make_index_sequence<C.table.size()>{});
}

}  // namespace xcorr
