//===- json.cpp - Minimal JSON reader/writer (internal) -------------------===//
#include "json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace merak::rt::json {

const Value *Value::get(std::string_view key) const {
  for (const auto &member : object)
    if (member.first == key)
      return &member.second;
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 64;

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
size_t utf8SequenceLength(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80)
    return 1;
  size_t len;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size())
    return 0;
  for (size_t k = 1; k < len; ++k) {
    unsigned char cc = byte(i + k);
    if ((cc & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  static const uint32_t minimum[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < minimum[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

class Parser {
public:
  Parser(std::string_view text, std::string &error)
      : text_(text), error_(error) {}

  bool parseDocument(Value &out) {
    skipSpace();
    if (!parseValue(out, 0))
      return false;
    skipSpace();
    if (pos_ != text_.size())
      return fail("unexpected trailing characters");
    return true;
  }

private:
  std::string_view text_;
  std::string &error_;
  size_t pos_ = 0;

  bool fail(const std::string &what) {
    error_ = what + " at byte " + std::to_string(pos_);
    return false;
  }
  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return atEnd() ? '\0' : text_[pos_]; }
  void skipSpace() {
    while (!atEnd() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                        text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word)
      return fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool parseValue(Value &out, int depth) {
    if (depth > kMaxDepth)
      return fail("nesting too deep");
    if (atEnd())
      return fail("unexpected end of input");
    char c = peek();
    switch (c) {
    case '{':
      return parseObject(out, depth);
    case '[':
      return parseArray(out, depth);
    case '"':
      out.kind = Value::Kind::String;
      return parseString(out.string);
    case 't':
      out.kind = Value::Kind::Bool;
      out.boolean = true;
      return literal("true");
    case 'f':
      out.kind = Value::Kind::Bool;
      out.boolean = false;
      return literal("false");
    case 'n':
      out.kind = Value::Kind::Null;
      return literal("null");
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return parseNumber(out);
      return fail(std::string("unexpected character '") + c + "'");
    }
  }

  bool parseObject(Value &out, int depth) {
    out.kind = Value::Kind::Object;
    ++pos_; // '{'
    skipSpace();
    if (peek() == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      skipSpace();
      if (peek() != '"')
        return fail("expected a string key");
      std::string key;
      if (!parseString(key))
        return false;
      skipSpace();
      if (peek() != ':')
        return fail("expected ':'");
      ++pos_;
      skipSpace();
      Value member;
      if (!parseValue(member, depth + 1))
        return false;
      out.object.emplace_back(std::move(key), std::move(member));
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool parseArray(Value &out, int depth) {
    out.kind = Value::Kind::Array;
    ++pos_; // '['
    skipSpace();
    if (peek() == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      skipSpace();
      Value element;
      if (!parseValue(element, depth + 1))
        return false;
      out.array.push_back(std::move(element));
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  bool parseHex4(uint32_t &cp) {
    if (pos_ + 4 > text_.size())
      return fail("truncated \\u escape");
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      char h = text_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9')
        cp |= h - '0';
      else if (h >= 'a' && h <= 'f')
        cp |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        cp |= h - 'A' + 10;
      else
        return fail("invalid \\u escape");
    }
    return true;
  }

  bool parseString(std::string &out) {
    ++pos_; // opening quote
    while (true) {
      if (atEnd())
        return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        size_t len = utf8SequenceLength(text_, pos_);
        if (len == 0)
          return fail("invalid UTF-8 in string");
        out.append(text_.substr(pos_, len));
        pos_ += len;
        continue;
      }
      ++pos_;
      if (atEnd())
        return fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!parseHex4(cp))
          return false;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t low;
          if (text_.substr(pos_, 2) != "\\u")
            return fail("unpaired surrogate in \\u escape");
          pos_ += 2;
          if (!parseHex4(low))
            return false;
          if (low < 0xDC00 || low > 0xDFFF)
            return fail("invalid low surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return fail("unpaired surrogate in \\u escape");
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        --pos_;
        return fail(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  bool parseNumber(Value &out) {
    size_t start = pos_;
    bool isInt = true;
    if (peek() == '-')
      ++pos_;
    auto digits = [&]() {
      size_t begin = pos_;
      while (!atEnd() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
      return pos_ - begin;
    };
    if (peek() == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return fail("invalid number");
    }
    if (peek() == '.') {
      ++pos_;
      isInt = false;
      if (digits() == 0)
        return fail("invalid number");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      isInt = false;
      if (peek() == '+' || peek() == '-')
        ++pos_;
      if (digits() == 0)
        return fail("invalid number");
    }
    std::string lexeme(text_.substr(start, pos_ - start));
    if (isInt) {
      int64_t v = 0;
      auto [ptr, ec] =
          std::from_chars(lexeme.data(), lexeme.data() + lexeme.size(), v);
      if (ec == std::errc() && ptr == lexeme.data() + lexeme.size()) {
        out.kind = Value::Kind::Integer;
        out.integer = v;
        out.number = static_cast<double>(v);
        return true;
      }
    }
    out.kind = Value::Kind::Double;
    out.number = std::strtod(lexeme.c_str(), nullptr);
    return true;
  }
};

} // namespace

bool parse(std::string_view text, Value &out, std::string &error) {
  out = Value();
  Parser parser(text, error);
  return parser.parseDocument(out);
}

bool isValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8SequenceLength(s, i);
    if (len == 0)
      return false;
    i += len;
  }
  return true;
}

void appendString(std::string &out, std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t len = utf8SequenceLength(s, i);
      if (len == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.substr(i, len));
        i += len;
      }
      continue;
    }
    ++i;
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20) {
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 0xF];
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

void appendNumber(std::string &out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buffer[64];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);
  if (ec != std::errc()) { // cannot happen with 64 bytes; be safe anyway
    int n = std::snprintf(buffer, sizeof(buffer), "%.17g", v);
    out.append(buffer, static_cast<size_t>(n));
    return;
  }
  // "6e-04" -> "6e-4" (valid either way; the short form reads better).
  std::string text(buffer, ptr);
  size_t e = text.find('e');
  if (e != std::string::npos) {
    size_t digits = e + 1;
    if (digits < text.size() && (text[digits] == '-' || text[digits] == '+'))
      ++digits;
    while (digits + 1 < text.size() && text[digits] == '0')
      text.erase(digits, 1);
  }
  out += text;
}

void appendInteger(std::string &out, int64_t v) {
  char buffer[32];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);
  (void)ec;
  out.append(buffer, ptr);
}

} // namespace merak::rt::json
