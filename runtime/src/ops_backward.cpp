//===- ops_backward.cpp - fused backward kernels ----------------------------===//
//
// See merak_rt/ops.h: gelu_grad, softmax_grad / log_softmax_grad,
// layer_norm_grad and cross_entropy_grad, with the semantics of
// lib/Evaluator/EvalBackward.cpp. F32 with the axis last uses the row
// kernels of kernels.h where one fits (exact GELU, softmax, log-softmax,
// mean/sum cross entropy with i64 labels); everything else computes in
// double per element with double sums, rows in parallel.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/kernels.h"
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace merak::rt::cpu {
using namespace detail;

// --- GELU ---------------------------------------------------------------------

namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

inline double geluDerivative(double x, bool tanhApprox) {
  if (tanhApprox) {
    const double t = std::tanh(kSqrt2OverPi * (x + kGeluA * x * x * x));
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluA * x * x);
  }
  return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) +
         x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}
} // namespace

void geluGrad(DT t, const void *x, const void *dy, void *dx, int64_t n,
              bool tanhApprox) {
  if (t == DT::BF16) { // widen, compute in float32, round once
    float *fx = scratch<float, 24>(static_cast<size_t>(n));
    float *fg = scratch<float, 25>(static_cast<size_t>(n));
    cast(DT::BF16, x, DT::F32, fx, n);
    cast(DT::BF16, dy, DT::F32, fg, n);
    geluGrad(DT::F32, fx, fg, fg, n, tanhApprox);
    cast(DT::F32, fg, DT::BF16, dx, n);
    return;
  }
  if (t == DT::F32 && !tanhApprox) {
    geluBackward(static_cast<const float *>(x), static_cast<const float *>(dy),
                 static_cast<float *>(dx), n);
    return;
  }
  dispatchFloat(t, "gelu_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    const T *pg = static_cast<const T *>(dy);
    T *pd = static_cast<T *>(dx);
    parallelFor(n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        pd[i] = static_cast<T>(static_cast<double>(pg[i]) *
                               geluDerivative(static_cast<double>(px[i]), tanhApprox));
    });
  });
}

// --- softmax / log-softmax ----------------------------------------------------

void softmaxGrad(bool isLog, DT t, const void *y, const void *dy, const Dims &d,
                 int64_t axis, void *dx) {
  axis = normAxis(axis, d.rank);
  AxisSplit s(d, axis);
  if (s.outer * s.dim * s.inner == 0)
    return;
  if (t == DT::F32 && s.inner == 1) {
    const float *py = static_cast<const float *>(y);
    const float *pg = static_cast<const float *>(dy);
    float *pd = static_cast<float *>(dx);
    if (isLog)
      logSoftmaxBackward(py, pg, pd, s.outer, s.dim);
    else
      softmaxBackward(py, pg, pd, s.outer, s.dim);
    return;
  }
  dispatchFloat(t, "softmax_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *py = static_cast<const T *>(y);
    const T *pg = static_cast<const T *>(dy);
    T *pd = static_cast<T *>(dx);
    const int64_t dim = s.dim, inner = s.inner;
    // Per outer slice [dim, inner]: one sum per inner position, walked row
    // by row (contiguous); for inner == 1 a plain row.
    parallelFor(s.outer, dim * inner, [&](int64_t b, int64_t e) {
      double *sum = scratch<double, 30>(static_cast<size_t>(inner));
      for (int64_t o = b; o < e; ++o) {
        const T *yo = py + o * dim * inner;
        const T *go = pg + o * dim * inner;
        T *xo = pd + o * dim * inner;
        for (int64_t k = 0; k < inner; ++k)
          sum[k] = 0.0;
        for (int64_t j = 0; j < dim; ++j)
          for (int64_t k = 0; k < inner; ++k) {
            const double g = static_cast<double>(go[j * inner + k]);
            sum[k] += isLog ? g : g * static_cast<double>(yo[j * inner + k]);
          }
        for (int64_t j = 0; j < dim; ++j)
          for (int64_t k = 0; k < inner; ++k) {
            const double yv = static_cast<double>(yo[j * inner + k]);
            const double g = static_cast<double>(go[j * inner + k]);
            xo[j * inner + k] =
                static_cast<T>(isLog ? g - std::exp(yv) * sum[k] : yv * (g - sum[k]));
          }
      }
    });
  });
}

// --- layer norm / RMS norm ----------------------------------------------------

namespace {

/// The scale over the normalised shape (dims [axis, rank) of dx, `inner`
/// elements): the pointer itself when it has `inner` elements (step 1) or
/// one (step 0), else a broadcast copy in scratch.
template <class T>
const T *expandScale(const void *p, const Dims &dp, const Dims &dx, int64_t axis,
                     int64_t inner, int64_t &step) {
  step = 0;
  if (!p)
    return nullptr;
  const T *t = static_cast<const T *>(p);
  const int64_t n = dp.numel();
  if (n == inner || n == 1) {
    step = n == 1 ? 0 : 1;
    return t;
  }
  Dims norm;
  norm.rank = dx.rank - static_cast<int32_t>(axis);
  for (int32_t d = 0; d < norm.rank; ++d)
    norm.d[d] = dx.d[axis + d];
  T *buf = scratch<T, 31>(static_cast<size_t>(inner));
  const Dims *ins[1] = {&dp};
  Plan<1> plan = broadcastPlan<1>(norm, ins);
  forRows(plan, [&](int64_t o, const int64_t *off, int64_t len) {
    const int64_t st = plan.innerStride(0);
    for (int64_t i = 0; i < len; ++i)
      buf[o + i] = t[off[0] + i * st];
  });
  step = 1;
  return buf;
}

template <class T>
void normGrad(const T *x, const T *dy, const Dims &dx, int64_t axis,
              const void *scale, const Dims &ds, double eps, bool rms, T *dxOut,
              T *xhat) {
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < dx.rank; ++d)
    (d < axis ? outer : inner) *= dx.d[d];
  if (outer * inner == 0 || (!dxOut && !xhat))
    return;
  int64_t sStep;
  const T *ps = expandScale<T>(scale, ds, dx, axis, inner, sStep);
  const double invN = 1.0 / static_cast<double>(inner);
  parallelFor(outer, 4 * inner, [&](int64_t b, int64_t e) {
    for (int64_t o0 = b; o0 < e; o0 += kRowLanes) {
      const int64_t lanes = std::min(kRowLanes, e - o0);
      const T *x0 = x + o0 * inner, *g0 = dy + o0 * inner;
      double mean[kRowLanes] = {}, var[kRowLanes], rstd[kRowLanes], sg[kRowLanes],
          sgx[kRowLanes];
      auto at = [&](int64_t r, int64_t j) { return static_cast<double>(x0[r * inner + j]); };
      auto gradAt = [&](int64_t r, int64_t j) {
        const double g = static_cast<double>(g0[r * inner + j]);
        return ps ? g * static_cast<double>(ps[j * sStep]) : g;
      };
      auto xhatAt = [&](int64_t r, int64_t j) { return (at(r, j) - mean[r]) * rstd[r]; };
      if (!rms) {
        laneSums(lanes, inner, mean, at);
        for (int64_t r = 0; r < lanes; ++r)
          mean[r] *= invN;
      }
      laneSums(lanes, inner, var, [&](int64_t r, int64_t j) {
        const double c = at(r, j) - mean[r];
        return c * c;
      });
      for (int64_t r = 0; r < lanes; ++r)
        rstd[r] = 1.0 / std::sqrt(var[r] * invN + eps);
      laneSums(lanes, inner, sg, gradAt);
      laneSums(lanes, inner, sgx, [&](int64_t r, int64_t j) { return gradAt(r, j) * xhatAt(r, j); });
      for (int64_t r = 0; r < lanes; ++r) {
        const int64_t o = o0 + r;
        const double mg = rms ? 0.0 : sg[r] * invN, mgx = sgx[r] * invN;
        T *xr = xhat ? xhat + o * inner : nullptr, *dr = dxOut ? dxOut + o * inner : nullptr;
        for (int64_t j = 0; j < inner; ++j) {
          const double xh = xhatAt(r, j);
          if (xr)
            xr[j] = static_cast<T>(xh);
          if (dr)
            dr[j] = static_cast<T>(rstd[r] * (gradAt(r, j) - mg - xh * mgx));
        }
      }
    }
  });
}

} // namespace

void layerNormGrad(DT t, const void *x, const void *dy, const Dims &dx,
                   int64_t axis, const void *scale, const Dims &ds, double eps,
                   bool rms, void *dxOut, void *xhat) {
  axis = normAxis(axis, dx.rank);
  dispatchFloat(t, "layer_norm_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    normGrad<T>(static_cast<const T *>(x), static_cast<const T *>(dy), dx, axis, scale,
                ds, eps, rms, static_cast<T *>(dxOut), static_cast<T *>(xhat));
  });
}

// --- cross entropy ------------------------------------------------------------

namespace {
/// One position's gradient along the class axis (stride st): (softmax - onehot)
/// * w, the softmax from the max and the sum of exp in double.
template <class T>
inline void rowGrad(const T *p, T *d, int64_t dim, int64_t st, int64_t label,
                    double w) {
  double m = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < dim; ++j)
    m = std::max(m, static_cast<double>(p[j * st]));
  for (int64_t j = 0; j < dim; ++j)
    sum += std::exp(static_cast<double>(p[j * st]) - m);
  const double inv = 1.0 / sum;
  for (int64_t j = 0; j < dim; ++j) {
    const double prob = std::exp(static_cast<double>(p[j * st]) - m) * inv;
    d[j * st] = static_cast<T>((prob - (j == label ? 1.0 : 0.0)) * w);
  }
}
} // namespace

void crossEntropyGrad(DT t, const void *logits, const Dims &dl, int64_t axis,
                      DT labT, const void *labels, const void *g,
                      int32_t reduction, bool hasIgnore, int64_t ignoreIndex,
                      void *dlogits) {
  axis = normAxis(axis, dl.rank);
  AxisSplit s(dl, axis);
  const int64_t nLab = s.outer * s.inner;
  dispatchFloat(t, "cross_entropy_grad: float logits only", [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    dispatchIndex(labT, "cross_entropy_grad: labels must be i64 or i32", [&](auto itag) {
      using I = typename decltype(itag)::type;
      const I *lab = static_cast<const I *>(labels);
      const T *px = static_cast<const T *>(logits);
      const T *pg = static_cast<const T *>(g);
      T *pd = static_cast<T *>(dlogits);
      int64_t counted = 0;
      for (int64_t i = 0; i < nLab; ++i) {
        const int64_t l = lab[i];
        if (hasIgnore && l == ignoreIndex)
          continue;
        if (l < 0 || l >= s.dim) {
          std::string msg = "cross_entropy_grad: label " + std::to_string(l) +
                            " out of range [0, " + std::to_string(s.dim) + ")";
          fatal(msg.c_str());
        }
        ++counted;
      }
      const double scale = reduction == 0   ? 0.0
                           : reduction == 1 ? static_cast<double>(pg[0]) / counted
                                            : static_cast<double>(pg[0]);
      if constexpr (std::is_same_v<T, float> && std::is_same_v<I, int64_t>) {
        if (s.inner == 1 && reduction != 0) {
          // Labels are in range, so an ignoreIndex outside [0, dim) never
          // matches when there is none.
          crossEntropyBackward(px, lab, pd, s.outer, s.dim, static_cast<float>(scale),
                               hasIgnore ? ignoreIndex : -1);
          return;
        }
      }
      parallelFor(nLab, 3 * s.dim, [&](int64_t b, int64_t e) {
        for (int64_t li = b; li < e; ++li) {
          const int64_t l = lab[li];
          const int64_t at = s.laneStart(li);
          if (hasIgnore && l == ignoreIndex) {
            for (int64_t j = 0; j < s.dim; ++j)
              pd[at + j * s.inner] = T(0);
            continue;
          }
          const double w = reduction == 0 ? static_cast<double>(pg[li]) : scale;
          if (s.inner == 1)
            rowGrad(px + at, pd + at, s.dim, 1, l, w);
          else
            rowGrad(px + at, pd + at, s.dim, s.inner, l, w);
        }
      });
    });
  });
}

} // namespace merak::rt::cpu
