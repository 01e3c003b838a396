// Internal to the filter implementation files: the filter tables they
// contribute and shared helpers. Not for use elsewhere.
#pragma once

#include <span>
#include <string_view>

#include "gpu/result.hpp"
#include "model/jinja_value.hpp"

namespace pagoda::model::jinja {

using FilterFn = Result<Value> (*)(const Value& subject, const CallArgs& args);

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

std::span<const FilterEntry> text_filters();      // jinja_filters.cpp
std::span<const FilterEntry> sequence_filters();  // jinja_seq_filters.cpp

// Like jinja2's soft_str: str(v), keeping Markup.
Value soft_str(const Value& v);

}  // namespace pagoda::model::jinja
