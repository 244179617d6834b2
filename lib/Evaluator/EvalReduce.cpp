//===- EvalReduce.cpp - reduction and normalisation reference kernels -----===//
#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;

namespace {
/// Splits a shape at one axis into outer x dim x inner.
struct AxisView {
  int64_t outer = 1, dim = 1, inner = 1;
  AxisView(ArrayRef<int64_t> shape, int64_t axis) {
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
      if (d < axis)
        outer *= shape[d];
      else if (d == axis)
        dim = shape[d];
      else
        inner *= shape[d];
    }
  }
  int64_t at(int64_t o, int64_t j, int64_t k) const {
    return (o * dim + j) * inner + k;
  }
};
/// Splits a shape at `axis` into outer x (everything from axis on).
struct TailView {
  int64_t outer = 1, inner = 1;
  TailView(ArrayRef<int64_t> shape, int64_t axis) {
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
      (d < axis ? outer : inner) *= shape[d];
  }
};
enum class Red { Sum, Mean, Max, Min, Prod };
} // namespace

static LogicalResult evalReduce(Operation *op, Red kind, Operands in, Results out) {
  ArrayRef<int64_t> axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  const HostTensor &a = *in[0];
  HostTensor r(resultType(op));
  // Output strides over the input's index space: 0 on reduced axes.
  SmallVector<int64_t> keptShape;
  SmallVector<bool> reduced(a.getRank(), false);
  for (int64_t ax : axes)
    reduced[ax] = true;
  for (int64_t d = 0; d < a.getRank(); ++d)
    keptShape.push_back(reduced[d] ? 1 : a.getShape()[d]);
  auto ks = rowMajorStrides(keptShape);
  for (int64_t d = 0; d < a.getRank(); ++d)
    if (reduced[d])
      ks[d] = 0;
  int64_t count = 1;
  for (int64_t ax : axes)
    count *= a.getShape()[ax];
  if (!a.isFloat()) {
    // Integers reduce exactly in int64 (wrapping like the element type).
    // Max/min of nothing is the element type's lowest/highest value.
    unsigned width = a.getElementType().getIntOrFloatBitWidth();
    int64_t lowest = width == 32 ? std::numeric_limits<int32_t>::min()
                                 : std::numeric_limits<int64_t>::min();
    int64_t highest = width == 32 ? std::numeric_limits<int32_t>::max()
                                  : std::numeric_limits<int64_t>::max();
    int64_t iinit = kind == Red::Max   ? lowest
                    : kind == Red::Min ? highest
                    : kind == Red::Prod ? 1
                                        : 0;
    std::vector<int64_t> iacc(r.size(), iinit);
    forEachIndex(a.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
      int64_t o = dot(idx, ks), v = a.i()[lin];
      switch (kind) {
      case Red::Sum:
      case Red::Mean: iacc[o] = (int64_t)((uint64_t)iacc[o] + (uint64_t)v); break;
      case Red::Prod: iacc[o] = (int64_t)((uint64_t)iacc[o] * (uint64_t)v); break;
      case Red::Max: iacc[o] = std::max(iacc[o], v); break;
      case Red::Min: iacc[o] = std::min(iacc[o], v); break;
      }
    });
    for (int64_t k = 0; k < r.size(); ++k)
      r.setFromInt(k, kind == Red::Mean && count ? iacc[k] / count : iacc[k]);
    out.push_back(std::move(r));
    return success();
  }
  double init = kind == Red::Max   ? -INFINITY
                : kind == Red::Min ? INFINITY
                : kind == Red::Prod ? 1.0
                                    : 0.0;
  std::vector<double> acc(r.size(), init);
  std::vector<bool> sawNan(r.size(), false);
  forEachIndex(a.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
    int64_t o = dot(idx, ks);
    double v = a.getAsDouble(lin);
    switch (kind) {
    case Red::Sum:
    case Red::Mean: acc[o] += v; break;
    case Red::Prod: acc[o] *= v; break;
    case Red::Max: acc[o] = std::max(acc[o], v); sawNan[o] = sawNan[o] || std::isnan(v); break;
    case Red::Min: acc[o] = std::min(acc[o], v); sawNan[o] = sawNan[o] || std::isnan(v); break;
    }
  });
  for (int64_t k = 0; k < r.size(); ++k) {
    double v = acc[k];
    if (kind == Red::Mean)
      v /= count;
    if (sawNan[k])
      v = NAN;
    r.setFromDouble(k, v);
  }
  out.push_back(std::move(r));
  return success();
}

#define MERAK_EVAL_REDUCE(OP, KIND)                                            \
  LogicalResult kernels::eval(OP op, Operands in, Results out) {               \
    return evalReduce(op, Red::KIND, in, out);                                 \
  }
MERAK_REDUCE_OP_KINDS(MERAK_EVAL_REDUCE)
#undef MERAK_EVAL_REDUCE

/// argmax (or argmin with `min`) along `axis`.
static LogicalResult evalArg(Operation *op, int64_t axis, bool last, bool min,
                             Operands in, Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(resultType(op));
  AxisView v(a.getShape(), axis);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      int64_t best = 0;
      for (int64_t j = 1; j < v.dim; ++j) {
        int64_t cur = v.at(o, j, k), top = v.at(o, best, k);
        bool greater = a.isFloat() ? (min ? a.f()[cur] < a.f()[top] : a.f()[cur] > a.f()[top])
                                   : (min ? a.i()[cur] < a.i()[top] : a.i()[cur] > a.i()[top]);
        bool equal = a.isFloat() ? a.f()[cur] == a.f()[top] : a.i()[cur] == a.i()[top];
        if (greater || (last && equal))
          best = j;
      }
      r.i()[o * v.inner + k] = best;
    }
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(ArgMaxOp op, Operands in, Results out) {
  return evalArg(op, op.getAxis(), op.getSelectLastIndex(), /*min=*/false, in, out);
}

LogicalResult kernels::eval(ArgMinOp op, Operands in, Results out) {
  return evalArg(op, op.getAxis(), op.getSelectLastIndex(), /*min=*/true, in, out);
}

/// The stable sorting permutation along the axis; NaN ranks above every
/// number (in float tensors; integers are compared as integers).
LogicalResult kernels::eval(ArgSortOp op, Operands in, Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(op.getType());
  AxisView v(a.getShape(), op.getAxis());
  bool desc = op.getDescending();
  std::vector<int64_t> order(v.dim);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      auto before = [&](int64_t i, int64_t j) {
        int64_t ai = v.at(o, i, k), aj = v.at(o, j, k);
        if (!a.isFloat())
          return desc ? a.i()[ai] > a.i()[aj] : a.i()[ai] < a.i()[aj];
        double x = a.f()[ai], y = a.f()[aj];
        if (std::isnan(x) || std::isnan(y))
          return desc ? !std::isnan(y) : !std::isnan(x);
        return desc ? x > y : x < y;
      };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), before);
      for (int64_t j = 0; j < v.dim; ++j)
        r.i()[v.at(o, j, k)] = order[j];
    }
  out.push_back(std::move(r));
  return success();
}

/// softmax, or log_softmax with `log`, along `axis`.
static LogicalResult evalSoftmax(Operation *op, int64_t axis, bool log, Operands in,
                                 Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(resultType(op));
  AxisView v(a.getShape(), axis);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      double m = -INFINITY;
      for (int64_t j = 0; j < v.dim; ++j)
        m = std::max(m, a.f()[v.at(o, j, k)]);
      double s = 0;
      for (int64_t j = 0; j < v.dim; ++j)
        s += std::exp(a.f()[v.at(o, j, k)] - m);
      for (int64_t j = 0; j < v.dim; ++j) {
        double x = a.f()[v.at(o, j, k)] - m;
        r.setFromDouble(v.at(o, j, k), log ? x - std::log(s) : std::exp(x) / s);
      }
    }
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(SoftmaxOp op, Operands in, Results out) {
  return evalSoftmax(op, op.getAxis(), /*log=*/false, in, out);
}

LogicalResult kernels::eval(LogSoftmaxOp op, Operands in, Results out) {
  return evalSoftmax(op, op.getAxis(), /*log=*/true, in, out);
}

LogicalResult kernels::eval(CumSumOp op, Operands in, Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(op.getType());
  AxisView v(a.getShape(), op.getAxis());
  bool excl = op.getExclusive(), rev = op.getReverse();
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      double fs = 0;
      int64_t is = 0;
      for (int64_t step = 0; step < v.dim; ++step) {
        int64_t j = rev ? v.dim - 1 - step : step, at = v.at(o, j, k);
        if (excl) {
          a.isFloat() ? r.setFromDouble(at, fs) : r.setFromInt(at, is);
        }
        if (a.isFloat())
          fs += a.f()[at];
        else
          is = (int64_t)((uint64_t)is + (uint64_t)a.i()[at]);
        if (!excl) {
          a.isFloat() ? r.setFromDouble(at, fs) : r.setFromInt(at, is);
        }
      }
    }
  out.push_back(std::move(r));
  return success();
}

/// merak.linear_scan: h[t] = a[t] * h[t - 1] + b[t] from a zero state, each
/// state rounded to the result's type before the next step reads it.
LogicalResult kernels::eval(LinearScanOp op, Operands in, Results out) {
  const HostTensor &a = *in[0], &b = *in[1];
  HostTensor h(op.getType());
  AxisView v(a.getShape(), op.getAxis());
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k)
      for (int64_t t = 0; t < v.dim; ++t) {
        double prev = t ? h.f()[v.at(o, t - 1, k)] : 0.0;
        int64_t at = v.at(o, t, k);
        h.setFromDouble(at, a.f()[at] * prev + b.f()[at]);
      }
  out.push_back(std::move(h));
  return success();
}

/// merak.linear_scan_grad: g[t] = grad[t] + a[t + 1] * g[t + 1] from the
/// end; input_grad = g, decay_grad[t] = g[t] * h[t - 1].
LogicalResult kernels::eval(LinearScanGradOp op, Operands in, Results out) {
  const HostTensor &a = *in[0], &h = *in[1], &grad = *in[2];
  HostTensor da(op.getDecayGrad().getType()), db(op.getInputGrad().getType());
  AxisView v(a.getShape(), op.getAxis());
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k)
      for (int64_t t = v.dim - 1; t >= 0; --t) {
        int64_t at = v.at(o, t, k);
        double g = grad.f()[at];
        if (t + 1 < v.dim) {
          int64_t next = v.at(o, t + 1, k);
          g += a.f()[next] * db.f()[next];
        }
        db.setFromDouble(at, g);
        da.setFromDouble(at, t ? g * h.f()[v.at(o, t - 1, k)] : 0.0);
      }
  out.push_back(std::move(da));
  out.push_back(std::move(db));
  return success();
}

namespace {
/// The shapes of merak.selective_scan(_grad): u [B, D, T], a [D, N], b and c
/// [B, T, N]; flat indices of each.
struct ScanShape {
  int64_t batch, channels, tokens, states;
  explicit ScanShape(const HostTensor &u, const HostTensor &a)
      : batch(u.getShape()[0]), channels(u.getShape()[1]), tokens(u.getShape()[2]),
        states(a.getShape()[1]) {}
  int64_t row(int64_t b, int64_t d, int64_t t) const { return (b * channels + d) * tokens + t; }
  int64_t state(int64_t d, int64_t n) const { return d * states + n; }
  int64_t token(int64_t b, int64_t t, int64_t n) const { return (b * tokens + t) * states + n; }
};

/// Every state h[t][n] of one (b, d) row (see merak.selective_scan), in
/// double.
std::vector<double> scanStates(const ScanShape &s, const HostTensor &u, const HostTensor &delta,
                               const HostTensor &a, const HostTensor &b, int64_t bi, int64_t d) {
  std::vector<double> h(s.tokens * s.states);
  for (int64_t t = 0; t < s.tokens; ++t) {
    double dt = delta.f()[s.row(bi, d, t)], x = u.f()[s.row(bi, d, t)];
    for (int64_t n = 0; n < s.states; ++n) {
      double prev = t ? h[(t - 1) * s.states + n] : 0.0;
      double decay = std::exp(dt * a.f()[s.state(d, n)]);
      h[t * s.states + n] = decay * prev + dt * b.f()[s.token(bi, t, n)] * x;
    }
  }
  return h;
}
} // namespace

/// merak.selective_scan: the states of each (batch, channel) row read out
/// against c.
LogicalResult kernels::eval(SelectiveScanOp op, Operands in, Results out) {
  const HostTensor &u = *in[0], &delta = *in[1], &a = *in[2], &b = *in[3], &c = *in[4];
  ScanShape s(u, a);
  HostTensor y(op.getType());
  for (int64_t bi = 0; bi < s.batch; ++bi)
    for (int64_t d = 0; d < s.channels; ++d) {
      std::vector<double> h = scanStates(s, u, delta, a, b, bi, d);
      for (int64_t t = 0; t < s.tokens; ++t) {
        double acc = 0;
        for (int64_t n = 0; n < s.states; ++n)
          acc += h[t * s.states + n] * c.f()[s.token(bi, t, n)];
        y.setFromDouble(s.row(bi, d, t), acc);
      }
    }
  out.push_back(std::move(y));
  return success();
}

/// merak.selective_scan_grad: per row the states recomputed, then the
/// reverse recurrence g[t] = grad[t] c[t] + exp(delta[t + 1] a) g[t + 1];
/// the sums over rows accumulate in double.
LogicalResult kernels::eval(SelectiveScanGradOp op, Operands in, Results out) {
  const HostTensor &u = *in[0], &delta = *in[1], &a = *in[2], &b = *in[3], &c = *in[4],
                   &grad = *in[5];
  ScanShape s(u, a);
  std::vector<double> du(u.size()), ddelta(u.size()), da(a.size()), db(b.size()), dc(b.size());
  for (int64_t bi = 0; bi < s.batch; ++bi)
    for (int64_t d = 0; d < s.channels; ++d) {
      std::vector<double> h = scanStates(s, u, delta, a, b, bi, d), carry(s.states, 0.0);
      for (int64_t t = s.tokens - 1; t >= 0; --t) {
        int64_t r = s.row(bi, d, t);
        double dt = delta.f()[r], x = u.f()[r], gy = grad.f()[r];
        for (int64_t n = 0; n < s.states; ++n) {
          int64_t k = s.token(bi, t, n);
          double an = a.f()[s.state(d, n)], decay = std::exp(dt * an);
          double g = gy * c.f()[k] + carry[n];
          double prev = t ? h[(t - 1) * s.states + n] : 0.0;
          double dDecay = g * prev;
          dc[k] += gy * h[t * s.states + n];
          da[s.state(d, n)] += dDecay * decay * dt;
          ddelta[r] += dDecay * decay * an + g * b.f()[k] * x;
          du[r] += g * dt * b.f()[k];
          db[k] += g * dt * x;
          carry[n] = decay * g;
        }
      }
    }
  std::vector<double> *grads[] = {&du, &ddelta, &da, &db, &dc};
  for (auto [value, type] : llvm::zip_equal(grads, op->getResultTypes())) {
    HostTensor r(cast<RankedTensorType>(type));
    for (auto [i, v] : llvm::enumerate(*value))
      r.setFromDouble(i, v);
    out.push_back(std::move(r));
  }
  return success();
}

double kernels::featureValue(const HostTensor *t, ArrayRef<int64_t> normShape,
                           int64_t j, double dflt) {
  if (!t)
    return dflt;
  if (t->size() == 1)
    return t->f()[0];
  if (t->getShape() == normShape)
    return t->f()[j];
  // General broadcast: map j to t's index.
  auto ns = rowMajorStrides(normShape);
  auto ts = broadcastStrides(t->getShape(), normShape);
  int64_t o = 0, rem = j;
  for (size_t d = 0; d < ns.size(); ++d) {
    o += (rem / ns[d]) * ts[d];
    rem %= ns[d];
  }
  return t->f()[o];
}

static LogicalResult normalise(Operation *op, const HostTensor &a,
                               const HostTensor *scale, const HostTensor *bias,
                               int64_t axis, double eps, bool rms, Results out) {
  HostTensor r(resultType(op));
  TailView v(a.getShape(), axis);
  ArrayRef<int64_t> normShape = a.getShape().drop_front(axis);
  for (int64_t o = 0; o < v.outer; ++o) {
    const double *x = a.f().data() + o * v.inner;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < v.inner; ++j)
        mean += x[j];
      mean /= v.inner;
    }
    for (int64_t j = 0; j < v.inner; ++j)
      var += (x[j] - mean) * (x[j] - mean);
    var /= v.inner;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < v.inner; ++j) {
      double y = (x[j] - mean) * inv * featureValue(scale, normShape, j, 1.0) +
                 featureValue(bias, normShape, j, 0.0);
      r.setFromDouble(o * v.inner + j, y);
    }
  }
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(LayerNormOp op, Operands in, Results out) {
  const HostTensor *scale = op.getScale() ? in[1] : nullptr;
  const HostTensor *bias = op.getBias() ? in[op.getScale() ? 2 : 1] : nullptr;
  return normalise(op, *in[0], scale, bias, op.getAxis(),
                   op.getEpsilon().convertToDouble(), false, out);
}

LogicalResult kernels::eval(RmsNormOp op, Operands in, Results out) {
  const HostTensor *scale = op.getScale() ? in[1] : nullptr;
  return normalise(op, *in[0], scale, nullptr, op.getAxis(),
                   op.getEpsilon().convertToDouble(), true, out);
}

/// Channel c's mean and population variance over the other dimensions.
static std::pair<double, double> channelMoments(const HostTensor &x, const AxisView &v, int64_t c) {
  double sum = 0, sq = 0;
  int64_t n = v.outer * v.inner;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k)
      sum += x.f()[v.at(o, c, k)];
  double m = sum / n;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      double d = x.f()[v.at(o, c, k)] - m;
      sq += d * d;
    }
  return {m, sq / n};
}

LogicalResult kernels::eval(BatchNormOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &scale = *in[1], &bias = *in[2], &mean = *in[3],
                   &var = *in[4];
  HostTensor r(op.getType());
  AxisView v(x.getShape(), 1);
  double eps = op.getEpsilon().convertToDouble();
  for (int64_t c = 0; c < v.dim; ++c) {
    double m = mean.f()[c], s2 = var.f()[c];
    if (op.getTraining())
      std::tie(m, s2) = channelMoments(x, v, c);
    double inv = 1.0 / std::sqrt(s2 + eps);
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t k = 0; k < v.inner; ++k) {
        int64_t at = v.at(o, c, k);
        r.setFromDouble(at, (x.f()[at] - m) * inv * scale.f()[c] + bias.f()[c]);
      }
  }
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(SumSquaresOp op, Operands in, Results out) {
  const HostTensor &x = *in[0];
  double sum = 0;
  for (int64_t i = 0; i < x.size(); ++i)
    sum += x.f()[i] * x.f()[i];
  HostTensor r(op.getType());
  r.setFromDouble(0, sum);
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(BatchNormGradOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &g = *in[1], &scale = *in[2];
  HostTensor dx(op.getInputGrad().getType()), dscale(op.getScaleGrad().getType()),
      dbias(op.getBiasGrad().getType());
  AxisView v(x.getShape(), 1);
  double eps = op.getEpsilon().convertToDouble();
  double n = static_cast<double>(v.outer * v.inner);
  for (int64_t c = 0; c < v.dim; ++c) {
    auto [m, s2] = channelMoments(x, v, c);
    double rstd = 1.0 / std::sqrt(s2 + eps), sumG = 0, sumGX = 0;
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t k = 0; k < v.inner; ++k) {
        int64_t at = v.at(o, c, k);
        sumG += g.f()[at];
        sumGX += g.f()[at] * (x.f()[at] - m) * rstd;
      }
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t k = 0; k < v.inner; ++k) {
        int64_t at = v.at(o, c, k);
        double xhat = (x.f()[at] - m) * rstd;
        dx.setFromDouble(at, scale.f()[c] * rstd * (g.f()[at] - sumG / n - xhat * sumGX / n));
      }
    dscale.setFromDouble(c, sumGX);
    dbias.setFromDouble(c, sumG);
  }
  out.push_back(std::move(dx));
  out.push_back(std::move(dscale));
  out.push_back(std::move(dbias));
  return success();
}

LogicalResult kernels::eval(BatchNormStatsOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &mean = *in[1], &var = *in[2];
  HostTensor newMean(op.getNewMean().getType()), newVar(op.getNewVar().getType());
  AxisView v(x.getShape(), 1);
  double momentum = op.getMomentum().convertToDouble();
  double n = static_cast<double>(v.outer * v.inner);
  for (int64_t c = 0; c < v.dim; ++c) {
    auto [m, s2] = channelMoments(x, v, c);
    newMean.setFromDouble(c, momentum * mean.f()[c] + (1 - momentum) * m);
    newVar.setFromDouble(c, momentum * var.f()[c] + (1 - momentum) * s2 * n / (n - 1));
  }
  out.push_back(std::move(newMean));
  out.push_back(std::move(newVar));
  return success();
}

LogicalResult kernels::eval(CrossEntropyOp op, Operands in,
                                       Results out) {
  const HostTensor &logits = *in[0], &labels = *in[1];
  AxisView v(logits.getShape(), op.getAxis());
  std::optional<int64_t> ignore;
  if (op.getIgnoreIndex())
    ignore = *op.getIgnoreIndex();
  std::vector<double> losses(labels.size(), 0.0);
  int64_t counted = 0;
  // Padding classes (at >= `classes`) are left out.
  const int64_t dim = std::min<int64_t>(v.dim, op.getClasses().value_or(v.dim));
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      int64_t li = o * v.inner + k;
      int64_t label = labels.i()[li];
      if (ignore && label == *ignore)
        continue;
      if (label < 0 || label >= dim)
        return op.emitError("label ") << label << " out of range [0, " << dim << ")";
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < dim; ++j)
        m = std::max(m, logits.f()[v.at(o, j, k)]);
      for (int64_t j = 0; j < dim; ++j)
        s += std::exp(logits.f()[v.at(o, j, k)] - m);
      losses[li] = m + std::log(s) - logits.f()[v.at(o, label, k)];
      ++counted;
    }
  HostTensor r(op.getType());
  StringRef red = op.getReduction();
  if (red == "none") {
    for (size_t k = 0; k < losses.size(); ++k)
      r.setFromDouble(k, losses[k]);
  } else {
    double total = 0;
    for (double l : losses)
      total += l;
    r.setFromDouble(0, red == "mean" ? total / counted : total);
  }
  out.push_back(std::move(r));
  return success();
}
