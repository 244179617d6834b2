//===- train_test.cpp - Attention and mixed-precision kernels on a GPU -----===//
//
// merak_cuda_train_tests [attention|mixed|nccl ...]: the training-specific
// CUDA pieces against independent references computed here in double
// precision (no CPU-backend dependency, so it builds with nvcc + g++ alone:
// bench/gpu/run.sh uses it on a bare GPU machine):
//  * attention: fused causal attention forward (O, L) and backward (dQ, dK,
//    dV) vs naive attention in double, several (B, H, T, D), both layouts,
//    causal and not. Error = max |gpu - ref| / max |ref| per tensor; bound
//    2e-5 (fp32) for O/L, 1e-4 for fp32 gradients (they subtract Delta), and
//    1e-2 / 2e-2 for bf16 (inputs are rounded to bf16 first and the
//    reference uses the rounded values; the outputs carry one bf16 rounding,
//    2^-8 relative).
//  * mixed: fp32 -> bf16 casts over many segments in one launch, bf16 ->
//    fp32 gradient accumulation, vs host rounding (exact equality).
//  * nccl: single-rank NCCL communicators (all-reduce sum/mean f32/bf16,
//    reduce-scatter, all-gather, send/recv to self) vs the identity.
// Without a CUDA device it prints "SKIP: no CUDA device: ..." and exits 77.
//
//===----------------------------------------------------------------------===//
#include "train_test.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace merak::rt::cuda::test {

int failures = 0, checks = 0;
std::mt19937 rng(4321);

void must(const Status &s, const char *what) {
  if (!s.ok()) {
    std::fprintf(stderr, "FATAL %s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

Buf::Buf(size_t bytes_) : bytes(bytes_) {
  auto r = deviceAlloc(bytes + 16);
  must(r.status(), "deviceAlloc");
  p = *r;
}
Buf::~Buf() { deviceFree(p); }

std::vector<float> roundTo(std::vector<float> v, DType t) {
  if (t == DType::BF16)
    for (auto &x : v)
      x = bf16ToFloat(floatToBf16(x));
  return v;
}

std::vector<float> randn(size_t n, float stddev) {
  std::normal_distribution<float> d(0.f, stddev);
  std::vector<float> v(n);
  for (auto &x : v)
    x = d(rng);
  return v;
}

void putTyped(void *dev, const std::vector<float> &v, DType t) {
  if (t == DType::F32) {
    must(copyToDevice(dev, v.data(), v.size() * 4), "copyToDevice");
  } else {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      h[i] = floatToBf16(v[i]);
    must(copyToDevice(dev, h.data(), h.size() * 2), "copyToDevice");
  }
}
std::vector<float> getTyped(const void *dev, size_t n, DType t) {
  std::vector<float> v(n);
  if (t == DType::F32) {
    must(copyToHost(v.data(), dev, n * 4), "copyToHost");
  } else {
    std::vector<uint16_t> h(n);
    must(copyToHost(h.data(), dev, n * 2), "copyToHost");
    for (size_t i = 0; i < n; ++i)
      v[i] = bf16ToFloat(h[i]);
  }
  return v;
}

void compare(const std::string &what, const std::vector<float> &got,
             const std::vector<double> &ref, double bound) {
  ++checks;
  double maxDiff = 0, maxRef = 0;
  bool bad = got.size() != ref.size();
  for (size_t i = 0; i < ref.size() && !bad; ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i])) {
      bad |= std::isfinite(got[i]) != std::isfinite(ref[i]) ||
             (std::isinf(ref[i]) && double(got[i]) != ref[i]);
      continue;
    }
    maxDiff = std::max(maxDiff, std::fabs(double(got[i]) - ref[i]));
    maxRef = std::max(maxRef, std::fabs(ref[i]));
  }
  const double rel = maxDiff / std::max(maxRef, 1e-30);
  const bool ok = !bad && rel <= bound;
  std::printf("%s %-58s rel err %.3g (bound %.0e)\n", ok ? "ok  " : "FAIL",
              what.c_str(), rel, bound);
  if (!ok)
    ++failures;
}

void expect(bool cond, const std::string &what) {
  ++checks;
  std::printf("%s %s\n", cond ? "ok  " : "FAIL", what.c_str());
  if (!cond)
    ++failures;
}

} // namespace merak::rt::cuda::test

using namespace merak::rt::cuda;

int main(int argc, char **argv) {
  auto dev = Device::open(0);
  if (!dev.ok()) {
    std::printf("SKIP: %s\n", dev.message().c_str());
    return 77;
  }
  std::printf("device: %s\n", dev->describe().c_str());
  auto want = [&](const char *name) {
    if (argc < 2)
      return true;
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], name) == 0)
        return true;
    return false;
  };
  if (want("attention"))
    test::testAttention();
  if (want("mixed"))
    test::testMixed();
  if (want("nccl"))
    test::testNccl();
  std::printf("%d checks, %d failures\n", test::checks, test::failures);
  return test::failures ? 1 : 0;
}
