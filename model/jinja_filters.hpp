// Jinja filters (`x|name(args)`) and tests (`x is name(args)`) with jinja2's
// semantics, including transformers' custom tojson (json.dumps with
// ensure_ascii=False and the indent/separators/sort_keys options).
//
// Filters: abs attr batch capitalize center count d default dictsort e
// escape first float format indent int items join last length list lower map max
// min reject rejectattr replace reverse round safe select selectattr sort
// string sum title tojson trim truncate unique upper wordcount.
// Tests: defined undefined none boolean false true integer float number
// string mapping iterable sequence callable sameas escaped odd even
// divisibleby lower upper in filter test == eq equalto != ne > gt
// greaterthan >= ge < lt lessthan <= le.
// Unsupported jinja2 filters (groupby, pprint, random, slice,
// striptags, urlencode, urlize, wordwrap, xmlattr, filesizeformat,
// forceescape) are rejected by the parser via is_known_filter().
//
// Like jinja2, select/reject/selectattr/rejectattr/map/unique/batch/items/
// reverse return one-shot iterators (so `|length` on them is an error, as in
// jinja2, and `|list` is needed). Pure functions over their arguments;
// thread-safe for values not shared with a concurrent render.
#pragma once

#include <string_view>

#include "gpu/result.hpp"
#include "model/jinja_value.hpp"

namespace pagoda::model::jinja {

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

// `args` are the call arguments after the subject.
Result<Value> apply_filter(std::string_view name, const Value& subject, const CallArgs& args);
Result<bool> apply_test(std::string_view name, const Value& subject, const CallArgs& args);

}  // namespace pagoda::model::jinja
