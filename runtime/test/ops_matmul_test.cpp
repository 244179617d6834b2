//===- ops_matmul_test.cpp - matmul kernels ---------------------------------===//
//
// cpu::matmul against numpy.matmul written here in double: broadcast
// batches and rank-1 operands, operands stored transposed
// (merak.matmul_t), accumulation into the result (merak.matmul_t's
// accumulator), integer types.
//
//===----------------------------------------------------------------------===//
#include "ops_test_util.h"

// --- matmul ---------------------------------------------------------------------

namespace {
/// numpy.matmul in double (rank-1 rules, broadcast batch dims).
std::vector<double> refMatmul(const std::vector<double> &a, Dims da, const std::vector<double> &b,
                              Dims db, Dims &dy) {
  bool aVec = da.rank == 1, bVec = db.rank == 1;
  if (aVec)
    da = D({1, da.d[0]});
  if (bVec)
    db = D({db.d[0], 1});
  int64_t M = da.d[da.rank - 2], K = da.d[da.rank - 1], N = db.d[db.rank - 1];
  Dims la, lb, batch;
  la.rank = da.rank - 2;
  lb.rank = db.rank - 2;
  for (int i = 0; i < la.rank; ++i)
    la.d[i] = da.d[i];
  for (int i = 0; i < lb.rank; ++i)
    lb.d[i] = db.d[i];
  batch.rank = std::max(la.rank, lb.rank);
  for (int i = 0; i < batch.rank; ++i) {
    int ia = i - (batch.rank - la.rank), ib = i - (batch.rank - lb.rank);
    int64_t va = ia >= 0 ? la.d[ia] : 1, vb = ib >= 0 ? lb.d[ib] : 1;
    batch.d[i] = va == 1 ? vb : va;
  }
  std::vector<double> y(batch.numel() * M * N);
  forEach(batch, [&](int64_t bi, const int64_t *idx) {
    int64_t oa = bOff(la, batch, idx) * M * K, ob = bOff(lb, batch, idx) * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < K; ++p)
          acc += a[oa + i * K + p] * b[ob + p * N + j];
        y[(bi * M + i) * N + j] = acc;
      }
  });
  dy = batch;
  if (!aVec)
    dy.d[dy.rank++] = M;
  if (!bVec)
    dy.d[dy.rank++] = N;
  return y;
}
} // namespace

/// `x` (dims dx, rank >= 2) with its last two dimensions swapped.
static std::vector<double> swapLast2(const std::vector<double> &x, Dims dx, Dims &dt) {
  int64_t r = dx.d[dx.rank - 2], c = dx.d[dx.rank - 1], n = dx.numel() / (r * c);
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        y[(b * c + j) * r + i] = x[(b * r + i) * c + j];
  dt = dx;
  std::swap(dt.d[dt.rank - 2], dt.d[dt.rank - 1]);
  return y;
}

/// Random operands of logical shapes a x b, stored transposed where ta /
/// tb say (what merak.matmul_t hands the kernel), and their float64
/// product (dims dy).
struct TransposedProduct {
  std::vector<float> a, b;
  Dims da, db, dy;
  std::vector<double> want;
  TransposedProduct(Dims la, Dims lb, bool ta, bool tb) : da(la), db(lb) {
    auto af = randv<float>(la.numel()), bf = randv<float>(lb.numel());
    std::vector<double> ad(af.begin(), af.end()), bd(bf.begin(), bf.end());
    want = refMatmul(ad, la, bd, lb, dy);
    std::vector<double> as = ta ? swapLast2(ad, la, da) : ad;
    std::vector<double> bs = tb ? swapLast2(bd, lb, db) : bd;
    a.assign(as.begin(), as.end());
    b.assign(bs.begin(), bs.end());
  }
};

/// Logical shapes as numpy sees them, one per GEMM path.
struct MatmulCase {
  Dims a, b;
};
const MatmulCase kTransposedCases[] = {
    {D({5, 7}), D({7, 3})},          // plain
    {D({2, 3, 5, 7}), D({7, 4})},    // 2-D rhs (the lhs batch folds only untransposed)
    {D({5, 7}), D({3, 7, 4})},       // 2-D lhs, batched rhs
    {D({3, 5, 7}), D({3, 7, 4})},    // equal batches
    {D({2, 1, 5, 7}), D({3, 7, 4})}, // general broadcast
};

TEST(OpsMatmul, TransposedOperandsReadInPlace) {
  // The kernel gets the stored (transposed) operands and the flags, on
  // every GEMM path.
  for (const MatmulCase &c : kTransposedCases)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message() << c.a.rank << "x" << c.b.rank << " " << ta << tb);
        TransposedProduct p(c.a, c.b, ta, tb);
        std::vector<float> yf(p.want.size(), NAN);
        cpu::matmul(DT::F32, p.a.data(), p.da, p.b.data(), p.db, yf.data(), p.dy, ta, tb);
        expectNear(yf, p.want, 1e-5);
      }
}

TEST(OpsMatmul, AccumulatesIntoTheResult) {
  // merak.matmul_t's accumulator (gradient-accumulation fusion): y = y0 +
  // the product on every GEMM path, operands read transposed or not, and a
  // contracted dimension long enough for the BLAS to block it (the sums'
  // order differs from y0 + (a b), so compared within float rounding).
  std::vector<MatmulCase> cases(std::begin(kTransposedCases), std::end(kTransposedCases));
  cases.push_back({D({300, 1500}), D({1500, 9})}); // K blocked inside the BLAS
  for (const MatmulCase &c : cases)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message() << c.a.rank << "x" << c.b.rank << " " << ta << tb);
        TransposedProduct p(c.a, c.b, ta, tb);
        std::vector<float> yf = randv<float>(static_cast<int64_t>(p.want.size()));
        for (size_t i = 0; i < p.want.size(); ++i)
          p.want[i] += yf[i];
        cpu::matmul(DT::F32, p.a.data(), p.da, p.b.data(), p.db, yf.data(), p.dy, ta, tb, DT::F32,
                    /*accumulate=*/true);
        expectNear(yf, p.want, 1e-5 * std::sqrt(double(c.a.d[c.a.rank - 1])));
      }
  // K = 0: the accumulator stays as it is.
  std::vector<float> a0, b0, y = {1.5f, -2.0f};
  cpu::matmul(DT::F32, a0.data(), D({1, 0}), b0.data(), D({0, 2}), y.data(), D({1, 2}), false,
              false, DT::F32, true);
  EXPECT_EQ(y, (std::vector<float>{1.5f, -2.0f}));
}

TEST(OpsMatmul, NumpyRulesAndBroadcastBatches) {
  struct Case {
    Dims a, b;
  } cases[] = {
      {D({5, 7}), D({7, 3})},          // plain
      {D({2, 3, 5, 7}), D({7, 4})},    // rhs 2-D: batch folded into M
      {D({5, 7}), D({3, 7, 4})},       // lhs 2-D, batched rhs (stride 0)
      {D({3, 5, 7}), D({3, 7, 4})},    // equal batches
      {D({2, 1, 5, 7}), D({3, 7, 4})}, // general broadcast
      {D({1, 5, 7}), D({2, 7, 4})},    // batch-1 lhs
      {D({7}), D({7, 4})},             // rank-1 lhs
      {D({7}), D({2, 7, 4})},          // rank-1 lhs, batched rhs
      {D({2, 5, 7}), D({7})},          // rank-1 rhs
      {D({7}), D({7})},                // dot product -> scalar
      {D({4, 0}), D({0, 3})},          // K = 0: zeros
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(::testing::Message() << c.a.rank << "x" << c.b.rank);
    auto af = randv<float>(c.a.numel()), bf = randv<float>(c.b.numel());
    std::vector<double> ad(af.begin(), af.end()), bd(bf.begin(), bf.end());
    Dims dy;
    auto want = refMatmul(ad, c.a, bd, c.b, dy);
    std::vector<float> yf(want.size(), NAN);
    cpu::matmul(DT::F32, af.data(), c.a, bf.data(), c.b, yf.data(), dy);
    expectNear(yf, want, 1e-5);
    std::vector<double> yd(want.size(), NAN);
    cpu::matmul(DT::F64, ad.data(), c.a, bd.data(), c.b, yd.data(), dy);
    expectBits(yd, want);
    std::vector<int64_t> ai(ad.size()), bi(bd.size());
    for (size_t i = 0; i < ai.size(); ++i)
      ai[i] = static_cast<int64_t>(i % 5) - 2;
    for (size_t i = 0; i < bi.size(); ++i)
      bi[i] = static_cast<int64_t>(i % 7) - 3;
    std::vector<double> aid(ai.begin(), ai.end()), bid(bi.begin(), bi.end());
    auto wi = refMatmul(aid, c.a, bid, c.b, dy);
    std::vector<int64_t> yi(wi.size());
    cpu::matmul(DT::I64, ai.data(), c.a, bi.data(), c.b, yi.data(), dy);
    std::vector<int32_t> a32(ai.begin(), ai.end()), b32(bi.begin(), bi.end()), y32(wi.size());
    cpu::matmul(DT::I32, a32.data(), c.a, b32.data(), c.b, y32.data(), dy);
    for (size_t i = 0; i < wi.size(); ++i) {
      EXPECT_EQ(yi[i], static_cast<int64_t>(wi[i]));
      EXPECT_EQ(y32[i], static_cast<int32_t>(wi[i]));
    }
  }
}
