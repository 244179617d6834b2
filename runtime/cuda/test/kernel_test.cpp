//===- kernel_test.cpp - CUDA kernels against the CPU backend --------------===//
//
// merak_cuda_kernel_tests: every CUDA kernel on random data against the CPU
// backend (kernels.h / ops.h), relative error (max |gpu - cpu| / max |cpu|)
// within 1e-5 for fp32, 1e-2 for bf16 (bf16 inputs are rounded on the host
// first and the CPU reference runs on the rounded values), 2e-3 for TF32.
// Without a CUDA device it prints "SKIP: no CUDA device: ..." and exits 77,
// which ctest reports as skipped.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/gemm.h"
#include "merak_rt/cuda/kernels.h"
#include "merak_rt/kernels.h"
#include "merak_rt/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cuda = merak::rt::cuda;
namespace cpu = merak::rt::cpu;
using cuda::DType;
using merak::rt::Status;

namespace {
int failures = 0, checks = 0;
std::mt19937 rng(1234);

std::vector<float> randomVec(size_t n, float lo = -2.f, float hi = 2.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(rng);
  return v;
}
/// Rounds through bf16 when t is BF16 (the values the GPU sees).
std::vector<float> asType(std::vector<float> v, DType t) {
  if (t == DType::BF16)
    for (auto &x : v)
      x = cuda::bf16ToFloat(cuda::floatToBf16(x));
  return v;
}
const char *name(DType t) { return t == DType::F32 ? "f32" : "bf16"; }
double tol(DType t) { return t == DType::F32 ? 1e-5 : 1e-2; }

void must(const Status &s, const char *what) {
  if (!s.ok()) {
    std::fprintf(stderr, "FATAL %s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

/// A device buffer of n elements of type t (or raw bytes).
struct Buf {
  void *p = nullptr;
  size_t n = 0;
  DType t = DType::F32;
  Buf(size_t n_, DType t_ = DType::F32) : n(n_), t(t_) {
    auto r = cuda::deviceAlloc(n * cuda::dtypeSize(t) + 16);
    must(r.status(), "deviceAlloc");
    p = *r;
  }
  Buf(const std::vector<float> &v, DType t_) : Buf(v.size(), t_) { put(v); }
  ~Buf() { cuda::deviceFree(p); }
  Buf(const Buf &) = delete;
  void put(const std::vector<float> &v) {
    if (t == DType::F32) {
      must(cuda::copyToDevice(p, v.data(), v.size() * 4), "copyToDevice");
    } else {
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        h[i] = cuda::floatToBf16(v[i]);
      must(cuda::copyToDevice(p, h.data(), h.size() * 2), "copyToDevice");
    }
  }
  std::vector<float> get() const {
    std::vector<float> v(n);
    if (t == DType::F32) {
      must(cuda::copyToHost(v.data(), p, n * 4), "copyToHost");
    } else {
      std::vector<uint16_t> h(n);
      must(cuda::copyToHost(h.data(), p, n * 2), "copyToHost");
      for (size_t i = 0; i < n; ++i)
        v[i] = cuda::bf16ToFloat(h[i]);
    }
    return v;
  }
  float *f() const { return static_cast<float *>(p); }
};

struct I64Buf {
  void *p = nullptr;
  explicit I64Buf(const std::vector<int64_t> &v) {
    auto r = cuda::deviceAlloc(v.size() * 8);
    must(r.status(), "deviceAlloc");
    p = *r;
    must(cuda::copyToDevice(p, v.data(), v.size() * 8), "copyToDevice");
  }
  ~I64Buf() { cuda::deviceFree(p); }
  const int64_t *get() const { return static_cast<const int64_t *>(p); }
};


void compare(const std::string &what, const std::vector<float> &got,
             const std::vector<float> &ref, double bound) {
  ++checks;
  double maxDiff = 0, maxRef = 0;
  bool nanMismatch = false;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i]) || std::isnan(got[i])) {
      nanMismatch |= std::isnan(ref[i]) != std::isnan(got[i]);
      continue;
    }
    maxDiff = std::max(maxDiff, double(std::fabs(got[i] - ref[i])));
    maxRef = std::max(maxRef, double(std::fabs(ref[i])));
  }
  const double rel = maxDiff / std::max(maxRef, 1e-30);
  const bool ok = !nanMismatch && got.size() == ref.size() && rel <= bound;
  std::printf("%s %-48s rel err %.3g (bound %.0e)\n", ok ? "ok  " : "FAIL",
              what.c_str(), rel, bound);
  if (!ok)
    ++failures;
}

cpu::Dims dims(std::initializer_list<int64_t> l) {
  cpu::Dims d;
  for (int64_t v : l)
    d.d[d.rank++] = v;
  return d;
}

// --- tests -------------------------------------------------------------------

void testUnary(DType t) {
  const std::pair<cuda::Unary, cpu::Unary> ops[] = {
      {cuda::Unary::Relu, cpu::Unary::Relu},
      {cuda::Unary::Gelu, cpu::Unary::Gelu},
      {cuda::Unary::GeluTanh, cpu::Unary::GeluTanh},
      {cuda::Unary::Tanh, cpu::Unary::Tanh},
      {cuda::Unary::Sigmoid, cpu::Unary::Sigmoid},
      {cuda::Unary::Exp, cpu::Unary::Exp},
      {cuda::Unary::Neg, cpu::Unary::Neg},
      {cuda::Unary::Abs, cpu::Unary::Abs}};
  for (size_t n : {size_t(4096), size_t(100003)}) {
    auto x = asType(randomVec(n), t);
    for (auto [g, c] : ops) {
      Buf dx(x, t), dy(n, t);
      must(cuda::unary(g, t, dx.p, dy.p, int64_t(n), nullptr), "unary");
      std::vector<float> ref(n);
      cpu::unary(c, cpu::DT::F32, x.data(), ref.data(), int64_t(n));
      compare(std::string("unary ") + std::to_string(int(g)) + " " + name(t) +
                  " n=" + std::to_string(n),
              dy.get(), asType(ref, t), tol(t));
    }
  }
}

void testBinary(DType t) {
  struct Case {
    cpu::Dims a, b, out;
  };
  const Case cases[] = {
      {dims({64, 128}), dims({64, 128}), dims({64, 128})},
      {dims({4, 8, 64}), dims({64}), dims({4, 8, 64})},
      {dims({64}), dims({4, 8, 64}), dims({4, 8, 64})},
      {dims({}), dims({33, 7}), dims({33, 7})},
      {dims({33, 7}), dims({1}), dims({33, 7})},
      {dims({4, 1, 6}), dims({5, 1}), dims({4, 5, 6})},
      {dims({8, 16}), dims({8, 1}), dims({8, 16})},
      {dims({3, 5, 7}), dims({3, 5, 7}), dims({3, 5, 7})},
      {dims({1}), dims({4, 1}), dims({4, 6})}};
  const std::pair<cuda::Binary, cpu::Binary> ops[] = {
      {cuda::Binary::Add, cpu::Binary::Add},
      {cuda::Binary::Sub, cpu::Binary::Sub},
      {cuda::Binary::Mul, cpu::Binary::Mul},
      {cuda::Binary::Div, cpu::Binary::Div},
      {cuda::Binary::Max, cpu::Binary::Max},
      {cuda::Binary::Min, cpu::Binary::Min}};
  int ci = 0;
  for (const Case &c : cases) {
    auto a = asType(randomVec(size_t(c.a.numel())), t);
    auto b = asType(randomVec(size_t(c.b.numel()), 0.5f, 2.f), t);
    for (auto [g, k] : ops) {
      Buf da(a, t), db(b, t), dout(size_t(c.out.numel()), t);
      must(cuda::binary(g, t, da.p, c.a, db.p, c.b, dout.p, c.out, nullptr),
           "binary");
      std::vector<float> ref(size_t(c.out.numel()));
      cpu::binary(k, cpu::DT::F32, a.data(), c.a, b.data(), c.b, ref.data(),
                  c.out);
      compare(std::string("binary ") + std::to_string(int(g)) + " case " +
                  std::to_string(ci) + " " + name(t),
              dout.get(), asType(ref, t), tol(t));
    }
    ++ci;
  }
}

void testGeluBackward(DType t) {
  for (bool tanhApprox : {false, true})
    for (size_t n : {size_t(8192), size_t(1001)}) {
      auto x = asType(randomVec(n, -4, 4), t), dy = asType(randomVec(n), t);
      Buf bx(x, t), bdy(dy, t), bdx(n, t);
      must(cuda::geluBackward(t, bx.p, bdy.p, bdx.p, int64_t(n), tanhApprox,
                              nullptr),
           "geluBackward");
      std::vector<float> ref(n);
      cpu::geluGrad(cpu::DT::F32, x.data(), dy.data(), ref.data(), int64_t(n),
                    tanhApprox);
      compare(std::string("geluBackward ") + (tanhApprox ? "tanh " : "erf ") +
                  name(t) + " n=" + std::to_string(n),
              bdx.get(), asType(ref, t), tol(t));
    }
}

void testBiasGelu(DType t) {
  const std::pair<int64_t, int64_t> shapes[] = {{64, 3072}, {7, 101}};
  for (auto [rows, cols] : shapes)
    for (bool tanhApprox : {false, true}) {
      const size_t n = static_cast<size_t>(rows * cols);
      const size_t c = static_cast<size_t>(cols);
      auto x = asType(randomVec(n, -3, 3), t), b = asType(randomVec(c), t);
      auto dy = asType(randomVec(n), t);
      Buf bx(x, t), bb(b, t), by(n, t), bdy(dy, t), bdx(n, t), bdb(c);
      must(cuda::biasGeluForward(t, bx.p, bb.p, by.p, rows, cols, tanhApprox,
                                 nullptr),
           "biasGeluForward");
      must(cuda::biasGeluBackward(t, bx.p, bb.p, bdy.p, bdx.p, bdb.f(), rows,
                                  cols, tanhApprox, nullptr),
           "biasGeluBackward");
      // Reference: z = x + b in float (as the kernel), then ops.h.
      std::vector<float> z(n), y(n), dx(n), db(c, 0.f);
      for (size_t i = 0; i < n; ++i)
        z[i] = x[i] + b[i % c];
      cpu::unary(tanhApprox ? cpu::Unary::GeluTanh : cpu::Unary::Gelu,
                 cpu::DT::F32, z.data(), y.data(), int64_t(n));
      cpu::geluGrad(cpu::DT::F32, z.data(), dy.data(), dx.data(), int64_t(n),
                    tanhApprox);
      dx = asType(dx, t);
      for (size_t i = 0; i < n; ++i)
        db[i % c] += dx[i];
      const std::string tag = std::string("biasGelu ") +
                              (tanhApprox ? "tanh " : "erf ") + name(t) + " " +
                              std::to_string(rows) + "x" + std::to_string(cols);
      compare(tag + " fwd", by.get(), asType(y, t), tol(t));
      compare(tag + " bwd dx", bdx.get(), dx, tol(t));
      compare(tag + " bwd dbias", bdb.get(), db, t == DType::F32 ? 1e-5 : 2e-2);
    }
}

void testSoftmax(DType t) {
  const std::pair<int64_t, int64_t> shapes[] = {
      {37, 100}, {64, 768}, {8, 4096}, {5, 50257}};
  for (auto [rows, cols] : shapes)
    for (bool isLog : {false, true}) {
      const size_t n = size_t(rows * cols);
      auto x = asType(randomVec(n, -8, 8), t);
      Buf bx(x, t), by(n, t);
      must(cuda::softmaxForward(isLog, t, bx.p, by.p, rows, cols, nullptr),
           "softmaxForward");
      std::vector<float> ref(n);
      (isLog ? cpu::logSoftmaxForward : cpu::softmaxForward)(
          x.data(), ref.data(), rows, cols);
      const std::string tag = std::string(isLog ? "logSoftmax " : "softmax ") +
                              name(t) + " " + std::to_string(rows) + "x" +
                              std::to_string(cols);
      compare(tag + " fwd", by.get(), asType(ref, t), tol(t));
      // Backward from the (type-rounded) forward output.
      auto y = asType(ref, t);
      auto dy = asType(randomVec(n), t);
      Buf byy(y, t), bdy(dy, t), bdx(n, t);
      must(cuda::softmaxBackward(isLog, t, byy.p, bdy.p, bdx.p, rows, cols,
                                 nullptr),
           "softmaxBackward");
      std::vector<float> dref(n);
      (isLog ? cpu::logSoftmaxBackward : cpu::softmaxBackward)(
          y.data(), dy.data(), dref.data(), rows, cols);
      compare(tag + " bwd", bdx.get(), asType(dref, t),
              t == DType::F32 ? 1e-5 : 2e-2);
    }
}

void testLayerNorm(DType t) {
  const std::pair<int64_t, int64_t> shapes[] = {{33, 768}, {7, 100}, {4, 3000}};
  for (auto [rows, cols] : shapes) {
    const size_t n = size_t(rows * cols), c = size_t(cols);
    auto x = asType(randomVec(n, -3, 5), t);
    auto scale = asType(randomVec(c, 0.5f, 1.5f), t);
    auto bias = asType(randomVec(c), t);
    Buf bx(x, t), bs(scale, t), bb(bias, t), by(n, t);
    Buf bm(static_cast<size_t>(rows)), br(static_cast<size_t>(rows));
    must(cuda::layerNormForward(t, bx.p, bs.p, bb.p, by.p, bm.f(), br.f(),
                                rows, cols, 1e-5f, nullptr),
         "layerNormForward");
    std::vector<float> ref(n), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    cpu::layerNormForward(x.data(), scale.data(), bias.data(), ref.data(),
                          mean.data(), rstd.data(), rows, cols, 1e-5f);
    const std::string tag = std::string("layerNorm ") + name(t) + " " +
                            std::to_string(rows) + "x" + std::to_string(cols);
    compare(tag + " fwd", by.get(), asType(ref, t), tol(t));
    compare(tag + " mean", bm.get(), mean, 1e-5);
    compare(tag + " rstd", br.get(), rstd, 1e-5);
    auto dy = asType(randomVec(n), t);
    Buf bdy(dy, t), bdx(n, t), bds(c), bdb(c);
    bm.put(mean);
    br.put(rstd);
    must(cuda::layerNormBackward(t, bx.p, bs.p, bm.f(), br.f(), bdy.p, bdx.p,
                                 bds.f(), bdb.f(), rows, cols, nullptr),
         "layerNormBackward");
    std::vector<float> dx(n), ds(c), db(c);
    cpu::layerNormBackward(x.data(), scale.data(), mean.data(), rstd.data(),
                           dy.data(), dx.data(), ds.data(), db.data(), rows,
                           cols);
    compare(tag + " bwd dx", bdx.get(), asType(dx, t),
            t == DType::F32 ? 1e-5 : 2e-2);
    compare(tag + " bwd dscale", bds.get(), ds, 1e-5);
    compare(tag + " bwd dbias", bdb.get(), db, 1e-5);
  }
}

void testEmbedding(DType t) {
  const int64_t vocab = 1000, dim = 256, n = 777;
  auto table = asType(randomVec(size_t(vocab * dim)), t);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::uniform_int_distribution<int64_t> pick(0, 49); // many repeats
  for (auto &i : ids)
    i = pick(rng) * 7;
  I64Buf bids(ids);
  Buf bt(table, t), bo(size_t(n * dim), t);
  must(cuda::embeddingForward(t, bt.p, vocab, dim, bids.get(), n, bo.p,
                              nullptr, nullptr),
       "embeddingForward");
  std::vector<float> ref(size_t(n * dim));
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(&ref[size_t(i * dim)], &table[size_t(ids[size_t(i)] * dim)],
                size_t(dim) * 4);
  compare(std::string("embedding fwd ") + name(t), bo.get(), ref, 0);
  auto dy = asType(randomVec(size_t(n * dim)), t);
  Buf bdy(dy, t), bdt(size_t(vocab * dim));
  must(cuda::embeddingBackward(t, bdy.p, bids.get(), n, dim, bdt.f(), vocab,
                               false, nullptr),
       "embeddingBackward");
  std::vector<float> dref(size_t(vocab * dim), 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j)
      dref[size_t(ids[size_t(i)] * dim + j)] += dy[size_t(i * dim + j)];
  compare(std::string("embedding bwd ") + name(t), bdt.get(), dref, 1e-5);
}

void testCrossEntropy(DType t) {
  const std::pair<int64_t, int64_t> shapes[] = {{64, 1000}, {9, 50257}};
  for (auto [rows, classes] : shapes) {
    const size_t n = size_t(rows * classes);
    auto logits = asType(randomVec(n, -6, 6), t);
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    std::uniform_int_distribution<int64_t> pick(0, classes - 1);
    for (auto &l : labels)
      l = pick(rng);
    labels[1] = -100; // ignored
    I64Buf bl(labels);
    Buf bx(logits, t), bloss(static_cast<size_t>(rows)), bmean(1), bcount(1);
    must(cuda::crossEntropyForward(t, bx.p, bl.get(), bloss.f(), bmean.f(),
                                   bcount.f(), rows, classes, -100, nullptr),
         "crossEntropyForward");
    std::vector<float> loss(static_cast<size_t>(rows));
    const float mean = cpu::crossEntropyForward(
        logits.data(), labels.data(), loss.data(), rows, classes, -100);
    const std::string tag = std::string("crossEntropy ") + name(t) + " " +
                            std::to_string(rows) + "x" +
                            std::to_string(classes);
    compare(tag + " loss", bloss.get(), loss, 1e-5);
    compare(tag + " mean", bmean.get(), {mean}, 1e-5);
    compare(tag + " count", bcount.get(), {float(rows - 1)}, 0);
    Buf bd(n, t);
    must(cuda::crossEntropyBackward(t, bx.p, bl.get(), bd.p, rows, classes,
                                    2.0f, bcount.f(), -100, nullptr),
         "crossEntropyBackward");
    std::vector<float> dref(n);
    cpu::crossEntropyBackward(logits.data(), labels.data(), dref.data(), rows,
                              classes, 2.0f / float(rows - 1), -100);
    compare(tag + " bwd", bd.get(), asType(dref, t),
            t == DType::F32 ? 1e-5 : 2e-2);
  }
}

void testAdamW() {
  for (int64_t n : {int64_t(1 << 16), int64_t(1001)}) {
    auto p = randomVec(static_cast<size_t>(n));
    std::vector<float> m(static_cast<size_t>(n), 0.f),
        v(static_cast<size_t>(n), 0.f);
    Buf bp(p, DType::F32), bm(m, DType::F32), bv(v, DType::F32),
        bh(static_cast<size_t>(n), DType::BF16);
    for (int64_t step = 1; step <= 3; ++step) {
      auto g = randomVec(static_cast<size_t>(n));
      Buf bg(g, DType::F32);
      must(cuda::adamwStep(bp.f(), bg.f(), bm.f(), bv.f(), n, 1e-3f, 0.9f,
                           0.999f, 1e-8f, 0.1f, step, bh.p, nullptr),
           "adamwStep");
      cpu::adamwStep(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f,
                     0.999f, 1e-8f, 0.1f, step);
    }
    const std::string tag = "adamw n=" + std::to_string(n);
    compare(tag + " p", bp.get(), p, 1e-6);
    compare(tag + " m", bm.get(), m, 1e-6);
    compare(tag + " v", bv.get(), v, 1e-6);
    compare(tag + " p bf16", bh.get(), asType(p, DType::BF16), 1e-2);
  }
}

/// Host reference of cuda::adanStep (kernels.h's formulas, float).
void adanRef(std::vector<float> &p, const std::vector<float> &g,
             std::vector<float> &m, std::vector<float> &d,
             std::vector<float> &v, std::vector<float> &prev,
             const cuda::AdanParams &hp, int64_t step) {
  const double s = double(step);
  const float ibc1 = float(1.0 / (1.0 - std::pow(double(hp.beta1), s)));
  const float ibc2 = float(1.0 / (1.0 - std::pow(double(hp.beta2), s)));
  const float bc3 = float(std::sqrt(1.0 - std::pow(double(hp.beta3), s)));
  for (size_t i = 0; i < p.size(); ++i) {
    const float diff = step == 1 ? 0.f : g[i] - prev[i];
    m[i] = hp.beta1 * m[i] + (1.f - hp.beta1) * g[i];
    d[i] = hp.beta2 * d[i] + (1.f - hp.beta2) * diff;
    const float u = g[i] + hp.beta2 * diff;
    v[i] = hp.beta3 * v[i] + (1.f - hp.beta3) * u * u;
    const float upd =
        (m[i] * ibc1 + hp.beta2 * d[i] * ibc2) / (std::sqrt(v[i]) / bc3 + hp.eps);
    p[i] = hp.noProx ? p[i] * (1.f - hp.lr * hp.weightDecay) - hp.lr * upd
                     : (p[i] - hp.lr * upd) / (1.f + hp.lr * hp.weightDecay);
    prev[i] = g[i];
  }
}

void testAdan() {
  for (bool noProx : {false, true})
    for (int64_t n : {int64_t(1 << 16), int64_t(999)}) {
      cuda::AdanParams hp;
      hp.weightDecay = 0.02f;
      hp.noProx = noProx;
      const size_t sn = static_cast<size_t>(n);
      auto p = randomVec(sn);
      std::vector<float> m(sn, 0.f), d(sn, 0.f), v(sn, 0.f), prev(sn, 0.f);
      Buf bp(p, DType::F32), bm(m, DType::F32), bd(d, DType::F32),
          bv(v, DType::F32), bprev(prev, DType::F32), bh(sn, DType::BF16);
      for (int64_t step = 1; step <= 4; ++step) {
        auto g = randomVec(sn);
        Buf bg(g, DType::F32);
        must(cuda::adanStep(bp.f(), bg.f(), bm.f(), bd.f(), bv.f(), bprev.f(),
                            n, hp, step, bh.p, nullptr),
             "adanStep");
        adanRef(p, g, m, d, v, prev, hp, step);
      }
      const std::string tag = std::string("adan ") +
                              (noProx ? "noProx " : "prox ") +
                              "n=" + std::to_string(n);
      compare(tag + " p", bp.get(), p, 1e-5);
      compare(tag + " m", bm.get(), m, 1e-5);
      compare(tag + " d", bd.get(), d, 1e-5);
      compare(tag + " v", bv.get(), v, 1e-5);
      compare(tag + " p bf16", bh.get(), asType(p, DType::BF16), 1e-2);
    }
}

void testGemm() {
  auto blas = cuda::Blas::create();
  must(blas.status(), "Blas::create");
  struct Case {
    bool ta, tb;
    int64_t M, N, K, batch;
  };
  const Case cases[] = {{false, false, 64, 96, 128, 1},
                        {true, false, 33, 17, 65, 1},
                        {false, true, 128, 64, 32, 3},
                        {true, true, 40, 24, 56, 2}};
  const std::pair<cuda::GemmPrecision, const char *> precs[] = {
      {cuda::GemmPrecision::F32, "f32"},
      {cuda::GemmPrecision::TF32, "tf32"},
      {cuda::GemmPrecision::BF16, "bf16"}};
  for (const Case &c : cases)
    for (auto [prec, pname] : precs) {
      const DType t =
          prec == cuda::GemmPrecision::BF16 ? DType::BF16 : DType::F32;
      const int64_t sa = c.M * c.K, sb = c.K * c.N, sc = c.M * c.N;
      auto A = asType(randomVec(size_t(sa * c.batch), -1, 1), t);
      auto B = asType(randomVec(size_t(sb * c.batch), -1, 1), t);
      Buf bA(A, t), bB(B, t), bC(size_t(sc * c.batch), DType::F32);
      cuda::GemmShape s;
      s.transA = c.ta, s.transB = c.tb, s.M = c.M, s.N = c.N, s.K = c.K;
      s.batch = c.batch, s.strideA = sa, s.strideB = sb, s.strideC = sc;
      must(blas->gemm(prec, s, 1.f, bA.p, bB.p, 0.f, bC.p, nullptr, true),
           "gemm");
      std::vector<float> ref(size_t(sc * c.batch));
      cpu::batchedGemm(c.ta, c.tb, c.batch, c.M, c.N, c.K, 1.f, A.data(), sa,
                       B.data(), sb, 0.f, ref.data(), sc);
      const double bound = prec == cuda::GemmPrecision::F32    ? 1e-5
                           : prec == cuda::GemmPrecision::TF32 ? 2e-3
                                                               : 1e-2;
      compare(std::string("gemm ") + pname + (c.ta ? " tA" : "") +
                  (c.tb ? " tB" : "") + " " + std::to_string(c.M) + "x" +
                  std::to_string(c.N) + "x" + std::to_string(c.K) + " b" +
                  std::to_string(c.batch),
              bC.get(), ref, bound);
    }
}
} // namespace

int main() {
  auto dev = cuda::Device::open(0);
  if (!dev.ok()) {
    std::printf("SKIP: %s\n", dev.message().c_str());
    return 77;
  }
  std::printf("device: %s\n", dev->describe().c_str());
  for (DType t : {DType::F32, DType::BF16}) {
    testUnary(t);
    testBinary(t);
    testGeluBackward(t);
    testBiasGelu(t);
    testSoftmax(t);
    testLayerNorm(t);
    testEmbedding(t);
    testCrossEntropy(t);
  }
  testAdamW();
  testAdan();
  testGemm();
  std::printf("%d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
