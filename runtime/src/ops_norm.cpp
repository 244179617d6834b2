//===- ops_norm.cpp - softmax, layer norm, RMS norm, batch norm ------------===//
//
// See merak_rt/ops.h; semantics of lib/Evaluator/EvalReduce.cpp. F32
// softmax/log-softmax along the last axis use the row kernels of kernels.h
// (the vectorised float exp of ops_util.h, sums in double in a fixed order,
// rows in parallel: within an ulp or two of the evaluator's double);
// everything else computes in double exactly as the evaluator, rows in
// parallel.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/kernels.h"
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <algorithm>
#include <cmath>

namespace merak::rt::cpu {
using namespace detail;

// --- softmax ------------------------------------------------------------------

void softmax(bool isLog, DT t, const void *x, const Dims &dx, int64_t axis,
             void *y) {
  axis = normAxis(axis, dx.rank);
  AxisSplit s(dx, axis);
  if (s.outer * s.dim * s.inner == 0)
    return;
  if (t == DT::F32 && s.inner == 1) {
    const float *px = static_cast<const float *>(x);
    float *py = static_cast<float *>(y);
    if (isLog)
      logSoftmaxForward(px, py, s.outer, s.dim);
    else
      softmaxForward(px, py, s.outer, s.dim);
    return;
  }
  dispatchFloat(t, "softmax: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    T *py = static_cast<T *>(y);
    const int64_t dim = s.dim, inner = s.inner;
    if (inner == 1) {
      parallelFor(s.outer, dim, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T *xr = px + o * dim;
          T *yr = py + o * dim;
          double m = -INFINITY, sum = 0.0;
          for (int64_t j = 0; j < dim; ++j)
            m = std::max(m, static_cast<double>(xr[j]));
          for (int64_t j = 0; j < dim; ++j)
            sum += std::exp(static_cast<double>(xr[j]) - m);
          const double ls = std::log(sum);
          for (int64_t j = 0; j < dim; ++j) {
            const double v = static_cast<double>(xr[j]) - m;
            yr[j] = static_cast<T>(isLog ? v - ls : std::exp(v) / sum);
          }
        }
      });
      return;
    }
    // Axis not last: per outer slice [dim, inner], running statistics per
    // inner position, rows walked contiguously.
    parallelFor(s.outer, dim * inner, [&](int64_t b, int64_t e) {
      double *m = scratch<double, 10>(static_cast<size_t>(2 * inner));
      double *sum = m + inner;
      for (int64_t o = b; o < e; ++o) {
        const T *xo = px + o * dim * inner;
        T *yo = py + o * dim * inner;
        for (int64_t k = 0; k < inner; ++k) {
          m[k] = -INFINITY;
          sum[k] = 0.0;
        }
        for (int64_t j = 0; j < dim; ++j)
          for (int64_t k = 0; k < inner; ++k)
            m[k] = std::max(m[k], static_cast<double>(xo[j * inner + k]));
        for (int64_t j = 0; j < dim; ++j)
          for (int64_t k = 0; k < inner; ++k)
            sum[k] += std::exp(static_cast<double>(xo[j * inner + k]) - m[k]);
        for (int64_t j = 0; j < dim; ++j)
          for (int64_t k = 0; k < inner; ++k) {
            const double v = static_cast<double>(xo[j * inner + k]) - m[k];
            yo[j * inner + k] = static_cast<T>(
                isLog ? v - std::log(sum[k]) : std::exp(v) / sum[k]);
          }
      }
    });
  });
}

// --- layer norm / RMS norm ----------------------------------------------------

namespace {

/// A per-feature operand over the normalised shape (dims [axis, rank) of
/// dx): a pointer and a step of 1 (full), 0 (one value) or, for a general
/// broadcast, a pointer to an expanded copy in scratch.
template <class T, int Slot>
const T *featureOperand(const void *p, const Dims &dp, const Dims &dx,
                        int64_t axis, int64_t inner, int64_t &step) {
  if (!p) {
    step = 0;
    return nullptr;
  }
  const T *t = static_cast<const T *>(p);
  const int64_t n = dp.numel();
  if (n == inner) { // same layout (a broadcastable shape of equal size)
    step = 1;
    return t;
  }
  if (n == 1) {
    step = 0;
    return t;
  }
  Dims norm;
  norm.rank = dx.rank - static_cast<int32_t>(axis);
  for (int32_t d = 0; d < norm.rank; ++d)
    norm.d[d] = dx.d[axis + d];
  T *buf = scratch<T, Slot>(static_cast<size_t>(inner));
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
void normalise(const T *x, const Dims &dx, int64_t axis, const void *scale,
               const Dims &ds, const void *bias, const Dims &db, double eps,
               bool rms, T *y) {
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < dx.rank; ++d)
    (d < axis ? outer : inner) *= dx.d[d];
  if (outer * inner == 0)
    return;
  int64_t sStep, bStep;
  const T *ps = featureOperand<T, 11>(scale, ds, dx, axis, inner, sStep);
  const T *pb = featureOperand<T, 12>(bias, db, dx, axis, inner, bStep);
  parallelFor(outer, inner, [&](int64_t b, int64_t e) {
    for (int64_t o0 = b; o0 < e; o0 += kRowLanes) {
      const int64_t lanes = std::min(kRowLanes, e - o0);
      const T *x0 = x + o0 * inner;
      auto at = [&](int64_t r, int64_t j) { return static_cast<double>(x0[r * inner + j]); };
      double mean[kRowLanes] = {}, var[kRowLanes];
      if (!rms) {
        laneSums(lanes, inner, mean, at);
        for (int64_t r = 0; r < lanes; ++r)
          mean[r] /= inner;
      }
      laneSums(lanes, inner, var, [&](int64_t r, int64_t j) {
        const double d = at(r, j) - mean[r];
        return d * d;
      });
      for (int64_t r = 0; r < lanes; ++r) {
        const T *xr = x0 + r * inner;
        T *yr = y + (o0 + r) * inner;
        const double inv = 1.0 / std::sqrt(var[r] / inner + eps);
        // As the evaluator: `* scale + bias` with 1 and 0 when absent.
        for (int64_t j = 0; j < inner; ++j) {
          const double sv = ps ? static_cast<double>(ps[j * sStep]) : 1.0;
          const double bv = pb ? static_cast<double>(pb[j * bStep]) : 0.0;
          yr[j] = static_cast<T>((static_cast<double>(xr[j]) - mean[r]) * inv * sv + bv);
        }
      }
    }
  });
}

} // namespace

void layerNorm(DT t, const void *x, const Dims &dx, int64_t axis,
               const void *scale, const Dims &ds, const void *bias,
               const Dims &db, double eps, void *y) {
  axis = normAxis(axis, dx.rank);
  dispatchFloat(t, "layer_norm: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalise<T>(static_cast<const T *>(x), dx, axis, scale, ds, bias, db, eps,
                 false, static_cast<T *>(y));
  });
}

void rmsNorm(DT t, const void *x, const Dims &dx, int64_t axis,
             const void *scale, const Dims &ds, double eps, void *y) {
  axis = normAxis(axis, dx.rank);
  dispatchFloat(t, "rms_norm: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalise<T>(static_cast<const T *>(x), dx, axis, scale, ds, nullptr,
                 Dims{}, eps, true, static_cast<T *>(y));
  });
}

// --- batch norm ---------------------------------------------------------------

/// Channel c's mean and population variance over the n = outer x inner
/// values of an [outer, dim, inner] tensor, in double, two passes.
template <class T>
std::pair<double, double> channelMoments(const T *px, const AxisSplit &s, int64_t c) {
  const int64_t n = s.outer * s.inner;
  double sum = 0.0, sq = 0.0;
  for (int64_t o = 0; o < s.outer; ++o) {
    const T *xr = px + (o * s.dim + c) * s.inner;
    for (int64_t k = 0; k < s.inner; ++k)
      sum += static_cast<double>(xr[k]);
  }
  const double m = sum / n;
  for (int64_t o = 0; o < s.outer; ++o) {
    const T *xr = px + (o * s.dim + c) * s.inner;
    for (int64_t k = 0; k < s.inner; ++k) {
      const double d = static_cast<double>(xr[k]) - m;
      sq += d * d;
    }
  }
  return {m, sq / n};
}

void batchNorm(DT t, const void *x, const Dims &dx, const void *scale,
               const void *bias, const void *mean, const void *var, double eps,
               bool training, void *y) {
  AxisSplit s(dx, 1);
  dispatchFloat(t, "batch_norm: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    const T *sc = static_cast<const T *>(scale);
    const T *bi = static_cast<const T *>(bias);
    const T *mu = static_cast<const T *>(mean);
    const T *va = static_cast<const T *>(var);
    T *py = static_cast<T *>(y);
    const int64_t n = s.outer * s.inner;
    parallelFor(s.dim, n, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        auto [m, s2] = training ? channelMoments(px, s, c)
                                : std::pair<double, double>(static_cast<double>(mu[c]),
                                                            static_cast<double>(va[c]));
        const double inv = 1.0 / std::sqrt(s2 + eps);
        const double g = static_cast<double>(sc[c]),
                     bb = static_cast<double>(bi[c]);
        for (int64_t o = 0; o < s.outer; ++o) {
          const int64_t at = (o * s.dim + c) * s.inner;
          for (int64_t k = 0; k < s.inner; ++k)
            py[at + k] = static_cast<T>(
                (static_cast<double>(px[at + k]) - m) * inv * g + bb);
        }
      }
    });
  });
}

void batchNormGrad(DT t, const void *x, const void *dy, const Dims &dx, const void *scale,
                   double eps, void *dxOut, void *dscale, void *dbias) {
  AxisSplit s(dx, 1);
  const double n = static_cast<double>(s.outer * s.inner);
  dispatchFloat(t, "batch_norm_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    const T *pg = static_cast<const T *>(dy);
    const T *sc = static_cast<const T *>(scale);
    T *pdx = static_cast<T *>(dxOut);
    T *ds = static_cast<T *>(dscale);
    T *db = static_cast<T *>(dbias);
    parallelFor(s.dim, s.outer * s.inner * 4, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        auto [m, v] = channelMoments(px, s, c);
        const double rstd = 1.0 / std::sqrt(v + eps);
        double sumG = 0.0, sumGX = 0.0;
        for (int64_t o = 0; o < s.outer; ++o) {
          const int64_t at = (o * s.dim + c) * s.inner;
          for (int64_t k = 0; k < s.inner; ++k) {
            const double g = static_cast<double>(pg[at + k]);
            sumG += g;
            sumGX += g * (static_cast<double>(px[at + k]) - m);
          }
        }
        sumGX *= rstd; // sum(g * xhat)
        const double f = static_cast<double>(sc[c]) * rstd, meanG = sumG / n, meanGX = sumGX / n;
        for (int64_t o = 0; o < s.outer; ++o) {
          const int64_t at = (o * s.dim + c) * s.inner;
          for (int64_t k = 0; k < s.inner; ++k) {
            const double xhat = (static_cast<double>(px[at + k]) - m) * rstd;
            pdx[at + k] =
                static_cast<T>(f * (static_cast<double>(pg[at + k]) - meanG - xhat * meanGX));
          }
        }
        ds[c] = static_cast<T>(sumGX);
        db[c] = static_cast<T>(sumG);
      }
    });
  });
}

void batchNormStats(DT t, const void *x, const Dims &dx, const void *mean, const void *var,
                    double momentum, void *newMean, void *newVar) {
  AxisSplit s(dx, 1);
  const double n = static_cast<double>(s.outer * s.inner);
  dispatchFloat(t, "batch_norm_stats: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    const T *mu = static_cast<const T *>(mean);
    const T *va = static_cast<const T *>(var);
    T *nm = static_cast<T *>(newMean);
    T *nv = static_cast<T *>(newVar);
    parallelFor(s.dim, s.outer * s.inner, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        auto [m, s2] = channelMoments(px, s, c);
        nm[c] = static_cast<T>(momentum * static_cast<double>(mu[c]) + (1.0 - momentum) * m);
        nv[c] = static_cast<T>(momentum * static_cast<double>(va[c]) +
                               (1.0 - momentum) * s2 * n / (n - 1.0));
      }
    });
  });
}

} // namespace merak::rt::cpu
