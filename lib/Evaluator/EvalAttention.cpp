//===- EvalAttention.cpp - reference attention and its gradient -----------===//
//
// Straight from the definition, in double: the probabilities of each
// (batch, head) slice are materialised, and attention_grad recomputes them
// from query and key (it does not read the forward's result or lse), so the
// runtime's streamed kernels are checked against an independent sum. A
// bias is read through its broadcast (size-1 leading dims; a [..., 1, S]
// bias, ALiBi's, is the same for every query row), and its
// gradient is the scores' gradient, one [T, S] block per slice. Dropout on
// the probabilities is merak.dropout's mask (EvalNN.cpp) on the heads-first
// [..., T, S] probabilities, drawn in both ops.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;

namespace {
/// The shapes of one attention op: `batch` (batch x head) slices of T
/// queries, S keys, head dim D and value dim Dv.
struct AttnDims {
  int64_t batch = 1, t = 0, s = 0, d = 0, dv = 0;
  bool causal = false;
  int64_t window = 0;
  double scale = 1, softcap = 0;
  const HostTensor *bias = nullptr; // [..., T or 1, S], broadcast over the slices
  SmallVector<int64_t> lead;        // the scores' leading (batch, head) dims
  SerialDropoutMask drop;           // of the probabilities [..., T, S]

  AttnDims(ArrayRef<int64_t> qs, ArrayRef<int64_t> ks, ArrayRef<int64_t> vs, double scale,
           bool causal, int64_t window, double softcap)
      : causal(causal), window(window), scale(scale), softcap(softcap) {
    for (int64_t x : qs.drop_back(2))
      batch *= x;
    t = qs[qs.size() - 2];
    d = qs.back();
    s = ks.drop_back().back();
    dv = vs.back();
    lead.assign(qs.begin(), qs.end() - 2);
  }

  /// Reads an op's dropout (merak.dropout's mask, as the evaluator draws it).
  template <typename OpTy> LogicalResult setDropout(OpTy op) {
    SmallVector<int64_t> probs(lead);
    probs.append({t, s});
    FailureOr<SerialDropoutMask> m =
        serialDropoutMask(op, probs, op.getDropout().convertToDouble(), op.getSeed(),
                          op.getBatchSplit(), op.getTpSplit());
    if (failed(m))
      return failure();
    drop = *m;
    return success();
  }
  /// The dropout factor of probability (b, r, c): 1 without dropout.
  double keep(int64_t b, int64_t r, int64_t c) const { return drop.factor((b * t + r) * s + c); }

  /// The bias's rows per slice: T, or 1 for a per-key bias (broadcast over
  /// the query rows).
  int64_t biasRows() const { return bias->getShape()[lead.size()]; }
  /// The bias of score (r, c) of the slice whose block starts at `off`.
  double biasAt(int64_t off, int64_t r, int64_t c) const {
    return bias->getAsDouble(off + (biasRows() == 1 ? 0 : r * s) + c);
  }
  /// The offset of slice b's [T, S] (or [1, S]) block in the bias (its
  /// size-1 leading dims broadcast).
  int64_t biasOffset(int64_t b) const {
    ArrayRef<int64_t> bs = bias->getShape();
    int64_t off = 0, stride = biasRows() * s;
    for (int64_t d = (int64_t)lead.size() - 1; d >= 0; --d) {
      int64_t i = b % lead[d];
      b /= lead[d];
      if (bs[d] != 1)
        off += i * stride;
      stride *= bs[d];
    }
    return off;
  }

  /// Probabilities P [t, s] of slice b (0 where masked), and the row
  /// log-sum-exps when `lse` is given.
  void probs(const HostTensor &q, const HostTensor &k, int64_t b, std::vector<double> &p,
             double *lse = nullptr) const {
    p.assign(t * s, 0.0);
    for (int64_t r = 0; r < t; ++r) {
      int64_t keys = causal ? r + 1 : window > 0 ? std::min(s, r + window) : s;
      int64_t first = window > 0 ? std::max<int64_t>(0, r - window + 1) : 0;
      double m = -INFINITY;
      for (int64_t c = first; c < keys; ++c) {
        double dot = 0;
        for (int64_t j = 0; j < d; ++j)
          dot += q.f()[(b * t + r) * d + j] * k.f()[(b * s + c) * d + j];
        p[r * s + c] = scale * dot;
        if (softcap > 0)
          p[r * s + c] = softcap * std::tanh(p[r * s + c] / softcap);
        if (bias)
          p[r * s + c] += biasAt(biasOffset(b), r, c);
        m = std::max(m, p[r * s + c]);
      }
      double sum = 0;
      for (int64_t c = first; c < keys; ++c)
        sum += std::exp(p[r * s + c] - m);
      for (int64_t c = first; c < keys; ++c)
        p[r * s + c] = std::exp(p[r * s + c] - m) / sum;
      if (lse)
        lse[r] = m + std::log(sum);
    }
  }
};
/// `x` with dims rank-3 and rank-2 swapped ([..., T, H, D] <-> [..., H, T, D]).
HostTensor swapSeqHeads(const HostTensor &x) {
  ArrayRef<int64_t> s = x.getShape();
  const size_t r = s.size();
  const int64_t A = s[r - 3], B = s[r - 2], D = s[r - 1];
  const int64_t outer = A * B * D ? x.size() / (A * B * D) : 0;
  SmallVector<int64_t> t(s);
  std::swap(t[r - 3], t[r - 2]);
  HostTensor y(RankedTensorType::get(t, x.getType().getElementType()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t d = 0; d < D; ++d)
          y.setFromDouble(((o * B + b) * A + a) * D + d, x.f()[((o * A + a) * B + b) * D + d]);
  return y;
}

/// A seq_major op evaluated heads-first: its float operands (`which`)
/// swapped in, the listed results swapped back.
template <typename Eval>
LogicalResult viaHeadsFirst(Operation *op, Operands in, Results out, ArrayRef<unsigned> which,
                            ArrayRef<unsigned> resultsToSwap, Eval eval) {
  std::vector<HostTensor> swapped;
  swapped.reserve(in.size());
  SmallVector<const HostTensor *> ptrs(in.begin(), in.end());
  for (unsigned i : which) {
    swapped.push_back(swapSeqHeads(*in[i]));
    ptrs[i] = &swapped.back();
  }
  SmallVector<HostTensor, 3> tmp;
  if (failed(eval(Operands(ptrs), tmp)))
    return failure();
  for (unsigned i = 0; i < tmp.size(); ++i)
    out.push_back(llvm::is_contained(resultsToSwap, i) ? swapSeqHeads(tmp[i])
                                                       : std::move(tmp[i]));
  return success();
}
} // namespace

static LogicalResult attentionHeadsFirst(AttentionOp op, Operands in, Results out) {
  AttnDims a(in[0]->getShape(), in[1]->getShape(), in[2]->getShape(),
             op.getScale().convertToDouble(), op.getCausal(), op.getWindow(),
             op.getSoftcap().convertToDouble());
  if (op.getBias())
    a.bias = in[3];
  if (failed(a.setDropout(op)))
    return failure();
  const HostTensor &q = *in[0], &k = *in[1], &v = *in[2];
  SmallVector<int64_t> oShape(q.getShape());
  oShape.back() = v.getShape().back();
  HostTensor o(RankedTensorType::get(oShape, q.getType().getElementType())),
      lse(resultType(op, 1));
  std::vector<double> p, l(a.t);
  for (int64_t b = 0; b < a.batch; ++b) {
    a.probs(q, k, b, p, l.data());
    for (int64_t r = 0; r < a.t; ++r) {
      lse.setFromDouble(b * a.t + r, l[r]);
      for (int64_t j = 0; j < a.dv; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < a.s; ++c)
          acc += p[r * a.s + c] * a.keep(b, r, c) * v.f()[(b * a.s + c) * a.dv + j];
        o.setFromDouble((b * a.t + r) * a.dv + j, acc);
      }
    }
  }
  out.push_back(std::move(o));
  out.push_back(std::move(lse));
  return success();
}

LogicalResult kernels::eval(AttentionOp op, Operands in, Results out) {
  if (!op.getSeqMajor())
    return attentionHeadsFirst(op, in, out);
  return viaHeadsFirst(op, in, out, {0, 1, 2}, {0}, [&](Operands sin, Results sout) {
    return attentionHeadsFirst(op, sin, sout);
  });
}

static LogicalResult attentionGradHeadsFirst(AttentionGradOp op, Operands in, Results out) {
  AttnDims a(in[0]->getShape(), in[1]->getShape(), in[2]->getShape(),
             op.getScale().convertToDouble(), op.getCausal(), op.getWindow(),
             op.getSoftcap().convertToDouble());
  if (op.getBias())
    a.bias = in[6];
  if (failed(a.setDropout(op)))
    return failure();
  const HostTensor &q = *in[0], &k = *in[1], &v = *in[2], &g = *in[5];
  // The lse's gradient ([..., H, T]), after the bias when there is one.
  const HostTensor *lseGrad = op.getLseGrad() ? in[op.getBias() ? 7 : 6] : nullptr;
  HostTensor dq(q.getType()), dk(k.getType()), dv(v.getType());
  std::optional<HostTensor> db;
  if (op.getBiasGrad())
    db.emplace(cast<RankedTensorType>(op.getBiasGrad().getType()));
  std::vector<double> p, dp(a.s);
  std::vector<double> dqAcc(q.size(), 0.0), dkAcc(k.size(), 0.0), dvAcc(v.size(), 0.0);
  for (int64_t b = 0; b < a.batch; ++b) {
    a.probs(q, k, b, p);
    for (int64_t r = 0; r < a.t; ++r) {
      const double *gr = &g.f()[(b * a.t + r) * a.dv];
      // dP[c] = M[c] g[r] . V[c] (M the dropout factor); dS = P * (dP -
      // sum_c P dP - lse_grad) (the softmax's Jacobian, not the Delta
      // shortcut through the forward's result); dV gets the dropped
      // probabilities P M.
      double dot = 0;
      for (int64_t c = 0; c < a.s; ++c) {
        double x = 0;
        for (int64_t j = 0; j < a.dv; ++j)
          x += gr[j] * v.f()[(b * a.s + c) * a.dv + j];
        dp[c] = x * a.keep(b, r, c);
        dot += p[r * a.s + c] * dp[c];
      }
      if (lseGrad) // d lse / d s = P: dS gains P * lse_grad
        dot -= lseGrad->getAsDouble(b * a.t + r);
      for (int64_t c = 0; c < a.s; ++c) {
        double pc = p[r * a.s + c];
        if (pc == 0)
          continue;
        const double dropped = pc * a.keep(b, r, c);
        for (int64_t j = 0; j < a.dv; ++j)
          dvAcc[(b * a.s + c) * a.dv + j] += dropped * gr[j];
        if (db) // the score's own gradient
          db->setFromDouble((b * a.t + r) * a.s + c, pc * (dp[c] - dot));
        double ds = pc * (dp[c] - dot) * a.scale;
        if (a.softcap > 0) { // d/ds of c tanh(s / c) = 1 - tanh^2
          double raw = 0;
          for (int64_t j = 0; j < a.d; ++j)
            raw += q.f()[(b * a.t + r) * a.d + j] * k.f()[(b * a.s + c) * a.d + j];
          double th = std::tanh(a.scale * raw / a.softcap);
          ds *= 1 - th * th;
        }
        for (int64_t j = 0; j < a.d; ++j) {
          dqAcc[(b * a.t + r) * a.d + j] += ds * k.f()[(b * a.s + c) * a.d + j];
          dkAcc[(b * a.s + c) * a.d + j] += ds * q.f()[(b * a.t + r) * a.d + j];
        }
      }
    }
  }
  for (auto [t, acc] : {std::pair{&dq, &dqAcc}, {&dk, &dkAcc}, {&dv, &dvAcc}})
    for (size_t i = 0; i < acc->size(); ++i)
      t->setFromDouble(i, (*acc)[i]);
  out.push_back(std::move(dq));
  out.push_back(std::move(dk));
  out.push_back(std::move(dv));
  if (db)
    out.push_back(std::move(*db));
  return success();
}

LogicalResult kernels::eval(AttentionGradOp op, Operands in, Results out) {
  if (!op.getSeqMajor())
    return attentionGradHeadsFirst(op, in, out);
  return viaHeadsFirst(op, in, out, {0, 1, 2, 3, 5}, {0, 1, 2},
                       [&](Operands sin, Results sout) {
                         return attentionGradHeadsFirst(op, sin, sout);
                       });
}
