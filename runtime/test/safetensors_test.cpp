//===- safetensors_test.cpp - safetensors files and checkpoints -----------===//
#include "merak_rt/safetensors.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <dirent.h>
#include <random>
#include <unistd.h>

using namespace merak::rt;
using merak::rt::testing::fileExists;
using merak::rt::testing::readFile;
using merak::rt::testing::TempDir;
using merak::rt::testing::writeFile;

namespace {

struct OwnedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  TensorRef ref() const { return {name, dtype, shape, bytes.data()}; }
};

OwnedTensor makeTensor(const std::string &name, DType dtype,
                       std::vector<int64_t> shape, uint32_t seed) {
  OwnedTensor t{name, dtype, shape, {}};
  uint64_t n = *elementCount(shape) * dtypeSize(dtype);
  std::mt19937 rng(seed);
  t.bytes.resize(n);
  for (auto &b : t.bytes)
    b = static_cast<uint8_t>(dtype == DType::BOOL ? rng() % 2 : rng());
  return t;
}

std::vector<TensorRef> refs(const std::vector<OwnedTensor> &ts) {
  std::vector<TensorRef> out;
  for (const auto &t : ts)
    out.push_back(t.ref());
  return out;
}

/// Builds a file from a literal header (padded) and raw data bytes.
std::string rawFile(std::string header, const std::string &data) {
  uint64_t n = header.size();
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k)
    out[k] = static_cast<char>((n >> (8 * k)) & 0xFF);
  return out + header + data;
}

std::string readError(const std::string &path) {
  Result<SafetensorsFile> r = readSafetensors(path);
  EXPECT_FALSE(r.ok()) << "expected an error reading " << path;
  if (r.ok())
    return "";
  EXPECT_NE(r.message().find(path), std::string::npos) << r.message();
  return r.message();
}

} // namespace

TEST(Safetensors, DTypeNamesAndSizes) {
  const std::pair<DType, size_t> all[] = {
      {DType::F64, 8}, {DType::F32, 4}, {DType::F16, 2}, {DType::BF16, 2},
      {DType::I64, 8}, {DType::I32, 4}, {DType::U16, 2}, {DType::BOOL, 1}};
  for (auto [dtype, size] : all) {
    EXPECT_EQ(dtypeSize(dtype), size);
    ASSERT_TRUE(parseDType(dtypeName(dtype)).has_value());
    EXPECT_EQ(*parseDType(dtypeName(dtype)), dtype);
  }
  EXPECT_FALSE(parseDType("F8").has_value());
  EXPECT_FALSE(parseDType("f32").has_value());
  EXPECT_EQ(*elementCount({}), 1u);
  EXPECT_EQ(*elementCount({2, 0, 3}), 0u);
  EXPECT_FALSE(elementCount({2, -1}).has_value());
}

TEST(Safetensors, RoundTripEveryDType) {
  TempDir dir;
  std::vector<OwnedTensor> ts = {
      makeTensor("transformer.h.0.attn.c_attn.weight", DType::F32, {3, 4}, 1),
      makeTensor("f16", DType::F16, {5}, 2),
      makeTensor("bf16", DType::BF16, {2, 3, 2}, 3),
      makeTensor("f64", DType::F64, {}, 4),
      makeTensor("optimizer.adamw.m.transformer.wte.weight", DType::I64, {7},
                 5),
      makeTensor("i32", DType::I32, {1, 1, 1}, 6),
      makeTensor("mask", DType::BOOL, {4, 4}, 7),
      makeTensor("u16", DType::U16, {9}, 8),
      makeTensor("empty", DType::F32, {0, 3}, 9),
  };
  Metadata meta = {{"format", "pt"}, {"note", "quote \" slash \\ nl \n ü"}};
  std::string path = dir.file("all.safetensors");
  ASSERT_TRUE(writeSafetensors(path, refs(ts), meta).ok());

  Result<SafetensorsFile> r = readSafetensors(path);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->tensors.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor &got = r->tensors[i]; // data order == write order
    EXPECT_EQ(got.name, ts[i].name);
    EXPECT_EQ(got.dtype, ts[i].dtype) << got.name;
    EXPECT_EQ(got.shape, ts[i].shape) << got.name;
    EXPECT_EQ(got.data, ts[i].bytes) << got.name;
    EXPECT_EQ(r->find(ts[i].name), &got);
  }
  EXPECT_EQ(r->find("missing"), nullptr);
  EXPECT_EQ(r->metadata, meta);
}

TEST(Safetensors, HeaderLayout) {
  TempDir dir;
  std::vector<OwnedTensor> ts = {makeTensor("a", DType::F32, {2, 3}, 1),
                                 makeTensor("b", DType::F16, {3}, 2),
                                 makeTensor("c", DType::I64, {1}, 3)};
  std::string path = dir.file("x.safetensors");
  ASSERT_TRUE(writeSafetensors(path, refs(ts), {{"k", "v"}}).ok());
  std::string bytes = readFile(path);
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k)
    n = (n << 8) | static_cast<uint8_t>(bytes[k]);
  EXPECT_EQ((8 + n) % 8, 0u);
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.find(
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,"
                "24]},\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":"
                "[24,30]},\"c\":{\"dtype\":\"I64\",\"shape\":[1],\"data_"
                "offsets\":[30,38]},\"__metadata__\":{\"k\":\"v\"}}"),
            0u)
      << header;
  EXPECT_EQ(header.find_last_not_of(' '), header.find_last_of('}'));
  EXPECT_EQ(bytes.size(), 8 + n + 38);
  EXPECT_EQ(bytes.substr(8 + n, 24),
            std::string(ts[0].bytes.begin(), ts[0].bytes.end()));
}

TEST(Safetensors, UnusualNames) {
  TempDir dir;
  std::vector<OwnedTensor> ts = {
      makeTensor("quote\"back\\slash", DType::F32, {1}, 1),
      makeTensor("tab\tnewline\nctrl\x01", DType::F32, {1}, 2),
      makeTensor("日本語.gewicht.ü", DType::F32, {1}, 3),
      makeTensor("", DType::F32, {1}, 4),
      makeTensor("/slash/and spaces/", DType::F32, {1}, 5)};
  std::string path = dir.file("names.safetensors");
  ASSERT_TRUE(writeSafetensors(path, refs(ts)).ok());
  Result<SafetensorsFile> r = readSafetensors(path);
  ASSERT_TRUE(r.ok()) << r.message();
  for (const auto &t : ts) {
    ASSERT_NE(r->find(t.name), nullptr) << t.name;
    EXPECT_EQ(r->find(t.name)->data, t.bytes);
  }
  EXPECT_TRUE(r->metadata.empty());
}

TEST(Safetensors, NoTensors) {
  TempDir dir;
  ASSERT_TRUE(writeSafetensors(dir.file("e"), {}).ok());
  Result<SafetensorsFile> r = readSafetensors(dir.file("e"));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->tensors.empty());
}

TEST(Safetensors, WriteErrorsLeaveTargetUntouched) {
  TempDir dir;
  std::string path = dir.file("t.safetensors");
  writeFile(path, "previous");
  float x = 1;
  auto expectError = [&](std::vector<TensorRef> ts, const char *cause,
                         Metadata meta = {}) {
    Status s = writeSafetensors(path, ts, meta);
    ASSERT_FALSE(s.ok()) << cause;
    EXPECT_NE(s.message().find(cause), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_EQ(readFile(path), "previous");
  };
  expectError({{"a", DType::F32, {1}, &x}, {"a", DType::F32, {1}, &x}},
              "duplicate tensor name 'a'");
  expectError({{"__metadata__", DType::F32, {1}, &x}}, "reserved");
  expectError({{"bad\xff", DType::F32, {1}, &x}}, "not valid UTF-8");
  expectError({{"n", DType::F32, {2, -1}, &x}}, "invalid shape");
  expectError({{"n", DType::F32, {2}, nullptr}}, "has no data");
  expectError({}, "not valid UTF-8", {{"k", "\xc3"}});
  // No temporary files are left behind.
  DIR *d = opendir(dir.path().c_str());
  int entries = 0;
  while (struct dirent *e = readdir(d))
    if (e->d_name[0] != '.')
      ++entries;
  closedir(d);
  EXPECT_EQ(entries, 1);

  Status s = writeSafetensors(dir.file("no/such/dir/x"),
                              {{"a", DType::F32, {1}, &x}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir/x.tmp."), std::string::npos)
      << s.message();
}

TEST(Safetensors, MissingFile) {
  TempDir dir;
  std::string msg = readError(dir.file("nope.safetensors"));
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
}

TEST(Safetensors, EveryTruncationIsAnError) {
  TempDir dir;
  std::vector<OwnedTensor> ts = {makeTensor("a", DType::F32, {4, 4}, 1),
                                 makeTensor("b", DType::BF16, {5}, 2)};
  std::string path = dir.file("full.safetensors");
  ASSERT_TRUE(writeSafetensors(path, refs(ts), {{"m", "x"}}).ok());
  std::string bytes = readFile(path);
  std::string cut = dir.file("cut.safetensors");
  for (size_t len = 0; len < bytes.size(); ++len) {
    writeFile(cut, bytes.substr(0, len));
    std::string msg = readError(cut);
    EXPECT_NE(msg.find("truncated"), std::string::npos) << len << ": " << msg;
  }
}

TEST(Safetensors, CorruptedBytesNeverCrash) {
  TempDir dir;
  std::vector<OwnedTensor> ts = {makeTensor("a", DType::F32, {4, 4}, 1),
                                 makeTensor("b", DType::I32, {3}, 2)};
  std::string path = dir.file("ok.safetensors");
  ASSERT_TRUE(writeSafetensors(path, refs(ts), {{"m", "x"}}).ok());
  std::string bytes = readFile(path);
  std::mt19937 rng(42);
  std::string bad = dir.file("bad.safetensors");
  int errors = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string copy = bytes;
    int flips = 1 + rng() % 3;
    for (int f = 0; f < flips; ++f)
      copy[rng() % copy.size()] = static_cast<char>(rng());
    writeFile(bad, copy);
    Result<SafetensorsFile> r = readSafetensors(bad); // must not crash
    errors += !r.ok();
  }
  EXPECT_GT(errors, 0);
}

TEST(Safetensors, MalformedHeaders) {
  TempDir dir;
  std::string path = dir.file("h.safetensors");
  auto expect = [&](const std::string &header, const std::string &data,
                    const char *cause) {
    writeFile(path, rawFile(header, data));
    std::string msg = readError(path);
    EXPECT_NE(msg.find(cause), std::string::npos)
        << "header " << header << "\nmessage: " << msg;
  };
  const std::string d8(8, 'x');
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}",
         d8, "malformed header JSON");
  expect("[1,2]", "", "not a JSON object");
  expect("", "", "malformed header JSON");
  expect("{\"a\":{\"dtype\":\"F8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
         "xx", "unknown dtype 'F8'");
  expect("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", d8, "\"dtype\"");
  expect("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", d8, "\"shape\"");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
         d8, "non-negative");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", d8, "data_offsets");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
         d8, "data_offsets");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
         d8, "needs 12 bytes");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         d8, "overlap");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         d8, "gap of 4 bytes");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
         d8, "4 trailing bytes");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
         d8, "truncated");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         d8, "duplicate tensor name");
  expect("{\"__metadata__\":{\"k\":1}}", "", "not a string");
  expect("{\"__metadata__\":[]}", "", "not an object");
  expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999,99999999999,"
         "99999999999],\"data_offsets\":[0,8]}}",
         d8, "too large");

  // A header length pointing past the end of the file.
  std::string tiny = rawFile("{}", "");
  tiny[0] = 100;
  writeFile(path, tiny);
  EXPECT_NE(readError(path).find("exceeds"), std::string::npos);
  // An absurd header length.
  std::string huge(8, '\xff');
  writeFile(path, huge + "{}");
  EXPECT_NE(readError(path).find("100 MiB"), std::string::npos);

  // Foreign but valid: members in any order, extra keys, null metadata.
  writeFile(path,
            rawFile("{\"__metadata__\":null,\"b\":{\"data_offsets\":[4,8],"
                    "\"shape\":[],\"dtype\":\"I32\",\"extra\":1},\"a\":{"
                    "\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}",
                    std::string("\x01\x00\x02\x00\x07\x00\x00\x00", 8)));
  Result<SafetensorsFile> r = readSafetensors(path);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[0].name, "a");
  int32_t b;
  ASSERT_TRUE(r->copyTensor("b", DType::I32, {}, &b).ok());
  EXPECT_EQ(b, 7);
}

TEST(Safetensors, CopyTensorChecksDTypeAndShape) {
  TempDir dir;
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  std::string path = dir.file("w.safetensors");
  ASSERT_TRUE(writeSafetensors(path, {{"w", DType::F32, {2, 3}, w.data()}}).ok());
  Result<SafetensorsFile> r = readSafetensors(path);
  ASSERT_TRUE(r.ok());
  std::vector<float> out(6);
  ASSERT_TRUE(r->copyTensor("w", DType::F32, {2, 3}, out.data()).ok());
  EXPECT_EQ(out, w);
  Status s = r->copyTensor("w", DType::F32, {3, 2}, out.data());
  EXPECT_NE(s.message().find("has shape [2, 3], expected [3, 2]"),
            std::string::npos)
      << s.message();
  s = r->copyTensor("w", DType::BF16, {2, 3}, out.data());
  EXPECT_NE(s.message().find("has dtype F32, expected BF16"),
            std::string::npos)
      << s.message();
  s = r->copyTensor("v", DType::F32, {2, 3}, out.data());
  EXPECT_NE(s.message().find("no tensor named 'v'"), std::string::npos);
}
