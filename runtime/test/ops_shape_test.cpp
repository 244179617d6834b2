//===- ops_shape_test.cpp - ops.h shape and reduction kernels -------------===//
//
// The shape kernels of merak_rt/ops.h (broadcast, transpose, slices with
// negative strides, concat by insertion, gather and its gradient with
// repeated and negative indices, gather_elements) and the reductions
// (every kind and path, argmax/argmin, cumsum) against independent loops
// written here (see ops_test.cpp).
//
//===----------------------------------------------------------------------===//
#include "ops_test_util.h"

TEST(OpsShape, BroadcastTo) {
  struct Case {
    Dims in, out;
  } cases[] = {{D({3}), D({4, 3})},         {D({4, 1}), D({4, 5})},
               {D({}), D({2, 3})},          {D({2, 1, 3}), D({2, 4, 3})},
               {D({1, 5, 1}), D({3, 5, 2})}, {D({64, 1}), D({64, 1024})},
               {D({}), D({100000})}}; // one long row, split across threads
  for (const Case &c : cases) {
    auto x = randv<float>(c.in.numel());
    std::vector<float> y(c.out.numel()), w(c.out.numel());
    forEach(c.out, [&](int64_t lin, const int64_t *idx) { w[lin] = x[bOff(c.in, c.out, idx)]; });
    cpu::broadcastTo(DT::F32, x.data(), c.in, y.data(), c.out);
    expectBits(y, w);
    std::vector<uint8_t> xb(x.size()), yb(y.size()), wb(y.size());
    for (size_t i = 0; i < xb.size(); ++i)
      xb[i] = static_cast<uint8_t>(i & 1);
    forEach(c.out, [&](int64_t lin, const int64_t *idx) { wb[lin] = xb[bOff(c.in, c.out, idx)]; });
    cpu::broadcastTo(DT::BOOL, xb.data(), c.in, yb.data(), c.out);
    EXPECT_EQ(yb, wb);
  }
}

namespace {
template <class T> void checkTranspose(DT t, const Dims &dx, const Dims &perm) {
  const int64_t n = dx.numel();
  std::vector<T> x(n), y(n), w(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<T>(i * 31 + 7);
  Dims dy;
  dy.rank = dx.rank;
  for (int32_t i = 0; i < dx.rank; ++i)
    dy.d[i] = dx.d[perm.d[i]];
  int64_t xs[cpu::kMaxRank];
  int64_t acc = 1;
  for (int32_t i = dx.rank - 1; i >= 0; --i) {
    xs[i] = acc;
    acc *= dx.d[i];
  }
  forEach(dy, [&](int64_t lin, const int64_t *idx) {
    int64_t off = 0;
    for (int32_t i = 0; i < dy.rank; ++i)
      off += idx[i] * xs[perm.d[i]];
    w[lin] = x[off];
  });
  cpu::transpose(t, x.data(), dx, perm, y.data());
  EXPECT_EQ(y, w);
}
} // namespace

TEST(OpsShape, TransposeEveryPath) {
  struct Case {
    Dims x, perm;
  } cases[] = {
      {D({37, 53}), D({1, 0})},                 // 2-D tiled
      {D({3, 70, 45}), D({0, 2, 1})},           // swap last two, batched tiles
      {D({2, 5, 3, 64}), D({0, 2, 1, 3})},      // last dim stays: contiguous runs
      {D({2, 5, 3, 8}), D({0, 2, 3, 1})},       // [B,T,H,D] -> [B,H,D,T]
      {D({4, 3, 5}), D({2, 0, 1})},             // general
      {D({3, 4, 5, 2}), D({3, 1, 0, 2})},       // general, inner strided
      {D({1, 6, 1, 7}), D({3, 2, 1, 0})},       // size-1 dims
      {D({300, 257}), D({1, 0})},               // large: parallel tiles
      {D({5}), D({0})},                         // identity
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.x.numel());
    checkTranspose<float>(DT::F32, c.x, c.perm);
    checkTranspose<int64_t>(DT::I64, c.x, c.perm);
    checkTranspose<uint8_t>(DT::BOOL, c.x, c.perm);
  }
}

TEST(OpsShape, SliceIncludingNegativeStrides) {
  Dims dx = D({5, 6, 7});
  std::vector<int32_t> x(dx.numel());
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<int32_t>(i);
  struct Case {
    Dims starts, strides, out;
  } cases[] = {
      {D({1, 0, 2}), D({1, 1, 1}), D({3, 6, 4})},   // contiguous rows
      {D({4, 5, 6}), D({-1, -1, -1}), D({5, 6, 7})}, // full reverse
      {D({0, 1, 6}), D({2, 2, -3}), D({3, 3, 3})},   // mixed
      {D({2, 0, 0}), D({1, 1, 1}), D({1, 6, 7})},    // one plane: memcpy
      {D({0, 5, 0}), D({1, -2, 1}), D({5, 3, 7})},
  };
  for (const Case &c : cases) {
    std::vector<int32_t> y(c.out.numel()), w(c.out.numel());
    forEach(c.out, [&](int64_t lin, const int64_t *idx) {
      int64_t i0 = c.starts.d[0] + idx[0] * c.strides.d[0];
      int64_t i1 = c.starts.d[1] + idx[1] * c.strides.d[1];
      int64_t i2 = c.starts.d[2] + idx[2] * c.strides.d[2];
      w[lin] = x[(i0 * 6 + i1) * 7 + i2];
    });
    cpu::slice(DT::I32, x.data(), dx, c.starts, c.strides, y.data(), c.out);
    EXPECT_EQ(y, w);
  }
}

TEST(OpsShape, SliceLongReversedRow) {
  const int64_t n = 100000;
  std::vector<int64_t> x(n), y(n / 2);
  for (int64_t i = 0; i < n; ++i)
    x[i] = i;
  cpu::slice(DT::I64, x.data(), D({n}), D({n - 1}), D({-2}), y.data(), D({n / 2}));
  for (int64_t i = 0; i < n / 2; ++i)
    ASSERT_EQ(y[i], n - 1 - 2 * i);
  std::vector<float> a(n, 1.5f), out(n);
  float two = 2.0f;
  cpu::binary(cpu::Binary::Mul, DT::F32, &two, D({}), a.data(), D({n}), out.data(), D({n}));
  EXPECT_EQ(out, std::vector<float>(n, 3.0f));
}

TEST(OpsShape, InsertAlongAxisIsConcat) {
  Dims da = D({2, 3, 4}), db = D({2, 5, 4}), dy = D({2, 8, 4});
  auto a = randv<double>(da.numel()), b = randv<double>(db.numel());
  std::vector<double> y(dy.numel(), -1);
  cpu::insertAlongAxis(DT::F64, a.data(), da, 1, 0, y.data(), dy);
  cpu::insertAlongAxis(DT::F64, b.data(), db, 1, 3, y.data(), dy);
  forEach(dy, [&](int64_t lin, const int64_t *idx) {
    double want = idx[1] < 3 ? a[(idx[0] * 3 + idx[1]) * 4 + idx[2]]
                             : b[(idx[0] * 5 + idx[1] - 3) * 4 + idx[2]];
    EXPECT_EQ(y[lin], want);
  });
  // Axis 0 (one contiguous block) and the last axis.
  std::vector<float> p{1, 2}, q{3, 4, 5, 6}, r(6);
  cpu::insertAlongAxis(DT::F32, p.data(), D({1, 2}), 0, 0, r.data(), D({3, 2}));
  cpu::insertAlongAxis(DT::F32, q.data(), D({2, 2}), 0, 1, r.data(), D({3, 2}));
  EXPECT_EQ(r, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  std::vector<float> s(6);
  cpu::insertAlongAxis(DT::F32, p.data(), D({2, 1}), 1, 2, s.data(), D({2, 3}));
  cpu::insertAlongAxis(DT::F32, q.data(), D({2, 2}), 1, 0, s.data(), D({2, 3}));
  EXPECT_EQ(s, (std::vector<float>{3, 4, 1, 5, 6, 2}));
}

// A stack on a new last axis (the interleaved rotary embedding's
// stack(..., dim=-1)) inserts rows of one or a few elements, many of them
// (split across threads): every element lands in its interleaved place, for
// every element size.
TEST(OpsShape, InsertAlongAxisShortRowsInterleave) {
  const int64_t outer = 50000;
  for (int64_t w : {1, 2, 3}) {
    std::vector<float> a(outer * w), b(outer), y(outer * (w + 1), -1);
    for (int64_t i = 0; i < outer * w; ++i)
      a[i] = float(i);
    for (int64_t i = 0; i < outer; ++i)
      b[i] = -float(i) - 1;
    cpu::insertAlongAxis(DT::F32, b.data(), D({outer / 10, 10, 1}), 2, w, y.data(),
                         D({outer / 10, 10, w + 1}));
    cpu::insertAlongAxis(DT::F32, a.data(), D({outer / 10, 10, w}), 2, 0, y.data(),
                         D({outer / 10, 10, w + 1}));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < w; ++j)
        ASSERT_EQ(y[o * (w + 1) + j], float(o * w + j)) << w;
      ASSERT_EQ(y[o * (w + 1) + w], -float(o) - 1) << w;
    }
  }
  std::vector<uint8_t> p(outer, 1), q(outer, 2), r(2 * outer);
  cpu::insertAlongAxis(DT::BOOL, p.data(), D({outer, 1}), 1, 0, r.data(), D({outer, 2}));
  cpu::insertAlongAxis(DT::BOOL, q.data(), D({outer, 1}), 1, 1, r.data(), D({outer, 2}));
  for (int64_t o = 0; o < outer; ++o)
    ASSERT_TRUE(r[2 * o] == 1 && r[2 * o + 1] == 2);
  std::vector<uint16_t> h(outer, 7), g(outer, 9), hg(2 * outer);
  cpu::insertAlongAxis(DT::BF16, h.data(), D({outer, 1}), 1, 1, hg.data(), D({outer, 2}));
  cpu::insertAlongAxis(DT::BF16, g.data(), D({outer, 1}), 1, 0, hg.data(), D({outer, 2}));
  for (int64_t o = 0; o < outer; ++o)
    ASSERT_TRUE(hg[2 * o] == 9 && hg[2 * o + 1] == 7);
}

TEST(OpsShape, GatherNegativeIndicesBothIndexTypes) {
  useThreadsafeDeathTests();
  Dims dd = D({4, 5, 3});
  auto data = randv<float>(dd.numel());
  std::vector<int64_t> idx{0, -1, 2, -5, 4, 4};
  Dims di = D({2, 3});
  // axis 1: y [4, 2, 3, 3]
  std::vector<float> y(4 * 6 * 3), w(y.size());
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t j = 0; j < 6; ++j) {
      int64_t k = idx[j] < 0 ? idx[j] + 5 : idx[j];
      for (int64_t c = 0; c < 3; ++c)
        w[(o * 6 + j) * 3 + c] = data[(o * 5 + k) * 3 + c];
    }
  cpu::gather(DT::F32, data.data(), dd, DT::I64, idx.data(), di, 1, y.data());
  EXPECT_EQ(y, w);
  std::vector<int32_t> idx32(idx.begin(), idx.end());
  std::fill(y.begin(), y.end(), 0.f);
  cpu::gather(DT::F32, data.data(), dd, DT::I32, idx32.data(), di, 1, y.data());
  EXPECT_EQ(y, w);
  // axis 0, embedding style, large enough to run in parallel.
  Dims de = D({50, 64});
  auto emb = randv<float>(de.numel());
  auto tok = randi(4096, -50, 49);
  std::vector<float> ye(4096 * 64);
  cpu::gather(DT::F32, emb.data(), de, DT::I64, tok.data(), D({4096}), 0, ye.data());
  for (int64_t j = 0; j < 4096; ++j) {
    int64_t k = tok[j] < 0 ? tok[j] + 50 : tok[j];
    ASSERT_EQ(0, std::memcmp(&ye[j * 64], &emb[k * 64], 64 * sizeof(float)));
  }
  // Scalar index (rank-0 indices): drops the axis.
  int64_t one = -2;
  std::vector<float> ys(4 * 3);
  cpu::gather(DT::F32, data.data(), dd, DT::I64, &one, D({}), 1, ys.data());
  EXPECT_EQ(ys[0], data[(0 * 5 + 3) * 3]);
  EXPECT_EXIT(cpu::gather(DT::F32, data.data(), dd, DT::I64, std::vector<int64_t>{5}.data(), D({1}), 1,
                          y.data()),
              ::testing::ExitedWithCode(3), "gather: index 5 out of range");
}

TEST(OpsShape, GatherGradRepeatedIndicesDeterministic) {
  for (int64_t axis : {0, 1}) {
    Dims dy = axis == 0 ? D({40, 96}) : D({3, 40, 5});
    auto idx = randi(2000, -40, 39);
    idx[0] = idx[1] = idx[2] = 7; // repeats
    idx[3] = -33;
    Dims di = D({40, 50});
    const int64_t outer = axis == 0 ? 1 : 3, inner = axis == 0 ? 96 : 5, dim = 40;
    auto g = randv<float>(outer * 2000 * inner);
    std::vector<double> acc(dy.numel(), 0.0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < 2000; ++j) {
        int64_t k = idx[j] < 0 ? idx[j] + dim : idx[j];
        for (int64_t c = 0; c < inner; ++c)
          acc[(o * dim + k) * inner + c] += g[(o * 2000 + j) * inner + c];
      }
    std::vector<float> want(acc.begin(), acc.end()), y(dy.numel(), 123.f);
    cpu::gatherGrad(DT::F32, g.data(), DT::I64, idx.data(), di, axis, y.data(), dy);
    expectBits(y, want);
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    std::vector<float> y1(dy.numel());
    cpu::gatherGrad(DT::F32, g.data(), DT::I64, idx.data(), di, axis, y1.data(), dy);
    omp_set_num_threads(saved);
    expectBits(y1, y);
#endif
    std::vector<int32_t> i32(idx.begin(), idx.end());
    std::vector<double> gd(g.begin(), g.end()), yd(dy.numel());
    cpu::gatherGrad(DT::F64, gd.data(), DT::I32, i32.data(), di, axis, yd.data(), dy);
    expectBits(yd, acc);
  }
}

// merak.gather_grad with an accumulator (gradient-accumulation fusion of an
// embedding): y += each reached row's sum rounded to float, the rows no index
// reaches untouched; bit for bit the accumulator plus the plain scatter.
TEST(OpsShape, GatherGradAccumulates) {
  for (int64_t axis : {0, 1}) {
    Dims dy = axis == 0 ? D({40, 96}) : D({3, 40, 5});
    auto idx = randi(30, 0, 19); // rows 20..39 never reached
    idx[0] = idx[1] = 7;         // a repeat
    Dims di = D({30});
    const int64_t outer = axis == 0 ? 1 : 3, inner = axis == 0 ? 96 : 5;
    auto g = randv<float>(outer * 30 * inner);
    auto acc = randv<float>(dy.numel());
    std::vector<float> scatter(dy.numel());
    cpu::gatherGrad(DT::F32, g.data(), DT::I64, idx.data(), di, axis, scatter.data(), dy);
    std::vector<float> want(dy.numel());
    for (int64_t i = 0; i < dy.numel(); ++i) // merak.add of the two
      want[i] = acc[i] + scatter[i];
    for (int64_t o = 0; o < outer; ++o) // unreached rows: the accumulator's bits
      for (int64_t k = 20; k < 40; ++k)
        for (int64_t c = 0; c < inner; ++c)
          want[(o * 40 + k) * inner + c] = acc[(o * 40 + k) * inner + c];
    std::vector<float> y = acc;
    cpu::gatherGrad(DT::F32, g.data(), DT::I64, idx.data(), di, axis, y.data(), dy, true);
    expectBits(y, want);
  }
}

TEST(OpsShape, GatherElementsAndGrad) {
  useThreadsafeDeathTests();
  // data [3, 4, 5], idx [3, 6, 2] along axis 1 (idx smaller in dims 2).
  Dims dd = D({3, 4, 5}), di = D({3, 6, 2});
  auto data = randv<float>(dd.numel());
  auto idx = randi(di.numel(), -4, 3);
  std::vector<float> y(di.numel()), w(di.numel());
  forEach(di, [&](int64_t lin, const int64_t *p) {
    int64_t k = idx[lin] < 0 ? idx[lin] + 4 : idx[lin];
    w[lin] = data[(p[0] * 4 + k) * 5 + p[2]];
  });
  cpu::gatherElements(DT::F32, data.data(), dd, DT::I64, idx.data(), di, 1, y.data());
  EXPECT_EQ(y, w);
  // Along the last axis (contiguous fibres), int32 indices, int64 data.
  Dims dd2 = D({4, 7}), di2 = D({4, 3});
  std::vector<int64_t> data2(28);
  for (int i = 0; i < 28; ++i)
    data2[i] = i * 10;
  std::vector<int32_t> idx2{0, -1, 3, 6, 6, 0, 2, 2, -7, 1, 5, 4};
  std::vector<int64_t> y2(12);
  cpu::gatherElements(DT::I64, data2.data(), dd2, DT::I32, idx2.data(), di2, 1, y2.data());
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) {
      int k = idx2[r * 3 + c] < 0 ? idx2[r * 3 + c] + 7 : idx2[r * 3 + c];
      EXPECT_EQ(y2[r * 3 + c], data2[r * 7 + k]);
    }
  // Grad: scatter-add with repeats, accumulated in double.
  auto g = randv<float>(di.numel());
  std::vector<double> acc(dd.numel(), 0.0);
  forEach(di, [&](int64_t lin, const int64_t *p) {
    int64_t k = idx[lin] < 0 ? idx[lin] + 4 : idx[lin];
    acc[(p[0] * 4 + k) * 5 + p[2]] += g[lin];
  });
  std::vector<float> gy(dd.numel(), 9.f), gw(acc.begin(), acc.end());
  cpu::gatherElementsGrad(DT::F32, g.data(), DT::I64, idx.data(), di, 1, gy.data(), dd);
  expectBits(gy, gw);
  EXPECT_EXIT(cpu::gatherElements(DT::F32, data.data(), dd, DT::I64,
                                  std::vector<int64_t>(di.numel(), 4).data(), di, 1, y.data()),
              ::testing::ExitedWithCode(3), "gather_elements: index 4 out of range");
}

// --- reductions -----------------------------------------------------------------

namespace {
/// The evaluator's reduction: inputs in row-major order into their output.
template <class T>
std::vector<T> refReduce(cpu::Reduce op, const std::vector<T> &x, const Dims &dx,
                         const std::vector<int64_t> &axes) {
  bool red[cpu::kMaxRank] = {};
  for (int64_t a : axes)
    red[a] = true;
  int64_t nOut = 1, count = 1;
  for (int32_t d = 0; d < dx.rank; ++d)
    (red[d] ? count : nOut) *= dx.d[d];
  constexpr bool isF = std::is_floating_point_v<T>;
  using A = std::conditional_t<isF, double, int64_t>;
  A init = op == cpu::Reduce::Max   ? (isF ? A(-INFINITY) : A(std::numeric_limits<T>::min()))
           : op == cpu::Reduce::Min ? (isF ? A(INFINITY) : A(std::numeric_limits<T>::max()))
           : op == cpu::Reduce::Prod ? A(1)
                                     : A(0);
  std::vector<A> acc(nOut, init);
  std::vector<bool> nan(nOut, false);
  forEach(dx, [&](int64_t lin, const int64_t *idx) {
    int64_t o = 0;
    for (int32_t d = 0; d < dx.rank; ++d)
      if (!red[d])
        o = o * dx.d[d] + idx[d];
    A v = static_cast<A>(x[lin]);
    switch (op) {
    case cpu::Reduce::Sum:
    case cpu::Reduce::Mean: acc[o] = isF ? acc[o] + v : A(uint64_t(acc[o]) + uint64_t(v)); break;
    case cpu::Reduce::Prod: acc[o] = isF ? acc[o] * v : A(uint64_t(acc[o]) * uint64_t(v)); break;
    case cpu::Reduce::Max: acc[o] = std::max(acc[o], v); nan[o] = nan[o] || v != v; break;
    case cpu::Reduce::Min: acc[o] = std::min(acc[o], v); nan[o] = nan[o] || v != v; break;
    }
  });
  std::vector<T> y(nOut);
  for (int64_t o = 0; o < nOut; ++o) {
    A v = acc[o];
    if (op == cpu::Reduce::Mean)
      v = isF ? v / count : (count ? v / count : v);
    if constexpr (isF) {
      if (nan[o])
        v = NAN;
    }
    y[o] = static_cast<T>(v);
  }
  return y;
}
} // namespace

TEST(OpsReduce, EveryKindEveryPath) {
  using R = cpu::Reduce;
  struct Case {
    Dims x;
    std::vector<int64_t> axes;
  } cases[] = {
      {D({6, 7, 9}), {2}},          // rows
      {D({6, 7, 9}), {1, 2}},       // rows (merged)
      {D({6, 7, 9}), {0, 1, 2}},    // everything
      {D({6, 7, 9}), {0, 1}},       // columns (bias gradient)
      {D({150, 1, 200}), {0}},      // columns, large: parallel blocks
      {D({6, 7, 9}), {1}},          // [K, R, K]
      {D({6, 7, 9}), {0, 2}},       // general [R, K, R]
      {D({3, 4, 5, 6}), {0, 2}},    // general [R, K, R, K]
      {D({5, 1, 4}), {1}},          // size-1 reduced dim only
      {D({300, 400}), {1}},         // large rows
  };
  for (R op : {R::Sum, R::Mean, R::Max, R::Min, R::Prod})
    for (const Case &c : cases) {
      SCOPED_TRACE(::testing::Message() << "op " << static_cast<int>(op) << " n " << c.x.numel());
      Dims axes;
      for (int64_t a : c.axes)
        axes.d[axes.rank++] = a;
      auto xf = randv<float>(c.x.numel(), 0.5, 1.5);
      if (c.x.numel() < 1000)
        xf[5] = std::numeric_limits<float>::quiet_NaN();
      auto wf = refReduce<float>(op, xf, c.x, c.axes);
      std::vector<float> yf(wf.size());
      cpu::reduce(op, DT::F32, xf.data(), c.x, axes, yf.data());
      expectBits(yf, wf);
      auto xi = randi(c.x.numel(), -50, 50);
      std::vector<int32_t> x32(xi.begin(), xi.end());
      auto wi = refReduce<int64_t>(op, xi, c.x, c.axes);
      std::vector<int64_t> yi(wi.size());
      cpu::reduce(op, DT::I64, xi.data(), c.x, axes, yi.data());
      EXPECT_EQ(yi, wi);
      auto w32 = refReduce<int32_t>(op, x32, c.x, c.axes);
      std::vector<int32_t> y32(w32.size());
      cpu::reduce(op, DT::I32, x32.data(), c.x, axes, y32.data());
      EXPECT_EQ(y32, w32);
    }
  // No axes: a copy. Integer mean truncates.
  std::vector<double> x{1, 2, 3}, y(3);
  cpu::reduce(R::Sum, DT::F64, x.data(), D({3}), Dims{}, y.data());
  EXPECT_EQ(y, x);
  std::vector<int64_t> xi{-7, 0, 0}, yi(1);
  cpu::reduce(R::Mean, DT::I64, xi.data(), D({3}), D({0}), yi.data());
  EXPECT_EQ(yi[0], -2);
}

TEST(OpsReduce, ArgMaxArgMin) {
  Dims dx = D({2, 4, 3});
  std::vector<float> x{1, 5, 2, 3, 5, 2, 3, 1, 2, 0, 0, 9, //
                       7, 7, 7, 7, 7, 7, 1, 8, 7, -1, 8, 7};
  std::vector<int64_t> y(6);
  cpu::argReduce(true, DT::F32, x.data(), dx, 1, false, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{1, 0, 3, 0, 2, 0}));
  cpu::argReduce(true, DT::F32, x.data(), dx, 1, true, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{2, 1, 3, 1, 3, 3}));
  cpu::argReduce(false, DT::F32, x.data(), dx, 1, false, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{3, 3, 0, 3, 0, 0}));
  cpu::argReduce(false, DT::F32, x.data(), dx, 1, true, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{3, 3, 2, 3, 1, 3}));
  std::vector<int64_t> y8(8);
  std::vector<int32_t> xi(x.begin(), x.end());
  cpu::argReduce(true, DT::I32, xi.data(), dx, 2, false, y8.data());
  EXPECT_EQ(y8, (std::vector<int64_t>{1, 1, 0, 2, 0, 0, 1, 1}));
}

TEST(OpsReduce, ArgSortStableWithNaN) {
  // Rows [3, -inf, 3, NaN, 5] and [1, 1, 0, 2, 1]: ties keep their order,
  // NaN ranks above every number (last ascending, first descending).
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::vector<float> x = {3, -inf, 3, nan, 5, 1, 1, 0, 2, 1};
  std::vector<int64_t> y(10);
  cpu::argSort(DT::F32, x.data(), D({2, 5}), 1, false, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{1, 0, 2, 4, 3, 2, 0, 1, 4, 3}));
  cpu::argSort(DT::F32, x.data(), D({2, 5}), 1, true, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{3, 4, 0, 2, 1, 3, 0, 1, 4, 2}));
  // Along a strided axis, integers with many ties, against stable ranks
  // counted pair by pair (the element of rank r goes to position r).
  Dims d = D({3, 600, 2});
  std::vector<int64_t> xi(d.numel()), got(d.numel()), want(d.numel());
  for (size_t i = 0; i < xi.size(); ++i)
    xi[i] = static_cast<int64_t>((i * 7919) % 23) - 11;
  for (bool desc : {false, true}) {
    forEach(d, [&](int64_t lin, const int64_t *idx) {
      const int64_t base = lin - idx[1] * 2, v = xi[lin];
      int64_t rank = 0;
      for (int64_t l = 0; l < 600; ++l) {
        const int64_t u = xi[base + l * 2];
        rank += (desc ? u > v : u < v) || (u == v && l < idx[1]);
      }
      want[base + rank * 2] = idx[1];
    });
    cpu::argSort(DT::I64, xi.data(), d, 1, desc, got.data());
    EXPECT_EQ(got, want);
  }
}

TEST(OpsReduce, CumSumAllModes) {
  Dims dx = D({3, 4, 5});
  auto x = randv<float>(dx.numel());
  std::vector<int64_t> xi(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xi[i] = static_cast<int64_t>(i % 7) - 3;
  for (int64_t axis : {0, 1, 2})
    for (bool excl : {false, true})
      for (bool rev : {false, true}) {
        std::vector<float> y(x.size()), w(x.size());
        std::vector<int64_t> yi(x.size()), wi(x.size());
        forEach(dx, [&](int64_t lin, const int64_t *idx) {
          double s = 0;
          int64_t si = 0;
          for (int64_t j = 0; j < dx.d[axis]; ++j) {
            bool take = rev ? (excl ? j > idx[axis] : j >= idx[axis])
                            : (excl ? j < idx[axis] : j <= idx[axis]);
            if (!take)
              continue;
            int64_t p[3] = {idx[0], idx[1], idx[2]};
            p[axis] = j;
            int64_t at = (p[0] * 4 + p[1]) * 5 + p[2];
            s += x[at];
            si += xi[at];
          }
          w[lin] = static_cast<float>(s);
          wi[lin] = si;
        });
        cpu::cumsum(DT::F32, x.data(), dx, axis, excl, rev, y.data());
        cpu::cumsum(DT::I64, xi.data(), dx, axis, excl, rev, yi.data());
        expectNear(y, std::vector<double>(w.begin(), w.end()), 1e-6);
        EXPECT_EQ(yi, wi);
      }
}

TEST(OpsReduce, LinearScanAndGradAgainstProducts) {
  // h[t] = a[t] h[t-1] + b[t] and, for the loss sum(w * h), the gradients
  // written out as products: db[s] = sum over t >= s of w[t] a[s+1]..a[t],
  // da[s] = db[s] h[s-1]. Inner 300 spans two of the kernel's blocks.
  for (int64_t axis : {0, 1, 2}) {
    Dims d = D({3, 6, 300});
    auto a = randv<float>(d.numel(), -1.1, 1.1), b = randv<float>(d.numel());
    auto w = randv<float>(d.numel());
    std::vector<float> h(a.size()), da(a.size()), db(a.size());
    cpu::linearScan(DT::F32, a.data(), b.data(), d, axis, h.data());
    cpu::linearScanGrad(DT::F32, a.data(), h.data(), w.data(), d, axis, da.data(), db.data());
    std::vector<double> wantH(a.size()), wantDa(a.size()), wantDb(a.size());
    const int64_t stride = axis == 0 ? 6 * 300 : axis == 1 ? 300 : 1, n = d.d[axis];
    forEach(d, [&](int64_t lin, const int64_t *idx) {
      const int64_t base = lin - idx[axis] * stride, s = idx[axis];
      double state = 0;
      for (int64_t t = 0; t <= s; ++t)
        state = a[base + t * stride] * state + b[base + t * stride];
      wantH[lin] = state;
      double g = 0;
      for (int64_t t = s; t < n; ++t) {
        double product = w[base + t * stride];
        for (int64_t u = s + 1; u <= t; ++u)
          product *= a[base + u * stride];
        g += product;
      }
      wantDb[lin] = g;
      wantDa[lin] = s ? g * h[lin - stride] : 0.0;
    });
    expectNear(h, wantH, 1e-5);
    expectNear(db, wantDb, 1e-5);
    expectNear(da, wantDa, 1e-5);
  }
  // An empty scanned axis writes nothing.
  std::vector<float> ones(8, 1.0f), out(8, 7.0f);
  cpu::linearScan(DT::F32, ones.data(), ones.data(), D({2, 0, 3}), 1, out.data());
  cpu::linearScanGrad(DT::F32, ones.data(), ones.data(), ones.data(), D({2, 0, 3}), 1, out.data(),
                      out.data());
  EXPECT_EQ(out, std::vector<float>(8, 7.0f));
}

namespace {
template <class T> DT dtOf() { return std::is_same_v<T, float> ? DT::F32 : DT::F64; }

/// merak.selective_scan's operands: u, delta [B, D, T], a [D, N], b, c [B, T, N].
template <class T> struct ScanCase {
  Dims du, da;
  std::vector<T> u, delta, a, b, c;
  ScanCase(int64_t batch, int64_t channels, int64_t tokens, int64_t states)
      : du(D({batch, channels, tokens})), da(D({channels, states})),
        u(randv<T>(du.numel(), -1.5, 1.5)), delta(randv<T>(du.numel(), 0.05, 1.0)),
        a(randv<T>(da.numel(), -2.0, -0.2)), b(randv<T>(batch * tokens * states, -1, 1)),
        c(randv<T>(batch * tokens * states, -1, 1)) {}
  std::vector<T> *operand(int i) { return std::array{&u, &delta, &a, &b, &c}[i]; }

  std::vector<T> forward() const {
    std::vector<T> y(du.numel());
    cpu::selectiveScan(dtOf<T>(), u.data(), delta.data(), a.data(), b.data(), c.data(), du, da,
                       y.data());
    return y;
  }
  /// The gradients of u, delta, a, b, c for the result's gradient dy.
  std::array<std::vector<T>, 5> backward(const std::vector<T> &dy) const {
    std::array<std::vector<T>, 5> g{std::vector<T>(u.size()), std::vector<T>(u.size()),
                                    std::vector<T>(a.size()), std::vector<T>(b.size()),
                                    std::vector<T>(b.size())};
    cpu::selectiveScanGrad(dtOf<T>(), u.data(), delta.data(), a.data(), b.data(), c.data(),
                           dy.data(), du, da, g[0].data(), g[1].data(), g[2].data(), g[3].data(),
                           g[4].data());
    return g;
  }
  /// The recurrence written out in double, one (batch, channel) row at a time.
  std::vector<double> reference() const {
    const int64_t B = du.d[0], Dn = du.d[1], Tn = du.d[2], N = da.d[1];
    std::vector<double> y(du.numel());
    for (int64_t bi = 0; bi < B; ++bi)
      for (int64_t d = 0; d < Dn; ++d) {
        std::vector<double> h(N, 0.0);
        for (int64_t t = 0; t < Tn; ++t) {
          const int64_t r = (bi * Dn + d) * Tn + t;
          double acc = 0;
          for (int64_t n = 0; n < N; ++n) {
            const int64_t k = (bi * Tn + t) * N + n;
            h[n] =
                std::exp(double(delta[r]) * a[d * N + n]) * h[n] + double(delta[r]) * b[k] * u[r];
            acc += h[n] * c[k];
          }
          y[r] = acc;
        }
      }
    return y;
  }
};
} // namespace

TEST(OpsScan, SelectiveScanAgainstTheRecurrence) {
  // 37 channels: two full blocks of 16 and a partial one; 530: 34 blocks in
  // 32 groups of partial sums.
  for (auto [batch, channels, tokens, states] :
       {std::array<int64_t, 4>{2, 37, 5, 3}, {1, 530, 3, 2}, {3, 1, 1, 4}}) {
    ScanCase<float> f(batch, channels, tokens, states);
    expectNear(f.forward(), f.reference(), 1e-5);
    ScanCase<double> d(batch, channels, tokens, states);
    expectNear(d.forward(), d.reference(), 1e-12);
  }
}

TEST(OpsScan, SelectiveScanGradAgainstFiniteDifferences) {
  // In double: for a random direction v of each operand, <grad, v> against
  // (L(x + eps v) - L(x - eps v)) / (2 eps), L = sum(w * y).
  for (auto [batch, channels, tokens, states] :
       {std::array<int64_t, 4>{2, 19, 6, 3}, {1, 530, 40, 8}}) {
    ScanCase<double> s(batch, channels, tokens, states);
    std::vector<double> w = randv<double>(s.du.numel(), -1, 1);
    std::array<std::vector<double>, 5> g = s.backward(w);
    auto loss = [&] {
      std::vector<double> y = s.forward();
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i)
        l += w[i] * y[i];
      return l;
    };
    for (int i = 0; i < 5; ++i) {
      std::vector<double> &x = *s.operand(i), saved = x;
      std::vector<double> v = randv<double>(x.size(), -1, 1);
      const double eps = 1e-6;
      double along = 0;
      for (size_t k = 0; k < x.size(); ++k) {
        along += g[i][k] * v[k];
        x[k] = saved[k] + eps * v[k];
      }
      const double up = loss();
      for (size_t k = 0; k < x.size(); ++k)
        x[k] = saved[k] - eps * v[k];
      const double down = loss();
      x = saved;
      EXPECT_NEAR(along, (up - down) / (2 * eps), 1e-6 * (1 + std::abs(along))) << "operand " << i;
    }
    // float gradients agree with double's; b's and c's sums over the
    // channels do not depend on the thread count.
    ScanCase<float> f(batch, channels, tokens, states);
    for (int i = 0; i < 5; ++i)
      std::copy(s.operand(i)->begin(), s.operand(i)->end(), f.operand(i)->begin());
    std::vector<float> wf(w.begin(), w.end());
    std::array<std::vector<float>, 5> gf = f.backward(wf);
    for (int i = 0; i < 5; ++i)
      expectNear(gf[i], g[i], 1e-4);
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    std::array<std::vector<float>, 5> g1 = f.backward(wf);
    omp_set_num_threads(saved);
    for (int i = 0; i < 5; ++i)
      expectBits(g1[i], gf[i]);
#endif
  }
}
