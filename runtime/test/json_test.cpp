//===- json_test.cpp - the internal JSON reader/writer --------------------===//
#include "json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace merak::rt;

namespace {
json::Value parseOk(const std::string &text) {
  json::Value v;
  std::string error;
  EXPECT_TRUE(json::parse(text, v, error)) << text << ": " << error;
  return v;
}
std::string parseError(const std::string &text) {
  json::Value v;
  std::string error;
  EXPECT_FALSE(json::parse(text, v, error)) << text;
  return error;
}
} // namespace

TEST(Json, Values) {
  json::Value v = parseOk(
      " {\"a\": [1, -2, 3.5, 1e3, true, false, null], \"b\": {\"c\": \"d\"},"
      " \"big\": 9223372036854775807, \"bigger\": 9223372036854775808} ");
  ASSERT_TRUE(v.isObject());
  EXPECT_EQ(v.object[0].first, "a");
  const auto &a = v.get("a")->array;
  ASSERT_EQ(a.size(), 7u);
  EXPECT_TRUE(a[0].isInteger());
  EXPECT_EQ(a[1].integer, -2);
  EXPECT_EQ(a[2].kind, json::Value::Kind::Double);
  EXPECT_EQ(a[2].number, 3.5);
  EXPECT_EQ(a[3].number, 1000.0);
  EXPECT_FALSE(a[3].isInteger());
  EXPECT_TRUE(a[4].boolean);
  EXPECT_FALSE(a[5].boolean);
  EXPECT_TRUE(a[6].isNull());
  EXPECT_EQ(v.get("b")->get("c")->string, "d");
  EXPECT_EQ(v.get("big")->integer, INT64_MAX);
  EXPECT_EQ(v.get("bigger")->kind, json::Value::Kind::Double);
  EXPECT_EQ(v.get("zzz"), nullptr);
}

TEST(Json, StringEscapes) {
  json::Value v =
      parseOk(R"("q\" b\\ s\/ \b\f\n\r\t \u00fc \u65e5 \ud83d\ude00")");
  EXPECT_EQ(v.string,
            "q\" b\\ s/ \b\f\n\r\t \xc3\xbc \xe6\x97\xa5 \xf0\x9f\x98\x80");
  EXPECT_EQ(parseOk("\"raw \xc3\xbc\"").string, "raw \xc3\xbc");
}

TEST(Json, Errors) {
  EXPECT_NE(parseError("").find("unexpected end"), std::string::npos);
  EXPECT_NE(parseError("{\"a\":1,}").find("expected a string key"),
            std::string::npos);
  EXPECT_NE(parseError("[1 2]").find("expected ','"), std::string::npos);
  EXPECT_NE(parseError("{} x").find("trailing"), std::string::npos);
  EXPECT_NE(parseError("\"abc").find("unterminated"), std::string::npos);
  EXPECT_NE(parseError("\"a\nb\"").find("control character"),
            std::string::npos);
  EXPECT_NE(parseError("\"\\x\"").find("invalid escape"), std::string::npos);
  EXPECT_NE(parseError("\"\\ud800\"").find("surrogate"), std::string::npos);
  EXPECT_NE(parseError("\"\\udc00\"").find("surrogate"), std::string::npos);
  EXPECT_NE(parseError("\"\\u12\"").find("\\u escape"), std::string::npos);
  EXPECT_NE(parseError("\"\xff\"").find("UTF-8"), std::string::npos);
  EXPECT_NE(parseError("01").find("trailing"), std::string::npos);
  EXPECT_NE(parseError("-").find("invalid number"), std::string::npos);
  EXPECT_NE(parseError("1.").find("invalid number"), std::string::npos);
  EXPECT_NE(parseError("1e").find("invalid number"), std::string::npos);
  EXPECT_NE(parseError("tru").find("invalid literal"), std::string::npos);
  EXPECT_NE(parseError(std::string(100, '[')).find("nesting too deep"),
            std::string::npos);
  EXPECT_NE(parseError("{\"a\" 1}").find("at byte 5"), std::string::npos);
}

TEST(Json, Writing) {
  std::string s;
  json::appendString(s, "a\"b\\c\n\x01\xc3\xbc\xff");
  EXPECT_EQ(s, "\"a\\\"b\\\\c\\n\\u0001\xc3\xbc\\ufffd\"");
  EXPECT_EQ(parseOk(s).string, "a\"b\\c\n\x01\xc3\xbc\xef\xbf\xbd");

  for (double d : {0.0, -0.0, 0.1, 1.0 / 3.0, 1e300, 5e-324, -123456.789,
                   6.02214076e23, 0.30000000000000004}) {
    std::string n;
    json::appendNumber(n, d);
    json::Value v = parseOk(n);
    EXPECT_EQ(v.number, d) << n;
  }
  std::string n;
  json::appendNumber(n, 6e-4);
  EXPECT_EQ(n, "6e-4"); // shortest form; not "6e-04"
  n.clear();
  json::appendNumber(n, 1e-7);
  EXPECT_EQ(n, "1e-7"); // not "1e-07"
  n.clear();
  json::appendNumber(n, 1e100);
  EXPECT_EQ(n, "1e+100");
  n.clear();
  json::appendNumber(n, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(n, "null");
  n.clear();
  json::appendInteger(n, INT64_MIN);
  EXPECT_EQ(parseOk(n).integer, INT64_MIN);

  EXPECT_TRUE(json::isValidUtf8("plain \xc3\xbc \xf0\x9f\x98\x80"));
  EXPECT_FALSE(json::isValidUtf8("\xc0\x80"));     // overlong
  EXPECT_FALSE(json::isValidUtf8("\xed\xa0\x80")); // surrogate
  EXPECT_FALSE(json::isValidUtf8("\xf4\x90\x80\x80")); // > U+10FFFF
  EXPECT_FALSE(json::isValidUtf8("\xe6\x97"));     // truncated
}
