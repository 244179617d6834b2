//===- array_data_test.cpp - ArrayDataset ----------------------------------===//
#include "merak_rt/array_data.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace merak::rt;

namespace {
/// Writes a version-1 .npy file the way numpy.save does.
void writeNpy(const std::string &path, const std::string &descr,
              const std::string &shape, const void *data, size_t bytes) {
  std::string header = "{'descr': '" + descr +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char *>(&len), 2);
  out << header;
  out.write(static_cast<const char *>(data), static_cast<std::streamsize>(bytes));
}

struct ArrayDataTest : ::testing::Test {
  merak::rt::testing::TempDir tmp;
  std::string dir = tmp.path();
  void SetUp() override {
    std::vector<float> x(5 * 3);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(i);
    writeNpy(dir + "/x.npy", "<f4", "5, 3", x.data(), x.size() * 4);
    std::vector<int64_t> y = {10, 11, 12, 13, 14};
    writeNpy(dir + "/labels.npy", "<i8", "5,", y.data(), y.size() * 8);
  }
  std::vector<ArraySpec> specs() {
    return {{"x", DType::F32, {3}}, {"labels", DType::I64, {}}};
  }
};
} // namespace

TEST_F(ArrayDataTest, SequentialRowsWrapAround) {
  auto ds = ArrayDataset::open(dir, specs(), Sampler::Sequential, 0);
  ASSERT_TRUE(ds.ok()) << ds.message();
  EXPECT_EQ(ds.value().samples(), 5);
  // Step 1 of a global batch of 4: samples 4, 0, 1, 2; this rank has rows 1..3.
  float x[2 * 3];
  int64_t y[2];
  ASSERT_TRUE(ds.value().fill(0, 1, 4, 1, 3, x).ok());
  ASSERT_TRUE(ds.value().fill(1, 1, 4, 1, 3, y).ok());
  EXPECT_EQ(y[0], 10);
  EXPECT_EQ(y[1], 11);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[5], 5.0f);
}

TEST_F(ArrayDataTest, RandomIsAPureFunctionOfStepAndRow) {
  auto a = ArrayDataset::open(dir, specs(), Sampler::Random, 7);
  auto b = ArrayDataset::open(dir, specs(), Sampler::Random, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  bool differs = false;
  for (int64_t s = 0; s < 20; ++s)
    for (int64_t r = 0; r < 4; ++r) {
      int64_t i = a.value().sampleOf(s, 4, r);
      EXPECT_EQ(i, b.value().sampleOf(s, 4, r));
      EXPECT_GE(i, 0);
      EXPECT_LT(i, 5);
      differs |= i != a.value().sampleOf(0, 4, 0);
    }
  EXPECT_TRUE(differs);
}

TEST_F(ArrayDataTest, ErrorsNameTheFileAndTheMismatch) {
  auto missing = ArrayDataset::open(dir, {{"z", DType::F32, {3}}}, Sampler::Sequential, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("z.npy"), std::string::npos);
  auto dtype = ArrayDataset::open(dir, {{"x", DType::F64, {3}}}, Sampler::Sequential, 0);
  ASSERT_FALSE(dtype.ok());
  EXPECT_NE(dtype.message().find("dtype '<f4'"), std::string::npos);
  auto shape = ArrayDataset::open(dir, {{"x", DType::F32, {4}}}, Sampler::Sequential, 0);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.message().find("shape [5, 3], expected [N] + [4]"), std::string::npos);
  std::vector<int64_t> six(6);
  writeNpy(dir + "/labels.npy", "<i8", "6,", six.data(), 48);
  auto rows = ArrayDataset::open(dir, specs(), Sampler::Sequential, 0);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.message().find("6 samples"), std::string::npos);
  std::ofstream(dir + "/x.npy") << "not numpy";
  auto garbage = ArrayDataset::open(dir, specs(), Sampler::Sequential, 0);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.message().find("not a readable .npy"), std::string::npos);
}

TEST_F(ArrayDataTest, IndexLimitAllowsOnlyTheIgnoreIndex) {
  // Labels of padded positions are -100 (PyTorch's ignore_index), which the
  // loss skips; any other value outside [0, limit) is an error naming it.
  std::vector<int64_t> y = {1, -100, 4, -100, 0};
  writeNpy(dir + "/labels.npy", "<i8", "5,", y.data(), y.size() * 8);
  ArraySpec labels{"labels", DType::I64, {}, 5, -100};
  EXPECT_TRUE(ArrayDataset::open(dir, {labels}, Sampler::Sequential, 0).ok());
  labels.ignoreIndex.reset();
  auto strict = ArrayDataset::open(dir, {labels}, Sampler::Sequential, 0);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.message().find("value -100 at sample 1"), std::string::npos);
  y[4] = 5;
  writeNpy(dir + "/labels.npy", "<i8", "5,", y.data(), y.size() * 8);
  labels.ignoreIndex = -100;
  auto over = ArrayDataset::open(dir, {labels}, Sampler::Sequential, 0);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("value 5 at sample 4"), std::string::npos);
}

TEST_F(ArrayDataTest, CountOtherCountsTheStepsGlobalRows) {
  // The loss's label count: elements of the step's global rows (every dp
  // rank's) other than the ignore_index, whatever row a rank reads.
  std::vector<int32_t> y = {1, -100, 4, -100, -100, 0, 2, 3, -100, -100};
  writeNpy(dir + "/labels.npy", "<i4", "5, 2", y.data(), y.size() * 4);
  auto ds = ArrayDataset::open(dir, {{"labels", DType::I32, {2}, 5, -100}}, Sampler::Sequential, 0);
  ASSERT_TRUE(ds.ok()) << ds.message();
  // Step 0 of a global batch of 2: samples 0, 1 (1 + 1 counted).
  Result<int64_t> n = ds.value().countOther(0, 0, 2, -100);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(n.value(), 2);
  // Step 1 of a global batch of 3: samples 3, 4, 0 (2 + 0 + 1).
  EXPECT_EQ(ds.value().countOther(0, 1, 3, -100).value(), 3);
  // Float arrays count nothing: an internal error.
  auto floats = ArrayDataset::open(dir, {{"x", DType::F32, {3}}}, Sampler::Sequential, 0);
  ASSERT_TRUE(floats.ok()) << floats.message();
  EXPECT_FALSE(floats.value().countOther(0, 0, 2, -100).ok());
}
