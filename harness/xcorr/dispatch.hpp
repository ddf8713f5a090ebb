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
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

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
    template <typename F>
    static void dispatch(int value, F&& f, const char* what = "parameter") {
        xcorr::dispatch<Vs...>(value, std::forward<F>(f), what);
    }
};

}  // namespace xcorr
