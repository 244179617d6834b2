//===- ops_elementwise.cpp - unary, binary, where, cast ---------------------===//
//
// See merak_rt/ops.h. Semantics follow lib/Evaluator/EvalElementwise.cpp:
// float ops are computed in double and rounded to the element type (for
// + - * / and fmod the float operation gives the same result, so F32 uses
// it directly; likewise sqrt and reciprocal), integers wrap like the element
// type, and integer Div/Rem by zero is a fatal error. The exception: F32
// exp, log, tanh, erf, sigmoid and gelu use the vectorised float functions
// of ops_util.h, within a few ulp of the double result (bounds there).
//
// Dispatch on (op, dtype) happens once per call; the per-element work is a
// templated loop. binary/where iterate a coalesced broadcast plan whose
// innermost row has a specialised loop for the stride patterns (1,1),
// (1,0) (suffix or scalar b), (0,1), and a general strided one.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace merak::rt::cpu {
using namespace detail;

int64_t elemSize(DT t) {
  switch (t) {
  case DT::F32: return 4;
  case DT::F64: return 8;
  case DT::I64: return 8;
  case DT::I32: return 4;
  case DT::BOOL: return 1;
  case DT::BF16: return 2;
  }
  return 0;
}

void fatal(const char *what) {
  std::fprintf(stderr, "merak runtime: %s\n", what);
  std::fflush(stderr);
  std::exit(3);
}

// --- profiling hook -----------------------------------------------------------

namespace {
OpRecorder gRecorder = nullptr;
void *gRecorderCtx = nullptr;
} // namespace

void setOpRecorder(OpRecorder recorder, void *ctx) {
  gRecorder = recorder;
  gRecorderCtx = ctx;
}

void opMark(int64_t index) {
  if (gRecorder)
    gRecorder(gRecorderCtx, index);
}

bool opRecorderSet() { return gRecorder != nullptr; }

// --- unary --------------------------------------------------------------------

namespace {

template <class T, class Fn> void mapN(const T *x, T *y, int64_t n, Fn fn) {
  parallelFor(n, 1, [&](int64_t b, int64_t e) {
    MERAK_RT_VECTORIZE
    for (int64_t i = b; i < e; ++i)
      y[i] = fn(x[i]);
  });
}

/// A float op evaluated in double, rounded to T.
template <class T, class Fn> void mapD(const T *x, T *y, int64_t n, Fn fn) {
  parallelFor(n, 8, [&](int64_t b, int64_t e) {
    MERAK_RT_VECTORIZE
    for (int64_t i = b; i < e; ++i)
      y[i] = static_cast<T>(fn(static_cast<double>(x[i])));
  });
}

/// The F32 fast paths: the vectorised float functions of ops_util.h for the
/// transcendentals; sqrt and 1/x directly in float (correctly rounded, so
/// the same bits as the double form rounded). Returns false for the others.
bool unaryF32Fast(Unary op, const float *x, float *y, int64_t n) {
  RowFn f;
  switch (op) {
  case Unary::Exp: f = RowFn::Exp; break;
  case Unary::Log: f = RowFn::Log; break;
  case Unary::Tanh: f = RowFn::Tanh; break;
  case Unary::Erf: f = RowFn::Erf; break;
  case Unary::Sigmoid: f = RowFn::Sigmoid; break;
  case Unary::Gelu: f = RowFn::Gelu; break;
  case Unary::Softplus: f = RowFn::Softplus; break;
  case Unary::Sqrt:
    mapN(x, y, n, [](float v) { return std::sqrt(v); });
    return true;
  case Unary::Reciprocal:
    mapN(x, y, n, [](float v) { return 1.0f / v; });
    return true;
  default: return false;
  }
  parallelFor(n, 2, [&](int64_t b, int64_t e) { mapRowF32(f, x + b, y + b, e - b); });
  return true;
}

template <class T>
void unaryFloat(Unary op, const T *x, T *y, int64_t n, double a, double b) {
  if constexpr (std::is_same_v<T, float>) {
    if (unaryF32Fast(op, x, y, n))
      return;
  }
  switch (op) {
  case Unary::Exp: return mapD(x, y, n, [](double v) { return std::exp(v); });
  case Unary::Log: return mapD(x, y, n, [](double v) { return std::log(v); });
  case Unary::Sqrt: return mapD(x, y, n, [](double v) { return std::sqrt(v); });
  case Unary::Rsqrt:
    return mapD(x, y, n, [](double v) { return 1.0 / std::sqrt(v); });
  case Unary::Tanh: return mapD(x, y, n, [](double v) { return std::tanh(v); });
  case Unary::Erf: return mapD(x, y, n, [](double v) { return std::erf(v); });
  case Unary::Sigmoid:
    return mapD(x, y, n, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  case Unary::Softplus:
    return mapD(x, y, n, [](double v) {
      return std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v)));
    });
  case Unary::Expm1: return mapD(x, y, n, [](double v) { return std::expm1(v); });
  case Unary::Log1p: return mapD(x, y, n, [](double v) { return std::log1p(v); });
  case Unary::Reciprocal:
    return mapD(x, y, n, [](double v) { return 1.0 / v; });
  case Unary::Sin: return mapD(x, y, n, [](double v) { return std::sin(v); });
  case Unary::Cos: return mapD(x, y, n, [](double v) { return std::cos(v); });
  case Unary::Asin: return mapD(x, y, n, [](double v) { return std::asin(v); });
  case Unary::Acos: return mapD(x, y, n, [](double v) { return std::acos(v); });
  case Unary::Atan: return mapD(x, y, n, [](double v) { return std::atan(v); });
  case Unary::Floor: return mapN(x, y, n, [](T v) { return std::floor(v); });
  case Unary::Ceil: return mapN(x, y, n, [](T v) { return std::ceil(v); });
  case Unary::Relu:
    return mapN(x, y, n,
                [](T v) { return v > 0 ? v : (std::isnan(v) ? v : T(0)); });
  case Unary::Neg: return mapN(x, y, n, [](T v) { return -v; });
  case Unary::Abs: return mapN(x, y, n, [](T v) { return std::fabs(v); });
  case Unary::Sign:
    return mapN(x, y, n, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
  case Unary::GeluTanh:
    return mapD(x, y, n, [](double v) {
      return 0.5 * v *
             (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    });
  case Unary::Gelu:
    return mapD(x, y, n, [](double v) {
      return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    });
  case Unary::LeakyRelu:
    return mapD(x, y, n, [a](double v) { return v >= 0 ? v : a * v; });
  case Unary::Clamp:
    return mapD(x, y, n, [a, b](double v) {
      return std::isnan(v) ? v : std::min(std::max(v, a), b);
    });
  case Unary::Not: case Unary::BitNot: break;
  }
  fatal("unary: op has no float form");
}

template <class T>
void unaryInt(Unary op, const T *x, T *y, int64_t n, double lo, double hi) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
  case Unary::Relu: return mapN(x, y, n, [](T v) { return v > 0 ? v : T(0); });
  case Unary::Neg:
    return mapN(x, y, n, [](T v) { return static_cast<T>(U(0) - U(v)); });
  case Unary::Abs:
    return mapN(x, y, n,
                [](T v) { return v < 0 ? static_cast<T>(U(0) - U(v)) : v; });
  case Unary::Sign:
    return mapN(x, y, n, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
  case Unary::BitNot: return mapN(x, y, n, [](T v) { return static_cast<T>(~v); });
  case Unary::Clamp: {
    // As the evaluator: in int64 against the f64 bounds, then wrapped to T.
    auto toInt = [](double v) {
      return v <= -0x1p63   ? std::numeric_limits<int64_t>::min()
             : v >= 0x1p63 ? std::numeric_limits<int64_t>::max()
                           : static_cast<int64_t>(v);
    };
    const int64_t loV = toInt(std::ceil(lo)), hiV = toInt(std::floor(hi));
    return mapN(x, y, n, [=](T v) {
      int64_t w = v;
      if (static_cast<double>(w) < lo)
        w = loV;
      if (static_cast<double>(w) > hi)
        w = hiV;
      return static_cast<T>(static_cast<U>(static_cast<uint64_t>(w)));
    });
  }
  default: break;
  }
  fatal("unary: op has no integer form");
}

} // namespace

void unary(Unary op, DT t, const void *x, void *y, int64_t n, double a,
           double b) {
  if (n <= 0)
    return;
  if (t == DT::BF16) { // widen, compute in float32, round once
    float *fx = scratch<float, 24>(static_cast<size_t>(n));
    cast(DT::BF16, x, DT::F32, fx, n);
    unary(op, DT::F32, fx, fx, n, a, b);
    cast(DT::F32, fx, DT::BF16, y, n);
    return;
  }
  switch (t) {
  case DT::F32:
    return unaryFloat(op, static_cast<const float *>(x), static_cast<float *>(y),
                      n, a, b);
  case DT::F64:
    return unaryFloat(op, static_cast<const double *>(x),
                      static_cast<double *>(y), n, a, b);
  case DT::I64:
    return unaryInt(op, static_cast<const int64_t *>(x),
                    static_cast<int64_t *>(y), n, a, b);
  case DT::I32:
    return unaryInt(op, static_cast<const int32_t *>(x),
                    static_cast<int32_t *>(y), n, a, b);
  case DT::BOOL:
    if (op != Unary::Not)
      fatal("unary: only 'not' takes a bool tensor");
    return mapN(static_cast<const uint8_t *>(x), static_cast<uint8_t *>(y), n,
                [](uint8_t v) { return static_cast<uint8_t>(v == 0); });
  case DT::BF16: // converted through F32 above
    break;
  }
}

// --- binary -------------------------------------------------------------------

namespace {

/// out = f(a, b) over the broadcast of da, db to dout.
template <class T, class R, class F>
void binaryLoop(const T *a, const Dims &da, const T *b, const Dims &db, R *out,
                const Dims &dout, F f) {
  const int64_t n = dout.numel();
  if (n == 0)
    return;
  const int64_t na = da.numel(), nb = db.numel();
  if (na == n && nb == n) { // equal shapes: one flat loop
    parallelFor(n, 1, [&](int64_t s, int64_t e) {
      MERAK_RT_VECTORIZE
      for (int64_t i = s; i < e; ++i)
        out[i] = f(a[i], b[i]);
    });
    return;
  }
  if (na == n && nb == 1) { // scalar b
    const T bv = b[0];
    parallelFor(n, 1, [&](int64_t s, int64_t e) {
      MERAK_RT_VECTORIZE
      for (int64_t i = s; i < e; ++i)
        out[i] = f(a[i], bv);
    });
    return;
  }
  if (na == 1 && nb == n) { // scalar a
    const T av = a[0];
    parallelFor(n, 1, [&](int64_t s, int64_t e) {
      MERAK_RT_VECTORIZE
      for (int64_t i = s; i < e; ++i)
        out[i] = f(av, b[i]);
    });
    return;
  }
  // Suffix ("row", e.g. [B,T,C] + [C]) broadcasting coalesces to [M, N] with
  // b strides [0, 1]; prefix/column ([B,T,C] * [B,T,1]) to [M, N] with b
  // strides [1, 0]; anything else keeps more dims. The innermost row runs a
  // loop specialised on its stride pattern.
  const Dims *ins[2] = {&da, &db};
  Plan<2> p = broadcastPlan<2>(dout, ins);
  const int64_t sa = p.innerStride(0), sb = p.innerStride(1);
  forRows(p, [&](int64_t o, const int64_t *off, int64_t len) {
    const T *pa = a + off[0];
    const T *pb = b + off[1];
    R *po = out + o;
    if (sa == 1 && sb == 1) {
      MERAK_RT_VECTORIZE
      for (int64_t i = 0; i < len; ++i)
        po[i] = f(pa[i], pb[i]);
    } else if (sa == 1 && sb == 0) {
      const T bv = *pb;
      MERAK_RT_VECTORIZE
      for (int64_t i = 0; i < len; ++i)
        po[i] = f(pa[i], bv);
    } else if (sa == 0 && sb == 1) {
      const T av = *pa;
      MERAK_RT_VECTORIZE
      for (int64_t i = 0; i < len; ++i)
        po[i] = f(av, pb[i]);
    } else {
      for (int64_t i = 0; i < len; ++i)
        po[i] = f(pa[i * sa], pb[i * sb]);
    }
  });
}

int64_t ipow(int64_t base, int64_t exp) {
  if (exp < 0)
    return base == 1 ? 1 : (base == -1 ? (exp % 2 ? -1 : 1) : 0);
  int64_t r = 1;
  while (exp) {
    if (exp & 1)
      r = static_cast<int64_t>(static_cast<uint64_t>(r) *
                               static_cast<uint64_t>(base));
    base = static_cast<int64_t>(static_cast<uint64_t>(base) *
                                static_cast<uint64_t>(base));
    exp >>= 1;
  }
  return r;
}

template <class T>
void binaryArith(Binary op, const T *a, const Dims &da, const T *b,
                 const Dims &db, T *o, const Dims &dout) {
  auto run = [&](auto f) { binaryLoop<T, T>(a, da, b, db, o, dout, f); };
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
    case Binary::Add: return run([](T x, T y) { return x + y; });
    case Binary::Sub: return run([](T x, T y) { return x - y; });
    case Binary::Mul: return run([](T x, T y) { return x * y; });
    case Binary::Div: return run([](T x, T y) { return x / y; });
    case Binary::Rem: return run([](T x, T y) { return std::fmod(x, y); });
    case Binary::Pow:
      return run([](T x, T y) {
        return static_cast<T>(
            std::pow(static_cast<double>(x), static_cast<double>(y)));
      });
    case Binary::Max:
      return run([](T x, T y) {
        return std::isnan(x) || std::isnan(y)
                   ? std::numeric_limits<T>::quiet_NaN()
                   : std::max(x, y);
      });
    case Binary::Min:
      return run([](T x, T y) {
        return std::isnan(x) || std::isnan(y)
                   ? std::numeric_limits<T>::quiet_NaN()
                   : std::min(x, y);
      });
    default: break;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    if (op == Binary::Div || op == Binary::Rem) {
      const int64_t nb = db.numel();
      if (dout.numel() > 0)
        for (int64_t i = 0; i < nb; ++i)
          if (b[i] == 0)
            fatal(op == Binary::Div ? "div: integer division by zero"
                                    : "rem: integer division by zero");
    }
    switch (op) {
    case Binary::Add: return run([](T x, T y) { return T(U(x) + U(y)); });
    case Binary::Sub: return run([](T x, T y) { return T(U(x) - U(y)); });
    case Binary::Mul: return run([](T x, T y) { return T(U(x) * U(y)); });
    case Binary::Div:
      return run([](T x, T y) { return y == -1 ? T(U(0) - U(x)) : T(x / y); });
    case Binary::Rem:
      return run([](T x, T y) { return y == -1 ? T(0) : T(x % y); });
    case Binary::Pow:
      return run([](T x, T y) {
        return static_cast<T>(static_cast<U>(
            static_cast<uint64_t>(ipow(int64_t(x), int64_t(y)))));
      });
    case Binary::Max: return run([](T x, T y) { return std::max(x, y); });
    case Binary::Min: return run([](T x, T y) { return std::min(x, y); });
    case Binary::BitAnd: return run([](T x, T y) { return T(x & y); });
    case Binary::BitOr: return run([](T x, T y) { return T(x | y); });
    case Binary::BitXor: return run([](T x, T y) { return T(x ^ y); });
    case Binary::ShiftLeft: // as the evaluator: 0 past the width
      return run([](T x, T y) {
        return y < 0 || y >= T(8 * sizeof(T)) ? T(0) : T(U(x) << y);
      });
    case Binary::ShiftRight: // arithmetic (the runtime's integers are signed)
      return run([](T x, T y) {
        return y < 0 || y >= T(8 * sizeof(T)) ? T(x < 0 ? -1 : 0) : T(x >> y);
      });
    default: break;
    }
  }
  fatal("binary: bad arithmetic op");
}

template <class T>
void binaryCompare(Binary op, const T *a, const Dims &da, const T *b,
                   const Dims &db, uint8_t *o, const Dims &dout) {
  auto run = [&](auto f) { binaryLoop<T, uint8_t>(a, da, b, db, o, dout, f); };
  switch (op) {
  case Binary::Eq: return run([](T x, T y) { return uint8_t(x == y); });
  case Binary::Ne: return run([](T x, T y) { return uint8_t(x != y); });
  case Binary::Lt: return run([](T x, T y) { return uint8_t(x < y); });
  case Binary::Le: return run([](T x, T y) { return uint8_t(x <= y); });
  case Binary::Gt: return run([](T x, T y) { return uint8_t(x > y); });
  case Binary::Ge: return run([](T x, T y) { return uint8_t(x >= y); });
  default: break;
  }
  fatal("binary: bad comparison op");
}

} // namespace

void binary(Binary op, DT t, const void *a, const Dims &da, const void *b,
            const Dims &db, void *out, const Dims &dout) {
  if (t == DT::BF16) { // widen, compute in float32, round once
    const int64_t na = da.numel(), nb = db.numel(), no = dout.numel();
    float *fa = scratch<float, 24>(static_cast<size_t>(na));
    float *fb = scratch<float, 25>(static_cast<size_t>(nb));
    cast(DT::BF16, a, DT::F32, fa, na);
    cast(DT::BF16, b, DT::F32, fb, nb);
    if (op >= Binary::Eq) { // comparisons write BOOL
      binary(op, DT::F32, fa, da, fb, db, out, dout);
      return;
    }
    float *fo = scratch<float, 26>(static_cast<size_t>(no));
    binary(op, DT::F32, fa, da, fb, db, fo, dout);
    cast(DT::F32, fo, DT::BF16, out, no);
    return;
  }
  switch (op) {
  case Binary::BitAnd: case Binary::BitOr: case Binary::BitXor: case Binary::ShiftLeft:
  case Binary::ShiftRight:
    if (t != DT::I32 && t != DT::I64)
      fatal("binary: bitwise ops take integer tensors");
    [[fallthrough]];
  case Binary::Add: case Binary::Sub: case Binary::Mul: case Binary::Div:
  case Binary::Pow: case Binary::Max: case Binary::Min: case Binary::Rem:
    dispatchNumeric(t, "binary: arithmetic needs a numeric type", [&](auto tag) {
      using T = typename decltype(tag)::type;
      binaryArith<T>(op, static_cast<const T *>(a), da,
                     static_cast<const T *>(b), db, static_cast<T *>(out),
                     dout);
    });
    return;
  case Binary::Eq: case Binary::Ne: case Binary::Lt: case Binary::Le:
  case Binary::Gt: case Binary::Ge:
    dispatchAll(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      binaryCompare<T>(op, static_cast<const T *>(a), da,
                       static_cast<const T *>(b), db,
                       static_cast<uint8_t *>(out), dout);
    });
    return;
  case Binary::And: case Binary::Or: case Binary::Xor: {
    if (t != DT::BOOL)
      fatal("binary: logical ops take bool tensors");
    auto *pa = static_cast<const uint8_t *>(a);
    auto *pb = static_cast<const uint8_t *>(b);
    auto *po = static_cast<uint8_t *>(out);
    if (op == Binary::And)
      binaryLoop<uint8_t, uint8_t>(pa, da, pb, db, po, dout, [](uint8_t x, uint8_t y) {
        return uint8_t((x != 0) & (y != 0));
      });
    else if (op == Binary::Or)
      binaryLoop<uint8_t, uint8_t>(pa, da, pb, db, po, dout, [](uint8_t x, uint8_t y) {
        return uint8_t((x != 0) | (y != 0));
      });
    else
      binaryLoop<uint8_t, uint8_t>(pa, da, pb, db, po, dout, [](uint8_t x, uint8_t y) {
        return uint8_t((x != 0) != (y != 0));
      });
    return;
  }
  }
  fatal("binary: unknown op");
}

// --- where --------------------------------------------------------------------

namespace {
template <class E>
void whereLoop(const uint8_t *c, const Dims &dc, const E *a, const Dims &da,
               const E *b, const Dims &db, E *out, const Dims &dout) {
  const int64_t n = dout.numel();
  if (n == 0)
    return;
  if (dc.numel() == n && da.numel() == n && db.numel() == n) {
    parallelFor(n, 1, [&](int64_t s, int64_t e) {
      MERAK_RT_VECTORIZE
      for (int64_t i = s; i < e; ++i)
        out[i] = c[i] ? a[i] : b[i];
    });
    return;
  }
  const Dims *ins[3] = {&dc, &da, &db};
  Plan<3> p = broadcastPlan<3>(dout, ins);
  const int64_t sc = p.innerStride(0), sa = p.innerStride(1),
                sb = p.innerStride(2);
  forRows(p, [&](int64_t o, const int64_t *off, int64_t len) {
    const uint8_t *pc = c + off[0];
    const E *pa = a + off[1];
    const E *pb = b + off[2];
    E *po = out + o;
    if (sc == 1 && sa == 1 && sb == 1) {
      for (int64_t i = 0; i < len; ++i)
        po[i] = pc[i] ? pa[i] : pb[i];
    } else if (sc == 1 && sa == 1 && sb == 0) { // masked fill with a scalar
      const E bv = *pb;
      for (int64_t i = 0; i < len; ++i)
        po[i] = pc[i] ? pa[i] : bv;
    } else if (sc == 1 && sa == 0 && sb == 1) {
      const E av = *pa;
      for (int64_t i = 0; i < len; ++i)
        po[i] = pc[i] ? av : pb[i];
    } else if (sc == 0) { // one condition for the whole row
      if (*pc) {
        for (int64_t i = 0; i < len; ++i)
          po[i] = pa[i * sa];
      } else {
        for (int64_t i = 0; i < len; ++i)
          po[i] = pb[i * sb];
      }
    } else {
      for (int64_t i = 0; i < len; ++i)
        po[i] = pc[i * sc] ? pa[i * sa] : pb[i * sb];
    }
  });
}
} // namespace

void where(const void *cond, const Dims &dc, DT t, const void *a,
           const Dims &da, const void *b, const Dims &db, void *out,
           const Dims &dout) {
  dispatchBySize(t, [&](auto tag) {
    using E = typename decltype(tag)::type;
    whereLoop<E>(static_cast<const uint8_t *>(cond), dc,
                 static_cast<const E *>(a), da, static_cast<const E *>(b), db,
                 static_cast<E *>(out), dout);
  });
}

// --- cast ---------------------------------------------------------------------

namespace {
template <class To, class From> inline To convert(From v) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    return static_cast<uint8_t>(v != From(0));
  } else if constexpr (std::is_floating_point_v<To>) {
    if constexpr (std::is_floating_point_v<From>)
      return static_cast<To>(v);
    else // int -> double -> To, as the evaluator (one rounding for F64)
      return static_cast<To>(static_cast<double>(v));
  } else if constexpr (std::is_floating_point_v<From>) {
    // Truncation toward zero, saturating; NaN -> 0 (the evaluator's rule).
    const double t = std::trunc(static_cast<double>(v));
    if (std::isnan(t))
      return 0;
    constexpr double lo = sizeof(To) == 4 ? -0x1p31 : -0x1p63;
    constexpr double hi = sizeof(To) == 4 ? 0x1p31 : 0x1p63;
    if (t <= lo)
      return std::numeric_limits<To>::min();
    if (t >= hi)
      return std::numeric_limits<To>::max();
    return static_cast<To>(t);
  } else { // int -> int wraps
    using UT = std::make_unsigned_t<To>;
    return static_cast<To>(static_cast<UT>(static_cast<uint64_t>(
        static_cast<int64_t>(v))));
  }
}
} // namespace

void cast(DT from, const void *x, DT to, void *y, int64_t n) {
  if (n <= 0)
    return;
  if (from == to) {
    copyBytes(y, x, n * elemSize(from));
    return;
  }
  // bf16 goes through float32: widening is exact, narrowing rounds once
  // (to nearest even), as the evaluator's APFloat conversion.
  if (from == DT::BF16 || to == DT::BF16) {
    parallelFor(n, 1, [&](int64_t s, int64_t e) {
      constexpr int64_t kChunk = 1024;
      float buf[kChunk];
      for (int64_t b = s; b < e; b += kChunk) {
        const int64_t m = std::min(kChunk, e - b);
        if (from == DT::BF16) {
          const uint16_t *px = static_cast<const uint16_t *>(x) + b;
          for (int64_t i = 0; i < m; ++i)
            buf[i] = bf16ToFloat(px[i]);
        } else {
          cast(from, static_cast<const char *>(x) + b * elemSize(from), DT::F32, buf, m);
        }
        if (to == DT::BF16) {
          uint16_t *py = static_cast<uint16_t *>(y) + b;
          for (int64_t i = 0; i < m; ++i)
            py[i] = floatToBf16(buf[i]);
        } else {
          cast(DT::F32, buf, to, static_cast<char *>(y) + b * elemSize(to), m);
        }
      }
    });
    return;
  }
  dispatchAll(from, [&](auto ftag) {
    using F = typename decltype(ftag)::type;
    dispatchAll(to, [&](auto ttag) {
      using T = typename decltype(ttag)::type;
      const F *px = static_cast<const F *>(x);
      T *py = static_cast<T *>(y);
      parallelFor(n, 1, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i)
          py[i] = convert<T, F>(px[i]);
      });
    });
  });
}

} // namespace merak::rt::cpu
