//===- train_test.h - Helpers of merak_cuda_train_tests --------*- C++ -*-===//
#ifndef MERAK_RT_CUDA_TEST_TRAIN_TEST_H
#define MERAK_RT_CUDA_TEST_TRAIN_TEST_H

#include "merak_rt/cuda/device.h"
#include "merak_rt/cuda/launch.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace merak::rt::cuda::test {

extern int failures, checks;
extern std::mt19937 rng;

void must(const Status &s, const char *what);

/// A raw device allocation of `bytes` (+16 slack).
struct Buf {
  void *p = nullptr;
  size_t bytes = 0;
  explicit Buf(size_t bytes);
  ~Buf();
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;
  float *f32() const { return static_cast<float *>(p); }
};

/// Rounds through bf16 when t is BF16 (the values the GPU sees).
std::vector<float> roundTo(std::vector<float> v, DType t);
std::vector<float> randn(size_t n, float stddev);
void putTyped(void *dev, const std::vector<float> &v, DType t);
std::vector<float> getTyped(const void *dev, size_t n, DType t);

/// Prints and counts one check: max |got - ref| / max |ref| <= bound
/// (non-finite values must match).
void compare(const std::string &what, const std::vector<float> &got,
             const std::vector<double> &ref, double bound);
void expect(bool cond, const std::string &what);

void testAttention();
void testMixed();
void testNccl();

} // namespace merak::rt::cuda::test

#endif
