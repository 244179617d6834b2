//===- gpu_abi_test.cpp - merak::rt::gpu against merak::rt::cpu -----------===//
//
// merak_cuda_abi_tests: every GPU ABI entry point (merak_rt/cuda/ops.h) on
// random data against the CPU ABI entry point of the same name (the
// reference; merak_rt/ops.h), with the same arguments: relative error
// max|gpu - cpu| / max(max|cpu|, 1) within 1e-5 (F32; 1e-4 for matmul, whose
// cuBLASLt sums in a different order), 1e-12 for F64, exact for integers,
// bools, data movement and dropout masks. Without a CUDA device it prints
// "SKIP: no CUDA device: ..." and exits 77 (ctest: skipped).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/collectives.h"
#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/ops.h"
#include "merak_rt/ops.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace cuda = merak::rt::cuda;
namespace cpu = merak::rt::cpu;
namespace gpu = merak::rt::gpu;
using cpu::Dims;
using cpu::DT;

namespace {
int failures = 0, checks = 0;
std::mt19937 rng(4321);

/// A host tensor and its device copy.
struct T {
  DT t = DT::F32;
  Dims d;
  std::vector<unsigned char> host;
  void *dev = nullptr;
  int64_t bytes() const { return d.numel() * cpu::elemSize(t); }
};

void must(const merak::rt::Status &s, const char *what) {
  if (!s.ok()) {
    std::fprintf(stderr, "FATAL %s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

T make(DT t, Dims d) {
  T x;
  x.t = t;
  x.d = d;
  x.host.assign(static_cast<size_t>(x.bytes() > 0 ? x.bytes() : 1), 0);
  auto r = cuda::deviceAlloc(x.host.size());
  must(r.status(), "deviceAlloc");
  x.dev = r.value();
  return x;
}
/// Random values: floats in [lo, hi), integers in [lo, hi), bools 0/1.
T rand(DT t, Dims d, double lo = -2, double hi = 2) {
  T x = make(t, d);
  const int64_t n = d.numel();
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < n; ++i) {
    const double v = u(rng);
    switch (t) {
    case DT::F32: reinterpret_cast<float *>(x.host.data())[i] = float(v); break;
    case DT::F64: reinterpret_cast<double *>(x.host.data())[i] = v; break;
    case DT::I64: reinterpret_cast<int64_t *>(x.host.data())[i] = int64_t(std::floor(v)); break;
    case DT::I32: reinterpret_cast<int32_t *>(x.host.data())[i] = int32_t(std::floor(v)); break;
    case DT::BOOL: x.host[i] = v > (lo + hi) / 2; break;
    case DT::BF16: {
      const float f = float(v);
      cpu::cast(DT::F32, &f, DT::BF16, x.host.data() + 2 * i, 1);
      break;
    }
    }
  }
  must(cuda::copyToDevice(x.dev, x.host.data(), x.host.size()), "copyToDevice");
  return x;
}
double at(const T &x, const unsigned char *p, int64_t i) {
  switch (x.t) {
  case DT::F32: return reinterpret_cast<const float *>(p)[i];
  case DT::F64: return reinterpret_cast<const double *>(p)[i];
  case DT::I64: return double(reinterpret_cast<const int64_t *>(p)[i]);
  case DT::I32: return reinterpret_cast<const int32_t *>(p)[i];
  case DT::BOOL: return p[i];
  case DT::BF16: {
    uint32_t u = uint32_t(reinterpret_cast<const uint16_t *>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  }
  return 0;
}

/// Runs `ref` on the host copies and `dut` on the device copies of the same
/// tensors (`out` are outputs, both sides zeroed first), then compares.
void check(const std::string &what, std::vector<T *> out, double tol,
           const std::function<void()> &ref, const std::function<void()> &dut) {
  for (T *o : out) {
    std::fill(o->host.begin(), o->host.end(), 0);
    must(cuda::memsetDevice(o->dev, 0, o->host.size(), gpu::stream()), "memset");
  }
  ref();
  dut();
  if (merak::rt::Status s = gpu::checkErrors(); !s.ok()) {
    std::printf("FAIL %s: %s\n", what.c_str(), s.message().c_str());
    ++failures;
    return;
  }
  ++checks;
  for (T *o : out) {
    std::vector<unsigned char> got(o->host.size());
    must(cuda::copyToHost(got.data(), o->dev, got.size()), "copyToHost");
    double err = 0, scale = 1;
    const int64_t n = o->d.numel();
    for (int64_t i = 0; i < n; ++i) {
      const double c = at(*o, o->host.data(), i), g = at(*o, got.data(), i);
      scale = std::max(scale, std::fabs(c));
      if (std::isnan(c) != std::isnan(g))
        err = INFINITY;
      else if (!std::isnan(c))
        err = std::max(err, std::fabs(c - g));
    }
    if (err / scale > tol) {
      std::printf("FAIL %s: relative error %.3g > %.3g\n", what.c_str(), err / scale, tol);
      ++failures;
      return;
    }
  }
  std::printf("ok   %s\n", what.c_str());
}

// H: host pointer, D: device pointer of a tensor, chosen by the side.
#define P(x) (side ? (x).dev : (void *)(x).host.data())

/// A test whose calls take `side`: host (0, the reference) or device (1).
void pair(const std::string &what, std::vector<T *> out, double tol,
          const std::function<void(int)> &call) {
  check(what, out, tol, [&] { call(0); }, [&] { call(1); });
}

/// Tolerances relative to the largest reference value.
constexpr double kF32Tol = 1e-5, kF64Tol = 1e-12;

/// Elementwise, shape, reduction and softmax kernels of float type `t`.
void checkFloatElementwise(DT t) {
  const double tl = t == DT::F32 ? kF32Tol : kF64Tol;
  const std::string ts = t == DT::F32 ? " f32" : " f64";
  // unary (all float ops)
  for (int op = 0; op <= int(cpu::Unary::Atan); ++op) { // every kind (Atan is last)
    if (cpu::Unary(op) == cpu::Unary::Not)
      continue;
    const bool pos = cpu::Unary(op) == cpu::Unary::Log || cpu::Unary(op) == cpu::Unary::Sqrt ||
                     cpu::Unary(op) == cpu::Unary::Rsqrt;
    // asin and acos are NaN outside [-1, 1].
    const bool unit = cpu::Unary(op) == cpu::Unary::Asin || cpu::Unary(op) == cpu::Unary::Acos;
    T x = rand(t, Dims{2, {37, 29}},
               pos    ? 0.1
               : unit ? -0.99
                      : -3,
               unit ? 0.99 : 3),
      y = make(t, x.d);
    pair("unary " + std::to_string(op) + ts, {&y}, tl * 10, [&](int side) {
      (side ? gpu::unary : cpu::unary)(cpu::Unary(op), t, P(x), P(y), x.d.numel(), 0.1, 1.5);
    });
  }
  // binary with broadcasting: row, column, general
  for (auto [da, db, dout] :
       {std::tuple{Dims{2, {8, 33}}, Dims{1, {33}}, Dims{2, {8, 33}}},
        std::tuple{Dims{3, {4, 5, 6}}, Dims{3, {4, 5, 1}}, Dims{3, {4, 5, 6}}},
        std::tuple{Dims{3, {4, 1, 6}}, Dims{2, {5, 1}}, Dims{3, {4, 5, 6}}}}) {
    for (int op = 0; op <= int(cpu::Binary::Ge); ++op) {
      const bool cmp = op >= int(cpu::Binary::Eq);
      T a = rand(t, da, 0.5, 3), b = rand(t, db, 0.5, 3), y = make(cmp ? DT::BOOL : t, dout);
      pair("binary " + std::to_string(op) + ts, {&y}, tl, [&](int side) {
        (side ? gpu::binary : cpu::binary)(cpu::Binary(op), t, P(a), a.d, P(b), b.d, P(y), y.d);
      });
    }
  }
  {
    T c = rand(DT::BOOL, Dims{2, {1, 16}}), a = rand(t, Dims{2, {16, 16}}),
      b = rand(t, Dims{0, {}}), y = make(t, Dims{2, {16, 16}});
    pair("where" + ts, {&y}, 0, [&](int side) {
      (side ? gpu::where : cpu::where)(P(c), c.d, t, P(a), a.d, P(b), b.d, P(y), y.d);
    });
  }
  for (DT to : {DT::F32, DT::F64, DT::I64, DT::I32, DT::BOOL}) {
    T x = rand(t, Dims{1, {100}}, -50, 50), y = make(to, x.d);
    pair("cast" + ts + " -> " + std::to_string(int(to)), {&y}, 0,
         [&](int side) { (side ? gpu::cast : cpu::cast)(t, P(x), to, P(y), 100); });
  }
  {
    T x = rand(t, Dims{3, {4, 1, 6}}), y = make(t, Dims{3, {4, 5, 6}});
    pair("broadcastTo" + ts, {&y}, 0,
         [&](int side) { (side ? gpu::broadcastTo : cpu::broadcastTo)(t, P(x), x.d, P(y), y.d); });
    T z = rand(t, Dims{4, {2, 3, 4, 5}}), zt = make(t, Dims{4, {4, 2, 5, 3}});
    pair("transpose" + ts, {&zt}, 0, [&](int side) {
      (side ? gpu::transpose : cpu::transpose)(t, P(z), z.d, Dims{4, {2, 0, 3, 1}}, P(zt));
    });
    T s = make(t, Dims{2, {2, 3}});
    T sx = rand(t, Dims{2, {6, 7}});
    pair("slice" + ts, {&s}, 0, [&](int side) {
      (side ? gpu::slice : cpu::slice)(t, P(sx), sx.d, Dims{2, {5, 1}}, Dims{2, {-2, 2}}, P(s),
                                       s.d);
    });
    T c1 = rand(t, Dims{3, {2, 3, 4}}), cy = make(t, Dims{3, {2, 5, 4}});
    pair("insertAlongAxis" + ts, {&cy}, 0, [&](int side) {
      (side ? gpu::insertAlongAxis : cpu::insertAlongAxis)(t, P(c1), c1.d, 1, 2, P(cy), cy.d);
    });
  }
  {
    T data = rand(t, Dims{3, {3, 10, 4}}), idx = rand(DT::I64, Dims{2, {2, 5}}, -10, 10),
      y = make(t, Dims{4, {3, 2, 5, 4}});
    pair("gather" + ts, {&y}, 0, [&](int side) {
      (side ? gpu::gather : cpu::gather)(t, P(data), data.d, DT::I64, P(idx), idx.d, 1, P(y));
    });
    T g = rand(t, y.d), dy = make(t, data.d);
    pair("gatherGrad" + ts, {&dy}, tl, [&](int side) {
      (side ? gpu::gatherGrad : cpu::gatherGrad)(t, P(g), DT::I64, P(idx), idx.d, 1, P(dy), dy.d,
                                                 false);
    });
    // Into an accumulator (merak.gather_grad ... acc): rows no index
    // reaches keep the accumulator's values.
    T acc = rand(t, data.d), da = make(t, data.d);
    pair("gatherGrad accumulate" + ts, {&da}, tl, [&](int side) {
      (side ? gpu::copyBytes : cpu::copyBytes)(P(da), P(acc), (int64_t)da.host.size());
      (side ? gpu::gatherGrad : cpu::gatherGrad)(t, P(g), DT::I64, P(idx), idx.d, 1, P(da), da.d,
                                                 true);
    });
    T ie = rand(DT::I32, Dims{3, {3, 6, 4}}, 0, 10), ye = make(t, ie.d);
    pair("gatherElements" + ts, {&ye}, 0, [&](int side) {
      (side ? gpu::gatherElements : cpu::gatherElements)(t, P(data), data.d, DT::I32, P(ie), ie.d,
                                                         1, P(ye));
    });
    T ge = rand(t, ie.d), de = make(t, data.d);
    pair("gatherElementsGrad" + ts, {&de}, tl, [&](int side) {
      (side ? gpu::gatherElementsGrad : cpu::gatherElementsGrad)(t, P(ge), DT::I32, P(ie), ie.d, 1,
                                                                 P(de), de.d);
    });
  }
  for (int op = 0; op <= int(cpu::Reduce::Prod); ++op)
    for (Dims axes : {Dims{1, {2}}, Dims{1, {0}}, Dims{2, {0, 2}}, Dims{3, {0, 1, 2}}}) {
      T x = rand(t, Dims{3, {6, 7, 40}}, 0.5, 1.5);
      Dims dy;
      for (int i = 0; i < 3; ++i) {
        bool r = false;
        for (int j = 0; j < axes.rank; ++j)
          r |= axes.d[j] == i;
        if (!r)
          dy.d[dy.rank++] = x.d.d[i];
      }
      T y = make(t, dy);
      pair("reduce " + std::to_string(op) + " axes " + std::to_string(axes.rank) + ts, {&y},
           tl * 10, [&](int side) {
             (side ? gpu::reduce : cpu::reduce)(cpu::Reduce(op), t, P(x), x.d, axes, P(y));
           });
    }
  {
    T x = rand(t, Dims{3, {5, 9, 7}}), y = make(DT::I64, Dims{2, {5, 7}});
    pair("argReduce" + ts, {&y}, 0, [&](int side) {
      (side ? gpu::argReduce : cpu::argReduce)(true, t, P(x), x.d, 1, false,
                                               static_cast<int64_t *>(P(y)));
    });
    for (bool desc : {false, true}) {
      T o = make(DT::I64, x.d);
      pair("argSort" + ts + (desc ? " desc" : ""), {&o}, 0,
           [&](int side) { (side ? gpu::argSort : cpu::argSort)(t, P(x), x.d, 1, desc, P(o)); });
    }
    T c = make(t, x.d);
    pair("cumsum" + ts, {&c}, tl * 10,
         [&](int side) { (side ? gpu::cumsum : cpu::cumsum)(t, P(x), x.d, 1, true, true, P(c)); });
    T sa = rand(t, x.d), sb = rand(t, x.d), sh = make(t, x.d);
    pair("linearScan" + ts, {&sh}, tl * 10, [&](int side) {
      (side ? gpu::linearScan : cpu::linearScan)(t, P(sa), P(sb), x.d, 1, P(sh));
    });
    T sda = make(t, x.d), sdb = make(t, x.d);
    pair("linearScanGrad" + ts, {&sda, &sdb}, tl * 10, [&](int side) {
      (side ? gpu::linearScanGrad : cpu::linearScanGrad)(t, P(sa), P(sh), P(sb), x.d, 1, P(sda),
                                                         P(sdb));
    });
  }
  for (int axis : {2, 1}) {
    for (bool isLog : {false, true}) {
      T x = rand(t, Dims{3, {6, 17, 300}}, -4, 4), y = make(t, x.d);
      pair("softmax log=" + std::to_string(isLog) + " axis " + std::to_string(axis) + ts, {&y},
           tl * 10, [&](int side) {
             (side ? gpu::softmax : cpu::softmax)(isLog, t, P(x), x.d, axis, P(y));
           });
      T g = rand(t, x.d), dx = make(t, x.d);
      pair("softmaxGrad log=" + std::to_string(isLog) + ts, {&dx}, tl * 10, [&](int side) {
        (side ? gpu::softmaxGrad : cpu::softmaxGrad)(isLog, t, P(y), P(g), x.d, axis, P(dx));
      });
    }
  }
}

/// Matmul of float type `t`: numpy's broadcasting and rank-1 rules; F32
/// operands stored transposed (merak.matmul_t), plain and accumulated.
void checkMatmul(DT t) {
  const std::string ts = t == DT::F32 ? " f32" : " f64";
  for (auto [da, db, dy] :
       {std::tuple{Dims{2, {33, 70}}, Dims{2, {70, 45}}, Dims{2, {33, 45}}},
        std::tuple{Dims{3, {3, 8, 16}}, Dims{2, {16, 5}}, Dims{3, {3, 8, 5}}},
        std::tuple{Dims{4, {2, 1, 8, 16}}, Dims{3, {3, 16, 5}}, Dims{4, {2, 3, 8, 5}}},
        std::tuple{Dims{1, {16}}, Dims{3, {2, 16, 5}}, Dims{2, {2, 5}}}}) {
    T a = rand(t, da), b = rand(t, db), y = make(t, dy);
    pair("matmul rank " + std::to_string(da.rank) + "x" + std::to_string(db.rank) + ts, {&y},
         t == DT::F32 ? 1e-4 : kF64Tol, [&](int side) {
           if (side)
             gpu::matmul(t, P(a), a.d, P(b), b.d, P(y), y.d);
           else
             cpu::matmul(t, P(a), a.d, P(b), b.d, P(y), y.d);
         });
  }
  // Transposed operands (merak.matmul_t): stored [.., K, M] / [.., N, K].
  if (t == DT::F32)
    for (auto [da, db, dy, transA, transB] :
         {std::tuple{Dims{2, {70, 33}}, Dims{2, {45, 70}}, Dims{2, {33, 45}}, true, true},
          std::tuple{Dims{3, {3, 8, 16}}, Dims{2, {5, 16}}, Dims{3, {3, 8, 5}}, false, true},
          std::tuple{Dims{3, {3, 16, 8}}, Dims{3, {3, 16, 5}}, Dims{3, {3, 8, 5}}, true, false},
          std::tuple{Dims{4, {2, 1, 16, 8}}, Dims{3, {3, 5, 16}}, Dims{4, {2, 3, 8, 5}}, true,
                     true}}) {
      T a = rand(t, da), b = rand(t, db), y = make(t, dy);
      const bool ta = transA, tb = transB; // lambdas capture no structured bindings
      pair("matmul_t rank " + std::to_string(da.rank) + "x" + std::to_string(db.rank), {&y}, 1e-4,
           [&](int side) {
             if (side)
               gpu::matmul(t, P(a), a.d, P(b), b.d, P(y), y.d, ta, tb);
             else
               cpu::matmul(t, P(a), a.d, P(b), b.d, P(y), y.d, ta, tb);
           });
      // Accumulated (merak.matmul_t's acc, beta = 1): the product, then the
      // product added into it, 2 a b.
      pair("matmul_t accumulate rank " + std::to_string(da.rank) + "x" + std::to_string(db.rank),
           {&y}, 1e-4, [&](int side) {
             using Matmul = void (*)(DT, const void *, const Dims &, const void *, const Dims &,
                                     void *, const Dims &, bool, bool, DT, bool);
             Matmul mm = side ? static_cast<Matmul>(gpu::matmul) : static_cast<Matmul>(cpu::matmul);
             mm(t, P(a), a.d, P(b), b.d, P(y), y.d, ta, tb, DT::F32, false);
             mm(t, P(a), a.d, P(b), b.d, P(y), y.d, ta, tb, DT::F32, true);
           });
    }
}

/// Normalisation, convolution, pooling and matmul kernels of float type `t`.
void checkFloatNN(DT t) {
  const double tl = t == DT::F32 ? kF32Tol : kF64Tol;
  const std::string ts = t == DT::F32 ? " f32" : " f64";
  {
    T x = rand(t, Dims{3, {4, 6, 96}}), s = rand(t, Dims{1, {96}}), b = rand(t, Dims{1, {96}}),
      y = make(t, x.d);
    pair("layerNorm" + ts, {&y}, tl * 10, [&](int side) {
      (side ? gpu::layerNorm : cpu::layerNorm)(t, P(x), x.d, 2, P(s), s.d, P(b), b.d, 1e-5, P(y));
    });
    T s2 = rand(t, Dims{2, {1, 96}}), y2 = make(t, x.d);
    pair("layerNorm axis 1, broadcast scale" + ts, {&y2}, tl * 10, [&](int side) {
      (side ? gpu::layerNorm : cpu::layerNorm)(t, P(x), x.d, 1, P(s2), s2.d, nullptr, Dims{}, 1e-5,
                                               P(y2));
    });
    T r = make(t, x.d);
    pair("rmsNorm" + ts, {&r}, tl * 10, [&](int side) {
      (side ? gpu::rmsNorm : cpu::rmsNorm)(t, P(x), x.d, 2, P(s), s.d, 1e-6, P(r));
    });
    T g = rand(t, x.d), dx = make(t, x.d), xh = make(t, x.d);
    for (bool rms : {false, true})
      pair(std::string("layerNormGrad rms=") + (rms ? "1" : "0") + ts, {&dx, &xh}, tl * 10,
           [&](int side) {
             (side ? gpu::layerNormGrad : cpu::layerNormGrad)(t, P(x), P(g), x.d, 2, P(s), s.d,
                                                              1e-5, rms, P(dx), P(xh));
           });
    T bx = rand(t, Dims{4, {3, 5, 4, 4}}), sc = rand(t, Dims{1, {5}}), bi = rand(t, Dims{1, {5}}),
      mu = rand(t, Dims{1, {5}}), va = rand(t, Dims{1, {5}}, 0.5, 2), by = make(t, bx.d);
    for (bool training : {true, false})
      pair("batchNorm training=" + std::to_string(training) + ts, {&by}, tl * 10, [&](int side) {
        (side ? gpu::batchNorm : cpu::batchNorm)(t, P(bx), bx.d, P(sc), P(bi), P(mu), P(va), 1e-5,
                                                 training, P(by));
      });
    T bg = rand(t, bx.d), bdx = make(t, bx.d), bds = make(t, sc.d), bdb = make(t, sc.d);
    pair("batchNormGrad" + ts, {&bdx, &bds, &bdb}, tl * 10, [&](int side) {
      (side ? gpu::batchNormGrad : cpu::batchNormGrad)(t, P(bx), P(bg), bx.d, P(sc), 1e-5, P(bdx),
                                                       P(bds), P(bdb));
    });
    T ssq = make(t, Dims{0, {}});
    pair("sumSquares" + ts, {&ssq}, tl * 10, [&](int side) {
      (side ? gpu::sumSquares : cpu::sumSquares)(t, P(bx), bx.d.numel(), P(ssq));
    });
    T nm = make(t, mu.d), nv = make(t, va.d);
    pair("batchNormStats" + ts, {&nm, &nv}, tl * 10, [&](int side) {
      (side ? gpu::batchNormStats : cpu::batchNormStats)(t, P(bx), bx.d, P(mu), P(va), 0.9, P(nm),
                                                         P(nv));
    });
  }
  {
    T x = rand(t, Dims{1, {1000}}), y = make(t, x.d), m = make(DT::BOOL, x.d);
    pair("dropout" + ts, {&y, &m}, 0, [&](int side) {
      (side ? gpu::dropout : cpu::dropout)(t, P(x), x.d, 0.3, 42, Dims{}, Dims{}, P(y), P(m));
    });
    // A split tensor at a later step: batch part 3 of 4 (dim 0), tp rank 1
    // of 2 in 2 blocks (dim 2), the layout's index arithmetic on both sides.
    T xs = rand(t, Dims{3, {2, 5, 12}}), ys = make(t, xs.d), ms = make(DT::BOOL, xs.d);
    cpu::TrainingPosition &at = cpu::trainingPosition();
    const cpu::TrainingPosition saved = at;
    at.step = 7, at.dpRank = 1, at.microbatches = 2, at.microbatch = 1, at.tpRank = 1;
    pair("dropout split" + ts, {&ys, &ms}, 0, [&](int side) {
      (side ? gpu::dropout : cpu::dropout)(t, P(xs), xs.d, 0.3, 42, Dims{3, {0, 1, 4}},
                                           Dims{3, {2, 2, 2}}, P(ys), P(ms));
    });
    at = saved;
    T g = rand(t, x.d), dx = make(t, x.d);
    for (bool tanh : {false, true})
      pair("geluGrad tanh=" + std::to_string(tanh) + ts, {&dx}, tl * 10, [&](int side) {
        (side ? gpu::geluGrad : cpu::geluGrad)(t, P(x), P(g), P(dx), 1000, tanh);
      });
  }
  if (t == DT::F32) {
    // Fused optimizer updates (F32 only on the GPU): the same float
    // operations, so bit for bit (AdamW's bias corrections use the
    // device's double pow: within 1e-6).
    const int64_t n = 1003;
    const Dims d{1, {n}}, s{0, {}};
    T p = rand(t, d, -1, 1), g = rand(t, d, -1, 1), m = rand(t, d, -0.1, 0.1),
      v = rand(t, d, 0, 0.01), w = rand(t, d, -0.1, 0.1), pr = rand(t, d, -1, 1);
    T lr = rand(t, s, 0.01, 0.02), clip = rand(t, s, 0.5, 1.0);
    T po = make(t, d), mo = make(t, d), vo = make(t, d), wo = make(t, d), pro = make(t, d);
    for (int64_t st : {0, 3}) {
      T step = make(DT::I64, s);
      std::memcpy(step.host.data(), &st, sizeof st);
      must(cuda::copyToDevice(step.dev, step.host.data(), sizeof st), "copyToDevice");
      const std::string at = " step " + std::to_string(st);
      pair("adamwUpdate" + at, {&po, &mo, &vo}, 1e-6, [&](int side) {
        (side ? gpu::adamwUpdate : cpu::adamwUpdate)(t, P(p), P(g), P(m), P(v), P(lr), P(step),
                                                     P(clip), P(po), P(mo), P(vo), n, 0.9, 0.999,
                                                     1e-8, 0.01);
      });
      pair("adanUpdate" + at, {&po, &mo, &vo, &wo, &pro}, 0, [&](int side) {
        (side ? gpu::adanUpdate : cpu::adanUpdate)(t, P(p), P(g), P(m), P(w), P(v), P(pr), P(lr),
                                                   P(step), P(clip), P(po), P(mo), P(wo), P(vo),
                                                   P(pro), n, 0.02, 0.08, 0.01, 1e-8, 0.02);
      });
    }
    for (bool nesterov : {false, true})
      pair("sgdUpdate nesterov=" + std::to_string(nesterov), {&po, &mo}, 0, [&](int side) {
        (side ? gpu::sgdUpdate : cpu::sgdUpdate)(t, P(p), P(g), P(m), P(lr), P(clip), P(po), P(mo),
                                                 n, 0.9, 0.01, nesterov);
      });
    pair("sgdUpdate plain", {&po}, 0, [&](int side) {
      (side ? gpu::sgdUpdate : cpu::sgdUpdate)(t, P(p), P(g), nullptr, P(lr), nullptr, P(po),
                                               nullptr, n, 0.0, 0.0, false);
    });
  }
  for (DT lt : {DT::I64, DT::I32})
    for (int red : {0, 1, 2})
      for (int axis : {1, 2}) {
        Dims dl = axis == 2 ? Dims{3, {4, 6, 50}} : Dims{3, {4, 50, 6}};
        T logits = rand(t, dl, -3, 3), labels = rand(lt, Dims{2, {4, 6}}, 0, 50);
        T y = make(t, red == 0 ? labels.d : Dims{0, {}});
        std::string w = "crossEntropy red=" + std::to_string(red) + " axis " +
                        std::to_string(axis) + (lt == DT::I64 ? " i64" : " i32") + ts;
        pair(w, {&y}, tl * 10, [&](int side) {
          (side ? gpu::crossEntropy : cpu::crossEntropy)(t, P(logits), dl, axis, lt, P(labels), red,
                                                         true, 7, P(y));
        });
        T g = rand(t, red == 0 ? labels.d : Dims{0, {}}, 0.5, 1.5), dl2 = make(t, dl);
        pair(w + " grad", {&dl2}, tl * 10, [&](int side) {
          (side ? gpu::crossEntropyGrad : cpu::crossEntropyGrad)(
              t, P(logits), dl, axis, lt, P(labels), P(g), red, true, 7, P(dl2));
        });
      }
  checkMatmul(t);
}

/// Integer element types (and bf16 activations).
void checkIntegers() {
  // Integer paths.
  for (DT t : {DT::I64, DT::I32}) {
    T a = rand(t, Dims{2, {9, 10}}, -20, 20), b = rand(t, Dims{1, {10}}, 1, 7),
      y = make(t, a.d);
    for (auto op : {cpu::Binary::Add, cpu::Binary::Mul, cpu::Binary::Div, cpu::Binary::Rem,
                    cpu::Binary::Max})
      pair("binary int " + std::to_string(int(op)), {&y}, 0, [&](int side) {
        (side ? gpu::binary : cpu::binary)(op, t, P(a), a.d, P(b), b.d, P(y), y.d);
      });
    for (auto op : {cpu::Unary::Neg, cpu::Unary::Abs, cpu::Unary::Clamp})
      pair("unary int " + std::to_string(int(op)), {&y}, 0, [&](int side) {
        (side ? gpu::unary : cpu::unary)(op, t, P(a), P(y), 90, -3.5, 4.5);
      });
    T r = make(t, Dims{1, {10}});
    pair("reduce int sum", {&r}, 0, [&](int side) {
      (side ? gpu::reduce : cpu::reduce)(cpu::Reduce::Sum, t, P(a), a.d, Dims{1, {0}}, P(r));
    });
  }
  {
    T a = rand(DT::BOOL, Dims{1, {64}}), b = rand(DT::BOOL, Dims{1, {64}}),
      y = make(DT::BOOL, a.d);
    pair("binary xor", {&y}, 0, [&](int side) {
      (side ? gpu::binary : cpu::binary)(cpu::Binary::Xor, DT::BOOL, P(a), a.d, P(b), b.d, P(y),
                                         y.d);
    });
    pair("unary not", {&y}, 0, [&](int side) {
      (side ? gpu::unary : cpu::unary)(cpu::Unary::Not, DT::BOOL, P(a), P(y), 64, 0, 0);
    });
  }
  // A bad gather index is reported by checkErrors, not silently used.
  {
    T data = rand(DT::F32, Dims{2, {4, 3}}), idx = make(DT::I64, Dims{1, {1}}),
      y = make(DT::F32, Dims{2, {1, 3}});
    const int64_t bad = 9;
    must(cuda::copyToDevice(idx.dev, &bad, sizeof bad), "copyToDevice");
    gpu::gather(DT::F32, data.dev, data.d, DT::I64, idx.dev, idx.d, 0, y.dev);
    merak::rt::Status s = gpu::checkErrors();
    ++checks;
    if (s.ok() || s.message().find("gather: index out of range") == std::string::npos) {
      std::printf("FAIL bad gather index: got '%s'\n", s.message().c_str());
      ++failures;
    } else {
      std::printf("ok   bad gather index reported: %s\n", s.message().c_str());
    }
  }
  // bf16 storage (merak-mixed-precision): casts both ways exact (rounding
  // is nearest even on both sides), a bf16 GEMM (bf16 tensor cores, fp32
  // accumulation) within a bf16 ulp of the CPU's widened sgemm, and the
  // widen-compute-round arithmetic.
  {
    T x = rand(DT::F32, Dims{2, {64, 96}}), xb = make(DT::BF16, x.d), back = make(DT::F32, x.d);
    pair("cast f32->bf16", {&xb}, 0, [&](int side) {
      (side ? gpu::cast : cpu::cast)(DT::F32, P(x), DT::BF16, P(xb), x.d.numel());
    });
    pair("cast bf16->f32", {&back}, 0, [&](int side) {
      (side ? gpu::cast : cpu::cast)(DT::BF16, P(xb), DT::F32, P(back), x.d.numel());
    });
    T a = rand(DT::BF16, Dims{3, {2, 64, 96}}), b = rand(DT::BF16, Dims{2, {96, 80}}),
      y = make(DT::BF16, Dims{3, {2, 64, 80}});
    for (bool tb : {false, true}) {
      T bb = tb ? rand(DT::BF16, Dims{2, {80, 96}}) : b;
      pair(std::string("matmul bf16 transB=") + (tb ? "1" : "0"), {&y}, 1e-2, [&](int side) {
        if (side)
          gpu::matmul(DT::BF16, P(a), a.d, P(bb), bb.d, P(y), y.d, false, tb);
        else
          cpu::matmul(DT::BF16, P(a), a.d, P(bb), bb.d, P(y), y.d, false, tb);
      });
    }
    T s = rand(DT::BF16, Dims{1, {80}}), z = make(DT::BF16, y.d);
    pair("binary add bf16 (broadcast)", {&z}, 1e-2, [&](int side) {
      (side ? gpu::binary : cpu::binary)(cpu::Binary::Add, DT::BF16, P(y), y.d, P(s), s.d, P(z),
                                         z.d);
    });
    T r = make(DT::BF16, Dims{1, {80}});
    pair("reduce sum bf16", {&r}, 1e-2, [&](int side) {
      (side ? gpu::reduce : cpu::reduce)(cpu::Reduce::Sum, DT::BF16, P(z), z.d, Dims{2, {0, 1}},
                                         P(r));
    });
    // A widening GEMM (bf16 operands, float32 result: cuBLASLt's fp32 C),
    // both operands transposed as a weight gradient's may be.
    T at = rand(DT::BF16, Dims{3, {2, 96, 64}}), yf = make(DT::F32, y.d);
    for (bool tb : {false, true}) {
      T bb = tb ? rand(DT::BF16, Dims{2, {80, 96}}) : b;
      pair(std::string("matmul bf16->f32 transB=") + (tb ? "1" : "0"), {&yf}, 1e-4,
           [&](int side) {
             if (side)
               gpu::matmul(DT::BF16, P(at), at.d, P(bb), bb.d, P(yf), yf.d, true, tb, DT::F32);
             else
               cpu::matmul(DT::BF16, P(at), at.d, P(bb), bb.d, P(yf), yf.d, true, tb, DT::F32);
           });
    }
    // bf16 activations: GELU and its gradient natively in bf16.
    T gx = rand(DT::BF16, z.d, -4, 4), gy = make(DT::BF16, z.d), gd = make(DT::BF16, z.d);
    pair("gelu bf16", {&gy}, 1e-2, [&](int side) {
      (side ? gpu::unary : cpu::unary)(cpu::Unary::Gelu, DT::BF16, P(gx), P(gy), gx.d.numel(), 0,
                                       0);
    });
    pair("gelu_grad bf16", {&gd}, 1e-2, [&](int side) {
      (side ? gpu::geluGrad : cpu::geluGrad)(DT::BF16, P(gx), P(z), P(gd), gx.d.numel(), false);
    });
  }
}

/// merak.attention on both sides.
void checkAttention() {
  // merak.attention: the flash kernels against the CPU's tiled GEMMs, causal
  // and not, T = 200 (several tiles, a partial one), head dims 32 and 64;
  // float32 and bf16 (merak-mixed-precision's bf16 attention: one rounding
  // of each result on both sides, lse float32).
  // seq_major: [B, T, H, D] operands read in place (merak-fold-transposes'
  // form) against the CPU's transposing path.
  for (DT et : {DT::F32, DT::BF16})
  for (int64_t hd : {32, 64})
  for (bool sm : {false, true})
    for (bool causal : {true, false}) {
      const Dims d = sm ? Dims{4, {2, 200, 3, hd}} : Dims{4, {2, 3, 200, hd}},
                 dl{3, {2, 3, 200}};
      T q = rand(et, d, -1, 1), k = rand(et, d, -1, 1), v = rand(et, d, -1, 1);
      T o = make(et, d), lse = make(DT::F32, dl);
      const std::string what = std::string(et == DT::BF16 ? "bf16 " : "") + "attention D=" +
                               std::to_string(hd) + " causal=" + std::to_string(causal) +
                               (sm ? " seq_major" : "");
      const double scale = 1.0 / std::sqrt(double(hd));
      const double tol = et == DT::BF16 ? 1e-2 : 1e-4;
      pair(what, {&o, &lse}, tol, [&](int side) {
        (side ? gpu::attention : cpu::attention)(et, P(q), d, P(k), P(v), 200, scale, causal, P(o),
                                                 P(lse), sm, /*window=*/0, /*softcap=*/0.0,
                                                 /*bias=*/nullptr, Dims{}, /*dropout=*/0.0,
                                                 /*seed=*/0, Dims{}, Dims{});
      });
      T g = rand(et, d, -1, 1), dq = make(et, d), dk = make(et, d), dv = make(et, d);
      // The causal cases also take a gradient of lse (attention sinks').
      T dlse = rand(DT::F32, dl, -1, 1);
      // Both sides read the CPU's o and lse (the device copies are the
      // GPU's own; they agree within the forward's tolerance).
      must(cuda::copyToDevice(o.dev, o.host.data(), o.host.size()), "copyToDevice");
      must(cuda::copyToDevice(lse.dev, lse.host.data(), lse.host.size()), "copyToDevice");
      pair(what + " grad", {&dq, &dk, &dv}, tol, [&](int side) {
        (side ? gpu::attentionGrad : cpu::attentionGrad)(
            et, P(q), d, P(k), P(v), 200, P(o), P(lse), P(g), scale, causal, P(dq), P(dk), P(dv),
            sm, /*window=*/0, /*softcap=*/0.0,
            /*bias=*/nullptr, Dims{}, nullptr,
            /*dropout=*/0.0, /*seed=*/0, Dims{}, Dims{}, causal ? P(dlse) : nullptr);
      });
    }
}

void run() {
  for (DT t : {DT::F32, DT::F64}) {
    checkFloatElementwise(t);
    checkFloatNN(t);
  }
  checkIntegers();
  checkAttention();
}
/// An I64 (or I32) tensor holding `v`, on both sides.
T ints(const std::vector<int64_t> &v, DT t = DT::I64) {
  T x = make(t, Dims{1, {int64_t(v.size())}});
  for (size_t i = 0; i < v.size(); ++i)
    if (t == DT::I64)
      reinterpret_cast<int64_t *>(x.host.data())[i] = v[i];
    else
      reinterpret_cast<int32_t *>(x.host.data())[i] = int32_t(v[i]);
  must(cuda::copyToDevice(x.dev, x.host.data(), x.host.size()), "copyToDevice");
  return x;
}

/// The Mixture-of-Experts kernels (ops_experts.cu): the expert GEMMs with
/// dropped rows, another rank's experts (`first`), I32 ids, shadow copies
/// and both weight layouts, and the routing kernels (capacity, compact,
/// place, shadow plan), exact for the integer results.
void runExperts() {
  const int64_t S = 37, K = 24, O = 40, E = 4;
  std::vector<int64_t> route(S);
  for (int64_t s = 0; s < S; ++s) // skewed, expert 3 unused, some dropped
    route[s] = s % 9 == 4 ? -1 : (s * 7) % 5 == 0 ? 1 : (s % 3 == 0 ? 0 : 2);
  for (DT t : {DT::F32, DT::F64}) {
    const double tol = t == DT::F32 ? 1e-4 : 1e-12; // cuBLASLt sums in its own order
    const std::string ts = t == DT::F32 ? " f32" : " f64";
    T x = rand(t, Dims{2, {S, K}}), y = make(t, Dims{2, {S, O}}), g = rand(t, Dims{2, {S, O}});
    for (bool transW : {false, true}) {
      const std::string tw = transW ? " transW" : "";
      T w = rand(t, transW ? Dims{3, {E, K, O}} : Dims{3, {E, O, K}});
      T dw = make(t, w.d);
      for (DT ti : {DT::I64, DT::I32}) {
        T ids = ints(route, ti);
        pair("expert_matmul" + ts + tw + (ti == DT::I32 ? " i32" : ""), {&y}, tol, [&](int side) {
          (side ? gpu::expertMatmul : cpu::expertMatmul)(t, P(x), P(w), ti, P(ids), nullptr, S,
                                                         K, O, E, transW, P(y), nullptr, nullptr,
                                                         0);
        });
        pair("expert_matmul_grad_weight" + ts + tw, {&dw}, tol, [&](int side) {
          (side ? gpu::expertMatmulGradWeight : cpu::expertMatmulGradWeight)(
              t, P(x), P(g), ti, P(ids), nullptr, S, K, O, E, transW, P(dw), false);
        });
      }
      // Into an accumulator (expert 3 has no rows: it keeps its values);
      // `pair` clears its outputs, so the accumulator is copied in first.
      T acc = rand(t, w.d), da = make(t, w.d), ids = ints(route);
      pair("expert_matmul_grad_weight accumulate" + ts + tw, {&da}, tol, [&](int side) {
        (side ? gpu::copyBytes : cpu::copyBytes)(P(da), P(acc), (int64_t)da.host.size());
        (side ? gpu::expertMatmulGradWeight : cpu::expertMatmulGradWeight)(
            t, P(x), P(g), DT::I64, P(ids), nullptr, S, K, O, E, transW, P(da), true);
      });
      // Expert parallelism: this rank holds experts [2, 4) of global ids
      // [0, 8) (ids 0..7: route + 2 * (s % 2)), and with shadow copies
      // (ids from 100) one copy of another rank's expert.
      std::vector<int64_t> global(S);
      for (int64_t s = 0; s < S; ++s)
        global[s] = route[s] < 0 ? -1 : s % 11 == 5 ? 100 : route[s] + 2 * (s % 2);
      T gids = ints(global), first = ints({2}), shadowFirst = ints({100});
      T w2 = rand(t, transW ? Dims{3, {2, K, O}} : Dims{3, {2, O, K}}), dw2 = make(t, w2.d);
      T ws = rand(t, transW ? Dims{3, {1, K, O}} : Dims{3, {1, O, K}});
      pair("expert_matmul first+shadow" + ts + tw, {&y}, tol, [&](int side) {
        (side ? gpu::expertMatmul : cpu::expertMatmul)(t, P(x), P(w2), DT::I64, P(gids),
                                                       P(first), S, K, O, 2, transW, P(y), P(ws),
                                                       P(shadowFirst), 1);
      });
      pair("expert_matmul_grad_weight first" + ts + tw, {&dw2}, tol, [&](int side) {
        (side ? gpu::expertMatmulGradWeight : cpu::expertMatmulGradWeight)(
            t, P(x), P(g), DT::I64, P(gids), P(first), S, K, O, 2, transW, P(dw2), false);
      });
    }
  }
  // Routing: capacity by probs and by position, compact, place, shadow plan.
  std::vector<int64_t> dense(S);
  for (int64_t s = 0; s < S; ++s)
    dense[s] = route[s] < 0 ? 3 : route[s];
  T ids = ints(dense), probs = rand(DT::F32, Dims{1, {S}}, 0, 1), kept = make(DT::I64, ids.d);
  for (bool byProbs : {true, false})
    pair(std::string("expert_capacity ") + (byProbs ? "probs" : "position"), {&kept}, 0,
         [&](int side) {
           (side ? gpu::expertCapacity : cpu::expertCapacity)(P(ids), DT::F32, P(probs), S, E,
                                                              6, byProbs, P(kept));
         });
  T first = ints({2}), compact = make(DT::I64, Dims{1, {30}});
  pair("expert_compact", {&compact}, 0, [&](int side) {
    (side ? gpu::expertCompact : cpu::expertCompact)(P(ids), S, P(first), 2, 30, P(compact));
  });
  T placement = ints({2, 0, 3, 1}), placed = make(DT::I64, ids.d);
  pair("expert_place", {&placed}, 0, [&](int side) {
    (side ? gpu::expertPlace : cpu::expertPlace)(P(ids), S, P(placement), E, 0, P(placed));
  });
  T group = ints([&] { // two ranks' rows: rank 1's all go to expert 0
    std::vector<int64_t> v(dense);
    v.insert(v.end(), S, 0);
    return v;
  }());
  T routed = make(DT::I64, group.d), slots = make(DT::I64, Dims{1, {2}});
  pair("expert_shadow_plan", {&routed, &slots}, 0, [&](int side) {
    (side ? gpu::expertShadowPlan : cpu::expertShadowPlan)(P(group), 2, S, 2, 2, 1, P(routed),
                                                           P(slots));
  });
}
} // namespace

int main() {
  auto dev = cuda::Device::open(0);
  if (!dev.ok()) {
    std::printf("SKIP: %s\n", dev.message().c_str());
    return 77;
  }
  std::printf("device: %s\n", dev->describe().c_str());
  run();
  runExperts();
  std::printf("%d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
