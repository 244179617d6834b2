//===- sgemm_choice.cpp - oneDNN's and OpenBLAS's sgemm, shape by shape ----===//
//
// The CPU runtime multiplies float matrices with oneDNN's JIT sgemm, except
// where sgemmPrefersOpenBlas (runtime/include/merak_rt/kernels.h) sends a
// call to OpenBLAS: A^T B and A^T B^T with a contraction of 512 or more (the
// weight gradients), and products other than A B^T that read an operand
// whose rows are a multiple of 512 floats apart. This benchmark times both
// libraries on one thread at the calls the runtime makes for
// bench/zoo_step.py's models (d = 256, batch 8 x 128 tokens, vocab 2048;
// the runtime cuts a product into blocks of 256+ rows or 512+ columns, so a
// [1024, 1024] result is four calls of 256 rows) and at attention tiles
// (a [rows, width] probability tile against a head's D columns of a [T, H*D]
// tensor), row-major C[M, N] = op(A) op(B) with K contracted, on 64-byte
// aligned buffers like the runtime's arena. It prints which library the
// runtime picks, so the rule can be checked on a new machine:
//
//   ninja -C build merak-bench-sgemm && build/bench/merak-bench-sgemm
//
// (a target only where the runtime found oneDNN; without it every float
// GEMM is OpenBLAS's and there is nothing to choose).
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dnnl.h>
#include <merak_rt/kernels.h>
#include <random>
#include <string>
#include <unistd.h>

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F> double best(F f) {
  f();
  double b = 1e30;
  for (int r = 0; r < 7; ++r) {
    double t = seconds();
    f();
    b = std::min(b, seconds() - t);
  }
  return b;
}

struct Shape {
  bool ta, tb;
  long m, n, k;
  const char *what;
  long lda = 0, ldb = 0; // the stored operands' row strides; 0: packed
};

/// A 64-byte aligned float buffer (the runtime's arena aligns every tensor
/// so), filled from rng.
struct Buffer {
  float *p;
  Buffer(long n, std::mt19937 &rng)
      : p(static_cast<float *>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64))) {
    std::uniform_real_distribution<float> u(-1, 1);
    for (long i = 0; i < n; ++i)
      p[i] = u(rng);
  }
  ~Buffer() { std::free(p); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
};

} // namespace

int main(int argc, char **argv) {
  // Both libraries on one thread: OpenMP reads OMP_NUM_THREADS when the
  // program loads, so set it and start again.
  if (const char *t = std::getenv("OMP_NUM_THREADS"); !t || std::string(t) != "1") {
    setenv("OMP_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);
  }
  (void)argc;
  openblas_set_num_threads(1);
  const Shape shapes[] = {
      {false, true, 1024, 768, 256, "x W^T (QKV projection)"},
      {false, true, 1024, 1024, 256, "x W^T (MLP up)"},
      {false, true, 1024, 2048, 256, "x W^T (LM head)"},
      {false, false, 256, 256, 1024, "dY W, a 256-row block (MLP down)"},
      {false, false, 256, 768, 256, "dY W, a 256-row block (QKV)"},
      {false, false, 256, 1024, 256, "dY W, a 256-row block (MLP up)"},
      {false, false, 256, 2048, 256, "dY W, a 256-row block (2048 wide)"},
      {true, false, 256, 256, 1024, "dY^T X (out-projection weight grad)"},
      {true, false, 768, 256, 1024, "dY^T X (QKV weight grad)"},
      {true, false, 1024, 256, 1024, "dY^T X (MLP up weight grad)"},
      {true, false, 256, 1024, 1024, "dY^T X (MLP down weight grad)"},
      {true, false, 2048, 256, 1024, "dY^T X (LM head weight grad)"},
      {false, true, 128, 128, 64, "attention S = Q K^T, H*D = 256", 256, 256},
      {false, false, 128, 64, 128, "attention O = P V, H*D = 256", 128, 256},
      {true, false, 128, 64, 128, "attention dV = P^T dO, H*D = 256", 128, 256},
      {false, false, 128, 64, 128, "attention O = P V, H*D = 1024", 128, 1024},
      {true, false, 128, 64, 128, "attention dV = P^T dO, H*D = 1024", 128, 1024},
      {true, true, 256, 256, 1024, "A^T B^T, a long contraction"},
      {true, true, 256, 1024, 256, "A^T B^T, a 256-row block of 1024", 1024},
      {true, true, 256, 768, 256, "A^T B^T, a 256-row block of 768", 768},
      {true, false, 256, 1024, 8, "dH^T G, one LSTM step (K = batch)"},
      {false, true, 8, 1024, 256, "h R^T, one LSTM step"},
  };

  std::mt19937 rng(1);
  std::printf("%-3s %5s %5s %5s  %-40s %8s %8s %6s  %s\n", "op", "M", "N", "K", "", "oneDNN",
              "OpenBLAS", "ratio", "runtime picks");
  for (const Shape &s : shapes) {
    const long lda = s.lda ? s.lda : (s.ta ? s.m : s.k), ldb = s.ldb ? s.ldb : (s.tb ? s.k : s.n);
    Buffer a((s.ta ? s.k : s.m) * lda, rng), b((s.tb ? s.n : s.k) * ldb, rng), c(s.m * s.n, rng);
    const double dnnl = best([&] {
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.f, a.p, lda, b.p, ldb, 0.f,
                 c.p, s.n);
    });
    const double blas = best([&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  s.m, s.n, s.k, 1.f, a.p, lda, b.p, ldb, 0.f, c.p, s.n);
    });
    const double gflop = 2.0 * s.m * s.n * s.k / 1e9;
    const bool picksBlas = merak::rt::cpu::sgemmPrefersOpenBlas(s.ta, s.tb, s.k, lda, ldb);
    const bool right = picksBlas == (blas < dnnl);
    std::printf("%c%c  %5ld %5ld %5ld  %-40s %8.1f %8.1f %6.2f  %s%s\n", s.ta ? 'T' : 'N',
                s.tb ? 'T' : 'N', s.m, s.n, s.k, s.what, gflop / dnnl, gflop / blas, blas / dnnl,
                picksBlas ? "OpenBLAS" : "oneDNN", right ? "" : " (the slower)");
  }
  std::printf("GFLOP/s on one thread; ratio = OpenBLAS's time / oneDNN's\n");
}
