// Strict parsing of numbers from untrusted text (CLI flags, config files, query strings).
// "Strict": the whole string must be the number; no leading '+', spaces, or trailing junk.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuhub {

// `what` names the input in the error ("--context must be a whole number, got 'abc'").
Result<std::int64_t> ParseInt64(std::string_view text, std::string_view what);
// Finite decimal numbers only (no "nan", "inf", hex floats).
Result<double> ParseDouble(std::string_view text, std::string_view what);

std::string ToLower(std::string_view text);
std::string_view Trim(std::string_view text);
std::vector<std::string> Split(std::string_view text, char separator);

// Formats a double for humans with `decimals` digits after the point ("74.68").
std::string FormatFixed(double value, int decimals);

// False when an object or array of the JSON text `text` opens deeper than `max_depth` levels.
// Counts brackets outside strings without parsing, so hostile nesting is refused before a
// recursive parser sees it; says nothing about whether the text is valid JSON.
bool JsonNestingWithin(std::string_view text, int max_depth);

}  // namespace gpuhub
