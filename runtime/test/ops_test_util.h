//===- ops_test_util.h - helpers of the ops.h kernel tests ------*- C++ -*-===//
//
// Shared by the ops kernel tests: shape literals, seeded random data, index
// iteration, broadcasting offsets, comparisons and bf16 conversions.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_TEST_OPS_TEST_UTIL_H
#define MERAK_RT_TEST_OPS_TEST_UTIL_H

#include "merak_rt/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cpu = merak::rt::cpu;
using cpu::Dims;
using cpu::DT;

namespace {

inline Dims D(std::initializer_list<int64_t> v) {
  Dims d;
  for (int64_t x : v)
    d.d[d.rank++] = x;
  return d;
}

inline std::mt19937_64 &rng() {
  static std::mt19937_64 g(0xC0FFEEu);
  return g;
}

template <class T> std::vector<T> randv(int64_t n, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto &x : v)
    x = static_cast<T>(u(rng()));
  return v;
}
inline std::vector<int64_t> randi(int64_t n, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> u(lo, hi);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto &x : v)
    x = u(rng());
  return v;
}

/// fn(lin, idx) over every index of d, row-major.
inline void forEach(const Dims &d, const std::function<void(int64_t, const int64_t *)> &fn) {
  int64_t n = d.numel();
  int64_t idx[cpu::kMaxRank] = {};
  for (int64_t lin = 0; lin < n; ++lin) {
    fn(lin, idx);
    for (int32_t k = d.rank - 1; k >= 0; --k) {
      if (++idx[k] < d.d[k])
        break;
      idx[k] = 0;
    }
  }
}

/// Offset in `in` of output index idx (numpy broadcasting to out's rank).
inline int64_t bOff(const Dims &in, const Dims &out, const int64_t *idx) {
  int64_t off = 0, st = 1;
  for (int32_t k = in.rank - 1; k >= 0; --k) {
    int32_t ko = k + out.rank - in.rank;
    if (in.d[k] != 1)
      off += idx[ko] * st;
    st *= in.d[k];
  }
  return off;
}

template <class T> void expectBits(const std::vector<T> &got, const std::vector<T> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(static_cast<double>(want[i]))) {
      EXPECT_TRUE(std::isnan(static_cast<double>(got[i]))) << "at " << i;
      continue;
    }
    EXPECT_EQ(got[i], want[i]) << "at " << i;
    if (got[i] != want[i])
      return;
  }
}

template <class T>
void expectNear(const std::vector<T> &got, const std::vector<double> &want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(got[i]), want[i], tol * (1 + std::fabs(want[i])))
        << "at " << i;
    if (std::fabs(static_cast<double>(got[i]) - want[i]) > tol * (1 + std::fabs(want[i])))
      return;
  }
}

/// x rounded to bf16 by the runtime's cast, and bf16 widened back.
inline std::vector<uint16_t> toBf16(const std::vector<float> &x) {
  std::vector<uint16_t> y(x.size());
  cpu::cast(DT::F32, x.data(), DT::BF16, y.data(), int64_t(x.size()));
  return y;
}
inline std::vector<float> toF32(const std::vector<uint16_t> &x) {
  std::vector<float> y(x.size());
  cpu::cast(DT::BF16, x.data(), DT::F32, y.data(), int64_t(x.size()));
  return y;
}

} // namespace

namespace {
// The runtime's OpenMP workers exist by the time death tests run; re-exec
// the test binary instead of forking a threaded process.
inline void useThreadsafeDeathTests() { ::testing::FLAGS_gtest_death_test_style = "threadsafe"; }
} // namespace

#endif // MERAK_RT_TEST_OPS_TEST_UTIL_H
