//===- json_util.h - What the runtime adds to nlohmann-json (internal) -*- C++ -*-===//
//
// The runtime reads and writes JSON with nlohmann-json; these fill its gaps:
//  - parseJson: nlohmann keeps the last of a key given twice in an object;
//    a safetensors header or a manifest must not have any, so parseJson
//    reports the first one, with the keys around it;
//  - jsonErrorText: nlohmann's message without its "[json.exception...]" tag;
//  - nonNegativeInteger: an integer member that fits int64 and is >= 0
//    (nlohmann keeps non-negative ones as uint64);
//  - appendNumber: the shortest text that reads back to the same double, as
//    std::to_chars writes it with the exponent's leading zeros dropped
//    ("6e-4", "1", "1e+100"); nlohmann would write "0.0006" and "1.0", and
//    the metrics lines and traces keep their format;
//  - appendString, isValidUtf8: through nlohmann's serializer.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_JSON_UTIL_H
#define MERAK_RT_SRC_JSON_UTIL_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace merak::rt {

/// A parsed document and the first key it gives twice in one object: the
/// keys of the objects around it ("[i]" for list elements), then the key;
/// empty when there is none.
struct ParsedJson {
  nlohmann::json value;
  std::vector<std::string> duplicate;
};

/// Parses `text`; throws nlohmann::json::parse_error when it is not JSON.
ParsedJson parseJson(std::string_view text);

/// "parse error at line 1, column 6: ..." from nlohmann's exception.
std::string jsonErrorText(const std::exception &e);

/// The value of an integer in [0, INT64_MAX]; nullopt for anything else.
std::optional<int64_t> nonNegativeInteger(const nlohmann::json &v);

/// True if `s` is well-formed UTF-8 (no overlongs, no surrogates).
bool isValidUtf8(std::string_view s);

/// Appends `s` as a JSON string (invalid UTF-8 becomes U+FFFD).
void appendString(std::string &out, std::string_view s);

/// Appends the shortest decimal form that reads back to `v`; NaN and the
/// infinities become `null`.
void appendNumber(std::string &out, double v);

} // namespace merak::rt

#endif // MERAK_RT_SRC_JSON_UTIL_H
