//===- bench_kernels.cu - Attention and cuBLASLt GEMM throughput ------------===//
//
// merak_gpu_bench [--quick] [--json FILE]: times the runtime's fused causal
// attention (forward, backward) and cuBLASLt GEMMs on GPT-2-124M shapes
// (B=16, T=1024, C=768, 12 heads of 64, vocab 50304) and prints achieved
// TFLOP/s. Median of N timed repetitions after warm-up (CUDA events).
// A benchmark, not a test: correctness is train_test's job.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cuda/attention.h"
#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/gemm.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace merak::rt::cuda;
using merak::rt::Status;

namespace {
void must(const Status &s, const char *what) {
  if (!s.ok()) {
    std::fprintf(stderr, "FATAL %s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}
void *alloc(size_t bytes) {
  auto r = deviceAlloc(bytes);
  must(r.status(), "deviceAlloc");
  // Every byte 0x3c: 0.0115 as bf16 (0x3c3c) and as fp32 (0x3c3c3c3c),
  // finite and non-zero; filled on the device (the LM head's buffers are
  // gigabytes).
  must(memsetDevice(*r, 0x3c, bytes), "memsetDevice");
  return *r;
}

/// Median milliseconds of `reps` runs of f (after `warm` untimed runs).
double timeMs(const std::function<void()> &f, int warm, int reps) {
  for (int i = 0; i < warm; ++i)
    f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "FATAL: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::string json;
void record(const std::string &name, double ms, double flops) {
  const double tflops = flops / (ms * 1e-3) / 1e12;
  std::printf("%-52s %9.3f ms %8.1f TFLOP/s\n", name.c_str(), ms, tflops);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s{\"name\": \"%s\", \"ms\": %.4f, \"tflops\": %.2f}",
                json.empty() ? "" : ", ", name.c_str(), ms, tflops);
  json += buf;
}
} // namespace

int main(int argc, char **argv) {
  bool quick = false;
  const char *jsonPath = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      jsonPath = argv[++i];
  }
  auto dev = Device::open(0);
  if (!dev.ok()) {
    std::printf("SKIP: %s\n", dev.message().c_str());
    return 77;
  }
  std::printf("device: %s\n", dev->describe().c_str());
  const int warm = quick ? 2 : 5, reps = quick ? 5 : 20;
  const int64_t B = 16, T = 1024, C = 768, H = 12, D = 64, V = 50304;
  const int64_t M = B * T;

  // --- attention (GPT-2 layout: packed qkv [B, T, 3C], out [B, T, C]) ------
  for (DType t : {DType::BF16, DType::F32}) {
    const int64_t es = dtypeSize(t);
    void *qkv = alloc(M * 3 * C * es), *o = alloc(M * C * es),
         *dO = alloc(M * C * es), *dqkv = alloc(M * 3 * C * es);
    float *lse = static_cast<float *>(alloc(B * H * T * 4));
    float *delta = static_cast<float *>(alloc(B * H * T * 4));
    AttnShape s;
    s.B = B, s.H = H, s.T = T, s.D = D;
    auto P = [&](void *p, int w) {
      return AttnOperand::packedQKV(p, t, w, H, T, D);
    };
    const AttnOperand oo = AttnOperand::bthd(o, H, T, D),
                      og = AttnOperand::bthd(dO, H, T, D);
    const double f = attentionForwardFlops(s);
    const char *tn = t == DType::BF16 ? "bf16" : "fp32";
    record(std::string("attention fwd ") + tn + " B16 H12 T1024 D64 causal",
           timeMs([&] {
             must(attentionForward(t, s, P(qkv, 0), P(qkv, 1), P(qkv, 2), oo,
                                   lse, nullptr),
                  "attentionForward");
           }, warm, reps),
           f);
    if (t == DType::BF16) {
      AttnShape tc = s;
      tc.tensorCores = true;
      record("attention fwd bf16 B16 H12 T1024 D64 causal, tensor cores",
             timeMs([&] {
               must(attentionForward(t, tc, P(qkv, 0), P(qkv, 1), P(qkv, 2),
                                     oo, lse, nullptr),
                    "attentionForward (tensor cores)");
             }, warm, reps),
             f);
    }
    record(std::string("attention bwd ") + tn + " B16 H12 T1024 D64 causal",
           timeMs([&] {
             must(attentionBackward(t, s, P(qkv, 0), P(qkv, 1), P(qkv, 2), oo,
                                    og, lse, delta, P(dqkv, 0), P(dqkv, 1),
                                    P(dqkv, 2), nullptr),
                  "attentionBackward");
           }, warm, reps),
           2.5 * f);
    if (t == DType::BF16) {
      AttnShape tc = s;
      tc.tensorCores = true;
      record("attention bwd bf16 B16 H12 T1024 D64 causal, tensor cores",
             timeMs([&] {
               must(attentionBackward(t, tc, P(qkv, 0), P(qkv, 1), P(qkv, 2), oo, og, lse,
                                      delta, P(dqkv, 0), P(dqkv, 1), P(dqkv, 2), nullptr),
                    "attentionBackward (tensor cores)");
             }, warm, reps),
             2.5 * f);
    }
    for (void *p : {qkv, o, dO, dqkv, static_cast<void *>(lse),
                    static_cast<void *>(delta)})
      deviceFree(p);
  }

  // --- GEMMs of one GPT-2 124M training step (per layer + LM head) ---------
  auto blas = Blas::create();
  must(blas.status(), "Blas::create");
  struct G {
    const char *name;
    int64_t m, n, k;
    bool ta, tb;
  };
  // Forward Y[M,N] = X[M,K] W^T (W stored [N,K] as nn.Linear), and the two
  // backward products: dX = dY W (M,K,N) and dW = dY^T X (N,K,M).
  const G gemms[] = {
      {"qkv fwd", M, 3 * C, C, false, true},
      {"qkv dX", M, C, 3 * C, false, false},
      {"qkv dW", 3 * C, C, M, true, false},
      {"attn proj fwd", M, C, C, false, true},
      {"mlp fc fwd", M, 4 * C, C, false, true},
      {"mlp fc dX", M, C, 4 * C, false, false},
      {"mlp fc dW", 4 * C, C, M, true, false},
      {"mlp proj fwd", M, C, 4 * C, false, true},
      {"lm head fwd", M, V, C, false, true},
      {"lm head dX", M, C, V, false, false},
      {"lm head dW", V, C, M, true, false},
  };
  for (GemmPrecision p : {GemmPrecision::BF16, GemmPrecision::TF32}) {
    const int64_t es = p == GemmPrecision::BF16 ? 2 : 4;
    for (const G &g : gemms) {
      if (quick && p == GemmPrecision::TF32 && std::strstr(g.name, "lm head"))
        continue;
      void *A = alloc(g.m * g.k * es), *Bm = alloc(g.n * g.k * es),
           *Cm = alloc(g.m * g.n * es);
      GemmShape s;
      s.M = g.m, s.N = g.n, s.K = g.k, s.transA = g.ta, s.transB = g.tb;
      record(std::string("gemm ") +
                 (p == GemmPrecision::BF16 ? "bf16 " : "tf32 ") + g.name +
                 " " + std::to_string(g.m) + "x" + std::to_string(g.n) +
                 "x" + std::to_string(g.k),
             timeMs([&] {
               must(blas->gemm(p, s, 1.f, A, Bm, 0.f, Cm, nullptr),
                    "gemm");
             }, warm, reps),
             2.0 * g.m * g.n * g.k);
      deviceFree(A);
      deviceFree(Bm);
      deviceFree(Cm);
    }
  }
  if (jsonPath) {
    FILE *f = std::fopen(jsonPath, "w");
    if (f) {
      std::fprintf(f, "{\"device\": \"%s\", \"results\": [%s]}\n",
                   dev->describe().c_str(), json.c_str());
      std::fclose(f);
    }
  }
  return 0;
}
