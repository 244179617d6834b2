//===- EvalBackward.cpp - fused backward ops' reference kernels -----------===//
//
// gelu_grad, softmax_grad / log_softmax_grad, layer_norm_grad and
// cross_entropy_grad: the math of the VJP rules they replace, computed in
// double with one rounding to the element type at the end.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;

namespace {
/// outer x dim x inner split of a shape at one axis.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
  AxisSplit(ArrayRef<int64_t> shape, int64_t axis) {
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
      (d < axis ? outer : d == axis ? dim : inner) *= shape[d];
  }
  int64_t at(int64_t o, int64_t j, int64_t k) const { return (o * dim + j) * inner + k; }
};
} // namespace

/// d/dx gelu(x), exact (erf) or tanh form.
static double geluDerivative(double x, bool tanhApprox) {
  if (tanhApprox) {
    const double c = std::sqrt(2.0 / M_PI), a = 0.044715;
    double t = std::tanh(c * (x + a * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * a * x * x);
  }
  double cdf = 0.5 * (1.0 + std::erf(x * M_SQRT1_2));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
  return cdf + x * pdf;
}

LogicalResult kernels::eval(GeluGradOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &g = *in[1];
  HostTensor r(op.getType());
  bool tanhApprox = op.getApproximateTanh();
  for (int64_t k = 0; k < x.size(); ++k)
    r.setFromDouble(k, g.f()[k] * geluDerivative(x.f()[k], tanhApprox));
  out.push_back(std::move(r));
  return success();
}

/// softmax_grad, or log_softmax_grad with `log`.
static LogicalResult evalSoftmaxGrad(Operation *op, int64_t axis, bool log,
                                     Operands in, Results out) {
  const HostTensor &y = *in[0], &g = *in[1];
  HostTensor r(resultType(op));
  AxisSplit v(y.getShape(), axis);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      // softmax: sum(g * y); log_softmax: sum(g).
      double s = 0;
      for (int64_t j = 0; j < v.dim; ++j)
        s += g.f()[v.at(o, j, k)] * (log ? 1.0 : y.f()[v.at(o, j, k)]);
      for (int64_t j = 0; j < v.dim; ++j) {
        int64_t at = v.at(o, j, k);
        double yv = y.f()[at], gv = g.f()[at];
        r.setFromDouble(at, log ? gv - std::exp(yv) * s : yv * (gv - s));
      }
    }
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(SoftmaxGradOp op, Operands in, Results out) {
  return evalSoftmaxGrad(op, op.getAxis(), /*log=*/false, in, out);
}

LogicalResult kernels::eval(LogSoftmaxGradOp op, Operands in, Results out) {
  return evalSoftmaxGrad(op, op.getAxis(), /*log=*/true, in, out);
}

LogicalResult kernels::eval(LayerNormGradOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &g = *in[1];
  const HostTensor *scale = op.getScale() ? in[2] : nullptr;
  bool rms = op.getRms();
  double eps = op.getEpsilon().convertToDouble();
  int64_t axis = op.getAxis();
  HostTensor dx(op.getInputGrad().getType()), xhat(op.getNormalized().getType());
  ArrayRef<int64_t> normShape = x.getShape().drop_front(axis);
  int64_t outer = 1, n = 1;
  for (int64_t d = 0; d < x.getRank(); ++d)
    (d < axis ? outer : n) *= x.getShape()[d];
  std::vector<double> xh(n), gs(n);
  for (int64_t o = 0; o < outer; ++o) {
    const double *xr = x.f().data() + o * n, *gr = g.f().data() + o * n;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < n; ++j)
        mean += xr[j];
      mean /= n;
    }
    for (int64_t j = 0; j < n; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= n;
    double inv = 1.0 / std::sqrt(var + eps);
    double meanG = 0, meanGX = 0;
    for (int64_t j = 0; j < n; ++j) {
      xh[j] = (xr[j] - mean) * inv;
      gs[j] = gr[j] * featureValue(scale, normShape, j, 1.0);
      meanG += gs[j];
      meanGX += gs[j] * xh[j];
    }
    meanG /= n;
    meanGX /= n;
    for (int64_t j = 0; j < n; ++j) {
      double inner = gs[j] - xh[j] * meanGX - (rms ? 0.0 : meanG);
      dx.setFromDouble(o * n + j, inv * inner);
      xhat.setFromDouble(o * n + j, xh[j]);
    }
  }
  out.push_back(std::move(dx));
  out.push_back(std::move(xhat));
  return success();
}

LogicalResult kernels::eval(CrossEntropyGradOp op, Operands in,
                                           Results out) {
  const HostTensor &logits = *in[0], &labels = *in[1], &g = *in[2];
  AxisSplit v(logits.getShape(), op.getAxis());
  std::optional<int64_t> ignore;
  if (op.getIgnoreIndex())
    ignore = *op.getIgnoreIndex();
  int64_t counted = 0;
  // Padding classes (at >= `classes`) are left out: zero gradient.
  const int64_t dim = std::min<int64_t>(v.dim, op.getClasses().value_or(v.dim));
  for (int64_t li = 0; li < labels.size(); ++li) {
    int64_t label = labels.i()[li];
    if (ignore && label == *ignore)
      continue;
    if (label < 0 || label >= dim)
      return op.emitError("label ") << label << " out of range [0, " << dim << ")";
    ++counted;
  }
  StringRef red = op.getReduction();
  HostTensor r(op.getType());
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      int64_t li = o * v.inner + k, label = labels.i()[li];
      if (ignore && label == *ignore)
        continue; // zeros
      double w = red == "none" ? g.f()[li] : red == "sum" ? g.f()[0] : g.f()[0] / counted;
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < dim; ++j)
        m = std::max(m, logits.f()[v.at(o, j, k)]);
      for (int64_t j = 0; j < dim; ++j)
        s += std::exp(logits.f()[v.at(o, j, k)] - m);
      for (int64_t j = 0; j < dim; ++j) {
        double p = std::exp(logits.f()[v.at(o, j, k)] - m) / s;
        r.setFromDouble(v.at(o, j, k), (p - (j == label ? 1.0 : 0.0)) * w);
      }
    }
  out.push_back(std::move(r));
  return success();
}
