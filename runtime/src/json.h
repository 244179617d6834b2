//===- json.h - Minimal JSON reader/writer (internal) -----------*- C++ -*-===//
//
// Just enough JSON for the runtime's own formats: the safetensors header,
// JSONL metrics and Chrome traces. Not a public header.
//
// The reader keeps object members in file order, parses integers exactly into
// int64 (a number with a fraction or exponent, or outside int64, becomes a
// double), decodes \uXXXX escapes (surrogate pairs included) to UTF-8, limits
// nesting depth, and reports errors with a byte offset. It never throws.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_JSON_H
#define MERAK_RT_SRC_JSON_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace merak::rt::json {

struct Value {
  enum class Kind { Null, Bool, Integer, Double, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0; // also set for Integer
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object; // file order

  bool isNull() const { return kind == Kind::Null; }
  bool isInteger() const { return kind == Kind::Integer; }
  bool isNumber() const {
    return kind == Kind::Integer || kind == Kind::Double;
  }
  bool isString() const { return kind == Kind::String; }
  bool isArray() const { return kind == Kind::Array; }
  bool isObject() const { return kind == Kind::Object; }
  /// First member named `key`, or nullptr.
  const Value *get(std::string_view key) const;
};

/// Parses exactly one JSON value from `text` (surrounding whitespace
/// allowed). On failure returns false and sets `error` (with byte offset).
bool parse(std::string_view text, Value &out, std::string &error);

/// True if `s` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool isValidUtf8(std::string_view s);

/// Appends `s` as a quoted JSON string. Control characters, '"' and '\' are
/// escaped; other bytes pass through. Invalid UTF-8 sequences are replaced by
/// U+FFFD so the output is always valid JSON.
void appendString(std::string &out, std::string_view s);

/// Appends the shortest decimal form that reads back to the same double;
/// NaN and infinities become `null`.
void appendNumber(std::string &out, double v);

/// Appends an integer in decimal.
void appendInteger(std::string &out, int64_t v);

} // namespace merak::rt::json

#endif // MERAK_RT_SRC_JSON_H
