//===- ops_experts_test.cpp - Mixture-of-Experts kernels ------------------===//
//
// The ops.h expert kernels (see ops_test.cpp): the grouped expert GEMM and
// its weight gradient, expert parallelism's `first` expert, token dropping
// (expertCapacity, dropped rows), against loops written here.
//
//===----------------------------------------------------------------------===//
#include "ops_test_util.h"

#include <cstring>

// --- Mixture-of-Experts GEMMs ---------------------------------------------------

// expertMatmul / expertMatmulGradWeight against loops over the rows: both
// weight layouts, I64 and I32 expert indices, an expert without rows (its
// gradient is zero) and, in F64, to rounding; F32 to the GEMM's rounding.
TEST(OpsExperts, GroupedGemmMatchesLoops) {
  const int64_t S = 37, K = 19, O = 23, E = 5;
  std::vector<int64_t> ids(S);
  for (int64_t s = 0; s < S; ++s)
    ids[s] = (s * 7 + s / 3) % E == 3 ? 1 : (s * 7 + s / 3) % E; // expert 3: none
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  auto x = randv<double>(S * K), w = randv<double>(E * O * K), g = randv<double>(S * O);
  for (bool transW : {false, true}) {
    auto wAt = [&](int64_t e, int64_t o, int64_t k) {
      return transW ? w[(e * K + k) * O + o] : w[(e * O + o) * K + k];
    };
    std::vector<double> want(S * O, 0), wantDw(E * O * K, 0);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t k = 0; k < K; ++k) {
          want[s * O + o] += wAt(ids[s], o, k) * x[s * K + k];
          int64_t at = transW ? (ids[s] * K + k) * O + o : (ids[s] * O + o) * K + k;
          wantDw[at] += g[s * O + o] * x[s * K + k];
        }
    std::vector<double> y(S * O), dw(E * O * K, 7.0);
    cpu::expertMatmul(DT::F64, x.data(), w.data(), DT::I64, ids.data(), nullptr, S, K, O, E, transW,
                      y.data());
    cpu::expertMatmulGradWeight(DT::F64, x.data(), g.data(), DT::I32, ids32.data(), nullptr, S, K, O,
                                E, transW, dw.data());
    for (int64_t i = 0; i < S * O; ++i)
      EXPECT_NEAR(y[i], want[i], 1e-12);
    for (int64_t i = 0; i < E * O * K; ++i)
      EXPECT_NEAR(dw[i], wantDw[i], 1e-12);
    for (int64_t i = 3 * O * K; i < 4 * O * K; ++i)
      EXPECT_EQ(dw[i], 0.0);
    std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), gf(g.begin(), g.end());
    std::vector<float> yf(S * O), dwf(E * O * K);
    cpu::expertMatmul(DT::F32, xf.data(), wf.data(), DT::I32, ids32.data(), nullptr, S, K, O, E, transW,
                      yf.data());
    cpu::expertMatmulGradWeight(DT::F32, xf.data(), gf.data(), DT::I64, ids.data(), nullptr, S, K, O,
                                E, transW, dwf.data());
    for (int64_t i = 0; i < S * O; ++i)
      EXPECT_NEAR(yf[i], want[i], 1e-5 * (1 + std::fabs(want[i])));
    for (int64_t i = 0; i < E * O * K; ++i)
      EXPECT_NEAR(dwf[i], wantDw[i], 1e-5 * (1 + std::fabs(wantDw[i])));
  }
}

// Into an accumulator (merak-fuse-grad-accumulation's form): acc plus the
// loops' sums, an expert without rows (3) keeping acc's values exactly;
// F64 to rounding, F32 to the GEMM's (beta = 1).
TEST(OpsExperts, GradWeightAccumulates) {
  const int64_t S = 37, K = 19, O = 23, E = 5;
  std::vector<int64_t> ids(S);
  for (int64_t s = 0; s < S; ++s)
    ids[s] = (s * 7 + s / 3) % E == 3 ? 1 : (s * 7 + s / 3) % E; // expert 3: none
  auto x = randv<double>(S * K), g = randv<double>(S * O), acc = randv<double>(E * O * K);
  for (bool transW : {false, true}) {
    std::vector<double> want(acc);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t k = 0; k < K; ++k)
          want[transW ? (ids[s] * K + k) * O + o : (ids[s] * O + o) * K + k] +=
              g[s * O + o] * x[s * K + k];
    std::vector<double> dw(acc);
    cpu::expertMatmulGradWeight(DT::F64, x.data(), g.data(), DT::I64, ids.data(), nullptr, S, K, O,
                                E, transW, dw.data(), /*accumulate=*/true);
    for (int64_t i = 0; i < E * O * K; ++i)
      EXPECT_NEAR(dw[i], want[i], 1e-12);
    std::vector<float> xf(x.begin(), x.end()), gf(g.begin(), g.end()), dwf(acc.begin(), acc.end());
    cpu::expertMatmulGradWeight(DT::F32, xf.data(), gf.data(), DT::I64, ids.data(), nullptr, S, K,
                                O, E, transW, dwf.data(), /*accumulate=*/true);
    for (int64_t i = 0; i < E * O * K; ++i)
      EXPECT_NEAR(dwf[i], want[i], 1e-5 * (1 + std::fabs(want[i])));
    for (int64_t i = 3 * O * K; i < 4 * O * K; ++i) {
      EXPECT_EQ(dw[i], acc[i]);
      EXPECT_EQ(dwf[i], static_cast<float>(acc[i]));
    }
  }
}

// Expert parallelism: two ranks each holding 2 of 4 experts ("first" 0 and
// 2) see global ids; a rank's rows of the other's experts are zero, and the
// two results add up to the serial op's (exactly: each row has one owner).
// Their weight gradients are the serial gradient's halves, exactly.
TEST(OpsExperts, FirstExpertSplitsTheExpertsExactly) {
  const int64_t S = 29, K = 7, O = 5, E = 4, half = 2;
  std::vector<int64_t> ids(S);
  for (int64_t s = 0; s < S; ++s)
    ids[s] = (s * 5 + 1) % E;
  auto x = randv<double>(S * K), w = randv<double>(E * O * K), g = randv<double>(S * O);
  std::vector<double> y(S * O), dw(E * O * K);
  cpu::expertMatmul(DT::F64, x.data(), w.data(), DT::I64, ids.data(), nullptr, S, K, O, E,
                    false, y.data());
  cpu::expertMatmulGradWeight(DT::F64, x.data(), g.data(), DT::I64, ids.data(), nullptr, S, K,
                              O, E, false, dw.data());
  std::vector<double> sum(S * O, 0.0);
  for (int64_t first : {int64_t(0), half}) {
    std::vector<double> yr(S * O, 9.0), dwr(half * O * K, 9.0);
    cpu::expertMatmul(DT::F64, x.data(), w.data() + first * O * K, DT::I64, ids.data(), &first,
                      S, K, O, half, false, yr.data());
    cpu::expertMatmulGradWeight(DT::F64, x.data(), g.data(), DT::I64, ids.data(), &first, S, K,
                                O, half, false, dwr.data());
    for (int64_t s = 0; s < S; ++s)
      for (int64_t o = 0; o < O; ++o) {
        bool mine = ids[s] >= first && ids[s] < first + half;
        if (!mine)
          EXPECT_EQ(yr[s * O + o], 0.0);
        sum[s * O + o] += yr[s * O + o];
      }
    for (int64_t i = 0; i < half * O * K; ++i)
      EXPECT_EQ(dwr[i], dw[first * O * K + i]);
  }
  for (int64_t i = 0; i < S * O; ++i)
    EXPECT_EQ(sum[i], y[i]);
}

// expertCapacity: 3 experts of capacity 2 over 9 rows. Expert 0 has rows 0,
// 2, 5, 7 (probs .1 .9 .5 .9: by probs 2 and 7, the tie to the lower row;
// by position 0 and 2), expert 1 rows 1 and 4 (both kept), expert 2 rows
// 3, 6, 8 (probs .3 .2 .4: by probs 8 and 3; by position 3 and 6). The
// drop counts add up over calls; bf16 probs decide like f32 ones.
TEST(OpsExperts, CapacityKeepsEachExpertsBestRows) {
  const std::vector<int64_t> ids = {0, 1, 0, 2, 1, 0, 2, 0, 2};
  const std::vector<float> probs = {.1f, .8f, .9f, .3f, .7f, .5f, .2f, .9f, .4f};
  const int64_t S = 9;
  cpu::takeExpertDropCounts();
  std::vector<int64_t> kept(S);
  cpu::expertCapacity(ids.data(), DT::F32, probs.data(), S, 3, 2, /*byProbs=*/true, kept.data());
  EXPECT_EQ(kept, (std::vector<int64_t>{-1, 1, 0, 2, 1, -1, -1, 0, 2}));
  cpu::expertCapacity(ids.data(), DT::F32, probs.data(), S, 3, 2, /*byProbs=*/false, kept.data());
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 1, 0, 2, 1, -1, 2, -1, -1}));
  std::vector<uint16_t> bf(S);
  for (int64_t s = 0; s < S; ++s) { // truncated to bf16: the order stays
    uint32_t bits;
    std::memcpy(&bits, &probs[s], sizeof bits);
    bf[s] = static_cast<uint16_t>(bits >> 16);
  }
  cpu::expertCapacity(ids.data(), DT::BF16, bf.data(), S, 3, 2, /*byProbs=*/true, kept.data());
  EXPECT_EQ(kept, (std::vector<int64_t>{-1, 1, 0, 2, 1, -1, -1, 0, 2}));
  cpu::ExpertDropCounts c = cpu::takeExpertDropCounts();
  EXPECT_EQ(c.rows, 3 * S);
  EXPECT_EQ(c.dropped, 9);
  EXPECT_EQ(cpu::takeExpertDropCounts().rows, 0);
  cpu::expertCapacity(ids.data(), DT::F32, probs.data(), S, 3, 4, true, kept.data());
  EXPECT_EQ(kept, ids); // room for every row
}

// A dropped row (-1) is a zero row of expertMatmul and adds nothing to the
// weight gradient, with or without `first`; other negative ids stay fatal.
TEST(OpsExperts, DroppedRowsMeetNoExpert) {
  const int64_t S = 6, K = 3, O = 2, E = 2;
  const std::vector<int64_t> ids = {1, -1, 0, -1, 1, 0};
  auto x = randv<double>(S * K), w = randv<double>(E * O * K), g = randv<double>(S * O);
  // The same op over the four kept rows only.
  std::vector<double> xk, gk;
  for (int64_t s : {0, 2, 4, 5}) {
    xk.insert(xk.end(), x.begin() + s * K, x.begin() + (s + 1) * K);
    gk.insert(gk.end(), g.begin() + s * O, g.begin() + (s + 1) * O);
  }
  std::vector<int64_t> idsKept = {1, 0, 1, 0};
  std::vector<double> yk(4 * O), dwk(E * O * K);
  cpu::expertMatmul(DT::F64, xk.data(), w.data(), DT::I64, idsKept.data(), nullptr, 4, K, O, E,
                    false, yk.data());
  cpu::expertMatmulGradWeight(DT::F64, xk.data(), gk.data(), DT::I64, idsKept.data(), nullptr, 4,
                              K, O, E, false, dwk.data());
  const int64_t zero = 0;
  for (const int64_t *first : {static_cast<const int64_t *>(nullptr), &zero}) {
    std::vector<double> y(S * O, 7.0), dw(E * O * K, 7.0);
    cpu::expertMatmul(DT::F64, x.data(), w.data(), DT::I64, ids.data(), first, S, K, O, E, false,
                      y.data());
    cpu::expertMatmulGradWeight(DT::F64, x.data(), g.data(), DT::I64, ids.data(), first, S, K, O,
                                E, false, dw.data());
    for (int64_t s = 0, k = 0; s < S; ++s) {
      for (int64_t o = 0; o < O; ++o)
        EXPECT_EQ(y[s * O + o], ids[s] < 0 ? 0.0 : yk[k * O + o]);
      k += ids[s] >= 0;
    }
    EXPECT_EQ(dw, dwk);
  }
  useThreadsafeDeathTests();
  std::vector<int64_t> bad = {0, -2};
  std::vector<double> y(2 * O);
  EXPECT_EXIT(cpu::expertMatmul(DT::F64, x.data(), w.data(), DT::I64, bad.data(), nullptr, 2, K, O,
                                E, false, y.data()),
              ::testing::ExitedWithCode(3), "expert index -2 of row 1 out of range");
}

TEST(OpsExperts, ExpertIndexOutOfRangeStops) {
  useThreadsafeDeathTests();
  std::vector<float> x(6, 1.0f), w(2 * 2 * 3, 1.0f), y(4);
  std::vector<int64_t> ids = {0, 2};
  EXPECT_EXIT(cpu::expertMatmul(DT::F32, x.data(), w.data(), DT::I64, ids.data(), nullptr, 2, 3, 2, 2,
                                false, y.data()),
              ::testing::ExitedWithCode(3),
              "expert_matmul: expert index 2 of row 1 out of range \\[0, 2\\)");
}
