//===- EvalNN.cpp - contraction, convolution, pooling, dropout kernels ----===//
#include "Kernels.h"

#include "merak/Evaluator/DropoutMask.h"
#include "merak/Evaluator/Evaluator.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;
namespace mask = ::merak::rt::dropout;

LogicalResult kernels::eval(MatmulOp op, Operands in, Results out) {
  const HostTensor &a = *in[0], &b = *in[1];
  SmallVector<int64_t> l(a.getShape()), r(b.getShape());
  if (l.size() == 1)
    l.insert(l.begin(), 1);
  if (r.size() == 1)
    r.push_back(1);
  int64_t m = l[l.size() - 2], k = l.back(), n = r.back();
  ArrayRef<int64_t> lb = ArrayRef<int64_t>(l).drop_back(2),
                    rb = ArrayRef<int64_t>(r).drop_back(2);
  SmallVector<int64_t> batch = *broadcastShapes(lb, rb);
  // Strides (in matrices) of each operand's batch dims, broadcast to `batch`.
  auto sa = broadcastStrides(lb, batch), sb = broadcastStrides(rb, batch);
  HostTensor res(op.getType());
  bool isF = a.isFloat();
  forEachIndex(batch, [&](int64_t bi, ArrayRef<int64_t> idx) {
    int64_t ao = dot(idx, sa) * m * k, bo = dot(idx, sb) * k * n,
            ro = bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        if (isF) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += a.f()[ao + i * k + p] * b.f()[bo + p * n + j];
          res.setFromDouble(ro + i * n + j, acc);
        } else {
          uint64_t acc = 0; // wraps like the element type, no UB
          for (int64_t p = 0; p < k; ++p)
            acc += (uint64_t)a.i()[ao + i * k + p] * (uint64_t)b.i()[bo + p * n + j];
          res.setFromInt(ro + i * n + j, (int64_t)acc);
        }
      }
  });
  out.push_back(std::move(res));
  return success();
}

/// Visits every (output position, input position, weight position) triple
/// of a conv2d: fn(outIndex, inIndex, weightIndex). The forward pass and
/// both backward passes are the same loop nest with different accumulators.
template <typename Fn>
static void forEachConvTap(ArrayRef<int64_t> xs, ArrayRef<int64_t> ws,
                           ArrayRef<int64_t> rs, ArrayRef<int64_t> s,
                           ArrayRef<int64_t> p, ArrayRef<int64_t> d,
                           int64_t groups, Fn fn) {
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  int64_t O = ws[0], CG = ws[1], KH = ws[2], KW = ws[3];
  int64_t OH = rs[2], OW = rs[3], OG = O / groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t outIdx = ((n * O + o) * OH + oh) * OW + ow;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * s[0] - p[0] + kh * d[0];
              if (ih < 0 || ih >= H)
                continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * s[1] - p[1] + kw * d[1];
                if (iw < 0 || iw >= W)
                  continue;
                fn(outIdx, ((n * C + (o / OG) * CG + c) * H + ih) * W + iw,
                   ((o * CG + c) * KH + kh) * KW + kw);
              }
            }
        }
}

LogicalResult kernels::eval(Conv2DOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &w = *in[1];
  const HostTensor *bias = op.getBias() ? in[2] : nullptr;
  HostTensor r(op.getType());
  ArrayRef<int64_t> rs = r.getShape();
  if (bias)
    for (int64_t k = 0; k < r.size(); ++k)
      r.f()[k] = bias->f()[(k / (rs[2] * rs[3])) % rs[1]];
  forEachConvTap(x.getShape(), w.getShape(), rs, op.getStrides(), op.getPadding(),
                 op.getDilations(), op.getGroups(),
                 [&](int64_t o, int64_t i, int64_t k) { r.f()[o] += x.f()[i] * w.f()[k]; });
  r.roundToType();
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(Conv2DBackwardDataOp op, Operands in,
                                            Results out) {
  const HostTensor &g = *in[0], &w = *in[1];
  HostTensor r(op.getType());
  forEachConvTap(r.getShape(), w.getShape(), g.getShape(), op.getStrides(),
                 op.getPadding(), op.getDilations(), op.getGroups(),
                 [&](int64_t o, int64_t i, int64_t k) { r.f()[i] += g.f()[o] * w.f()[k]; });
  r.roundToType();
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(Conv2DBackwardFilterOp op, Operands in,
                                              Results out) {
  const HostTensor &x = *in[0], &g = *in[1];
  HostTensor r(op.getType());
  forEachConvTap(x.getShape(), r.getShape(), g.getShape(), op.getStrides(),
                 op.getPadding(), op.getDilations(), op.getGroups(),
                 [&](int64_t o, int64_t i, int64_t k) { r.f()[k] += g.f()[o] * x.f()[i]; });
  r.roundToType();
  out.push_back(std::move(r));
  return success();
}

/// Visits every window of a 2-d pool: fn(outIndex, inIndices of the window
/// inside the input, number of window positions inside the padded input).
template <typename Fn>
static void forEachPoolWindow(ArrayRef<int64_t> xs, ArrayRef<int64_t> rs,
                              ArrayRef<int64_t> k, ArrayRef<int64_t> s,
                              ArrayRef<int64_t> p, ArrayRef<int64_t> d, Fn fn) {
  int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], OH = rs[2], OW = rs[3];
  SmallVector<int64_t, 16> idx;
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        idx.clear();
        int64_t padded = 0;
        for (int64_t kh = 0; kh < k[0]; ++kh) {
          int64_t ih = oh * s[0] - p[0] + kh * d[0];
          for (int64_t kw = 0; kw < k[1]; ++kw) {
            int64_t iw = ow * s[1] - p[1] + kw * d[1];
            if (ih < H + p[2] && iw < W + p[3])
              ++padded;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
              idx.push_back((nc * H + ih) * W + iw);
          }
        }
        fn((nc * OH + oh) * OW + ow, ArrayRef<int64_t>(idx), padded);
      }
}

LogicalResult kernels::eval(MaxPool2DGradOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &g = *in[1];
  HostTensor r(op.getType());
  forEachPoolWindow(x.getShape(), g.getShape(), op.getKernel(), op.getStrides(),
                    op.getPadding(), op.getDilations(),
                    [&](int64_t o, ArrayRef<int64_t> idx, int64_t) {
                      if (idx.empty())
                        return;
                      int64_t best = idx[0];
                      for (int64_t i : idx)
                        if (x.f()[i] > x.f()[best] || std::isnan(x.f()[i]))
                          best = i;
                      r.f()[best] += g.f()[o];
                    });
  r.roundToType();
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(AvgPool2DGradOp op, Operands in, Results out) {
  const HostTensor &g = *in[0];
  HostTensor r(op.getType());
  int64_t ones[2] = {1, 1};
  bool includePad = op.getCountIncludePad();
  forEachPoolWindow(r.getShape(), g.getShape(), op.getKernel(), op.getStrides(),
                    op.getPadding(), ones,
                    [&](int64_t o, ArrayRef<int64_t> idx, int64_t padded) {
                      int64_t n = includePad ? padded : (int64_t)idx.size();
                      for (int64_t i : idx)
                        r.f()[i] += g.f()[o] / n;
                    });
  r.roundToType();
  out.push_back(std::move(r));
  return success();
}

template <typename Fn>
static void forEachWindow(const HostTensor &x, HostTensor &r, ArrayRef<int64_t> k,
                          ArrayRef<int64_t> s, ArrayRef<int64_t> p,
                          ArrayRef<int64_t> d, Fn fn) {
  ArrayRef<int64_t> xs = x.getShape(), rs = r.getShape();
  int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], OH = rs[2], OW = rs[3];
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        SmallVector<double, 16> vals;
        int64_t padded = 0; // window positions inside the padded extent
        for (int64_t kh = 0; kh < k[0]; ++kh) {
          int64_t ih = oh * s[0] - p[0] + kh * d[0];
          for (int64_t kw = 0; kw < k[1]; ++kw) {
            int64_t iw = ow * s[1] - p[1] + kw * d[1];
            if (ih < H + p[2] && iw < W + p[3])
              ++padded;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
              vals.push_back(x.f()[(nc * H + ih) * W + iw]);
          }
        }
        r.setFromDouble((nc * OH + oh) * OW + ow, fn(vals, padded));
      }
}

LogicalResult kernels::eval(MaxPool2DOp op, Operands in, Results out) {
  HostTensor r(op.getType());
  forEachWindow(*in[0], r, op.getKernel(), op.getStrides(), op.getPadding(),
                op.getDilations(), [](ArrayRef<double> v, int64_t) {
                  double m = -INFINITY;
                  for (double x : v)
                    m = std::isnan(x) ? x : std::max(m, x);
                  return m;
                });
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(AvgPool2DOp op, Operands in, Results out) {
  HostTensor r(op.getType());
  int64_t ones[2] = {1, 1};
  bool includePad = op.getCountIncludePad();
  forEachWindow(*in[0], r, op.getKernel(), op.getStrides(), op.getPadding(),
                ones, [&](ArrayRef<double> v, int64_t padded) {
                  double sum = 0;
                  for (double x : v)
                    sum += x;
                  int64_t n = includePad ? padded : (int64_t)v.size();
                  return n ? sum / n : 0.0;
                });
  out.push_back(std::move(r));
  return success();
}

FailureOr<SerialDropoutMask> kernels::serialDropoutMask(Operation *op, ArrayRef<int64_t> shape,
                                                        double ratio, int64_t seed,
                                                        std::optional<ArrayRef<int64_t>> batchSplit,
                                                        std::optional<ArrayRef<int64_t>> tpSplit) {
  auto split = [](std::optional<ArrayRef<int64_t>> s) {
    return s ? mask::Split{(*s)[0], (*s)[1], (*s)[2], 0} : mask::Split{};
  };
  SerialDropoutMask m;
  if (!mask::makeLayout(shape.size(), shape.data(), split(tpSplit), split(batchSplit), m.layout))
    return op->emitOpError("has dropout splits its shape cannot hold");
  m.key = mask::streamKey(seed, evaluationStep());
  m.ratio = ratio;
  return m;
}

double SerialDropoutMask::factor(int64_t k) const {
  if (ratio == 0.0)
    return 1.0;
  return mask::uniform(key, layout.globalIndex(k)) >= ratio ? 1.0 / (1.0 - ratio) : 0.0;
}

LogicalResult kernels::eval(DropoutOp op, Operands in, Results out) {
  const HostTensor &x = *in[0];
  HostTensor y(op.getOutput().getType()), keeps(op.getMask().getType());
  FailureOr<SerialDropoutMask> m =
      serialDropoutMask(op, op.getInput().getType().getShape(), op.getRatio().convertToDouble(),
                        op.getSeed(), op.getBatchSplit(), op.getTpSplit());
  if (failed(m))
    return failure();
  for (int64_t k = 0; k < x.size(); ++k) {
    const double f = m->factor(k);
    keeps.i()[k] = f != 0.0;
    y.setFromDouble(k, f != 0.0 ? x.f()[k] * f : 0.0);
  }
  out.push_back(std::move(y));
  out.push_back(std::move(keeps));
  return success();
}

/// The expert of row s, checked against [0, experts); `what` names the op.
/// With `first` (the op's first expert), ids are global: a row routed
/// outside [first, first + experts) gives -1 (another rank's expert). A
/// dropped row (id -1, merak.expert_capacity) gives -1.
static FailureOr<int64_t> expertOf(Operation *op, const HostTensor &ids, int64_t s,
                                   int64_t experts, const HostTensor *first) {
  int64_t e = ids.i()[s];
  if (e == -1)
    return -1;
  if (first) {
    e -= first->i()[0];
    return e < 0 || e >= experts ? -1 : e;
  }
  if (e < 0 || e >= experts)
    return op->emitError("expert index ") << e << " of row " << s << " out of range [0, "
                                          << experts << ")";
  return e;
}

LogicalResult kernels::eval(ExpertMatmulOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &w = *in[1], &ids = *in[2];
  const HostTensor *first = op.getFirst() ? in[3] : nullptr;
  const HostTensor *shadow = op.getShadow() ? in[4] : nullptr;
  HostTensor res(op.getType());
  int64_t s = x.getShape()[0], k = x.getShape()[1], o = res.getShape()[1];
  int64_t experts = w.getShape()[0];
  bool t = op.getTransposeWeight();
  for (int64_t r = 0; r < s; ++r) {
    FailureOr<int64_t> e = expertOf(op, ids, r, experts, first);
    if (failed(e))
      return failure();
    const double *we = *e >= 0 ? w.f().data() + *e * o * k : nullptr;
    if (shadow && *e < 0) // a shadow copy's row, or another rank's
      if (int64_t c = ids.i()[r] - in[5]->i()[0]; c >= 0 && c < shadow->getShape()[0])
        we = shadow->f().data() + c * o * k;
    if (!we) { // another rank's expert: a zero row
      for (int64_t j = 0; j < o; ++j)
        res.setFromDouble(r * o + j, 0.0);
      continue;
    }
    for (int64_t j = 0; j < o; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += (t ? we[p * o + j] : we[j * k + p]) * x.f()[r * k + p];
      res.setFromDouble(r * o + j, acc);
    }
  }
  out.push_back(std::move(res));
  return success();
}

LogicalResult kernels::eval(ExpertMatmulGradWeightOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &g = *in[1], &ids = *in[2];
  const HostTensor *first = op.getFirst() ? in[3] : nullptr;
  HostTensor res(op.getType());
  if (op.getAcc()) // acc plus the sums, rounded once
    for (int64_t i = 0; i < res.size(); ++i)
      res.f()[i] = in.back()->getAsDouble(i);
  int64_t s = x.getShape()[0], k = x.getShape()[1], o = g.getShape()[1];
  int64_t experts = res.getShape()[0];
  bool t = op.getTransposeWeight();
  // Accumulate in double, round once at the end.
  for (int64_t r = 0; r < s; ++r) {
    FailureOr<int64_t> e = expertOf(op, ids, r, experts, first);
    if (failed(e))
      return failure();
    if (*e < 0)
      continue;
    double *we = res.f().data() + *e * o * k;
    for (int64_t j = 0; j < o; ++j)
      for (int64_t p = 0; p < k; ++p)
        (t ? we[p * o + j] : we[j * k + p]) += g.f()[r * o + j] * x.f()[r * k + p];
  }
  res.roundToType();
  out.push_back(std::move(res));
  return success();
}

/// placement[experts[s]]: the reference evaluator never rebalances, but it
/// reads any permutation it is given.
LogicalResult kernels::eval(ExpertPlaceOp op, Operands in, Results out) {
  const HostTensor &ids = *in[0], &table = *in[1];
  const int64_t experts = table.getShape()[0];
  HostTensor res(cast<RankedTensorType>(op.getResult().getType()));
  for (int64_t s = 0; s < ids.getShape()[0]; ++s) {
    const int64_t e = ids.i()[s];
    if (e < -1 || e >= experts)
      return op.emitOpError("expert id ")
             << e << " of row " << s << " out of range [0, " << experts << ")";
    res.i()[s] = e < 0 ? -1 : table.i()[e]; // a dropped row stays dropped
  }
  out.push_back(std::move(res));
  return success();
}

/// With one rank no expert has remote rows, so nothing is shadowed: the ids
/// pass through and every slot is unused.
LogicalResult kernels::eval(ExpertShadowPlanOp op, Operands in, Results out) {
  if (op.getParts() != 1)
    return op.emitOpError("splits over ")
           << op.getParts() << " ranks; the reference evaluator runs one";
  const HostTensor &ids = *in[0];
  for (int64_t s = 0; s < ids.getShape()[0]; ++s)
    if (int64_t e = ids.i()[s]; e < -1 || e >= static_cast<int64_t>(op.getExpertsPerRank()))
      return op.emitOpError("expert id ")
             << e << " of row " << s << " out of range [0, " << op.getExpertsPerRank() << ")";
  HostTensor slots(cast<RankedTensorType>(op.getSlots().getType()));
  std::fill(slots.i().begin(), slots.i().end(), -1);
  out.push_back(ids);
  out.push_back(std::move(slots));
  return success();
}

/// Each expert keeps its `capacity` rows of the highest probability (ties:
/// the lower row) or its first ones; the others become -1.
LogicalResult kernels::eval(ExpertCapacityOp op, Operands in, Results out) {
  const HostTensor &ids = *in[0], &probs = *in[1];
  const int64_t rows = ids.getShape()[0], experts = op.getNumExperts();
  const bool byProbs = op.getPolicy() == "probs";
  std::vector<std::vector<int64_t>> byExpert(static_cast<size_t>(experts));
  for (int64_t s = 0; s < rows; ++s) {
    const int64_t e = ids.i()[s];
    if (e < 0 || e >= experts)
      return op.emitOpError("expert id ")
             << e << " of row " << s << " out of range [0, " << experts << ")";
    byExpert[e].push_back(s);
  }
  HostTensor res(cast<RankedTensorType>(op.getResult().getType()));
  std::fill(res.i().begin(), res.i().end(), -1);
  for (int64_t e = 0; e < experts; ++e) {
    std::vector<int64_t> &r = byExpert[e];
    if (byProbs)
      std::stable_sort(r.begin(), r.end(),
                       [&](int64_t a, int64_t b) { return probs.f()[a] > probs.f()[b]; });
    for (size_t j = 0; j < r.size() && (int64_t)j < (int64_t)op.getCapacity(); ++j)
      res.i()[r[j]] = e;
  }
  out.push_back(std::move(res));
  return success();
}
