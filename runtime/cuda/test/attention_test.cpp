//===- attention_test.cpp - Fused attention vs naive attention in double --===//
#include "merak_rt/cuda/attention.h"
#include "train_test.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace merak::rt::cuda::test {
namespace {

struct Case {
  int64_t B, H, T, D;
  bool causal;
  bool packed; // q/k/v (and dq/dk/dv) in one [B, T, 3C]; o, dO [B, T, C]
};

/// Naive attention for one (b, h) in double: logical [T, D] slices.
struct Ref {
  std::vector<double> o, lse, dq, dk, dv;
};
Ref reference(const Case &c, double scale, const std::vector<float> &q,
              const std::vector<float> &k, const std::vector<float> &v,
              const std::vector<float> &dO) {
  const int64_t T = c.T, D = c.D, BH = c.B * c.H;
  Ref r;
  r.o.assign(BH * T * D, 0);
  r.lse.assign(BH * T, 0);
  r.dq.assign(BH * T * D, 0);
  r.dk.assign(BH * T * D, 0);
  r.dv.assign(BH * T * D, 0);
  std::vector<double> p(T), dp(T);
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t base = bh * T * D;
    for (int64_t i = 0; i < T; ++i) {
      const int64_t n = c.causal ? i + 1 : T;
      double m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d)
          s += double(q[base + i * D + d]) * k[base + j * D + d];
        p[j] = s * scale;
        m = std::max(m, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(p[j] - m);
      const double L = m + std::log(sum);
      r.lse[bh * T + i] = L;
      for (int64_t j = 0; j < n; ++j) {
        p[j] = std::exp(p[j] - L);
        for (int64_t d = 0; d < D; ++d)
          r.o[base + i * D + d] += p[j] * v[base + j * D + d];
      }
      // Backward of row i.
      double delta = 0;
      for (int64_t j = 0; j < n; ++j) {
        dp[j] = 0;
        for (int64_t d = 0; d < D; ++d)
          dp[j] += double(dO[base + i * D + d]) * v[base + j * D + d];
        delta += p[j] * dp[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        const double ds = p[j] * (dp[j] - delta);
        for (int64_t d = 0; d < D; ++d) {
          r.dv[base + j * D + d] += p[j] * dO[base + i * D + d];
          r.dq[base + i * D + d] += scale * ds * k[base + j * D + d];
          r.dk[base + j * D + d] += scale * ds * q[base + i * D + d];
        }
      }
    }
  }
  return r;
}

/// Element offset of logical (b, h, t, d) in an operand at `off` elements
/// from its buffer's base.
int64_t at(const AttnOperand &o, int64_t off, int64_t b, int64_t h, int64_t t,
           int64_t d) {
  return off + b * o.strideB + h * o.strideH + t * o.strideT + d;
}
/// Scatters a logical [B, H, T, D] array into a host image of a buffer.
void scatter(const Case &c, const std::vector<float> &x, const AttnOperand &o,
             int64_t off, std::vector<float> &img) {
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t t = 0; t < c.T; ++t)
        for (int64_t d = 0; d < c.D; ++d)
          img[at(o, off, b, h, t, d)] =
              x[((b * c.H + h) * c.T + t) * c.D + d];
}
std::vector<float> gather(const Case &c, const std::vector<float> &img,
                          const AttnOperand &o, int64_t off) {
  std::vector<float> x(c.B * c.H * c.T * c.D);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t t = 0; t < c.T; ++t)
        for (int64_t d = 0; d < c.D; ++d)
          x[((b * c.H + h) * c.T + t) * c.D + d] =
              img[at(o, off, b, h, t, d)];
  return x;
}

void runCase(const Case &c, DType t, bool tc) {
  const int64_t N = c.B * c.H * c.T * c.D, C = c.H * c.D;
  const int64_t es = dtypeSize(t);
  const double scale = 1.0 / std::sqrt(double(c.D));
  // q larger than k, v: peaked softmax rows, not just averages.
  auto q = roundTo(randn(N, 2.f), t), k = roundTo(randn(N, 1.f), t),
       v = roundTo(randn(N, 1.f), t), dO = roundTo(randn(N, 1.f), t);
  const Ref ref = reference(c, scale, q, k, v, dO);

  // Buffers: one qkv (and one dqkv) when packed, else one per operand.
  const int64_t qkvElems = c.packed ? 3 * N : N;
  Buf bq(qkvElems * es), bk(c.packed ? 16 : N * es), bv(c.packed ? 16 : N * es);
  Buf bo(N * es), bdO(N * es), bdq(qkvElems * es),
      bdk(c.packed ? 16 : N * es), bdv(c.packed ? 16 : N * es);
  Buf blse(c.B * c.H * c.T * 4), bdelta(c.B * c.H * c.T * 4);

  AttnOperand oq, ok, ov, oo, odO, odq, odk, odv;
  int64_t offq = 0, offk = 0, offv = 0;
  if (c.packed) {
    oq = AttnOperand::packedQKV(bq.p, t, 0, c.H, c.T, c.D);
    ok = AttnOperand::packedQKV(bq.p, t, 1, c.H, c.T, c.D);
    ov = AttnOperand::packedQKV(bq.p, t, 2, c.H, c.T, c.D);
    odq = AttnOperand::packedQKV(bdq.p, t, 0, c.H, c.T, c.D);
    odk = AttnOperand::packedQKV(bdq.p, t, 1, c.H, c.T, c.D);
    odv = AttnOperand::packedQKV(bdq.p, t, 2, c.H, c.T, c.D);
    oo = AttnOperand::bthd(bo.p, c.H, c.T, c.D);
    odO = AttnOperand::bthd(bdO.p, c.H, c.T, c.D);
    offk = C, offv = 2 * C;
  } else {
    oq = AttnOperand::bhtd(bq.p, c.H, c.T, c.D);
    ok = AttnOperand::bhtd(bk.p, c.H, c.T, c.D);
    ov = AttnOperand::bhtd(bv.p, c.H, c.T, c.D);
    odq = AttnOperand::bhtd(bdq.p, c.H, c.T, c.D);
    odk = AttnOperand::bhtd(bdk.p, c.H, c.T, c.D);
    odv = AttnOperand::bhtd(bdv.p, c.H, c.T, c.D);
    oo = AttnOperand::bhtd(bo.p, c.H, c.T, c.D);
    odO = AttnOperand::bhtd(bdO.p, c.H, c.T, c.D);
  }
  if (c.packed) {
    std::vector<float> img(3 * N, 0.f);
    scatter(c, q, oq, offq, img);
    scatter(c, k, ok, offk, img);
    scatter(c, v, ov, offv, img);
    putTyped(bq.p, img, t);
  } else {
    putTyped(bq.p, q, t);
    putTyped(bk.p, k, t);
    putTyped(bv.p, v, t);
  }
  {
    std::vector<float> img(N);
    scatter(c, dO, odO, 0, img);
    putTyped(bdO.p, img, t);
  }
  AttnShape s;
  s.B = c.B, s.H = c.H, s.T = c.T, s.D = c.D, s.causal = c.causal;
  s.tensorCores = tc;
  must(attentionForward(t, s, oq, ok, ov, oo, static_cast<float *>(blse.p),
                        nullptr),
       "attentionForward");
  must(attentionBackward(t, s, oq, ok, ov, oo, odO,
                         static_cast<const float *>(blse.p),
                         static_cast<float *>(bdelta.p), odq, odk, odv,
                         nullptr),
       "attentionBackward");
  // The copies below synchronise the (legacy default) stream.

  const std::string tag = std::string(t == DType::F32 ? "f32" : "bf16") +
                          " B" + std::to_string(c.B) + " H" +
                          std::to_string(c.H) + " T" + std::to_string(c.T) +
                          " D" + std::to_string(c.D) +
                          (c.causal ? " causal" : " full") +
                          (c.packed ? " packed" : " bhtd") + (tc ? " tc" : "");
  const double fwdBound = t == DType::F32 ? 2e-5 : 1e-2;
  const double bwdBound = t == DType::F32 ? 1e-4 : 2e-2;
  compare("attention O " + tag,
          gather(c, getTyped(bo.p, N, t), oo, 0), ref.o, fwdBound);
  compare("attention L " + tag,
          getTyped(blse.p, c.B * c.H * c.T, DType::F32), ref.lse, 2e-5);
  std::vector<float> dimg = getTyped(bdq.p, qkvElems, t);
  auto grad = [&](const AttnOperand &o, int64_t off, Buf &buf) {
    return c.packed ? gather(c, dimg, o, off)
                    : gather(c, getTyped(buf.p, N, t), o, 0);
  };
  compare("attention dQ " + tag, grad(odq, 0, bdq), ref.dq, bwdBound);
  compare("attention dK " + tag, grad(odk, offk, bdk), ref.dk, bwdBound);
  compare("attention dV " + tag, grad(odv, offv, bdv), ref.dv, bwdBound);
}

} // namespace

void testAttention() {
  const Case cases[] = {
      {1, 1, 1, 64, true, false},    {2, 3, 77, 64, true, false},
      {1, 2, 130, 128, true, false}, {2, 2, 64, 16, true, false},
      {1, 1, 200, 32, true, false},  {1, 2, 100, 64, false, false},
      {2, 2, 65, 64, true, true},    {1, 3, 129, 128, false, true},
      {1, 1, 1024, 64, true, true},
  };
  for (DType t : {DType::F32, DType::BF16})
    for (const Case &c : cases) {
      runCase(c, t, false);
      // The opt-in tensor-core forward and backward (bf16, D 64/128).
      if (t == DType::BF16 && (c.D == 64 || c.D == 128))
        runCase(c, t, true);
    }

  // Misuse is reported, not launched.
  AttnShape bad;
  bad.D = 48;
  Buf b(4096);
  const AttnOperand o = AttnOperand::bhtd(b.p, 1, 1, 48);
  Buf l(64);
  const Status st = attentionForward(DType::F32, bad, o, o, o, o,
                                     static_cast<float *>(l.p), nullptr);
  expect(!st.ok() && st.message().find("D=48") != std::string::npos,
         "attention rejects D=48: " + st.message());
}

} // namespace merak::rt::cuda::test
