//===- ops_optimizer.cu - GPU ABI: fused optimizer updates ------------------===//
//
// gpu::adamwUpdate / adanUpdate / sgdUpdate with the semantics of
// runtime/src/ops_optimizer.cpp, F32 only. The learning rate, the clip
// coefficient and the step are device scalars (the schedule and the global
// norm are computed on the device), so each kernel reads them itself rather
// than wrapping cuda::adamwStep / adanStep, whose scalars are host values
// (a device-to-host copy and a synchronisation per parameter). Every float
// operation is an explicitly rounded intrinsic (__fadd_rn, ...), so nvcc
// contracts nothing into FMAs and the results are the CPU program's bit for
// bit; the bias corrections are computed in double as on the CPU.
//
//===----------------------------------------------------------------------===//
#include "ops_common.cuh"

namespace merak::rt::gpu {
using namespace detail;

namespace {

struct AdamWK {
  double beta1, beta2;
  float b1, b2, omb1, omb2, eps, wd;
};

__global__ void __launch_bounds__(256)
    adamwUpdateKernel(const float *p, const float *g, const float *m, const float *v,
                      const float *lr, const int64_t *step, const float *clip, float *pOut,
                      float *mOut, float *vOut, int64_t n, AdamWK k) {
  const float lrT = *lr;
  const float coef = clip ? *clip : 1.0f;
  const double t = double(*step) + 1.0;
  const double bc1 = 1.0 - pow(k.beta1, t), bc2 = 1.0 - pow(k.beta2, t);
  const float stepSize = float(double(lrT) / bc1);
  const float bc2Sqrt = float(sqrt(bc2));
  const float decay = __fsub_rn(1.0f, __fmul_rn(lrT, k.wd));
  MERAK_GRID_STRIDE(i, n) {
    const float gi = __fmul_rn(g[i], coef);
    const float mi = __fadd_rn(__fmul_rn(k.b1, m[i]), __fmul_rn(k.omb1, gi));
    const float vi = __fadd_rn(__fmul_rn(k.b2, v[i]), __fmul_rn(k.omb2, __fmul_rn(gi, gi)));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2Sqrt), k.eps);
    const float pi = __fsub_rn(__fmul_rn(p[i], decay), __fmul_rn(stepSize, __fdiv_rn(mi, denom)));
    mOut[i] = mi;
    vOut[i] = vi;
    pOut[i] = pi;
  }
}

struct AdanK {
  float b1, b2, b3, omb1, omb2, omb3, eps, wd;
};

__global__ void __launch_bounds__(256)
    adanUpdateKernel(const float *p, const float *g, const float *m, const float *d,
                     const float *nsq, const float *prev, const float *lr,
                     const int64_t *step, const float *clip, float *pOut, float *mOut,
                     float *dOut, float *nOut, float *prevOut, int64_t n, AdanK k) {
  const float lrT = *lr;
  const float coef = clip ? *clip : 1.0f;
  const bool first = *step == 0;
  const float shrink = __fadd_rn(1.0f, __fmul_rn(k.wd, lrT));
  MERAK_GRID_STRIDE(i, n) {
    const float gi = __fmul_rn(g[i], coef);
    const float diff = __fsub_rn(gi, prev[i]);
    float mi, di, ni;
    if (first) {
      mi = gi;
      di = __fmul_rn(gi, 0.0f);
      ni = __fmul_rn(gi, gi);
    } else {
      mi = __fadd_rn(__fmul_rn(k.omb1, m[i]), __fmul_rn(k.b1, gi));
      di = __fadd_rn(__fmul_rn(k.omb2, d[i]), __fmul_rn(k.b2, diff));
      const float u = __fadd_rn(gi, __fmul_rn(k.omb2, diff));
      ni = __fadd_rn(__fmul_rn(k.omb3, nsq[i]), __fmul_rn(k.b3, __fmul_rn(u, u)));
    }
    const float eta = __fdiv_rn(lrT, __fadd_rn(__fsqrt_rn(ni), k.eps));
    const float dir = __fmul_rn(eta, __fadd_rn(mi, __fmul_rn(k.omb2, di)));
    const float pi = __fdiv_rn(__fsub_rn(p[i], dir), shrink);
    mOut[i] = mi;
    dOut[i] = di;
    nOut[i] = ni;
    prevOut[i] = gi;
    pOut[i] = pi;
  }
}

__global__ void __launch_bounds__(256)
    sgdUpdateKernel(const float *p, const float *g, const float *buf, const float *lr,
                    const float *clip, float *pOut, float *bufOut, int64_t n, float mom,
                    float wd, bool decay, bool nesterov) {
  const float lrT = *lr;
  const float coef = clip ? *clip : 1.0f;
  MERAK_GRID_STRIDE(i, n) {
    float di = __fmul_rn(g[i], coef);
    if (decay)
      di = __fadd_rn(di, __fmul_rn(wd, p[i]));
    float dir = di;
    if (buf) {
      const float bi = __fadd_rn(__fmul_rn(mom, buf[i]), di);
      bufOut[i] = bi;
      dir = nesterov ? __fadd_rn(di, __fmul_rn(mom, bi)) : bi;
    }
    pOut[i] = __fsub_rn(p[i], __fmul_rn(lrT, dir));
  }
}

const float *f(const void *p) { return static_cast<const float *>(p); }
float *f(void *p) { return static_cast<float *>(p); }

} // namespace

void adamwUpdate(DT t, const void *p, const void *g, const void *m, const void *v,
                 const void *lr, const void *step, const void *clip, void *pOut,
                 void *mOut, void *vOut, int64_t n, double beta1, double beta2,
                 double eps, double weightDecay) {
  if (t != DT::F32)
    fatal("adamw_update: float32 tensors only on the GPU");
  if (n <= 0)
    return;
  AdamWK k{beta1,
           beta2,
           float(beta1),
           float(beta2),
           float(1.0 - beta1),
           float(1.0 - beta2),
           float(eps),
           float(weightDecay)};
  adamwUpdateKernel<<<gridFor(n), 256, 0, cs()>>>(
      f(p), f(g), f(m), f(v), f(lr), static_cast<const int64_t *>(step), f(clip), f(pOut),
      f(mOut), f(vOut), n, k);
  checkLaunch("adamw_update");
}

void adanUpdate(DT t, const void *p, const void *g, const void *m, const void *d,
                const void *nsq, const void *prev, const void *lr, const void *step,
                const void *clip, void *pOut, void *mOut, void *dOut, void *nOut,
                void *prevOut, int64_t n, double beta1, double beta2, double beta3,
                double eps, double weightDecay) {
  if (t != DT::F32)
    fatal("adan_update: float32 tensors only on the GPU");
  if (n <= 0)
    return;
  AdanK k{float(beta1),       float(beta2),       float(beta3), float(1.0 - beta1),
          float(1.0 - beta2), float(1.0 - beta3), float(eps),   float(weightDecay)};
  adanUpdateKernel<<<gridFor(n), 256, 0, cs()>>>(
      f(p), f(g), f(m), f(d), f(nsq), f(prev), f(lr), static_cast<const int64_t *>(step),
      f(clip), f(pOut), f(mOut), f(dOut), f(nOut), f(prevOut), n, k);
  checkLaunch("adan_update");
}

void sgdUpdate(DT t, const void *p, const void *g, const void *buf, const void *lr,
               const void *clip, void *pOut, void *bufOut, int64_t n, double momentum,
               double weightDecay, bool nesterov) {
  if (t != DT::F32)
    fatal("sgd_update: float32 tensors only on the GPU");
  if (n <= 0)
    return;
  sgdUpdateKernel<<<gridFor(n), 256, 0, cs()>>>(f(p), f(g), f(buf), f(lr), f(clip), f(pOut),
                                                f(bufOut), n, float(momentum),
                                                float(weightDecay), weightDecay != 0,
                                                nesterov);
  checkLaunch("sgd_update");
}

} // namespace merak::rt::gpu
