//===- json_util_test.cpp - what the runtime adds to nlohmann-json --------===//
#include "json_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace merak::rt;

TEST(JsonUtil, Numbers) {
  for (double d : {0.0, -0.0, 0.1, 1.0 / 3.0, 1e300, 5e-324, -123456.789,
                   6.02214076e23, 0.30000000000000004}) {
    std::string n;
    appendNumber(n, d);
    EXPECT_EQ(nlohmann::json::parse(n).get<double>(), d) << n;
  }
  std::string n;
  appendNumber(n, 6e-4);
  EXPECT_EQ(n, "6e-4"); // shortest form; not "6e-04" or "0.0006"
  n.clear();
  appendNumber(n, 1e-7);
  EXPECT_EQ(n, "1e-7"); // not "1e-07"
  n.clear();
  appendNumber(n, 1e100);
  EXPECT_EQ(n, "1e+100");
  n.clear();
  appendNumber(n, 1.0);
  EXPECT_EQ(n, "1"); // not "1.0"
  n.clear();
  appendNumber(n, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(n, "null");
}

TEST(JsonUtil, Strings) {
  std::string s;
  appendString(s, "a\"b\\c\n\x01\xc3\xbc");
  EXPECT_EQ(s, "\"a\\\"b\\\\c\\n\\u0001\xc3\xbc\"");
  EXPECT_EQ(nlohmann::json::parse(s).get<std::string>(), "a\"b\\c\n\x01\xc3\xbc");
  s.clear();
  appendString(s, "x\xff");
  EXPECT_EQ(nlohmann::json::parse(s).get<std::string>(), "x\xef\xbf\xbd"); // U+FFFD

  EXPECT_TRUE(isValidUtf8("plain \xc3\xbc \xf0\x9f\x98\x80"));
  EXPECT_FALSE(isValidUtf8("\xc0\x80"));         // overlong
  EXPECT_FALSE(isValidUtf8("\xed\xa0\x80"));     // surrogate
  EXPECT_FALSE(isValidUtf8("\xf4\x90\x80\x80")); // > U+10FFFF
  EXPECT_FALSE(isValidUtf8("\xe6\x97"));         // truncated
}

TEST(JsonUtil, DuplicateKeys) {
  EXPECT_TRUE(parseJson(R"({"a": 1, "b": {"a": 2}, "c": [{"a": 3}]})").duplicate.empty());
  EXPECT_EQ(parseJson(R"({"a": 1, "a": 2})").duplicate, (std::vector<std::string>{"a"}));
  EXPECT_EQ(parseJson(R"({"x": [0, {}, {"k": 1, "k": 2}]})").duplicate,
            (std::vector<std::string>{"x", "[2]", "k"}));
  EXPECT_EQ(parseJson(R"({"m": {"k": 1, "j": [1, 2], "k": 2}})").duplicate,
            (std::vector<std::string>{"m", "k"}));
  EXPECT_THROW(parseJson("{\"a\" 1}"), nlohmann::json::parse_error);
  try {
    parseJson("{\"a\" 1}");
  } catch (const nlohmann::json::parse_error &e) {
    EXPECT_EQ(jsonErrorText(e).rfind("parse error at line 1, column 6", 0), 0u) << e.what();
  }
}

TEST(JsonUtil, NonNegativeIntegers) {
  nlohmann::json v = nlohmann::json::parse(
      "[0, 7, -1, 1.5, \"3\", 9223372036854775807, 9223372036854775808]");
  EXPECT_EQ(nonNegativeInteger(v[0]), 0);
  EXPECT_EQ(nonNegativeInteger(v[1]), 7);
  EXPECT_EQ(nonNegativeInteger(v[2]), std::nullopt);
  EXPECT_EQ(nonNegativeInteger(v[3]), std::nullopt);
  EXPECT_EQ(nonNegativeInteger(v[4]), std::nullopt);
  EXPECT_EQ(nonNegativeInteger(v[5]), INT64_MAX);
  EXPECT_EQ(nonNegativeInteger(v[6]), std::nullopt);
}
