// Python's text for a float (repr / str): what DeepSpeed's csv monitor and log lines print, so
// dsx's files and lines read the same — "0.0001", "1e-05", "65536.0", "1e+16", "nan", "-inf".
#pragma once

#include <string>

namespace dsx::engine::monitor {

// repr(x) in Python 3: the shortest digits that round-trip, fixed notation when the decimal
// exponent is in [-4, 16), scientific with a signed two-digit-minimum exponent otherwise.
std::string python_float_repr(double x);

// round(x, ndigits) in Python 3 (correctly rounded, halves to even on the decimal value).
double python_round(double x, int ndigits);

}  // namespace dsx::engine::monitor
