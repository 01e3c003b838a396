// Splitting an HTTP request target ("/path?a=1&b=x%20y") into its decoded
// path and query parameters. Pure functions, thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace pagoda::net {

// Percent-decodes `s` ('+' becomes a space when `plus_is_space`); nullopt on a
// malformed escape.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

struct Target {
  std::string path;
  std::map<std::string, std::string> query;
};
// nullopt when the path or a query escape is malformed; a repeated query key
// keeps its last value.
std::optional<Target> parse_target(std::string_view target);

}  // namespace pagoda::net
