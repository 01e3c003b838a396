// Unicode data for Python str semantics, generated from Python itself by
// tools/gen-jinja-unicode.py into jinja_unicode_data.cpp. Used only by
// jinja_strings.cpp. All tables are sorted by code point and immutable.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pagoda::model::jinja::pystr::data {

struct Range {  // inclusive
  char32_t lo, hi;
};

// Code points in [lo, hi] with (cp - lo) % stride == 0 map to cp + delta.
struct CaseRun {
  char32_t lo, hi;
  int32_t delta;
  uint8_t stride;
};

// A mapping to several code points (e.g. upper('ß') == "SS"); unused slots 0.
struct SpecialCase {
  char32_t cp;
  char32_t out[3];
};

extern const Range kPrintable[], kAlpha[], kDecimal[], kDigit[], kNumeric[], kUpper[], kLower[],
    kTitle[], kCased[], kCaseIgnorable[];
extern const size_t kPrintableCount, kAlphaCount, kDecimalCount, kDigitCount, kNumericCount,
    kUpperCount, kLowerCount, kTitleCount, kCasedCount, kCaseIgnorableCount;
extern const CaseRun kToUpperRuns[], kToLowerRuns[], kToTitleRuns[];
extern const size_t kToUpperRunsCount, kToLowerRunsCount, kToTitleRunsCount;
extern const SpecialCase kToUpperSpecial[], kToLowerSpecial[], kToTitleSpecial[];
extern const size_t kToUpperSpecialCount, kToLowerSpecialCount, kToTitleSpecialCount;

}  // namespace pagoda::model::jinja::pystr::data
