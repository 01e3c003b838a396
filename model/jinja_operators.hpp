// Python operator semantics for jinja::Value: arithmetic (+ - * / // % **,
// unary - +), comparisons and `in`, as jinja2 evaluates them with Python.
//
// Integers are int64: a result that overflows is an Error (Python would
// switch to big integers), never a wrapped value. `str % args` is Python's
// printf-style formatting (jinja_printf.cpp: flags, width, precision,
// %(key)s, conversions s r a d i u x X o c f F e E g G; a Markup format
// escapes its arguments). Using an undefined value in arithmetic or an
// ordering comparison is an Error carrying the undefined value's message.
// Pure functions; thread-safe for values not mutated concurrently.
#pragma once

#include "gpu/result.hpp"
#include "model/jinja_parser.hpp"
#include "model/jinja_value.hpp"

namespace pagoda::model::jinja {

Result<Value> binary_op(BinOp op, const Value& a, const Value& b);
Result<Value> negate(const Value& a);
Result<Value> unary_plus(const Value& a);
Result<bool> compare_op(CmpOp op, const Value& a, const Value& b);
// `item in container`.
Result<bool> contains(const Value& container, const Value& item);
// `fmt % args` for a string fmt (args: a tuple, a mapping-like value, or one value).
Result<Value> printf_format(const Value& fmt, const Value& args);

}  // namespace pagoda::model::jinja
