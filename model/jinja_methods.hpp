// Attribute/item access with the rules of jinja2's ImmutableSandboxedEnvironment,
// and the built-in methods of str, dict and list values.
//
//  - get_attr(obj, name) (`obj.name`): the Python attribute first (a bound
//    method of str/dict/list, an attribute of a namespace/loop object), then
//    obj[name]; a missing one is an undefined value (no error yet). Mutating
//    methods (list.append, dict.update, ...) are "unsafe": an undefined value
//    whose use raises the sandbox's SecurityError message.
//  - get_item(obj, key) (`obj[key]`): the item first (dict key, sequence
//    index with negative indices), then for string keys the attribute; a
//    missing item (also an out-of-range index) is undefined.
//  - get_slice(obj, start, stop, step) (`obj[a:b:c]`): Python slicing of
//    strings (by code point) and sequences; none for omitted bounds. Like
//    jinja2 (slices bypass the sandbox's getitem), bad bounds or a value
//    that cannot be sliced are errors, not undefined.
//  - On an undefined `obj` all three fail with the undefined value's message,
//    as jinja2's Undefined does.
// Bound methods are callables holding a copy of the receiver.
#pragma once

#include <string_view>

#include "gpu/result.hpp"
#include "model/jinja_value.hpp"

namespace pagoda::model::jinja {

// Whether `x.name(...)` may appear in a template (a supported method, or a
// mutating one that the sandbox rejects at render time as jinja2 does).
bool is_known_method(std::string_view name);

Result<Value> get_attr(const Value& obj, std::string_view name);
Result<Value> get_item(const Value& obj, const Value& key);
Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop,
                        const Value& step);

}  // namespace pagoda::model::jinja
