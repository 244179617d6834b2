//===- sgemm_choice.cpp - oneDNN's and OpenBLAS's sgemm, shape by shape ----===//
//
// The CPU runtime multiplies float matrices with oneDNN's JIT sgemm, except
// A^T B and A^T B^T with a contraction of 512 or more (the weight
// gradients), which go to OpenBLAS (sgemmPrefersOpenBlas in
// runtime/include/merak_rt/kernels.h). This benchmark times both
// libraries on one thread at the GEMM shapes of bench/zoo_step.py's models
// (d = 256, batch 8 x 128 tokens, vocab 2048: row-major C[M, N] = op(A)
// op(B) with K contracted) and prints which one the runtime picks, so the
// rule can be checked on a new machine:
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
#include <vector>

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
      {false, false, 1024, 256, 1024, "dY W (MLP down's input grad)"},
      {false, false, 1024, 256, 2048, "dY W (LM head's input grad)"},
      {true, false, 256, 256, 1024, "dY^T X (out-projection weight grad)"},
      {true, false, 768, 256, 1024, "dY^T X (QKV weight grad)"},
      {true, false, 1024, 256, 1024, "dY^T X (MLP up weight grad)"},
      {true, false, 256, 1024, 1024, "dY^T X (MLP down weight grad)"},
      {true, false, 2048, 256, 1024, "dY^T X (LM head weight grad)"},
      {true, false, 128, 32, 128, "attention tile (dK = dS^T Q)"},
      {true, true, 1024, 256, 1024, "A^T B^T, a long contraction"},
      {true, true, 1024, 1024, 256, "A^T B^T, a short one"},
      {true, false, 256, 1024, 8, "dH^T G, one LSTM step (K = batch)"},
      {false, true, 8, 1024, 256, "h R^T, one LSTM step"},
  };
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::printf("%-3s %5s %5s %5s  %-36s %8s %8s %6s  %s\n", "op", "M", "N", "K", "", "oneDNN",
              "OpenBLAS", "ratio", "runtime picks");
  for (const Shape &s : shapes) {
    std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
    for (float &x : a)
      x = u(rng);
    for (float &x : b)
      x = u(rng);
    const long lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const double dnnl = best([&] {
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.f, a.data(), lda, b.data(),
                 ldb, 0.f, c.data(), s.n);
    });
    const double blas = best([&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), s.n);
    });
    const double gflop = 2.0 * s.m * s.n * s.k / 1e9;
    const bool picksBlas = merak::rt::cpu::sgemmPrefersOpenBlas(s.ta, s.k);
    const bool right = picksBlas == (blas < dnnl);
    std::printf("%c%c  %5ld %5ld %5ld  %-36s %8.1f %8.1f %6.2f  %s%s\n", s.ta ? 'T' : 'N',
                s.tb ? 'T' : 'N', s.m, s.n, s.k, s.what, gflop / dnnl, gflop / blas, blas / dnnl,
                picksBlas ? "OpenBLAS" : "oneDNN", right ? "" : " (the slower)");
  }
  std::printf("GFLOP/s on one thread; ratio = OpenBLAS's time / oneDNN's\n");
}
