// Turning a run-time parameter value into a compile-time template argument, over exactly the
// values a variant instantiates (compile time is a feature: nothing else gets instantiated).
//   dispatch<1, 2, 4, 8>(value, [&](auto v) { kernel<decltype(v)::value><<<...>>>(...); });
#pragma once

#include <string>
#include <type_traits>

#include "xcorr/core.hpp"

namespace xcorr {

template <int... Values, typename F>
void dispatch(int value, F&& f, const char* what = "parameter") {
    bool done = ((value == Values ? (f(std::integral_constant<int, Values>{}), true) : false) || ...);
    if (!done)
        throw UsageError(std::string(what) + " value " + std::to_string(value) + " is not instantiated");
}

}  // namespace xcorr
