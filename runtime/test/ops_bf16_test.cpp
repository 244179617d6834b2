//===- ops_bf16_test.cpp - bfloat16 storage in the CPU runtime ------------===//
//
// DT::BF16 (merak-mixed-precision): casts round to nearest even with ties
// to even and keep NaN/inf, matmul widens exactly and rounds its float
// result once, and the widen-compute-round paths of binary/unary/reduce and
// the data movement ops, all against values worked out here by hand.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"
#include "ops_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace cpu = merak::rt::cpu;
using cpu::Dims;
using cpu::DT;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
/// The bf16 of the float whose upper 16 bits are `hi` (exactly representable).
float bfv(uint16_t hi) { return fromBits(uint32_t(hi) << 16); }


TEST(OpsBf16, CastRoundsToNearestEven) {
  EXPECT_EQ(cpu::elemSize(DT::BF16), 2);
  // 1 + 2^-8 is the tie between 1 and 1 + 2^-7: even (1). 1 + 3*2^-8 ties
  // between 1 + 2^-7 and 1 + 2^-6: even (1 + 2^-6). Just above a tie rounds up.
  const std::vector<float> x = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                                1.0f + 0x1p-8f + 0x1p-20f, -2.5f, 0.0f, -0.0f,
                                INFINITY, -INFINITY, 3.0e38f};
  const std::vector<uint16_t> want = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc020,
                                      0x0000, 0x8000, 0x7f80, 0xff80, 0x7f62};
  EXPECT_EQ(toBf16(x), want);
  std::vector<uint16_t> nan = toBf16({NAN});
  EXPECT_TRUE(std::isnan(bfv(nan[0])));
  // Widening is exact.
  EXPECT_EQ(toF32({0x3f82, 0xc020}), (std::vector<float>{1.0f + 0x1p-6f, -2.5f}));
  // Through other types: i64 -> bf16 and bf16 -> i32 (truncation).
  std::vector<int64_t> i = {3, -257};
  std::vector<uint16_t> b(2);
  cpu::cast(DT::I64, i.data(), DT::BF16, b.data(), 2);
  EXPECT_EQ(b, (std::vector<uint16_t>{0x4040, 0xc380})); // 3, -256 (257 rounds to even)
  std::vector<int32_t> j(2);
  cpu::cast(DT::BF16, b.data(), DT::I32, j.data(), 2);
  EXPECT_EQ(j, (std::vector<int32_t>{3, -256}));
}

TEST(OpsBf16, MatmulWidensAndRoundsOnce) {
  // [1 x 3] x [3 x 2]: 1*1 + (1+2^-7)*(1+2^-7) + 1*0 = 2 + 2^-6 + 2^-14, which
  // is bf16 2 + 2^-6 (ulp at 2 is 2^-6; the 2^-14 rounds away); column 2:
  // 1*256 + (1+2^-7)*1 + 1*1 = 258 + 2^-7 -> 258 (ulp 2).
  const std::vector<float> a = {1.0f, 1.0f + 0x1p-7f, 1.0f};
  const std::vector<float> b = {1.0f, 256.0f, 1.0f + 0x1p-7f, 1.0f, 0.0f, 1.0f};
  auto a16 = toBf16(a), b16 = toBf16(b);
  std::vector<uint16_t> y(2);
  Dims da, db, dy;
  da.rank = db.rank = dy.rank = 2;
  da.d[0] = 1, da.d[1] = 3, db.d[0] = 3, db.d[1] = 2, dy.d[0] = 1, dy.d[1] = 2;
  cpu::matmul(DT::BF16, a16.data(), da, b16.data(), db, y.data(), dy, false, false);
  EXPECT_EQ(toF32(y), (std::vector<float>{2.0f + 0x1p-6f, 258.0f}));
  // Read transposed: b stored [2 x 3] is the same product.
  const std::vector<float> bt = {1.0f, 1.0f + 0x1p-7f, 0.0f, 256.0f, 1.0f, 1.0f};
  auto bt16 = toBf16(bt);
  Dims dbt = db;
  dbt.d[0] = 2, dbt.d[1] = 3;
  std::vector<uint16_t> y2(2);
  cpu::matmul(DT::BF16, a16.data(), da, bt16.data(), dbt, y2.data(), dy, false, true);
  EXPECT_EQ(y2, y);
  // A widening GEMM (bf16 operands, float32 result): the float32 sum as it
  // is, 2 + 2^-6 + 2^-14 and 258 + 2^-7, without the rounding to bf16.
  std::vector<float> yf(2);
  cpu::matmul(DT::BF16, a16.data(), da, b16.data(), db, yf.data(), dy, false, false, DT::F32);
  EXPECT_EQ(yf, (std::vector<float>{2.0f + 0x1p-6f + 0x1p-14f, 258.0f + 0x1p-7f}));
}

TEST(OpsBf16, MatmulAccumulatesInFloat32) {
  // A bf16 weight gradient added into its float32 accumulator (beta = 1):
  // 0.25 + (2 + 2^-6 + 2^-14) and -1 + (258 + 2^-7), both exact in float32.
  const std::vector<float> a = {1.0f, 1.0f + 0x1p-7f, 1.0f};
  const std::vector<float> b = {1.0f, 256.0f, 1.0f + 0x1p-7f, 1.0f, 0.0f, 1.0f};
  auto a16 = toBf16(a), b16 = toBf16(b);
  Dims da, db, dy;
  da.rank = db.rank = dy.rank = 2;
  da.d[0] = 1, da.d[1] = 3, db.d[0] = 3, db.d[1] = 2, dy.d[0] = 1, dy.d[1] = 2;
  std::vector<float> y = {0.25f, -1.0f};
  cpu::matmul(DT::BF16, a16.data(), da, b16.data(), db, y.data(), dy, false, false, DT::F32,
              /*accumulate=*/true);
  EXPECT_EQ(y, (std::vector<float>{2.25f + 0x1p-6f + 0x1p-14f, 257.0f + 0x1p-7f}));
}

TEST(OpsBf16, ArithmeticRoundsItsFloatResult) {
  // binary: (1 + 2^-7) + 2^-8 = 1 + 3*2^-8 -> tie -> even 1 + 2^-6.
  auto a = toBf16({1.0f + 0x1p-7f, 2.0f}), b = toBf16({0x1p-8f, 3.0f});
  std::vector<uint16_t> y(2);
  Dims d;
  d.rank = 1, d.d[0] = 2;
  cpu::binary(cpu::Binary::Add, DT::BF16, a.data(), d, b.data(), d, y.data(), d);
  EXPECT_EQ(toF32(y), (std::vector<float>{1.0f + 0x1p-6f, 5.0f}));
  std::vector<uint8_t> lt(2);
  cpu::binary(cpu::Binary::Lt, DT::BF16, a.data(), d, b.data(), d, lt.data(), d);
  EXPECT_EQ(lt, (std::vector<uint8_t>{0, 1}));
  // unary: neg; reduce: sum of 256 ones and a 1 = 257 -> 256 (even).
  cpu::unary(cpu::Unary::Neg, DT::BF16, a.data(), y.data(), 2);
  EXPECT_EQ(toF32(y), (std::vector<float>{-(1.0f + 0x1p-7f), -2.0f}));
  std::vector<uint16_t> ones = toBf16(std::vector<float>(257, 1.0f)), s(1);
  Dims dx, axes;
  dx.rank = 1, dx.d[0] = 257, axes.rank = 1, axes.d[0] = 0;
  cpu::reduce(cpu::Reduce::Sum, DT::BF16, ones.data(), dx, axes, s.data());
  EXPECT_EQ(toF32(s)[0], 256.0f);
}

TEST(OpsBf16, DataMovementByElementSize) {
  // transpose of a [2 x 3] bf16 matrix moves 2-byte elements.
  std::vector<uint16_t> x = {1, 2, 3, 4, 5, 6}, y(6);
  Dims d, perm;
  d.rank = 2, d.d[0] = 2, d.d[1] = 3, perm.rank = 2, perm.d[0] = 1, perm.d[1] = 0;
  cpu::transpose(DT::BF16, x.data(), d, perm, y.data());
  EXPECT_EQ(y, (std::vector<uint16_t>{1, 4, 2, 5, 3, 6}));
}

} // namespace

TEST(OpsBf16, GeluAndGeluGradRoundOnce) {
  // The float32 results, rounded once to bf16, for bf16 inputs (exact GELU
  // and its derivative computed here in double): the bf16 kernels must
  // equal cast(float32 kernel(widened inputs)) for every element.
  const std::vector<float> xs = {-3.0f, -1.0f, -0.5f, 0.0f, 0.375f, 1.0f, 2.5f, 4.0f};
  auto x = toBf16(xs);
  auto g = toBf16({1.0f, -2.0f, 0.5f, 3.0f, 1.0f + 0x1p-7f, -1.0f, 0.25f, 8.0f});
  const int64_t n = int64_t(xs.size());
  std::vector<uint16_t> y(n), dx(n);
  cpu::unary(cpu::Unary::Gelu, DT::BF16, x.data(), y.data(), n);
  cpu::geluGrad(DT::BF16, x.data(), g.data(), dx.data(), n, false);
  auto xf = toF32(x), gf = toF32(g), yf = toF32(y), dxf = toF32(dx);
  for (int64_t i = 0; i < n; ++i) {
    const double v = xf[i];
    const double gelu = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double d = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0))) +
                     v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    EXPECT_EQ(bits(yf[i]), bits(toF32(toBf16({float(gelu)}))[0])) << "gelu x=" << v;
    EXPECT_EQ(bits(dxf[i]), bits(toF32(toBf16({float(gf[i] * d)}))[0])) << "gelu_grad x=" << v;
  }
}
