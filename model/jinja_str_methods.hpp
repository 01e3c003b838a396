// Python str methods callable from templates (`content.strip()`,
// `role.startswith(('a', 'b'))`, `'{} x'.format(y)`, ...).
//
// Supported: strip lstrip rstrip split rsplit splitlines replace startswith
// endswith upper lower title capitalize swapcase casefold find rfind index
// rindex count join center ljust rjust zfill partition rpartition
// removeprefix removesuffix format isdigit isdecimal isnumeric isalpha
// isalnum isspace islower isupper. format() handles {}, {0}, {name},
// .attr/[key] field chains and !r/!s/!a conversions, but no format specs
// (an Error). Other Python str methods exist as attributes but fail when
// called. A result of a method on a Markup string stays Markup only for the
// case/strip family (as markupsafe does); others return plain strings.
#pragma once

#include <string_view>

#include "gpu/result.hpp"
#include "model/jinja_value.hpp"

namespace pagoda::model::jinja {

bool is_str_method(std::string_view name);       // implemented here
bool is_python_str_attr(std::string_view name);  // any attribute of Python's str
Result<Value> call_str_method(const Value& self, std::string_view name, const CallArgs& args);

}  // namespace pagoda::model::jinja
