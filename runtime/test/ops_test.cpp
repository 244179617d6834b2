//===- ops_test.cpp - tensor-level CPU kernels (ops.h) against references --===//
//
// The entry points of merak_rt/ops.h against independent loops written here
// (in double, in the order lib/Evaluator uses, so most comparisons are
// bitwise): the basics, each Unary/Binary kind with the fast paths and the
// general fallback of binary/where, integer semantics and casts. Shapes and
// reductions: ops_shape_test.cpp; convolution, pools, norms, cross entropy,
// matmul and dropout: ops_nn_test.cpp.
//
//===----------------------------------------------------------------------===//
#include "ops_test_util.h"

// --- basics ---------------------------------------------------------------------

TEST(OpsBasics, ElemSizeFatalRecorder) {
  useThreadsafeDeathTests();
  EXPECT_EQ(cpu::elemSize(DT::F32), 4);
  EXPECT_EQ(cpu::elemSize(DT::F64), 8);
  EXPECT_EQ(cpu::elemSize(DT::I64), 8);
  EXPECT_EQ(cpu::elemSize(DT::I32), 4);
  EXPECT_EQ(cpu::elemSize(DT::BOOL), 1);
  EXPECT_EXIT(cpu::fatal("boom"), ::testing::ExitedWithCode(3), "merak runtime: boom");
  std::vector<int64_t> seen;
  cpu::opMark(7); // no recorder: no-op
  cpu::setOpRecorder([](void *ctx, int64_t i) { static_cast<std::vector<int64_t> *>(ctx)->push_back(i); },
                     &seen);
  cpu::opMark(0);
  cpu::opMark(1);
  cpu::opMark(-1);
  cpu::setOpRecorder(nullptr, nullptr);
  cpu::opMark(5);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, -1}));
}

TEST(OpsBasics, CopyBytes) {
  std::vector<uint8_t> src(3 << 20), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<uint8_t>(i * 7 + 3);
  cpu::copyBytes(dst.data(), src.data(), static_cast<int64_t>(src.size()) - 5);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), src.size() - 5), 0);
  EXPECT_EQ(dst[src.size() - 1], 0);
}

// --- unary ----------------------------------------------------------------------

namespace {
double refUnary(cpu::Unary op, double x, double a, double b) {
  using U = cpu::Unary;
  switch (op) {
  case U::Exp: return std::exp(x);
  case U::Log: return std::log(x);
  case U::Sqrt: return std::sqrt(x);
  case U::Rsqrt: return 1.0 / std::sqrt(x);
  case U::Tanh: return std::tanh(x);
  case U::Erf: return std::erf(x);
  case U::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
  case U::Expm1: return std::expm1(x);
  case U::Log1p: return std::log1p(x);
  case U::Softplus: return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  case U::Reciprocal: return 1.0 / x;
  case U::Sin: return std::sin(x);
  case U::Cos: return std::cos(x);
  case U::Asin: return std::asin(x);
  case U::Acos: return std::acos(x);
  case U::Atan: return std::atan(x);
  case U::Floor: return std::floor(x);
  case U::Ceil: return std::ceil(x);
  case U::Relu: return x > 0 ? x : (std::isnan(x) ? x : 0.0);
  case U::Neg: return -x;
  case U::Abs: return std::fabs(x);
  case U::Sign: return (x > 0) - (x < 0);
  case U::Gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  case U::GeluTanh:
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case U::LeakyRelu: return x >= 0 ? x : a * x;
  case U::Clamp: return std::isnan(x) ? x : std::min(std::max(x, a), b);
  case U::Not: break;
  }
  return 0;
}
} // namespace

namespace {
/// F32 exp, log, tanh, erf, sigmoid, gelu and softplus use the runtime's vectorised
/// float functions (ops_util.h) instead of double libm rounded to float, so
/// they are compared with the double result in ulps of float rather than
/// bitwise. Measured over every float, the maxima are 1-3 ulp; 4 is the
/// bound the runtime promises.
bool fastF32(cpu::Unary op) {
  using U = cpu::Unary;
  return op == U::Exp || op == U::Log || op == U::Tanh || op == U::Erf ||
         op == U::Sigmoid || op == U::Gelu || op == U::Softplus;
}

/// The exact value of a fast op (GELU's lower tail through erfc, where
/// 1 + erf cancels even in double).
double refFast(cpu::Unary op, double x) {
  if (op == cpu::Unary::Gelu)
    return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  return refUnary(op, x, 0, 0);
}

/// |got - want| in ulps of float at |want| (the spacing of floats just
/// above it, 2^-149 among the subnormals).
double ulpDistance(float got, double want) {
  const float wf = static_cast<float>(want);
  const float a = std::fabs(wf);
  const double ulp = std::isfinite(a)
                         ? double(std::nextafter(a, INFINITY)) - double(a)
                         : double(std::numeric_limits<float>::max()) -
                               double(std::nextafter(
                                   std::numeric_limits<float>::max(), 0.0f));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

/// y = op(x) within maxUlps of the double reference; NaN and infinite
/// references must be matched exactly.
void expectUlps(const std::vector<float> &y, const std::vector<double> &x, cpu::Unary op,
                double maxUlps) {
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const double want = refFast(op, x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << "x=" << x[i];
    } else if (std::isinf(static_cast<float>(want))) {
      EXPECT_EQ(y[i], static_cast<float>(want)) << "x=" << x[i];
    } else {
      EXPECT_LE(ulpDistance(y[i], want), maxUlps)
          << "x=" << x[i] << " got " << y[i] << " want " << want;
    }
    if (::testing::Test::HasFailure())
      return;
  }
}
} // namespace

TEST(OpsElementwise, UnaryFloatEveryKind) {
  using U = cpu::Unary;
  const U kinds[] = {U::Exp,       U::Log,        U::Sqrt,     U::Rsqrt, U::Tanh,  U::Erf,
                     U::Sigmoid,   U::Reciprocal, U::Sin,      U::Cos,   U::Floor, U::Ceil,
                     U::Relu,      U::Neg,        U::Abs,      U::Sign,  U::Gelu,  U::GeluTanh,
                     U::LeakyRelu, U::Clamp,      U::Softplus, U::Asin,  U::Acos,  U::Atan,
                     U::Expm1,     U::Log1p};
  for (int64_t n : {int64_t(37), int64_t(50000)}) {
    auto xf = randv<float>(n, -3, 3);
    xf[0] = 0.0f;
    xf[1] = -0.0f;
    xf[2] = std::numeric_limits<float>::quiet_NaN();
    std::vector<double> xd(xf.begin(), xf.end());
    for (U op : kinds) {
      double a = op == U::LeakyRelu ? 0.1 : op == U::Clamp ? -0.5 : 0;
      double b = op == U::Clamp ? 1.25 : 0;
      bool positive = op == U::Log || op == U::Sqrt || op == U::Rsqrt;
      std::vector<float> in = xf;
      if (positive)
        for (auto &v : in)
          v = std::fabs(v) + 0.01f;
      if (op == U::Asin || op == U::Acos || op == U::Log1p) // NaN outside [-1, 1] or below -1
        for (auto &v : in)
          v = v / 3.0f;
      std::vector<double> ind(in.begin(), in.end());
      std::vector<float> yf(n), wf(n);
      std::vector<double> yd(n), wd(n);
      cpu::unary(op, DT::F32, in.data(), yf.data(), n, a, b);
      cpu::unary(op, DT::F64, ind.data(), yd.data(), n, a, b);
      for (int64_t i = 0; i < n; ++i) {
        wf[i] = static_cast<float>(refUnary(op, in[i], a, b));
        wd[i] = refUnary(op, ind[i], a, b);
      }
      SCOPED_TRACE(static_cast<int>(op));
      if (fastF32(op))
        expectUlps(yf, std::vector<double>(ind.begin(), ind.end()), op, 4.0);
      else
        expectBits(yf, wf);
      expectBits(yd, wd);
    }
  }
  // Relu turns -0 into +0 (as the evaluator); in place works.
  std::vector<float> z{-0.0f, -1.0f, 2.0f};
  cpu::unary(U::Relu, DT::F32, z.data(), z.data(), 3);
  EXPECT_FALSE(std::signbit(z[0]));
  EXPECT_EQ(z[1], 0.0f);
  EXPECT_EQ(z[2], 2.0f);
}

TEST(OpsElementwise, UnaryFloatFastPathsWideRange) {
  // The vectorised F32 functions over their whole range: every float
  // spacing class (random mantissas at each exponent), the overflow and
  // underflow edges, subnormals, zeros, infinities and NaN; large enough to
  // run in parallel chunks.
  using U = cpu::Unary;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                          88.72f, 88.7228f, 88.7229f, 89.0f, 100.0f, -87.3f, -103.9f,
                          -104.0f, -150.0f, 1e-45f, 1e-40f, 1.17549435e-38f, 0.625f,
                          -0.625f, 1.0f, -1.0f, 0.70710677f, -0.70710677f, 3.92f, 10.0f,
                          -5.6f, -13.0f, -16.0f, -20.0f, 3e38f, -3e38f};
  std::uniform_int_distribution<uint32_t> mant(0, (1u << 23) - 1);
  for (uint32_t e = 0; e < 255; ++e)
    for (uint32_t sign : {0u, 1u})
      for (int k = 0; k < 64; ++k) {
        const uint32_t bits = (sign << 31) | (e << 23) | mant(rng());
        float v;
        std::memcpy(&v, &bits, sizeof v);
        x.push_back(v);
      }
  std::vector<double> xd(x.begin(), x.end());
  for (U op : {U::Exp, U::Log, U::Tanh, U::Erf, U::Sigmoid, U::Gelu, U::Softplus}) {
    SCOPED_TRACE(static_cast<int>(op));
    std::vector<float> y(x.size());
    cpu::unary(op, DT::F32, x.data(), y.data(), static_cast<int64_t>(x.size()));
    if (op == U::Gelu) {
      // Below FLT_MIN the result is a subnormal with fewer bits: compare
      // those absolutely.
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = refFast(op, xd[i]);
        if (std::isfinite(want) && std::fabs(want) < 1.17549435e-38) {
          EXPECT_LE(std::fabs(y[i] - want), 4 * 1.401298464e-45) << "x=" << x[i];
          y[i] = static_cast<float>(want);
        }
      }
    }
    expectUlps(y, xd, op, 4.0);
    // In place gives the same.
    std::vector<float> z = x;
    cpu::unary(op, DT::F32, z.data(), z.data(), static_cast<int64_t>(z.size()));
    for (size_t i = 0; i < z.size(); ++i)
      if (!std::isnan(z[i]) && (op != U::Gelu || std::fabs(z[i]) >= 1.17549435e-38f))
        ASSERT_EQ(z[i], y[i]) << "x=" << x[i];
  }
  // Signs of zero are kept where the double function keeps them.
  for (U op : {U::Tanh, U::Erf, U::Gelu}) {
    float m0 = -0.0f, y0 = 1.0f;
    cpu::unary(op, DT::F32, &m0, &y0, 1);
    EXPECT_TRUE(y0 == 0.0f && std::signbit(y0)) << static_cast<int>(op);
  }
}

TEST(OpsElementwise, UnaryIntegerAndBool) {
  using U = cpu::Unary;
  std::vector<int64_t> x{-5, 0, 7, std::numeric_limits<int64_t>::min(), 3};
  std::vector<int64_t> y(5);
  cpu::unary(U::Neg, DT::I64, x.data(), y.data(), 5);
  EXPECT_EQ(y, (std::vector<int64_t>{5, 0, -7, std::numeric_limits<int64_t>::min(), -3}));
  cpu::unary(U::Abs, DT::I64, x.data(), y.data(), 5);
  EXPECT_EQ(y, (std::vector<int64_t>{5, 0, 7, std::numeric_limits<int64_t>::min(), 3}));
  cpu::unary(U::Sign, DT::I64, x.data(), y.data(), 5);
  EXPECT_EQ(y, (std::vector<int64_t>{-1, 0, 1, -1, 1}));
  cpu::unary(U::Relu, DT::I64, x.data(), y.data(), 5);
  EXPECT_EQ(y, (std::vector<int64_t>{0, 0, 7, 0, 3}));
  // Clamp with fractional bounds: ceil(lo), floor(hi).
  cpu::unary(U::Clamp, DT::I64, x.data(), y.data(), 5, -2.5, 4.5);
  EXPECT_EQ(y, (std::vector<int64_t>{-2, 0, 4, -2, 3}));
  cpu::unary(U::Clamp, DT::I64, x.data(), y.data(), 5, -HUGE_VAL, 1.0);
  EXPECT_EQ(y, (std::vector<int64_t>{-5, 0, 1, std::numeric_limits<int64_t>::min(), 1}));
  std::vector<int32_t> xi{-4, 9, std::numeric_limits<int32_t>::min()}, yi(3);
  cpu::unary(U::Neg, DT::I32, xi.data(), yi.data(), 3);
  EXPECT_EQ(yi, (std::vector<int32_t>{4, -9, std::numeric_limits<int32_t>::min()}));
  cpu::unary(U::Abs, DT::I32, xi.data(), yi.data(), 3);
  EXPECT_EQ(yi, (std::vector<int32_t>{4, 9, std::numeric_limits<int32_t>::min()}));
  cpu::unary(U::Clamp, DT::I32, xi.data(), yi.data(), 3, 0, 5);
  EXPECT_EQ(yi, (std::vector<int32_t>{0, 5, 0}));
  std::vector<uint8_t> b{0, 1, 1, 0}, nb(4);
  cpu::unary(U::Not, DT::BOOL, b.data(), nb.data(), 4);
  EXPECT_EQ(nb, (std::vector<uint8_t>{1, 0, 0, 1}));
}

// --- binary ---------------------------------------------------------------------

namespace {
double refBinF(cpu::Binary k, double a, double b) {
  using B = cpu::Binary;
  switch (k) {
  case B::Add: return a + b;
  case B::Sub: return a - b;
  case B::Mul: return a * b;
  case B::Div: return a / b;
  case B::Rem: return std::fmod(a, b);
  case B::Pow: return std::pow(a, b);
  case B::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  case B::Min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  case B::Eq: return a == b;
  case B::Ne: return a != b;
  case B::Lt: return a < b;
  case B::Le: return a <= b;
  case B::Gt: return a > b;
  case B::Ge: return a >= b;
  default: return 0;
  }
}
bool isCompare(cpu::Binary k) { return k >= cpu::Binary::Eq && k <= cpu::Binary::Ge; }

/// Checks binary(op) on F32 and F64 for shapes da, db -> dout against the
/// double reference, and the in-place form when a has the output's shape.
void checkBinaryFloat(cpu::Binary op, const Dims &da, const Dims &db, const Dims &dout) {
  auto a = randv<float>(da.numel(), -3, 3), b = randv<float>(db.numel(), 0.5, 3);
  if (a.size() > 3) {
    a[1] = b[1 % b.size()];
    a[2] = std::numeric_limits<float>::quiet_NaN();
  }
  const int64_t n = dout.numel();
  std::vector<double> want(n);
  forEach(dout, [&](int64_t lin, const int64_t *idx) {
    want[lin] = refBinF(op, a[bOff(da, dout, idx)], b[bOff(db, dout, idx)]);
  });
  if (isCompare(op)) {
    std::vector<uint8_t> y(n), w(n);
    for (int64_t i = 0; i < n; ++i)
      w[i] = static_cast<uint8_t>(want[i]);
    cpu::binary(op, DT::F32, a.data(), da, b.data(), db, y.data(), dout);
    expectBits(y, w);
    return;
  }
  std::vector<float> y(n), w(n);
  for (int64_t i = 0; i < n; ++i)
    w[i] = static_cast<float>(want[i]);
  cpu::binary(op, DT::F32, a.data(), da, b.data(), db, y.data(), dout);
  expectBits(y, w);
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), yd(n);
  cpu::binary(op, DT::F64, ad.data(), da, bd.data(), db, yd.data(), dout);
  expectBits(yd, want);
  if (da.numel() == n) { // out aliases a
    cpu::binary(op, DT::F32, a.data(), da, b.data(), db, a.data(), dout);
    expectBits(a, w);
  }
}
} // namespace

TEST(OpsElementwise, BinaryEveryKindEveryPath) {
  using B = cpu::Binary;
  const B kinds[] = {B::Add, B::Sub, B::Mul, B::Div, B::Pow, B::Max, B::Min,
                     B::Rem, B::Eq,  B::Ne,  B::Lt,  B::Le,  B::Gt,  B::Ge};
  struct Case {
    Dims a, b, out;
  } cases[] = {
      {D({5, 7}), D({5, 7}), D({5, 7})},                 // equal shapes
      {D({1, 5, 7}), D({5, 7}), D({5, 7})},              // equal up to leading 1
      {D({5, 7}), D({}), D({5, 7})},                     // scalar b (rank 0)
      {D({1}), D({4, 6}), D({4, 6})},                    // scalar a
      {D({2, 3, 8}), D({8}), D({2, 3, 8})},              // suffix (bias add)
      {D({3}), D({2, 4, 3}), D({2, 4, 3})},              // suffix on a
      {D({2, 3, 8}), D({2, 3, 1}), D({2, 3, 8})},        // prefix / column
      {D({2, 3, 1}), D({2, 3, 5}), D({2, 3, 5})},        // column on a
      {D({2, 1, 4}), D({3, 1}), D({2, 3, 4})},           // general (both broadcast)
      {D({4, 1, 3, 1}), D({1, 5, 1, 2}), D({4, 5, 3, 2})}, // general, outer product
      {D({64, 33, 40}), D({40}), D({64, 33, 40})},       // large: parallel suffix
      {D({64, 33, 40}), D({64, 1, 40}), D({64, 33, 40})}, // large general
      {D({70000}), D({70000}), D({70000})},              // large flat
  };
  for (B op : kinds)
    for (const Case &c : cases) {
      SCOPED_TRACE(::testing::Message() << "op " << static_cast<int>(op) << " out rank "
                                        << c.out.rank << " n " << c.out.numel());
      checkBinaryFloat(op, c.a, c.b, c.out);
    }
}

TEST(OpsElementwise, BinaryIntegerSemantics) {
  using B = cpu::Binary;
  std::vector<int64_t> a{7, -7, 7, -7, std::numeric_limits<int64_t>::min(), 2, -2, 3};
  std::vector<int64_t> b{2, 2, -2, -2, -1, -1, 3, 0};
  std::vector<int64_t> y(8);
  Dims d = D({8});
  b[7] = 5;
  cpu::binary(B::Div, DT::I64, a.data(), d, b.data(), d, y.data(), d);
  EXPECT_EQ(y, (std::vector<int64_t>{3, -3, -3, 3, std::numeric_limits<int64_t>::min(), -2, 0, 0}));
  cpu::binary(B::Rem, DT::I64, a.data(), d, b.data(), d, y.data(), d);
  EXPECT_EQ(y, (std::vector<int64_t>{1, -1, 1, -1, 0, 0, -2, 3}));
  std::vector<int64_t> pa{2, 3, -1, -1, 1, 2, 5}, pb{10, 3, -3, -2, -5, -1, 0}, py(7);
  Dims d7 = D({7});
  cpu::binary(B::Pow, DT::I64, pa.data(), d7, pb.data(), d7, py.data(), d7);
  EXPECT_EQ(py, (std::vector<int64_t>{1024, 27, -1, 1, 1, 0, 1}));
  // int32 wraps like the element type.
  std::vector<int32_t> ia{std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 65536, -9};
  std::vector<int32_t> ib{1, -1, 65536, 4}, iy(4);
  Dims d4 = D({4});
  cpu::binary(B::Add, DT::I32, ia.data(), d4, ib.data(), d4, iy.data(), d4);
  EXPECT_EQ(iy, (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 131072, -5}));
  cpu::binary(B::Mul, DT::I32, ia.data(), d4, ib.data(), d4, iy.data(), d4);
  EXPECT_EQ(iy, (std::vector<int32_t>{std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 0, -36}));
  cpu::binary(B::Div, DT::I32, ia.data(), d4, ib.data(), d4, iy.data(), d4);
  EXPECT_EQ(iy, (std::vector<int32_t>{std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 1, -2}));
  cpu::binary(B::Rem, DT::I32, ia.data(), d4, ib.data(), d4, iy.data(), d4);
  EXPECT_EQ(iy, (std::vector<int32_t>{0, 0, 0, -1}));
  cpu::binary(B::Max, DT::I32, ia.data(), d4, ib.data(), d4, iy.data(), d4);
  EXPECT_EQ(iy, (std::vector<int32_t>{std::numeric_limits<int32_t>::max(), -1, 65536, 4}));
  cpu::binary(B::Min, DT::I32, ia.data(), d4, ib.data(), d4, iy.data(), d4);
  EXPECT_EQ(iy, (std::vector<int32_t>{1, std::numeric_limits<int32_t>::min(), 65536, -9}));
  cpu::binary(B::Sub, DT::I32, ia.data(), d4, ib.data(), d4, iy.data(), d4);
  EXPECT_EQ(iy, (std::vector<int32_t>{std::numeric_limits<int32_t>::max() - 1, std::numeric_limits<int32_t>::min() + 1, 0, -13}));
  // Comparisons on ints with broadcasting, and on bools.
  std::vector<int64_t> ca{1, 2, 3, 4, 5, 6}, cb{3};
  std::vector<uint8_t> cy(6);
  cpu::binary(B::Le, DT::I64, ca.data(), D({2, 3}), cb.data(), D({1}), cy.data(), D({2, 3}));
  EXPECT_EQ(cy, (std::vector<uint8_t>{1, 1, 1, 0, 0, 0}));
  std::vector<uint8_t> ba{0, 0, 1, 1}, bb{0, 1, 0, 1}, by(4);
  cpu::binary(B::And, DT::BOOL, ba.data(), d4, bb.data(), d4, by.data(), d4);
  EXPECT_EQ(by, (std::vector<uint8_t>{0, 0, 0, 1}));
  cpu::binary(B::Or, DT::BOOL, ba.data(), d4, bb.data(), d4, by.data(), d4);
  EXPECT_EQ(by, (std::vector<uint8_t>{0, 1, 1, 1}));
  cpu::binary(B::Xor, DT::BOOL, ba.data(), d4, bb.data(), d4, by.data(), d4);
  EXPECT_EQ(by, (std::vector<uint8_t>{0, 1, 1, 0}));
  cpu::binary(B::Eq, DT::BOOL, ba.data(), d4, bb.data(), d4, by.data(), d4);
  EXPECT_EQ(by, (std::vector<uint8_t>{1, 0, 0, 1}));
  // Logical ops with a broadcast operand (general path).
  std::vector<uint8_t> col{1, 0}, row{1, 0, 1}, lo(6);
  cpu::binary(B::And, DT::BOOL, col.data(), D({2, 1}), row.data(), D({3}), lo.data(), D({2, 3}));
  EXPECT_EQ(lo, (std::vector<uint8_t>{1, 0, 1, 0, 0, 0}));
}

// Bitwise ops and shifts on the runtime's integers, against hand-computed
// two's-complement values: a shift by a negative count or at least the
// width gives 0 (left) or the sign (right, arithmetic); bit_not is ~x;
// floats are refused.
TEST(OpsElementwise, BitwiseAndShifts) {
  using B = cpu::Binary;
  useThreadsafeDeathTests();
  std::vector<int32_t> a{12, -12, 0x7fffffff, -1, 5, -8}, b{10, 3, 1, 31, 32, -1}, y(6);
  Dims d = D({6});
  cpu::binary(B::BitAnd, DT::I32, a.data(), d, b.data(), d, y.data(), d);
  EXPECT_EQ(y, (std::vector<int32_t>{8, 0, 1, 31, 0, -8}));
  cpu::binary(B::BitOr, DT::I32, a.data(), d, b.data(), d, y.data(), d);
  EXPECT_EQ(y, (std::vector<int32_t>{14, -9, 0x7fffffff, -1, 37, -1}));
  cpu::binary(B::BitXor, DT::I32, a.data(), d, b.data(), d, y.data(), d);
  EXPECT_EQ(y, (std::vector<int32_t>{6, -9, 0x7ffffffe, -32, 37, 7}));
  cpu::binary(B::ShiftLeft, DT::I32, a.data(), d, b.data(), d, y.data(), d);
  EXPECT_EQ(y, (std::vector<int32_t>{12288, -96, -2, std::numeric_limits<int32_t>::min(), 0, 0}));
  cpu::binary(B::ShiftRight, DT::I32, a.data(), d, b.data(), d, y.data(), d);
  EXPECT_EQ(y, (std::vector<int32_t>{0, -2, 0x3fffffff, -1, 0, -1}));
  std::vector<int64_t> l{1, -3}, s{63, 64}, ly(2);
  cpu::binary(B::ShiftLeft, DT::I64, l.data(), D({2}), s.data(), D({2}), ly.data(), D({2}));
  EXPECT_EQ(ly, (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 0}));
  std::vector<int64_t> nx{0, -1, 5}, ny(3);
  cpu::unary(cpu::Unary::BitNot, DT::I64, nx.data(), ny.data(), 3, 0, 0);
  EXPECT_EQ(ny, (std::vector<int64_t>{-1, 0, -6}));
  std::vector<float> f{1, 2}, fy(2);
  EXPECT_EXIT(cpu::binary(B::BitAnd, DT::F32, f.data(), D({2}), f.data(), D({2}), fy.data(), D({2})),
              ::testing::ExitedWithCode(3), "bitwise ops take integer tensors");
}

TEST(OpsElementwise, IntegerDivisionByZeroIsFatal) {
  useThreadsafeDeathTests();
  std::vector<int64_t> a{1, 2}, b{1, 0}, y(2);
  EXPECT_EXIT(cpu::binary(cpu::Binary::Div, DT::I64, a.data(), D({2}), b.data(), D({2}), y.data(), D({2})),
              ::testing::ExitedWithCode(3), "division by zero");
  EXPECT_EXIT(cpu::binary(cpu::Binary::Rem, DT::I64, a.data(), D({2}), b.data(), D({2}), y.data(), D({2})),
              ::testing::ExitedWithCode(3), "division by zero");
}

TEST(OpsElementwise, WhereEveryPath) {
  struct Case {
    Dims c, a, b, out;
  } cases[] = {
      {D({4, 5}), D({4, 5}), D({4, 5}), D({4, 5})},
      {D({4, 5}), D({4, 5}), D({}), D({4, 5})},           // masked fill
      {D({4, 5}), D({1}), D({4, 5}), D({4, 5})},
      {D({4, 1}), D({4, 5}), D({5}), D({4, 5})},          // one condition per row
      {D({1, 5}), D({3, 1}), D({3, 5}), D({3, 5})},       // general
      {D({1, 1, 256, 256}), D({2, 4, 256, 256}), D({}), D({2, 4, 256, 256})}, // causal mask
  };
  for (const Case &c : cases) {
    auto cond = randi(c.c.numel(), 0, 1);
    std::vector<uint8_t> cb(cond.begin(), cond.end());
    auto a = randv<float>(c.a.numel()), b = randv<float>(c.b.numel());
    std::vector<float> y(c.out.numel()), w(c.out.numel());
    forEach(c.out, [&](int64_t lin, const int64_t *idx) {
      w[lin] = cb[bOff(c.c, c.out, idx)] ? a[bOff(c.a, c.out, idx)] : b[bOff(c.b, c.out, idx)];
    });
    cpu::where(cb.data(), c.c, DT::F32, a.data(), c.a, b.data(), c.b, y.data(), c.out);
    expectBits(y, w);
    // 8-byte and 1-byte elements through the same path.
    std::vector<int64_t> ai(a.size()), bi(b.size()), yi(y.size()), wi(y.size());
    for (size_t i = 0; i < a.size(); ++i)
      ai[i] = static_cast<int64_t>(i) * 3;
    for (size_t i = 0; i < b.size(); ++i)
      bi[i] = -static_cast<int64_t>(i);
    forEach(c.out, [&](int64_t lin, const int64_t *idx) {
      wi[lin] = cb[bOff(c.c, c.out, idx)] ? ai[bOff(c.a, c.out, idx)] : bi[bOff(c.b, c.out, idx)];
    });
    cpu::where(cb.data(), c.c, DT::I64, ai.data(), c.a, bi.data(), c.b, yi.data(), c.out);
    EXPECT_EQ(yi, wi);
  }
}

TEST(OpsElementwise, CastRules) {
  std::vector<float> f{1.9f, -1.9f, 0.0f, NAN, 3e9f, -3e9f, 1e30f, -0.0f};
  std::vector<int32_t> i32(8);
  cpu::cast(DT::F32, f.data(), DT::I32, i32.data(), 8);
  const int32_t mx = std::numeric_limits<int32_t>::max(), mn = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(i32, (std::vector<int32_t>{1, -1, 0, 0, mx, mn, mx, 0}));
  std::vector<int64_t> i64(8);
  cpu::cast(DT::F32, f.data(), DT::I64, i64.data(), 8);
  EXPECT_EQ(i64[0], 1);
  EXPECT_EQ(i64[4], 3000000000LL);
  EXPECT_EQ(i64[6], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[3], 0);
  std::vector<uint8_t> bo(8);
  cpu::cast(DT::F32, f.data(), DT::BOOL, bo.data(), 8);
  EXPECT_EQ(bo, (std::vector<uint8_t>{1, 1, 0, 1, 1, 1, 1, 0}));
  // int64 -> f32 rounds through double, as the evaluator (double rounding).
  std::vector<int64_t> big{(int64_t(1) << 60) + (int64_t(1) << 36) + 1, -3, 5000000000LL};
  std::vector<float> bf(3);
  cpu::cast(DT::I64, big.data(), DT::F32, bf.data(), 3);
  EXPECT_EQ(bf[0], static_cast<float>(static_cast<double>(big[0])));
  EXPECT_EQ(bf[0], std::ldexp(1.0f, 60));
  EXPECT_EQ(bf[1], -3.0f);
  // int64 -> int32 wraps; int -> bool is != 0; bool -> f64.
  std::vector<int32_t> w(3);
  cpu::cast(DT::I64, big.data(), DT::I32, w.data(), 3);
  EXPECT_EQ(w[1], -3);
  EXPECT_EQ(w[2], static_cast<int32_t>(static_cast<uint32_t>(5000000000ULL)));
  std::vector<int32_t> iv{0, -2, 7};
  std::vector<uint8_t> ib(3);
  cpu::cast(DT::I32, iv.data(), DT::BOOL, ib.data(), 3);
  EXPECT_EQ(ib, (std::vector<uint8_t>{0, 1, 1}));
  std::vector<double> bd(3);
  cpu::cast(DT::BOOL, ib.data(), DT::F64, bd.data(), 3);
  EXPECT_EQ(bd, (std::vector<double>{0, 1, 1}));
  std::vector<double> dd{0.1, 1e300, -2.5};
  std::vector<float> df(3);
  cpu::cast(DT::F64, dd.data(), DT::F32, df.data(), 3);
  EXPECT_EQ(df[0], 0.1f);
  EXPECT_TRUE(std::isinf(df[1]));
  std::vector<float> same(3);
  cpu::cast(DT::F32, df.data(), DT::F32, same.data(), 3);
  EXPECT_EQ(same[2], -2.5f);
}

// --- data movement --------------------------------------------------------------
