//===- fake_program.cpp - A hand-written "generated program" for tests ----===//
//
// Stands in for what merak-compile --compile-to=binary emits (program.h):
// a merak_train_step, the manifest, the initial data and a main calling
// merak_train_main. The model is a bigram language model over a vocabulary
// of 16: logits[n] = (W[token[n]] + b) / temperature, mean cross-entropy
// against the labels, SGD with momentum 0.9 and a linear warm-up of the
// learning rate over 4 steps.
//
// Layout of P (offsets in bytes): the lr hparam (F32) at 0, the frozen
// temperature (F32, 1.0) at 64, the step counter (I64 state) at 128,
// bigram.weight [16,16] at 192, bigram.bias [16] at 1216, their momentum
// buffers at 1280 and 2304; params_bytes 2368. C: one F32 constant 1/(B*T)
// at consts_offset 2368. A: tokens I32 [4,8] at 0, labels I64 [4,8] at 128,
// step I64 at 384, outputs from 448 on.
//
// Test hooks: the outputs "batch_checksum" and "step_seen" (F64) let the
// tests check which batch the runtime fed; an lr of 1000 or more makes the
// loss NaN from step 2 on. With -DFAKE_BAD_MANIFEST the manifest is corrupt
// (a param outside params_bytes).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"
#include "merak_rt/program.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

constexpr int V = 16, B = 4, T = 8, N = B * T;

enum : int {
  kLr = 0, kTemperature = 64, kStepCount = 128, kW = 192, kBias = 1216,
  kMomW = 1280, kMomBias = 2304, kParamsBytes = 2368,
};
enum : int {
  kTokens = 0, kLabels = 128, kStep = 384, kLoss = 448, kGradNorm = 512,
  kLrOut = 576, kChecksum = 640, kStepSeen = 704, kArenaBytes = 768,
};

template <typename T> T load(const char *base, int offset) {
  T v;
  std::memcpy(&v, base + offset, sizeof(T));
  return v;
}
template <typename T> void store(char *base, int offset, T v) {
  std::memcpy(base + offset, &v, sizeof(T));
}

} // namespace

extern "C" void merak_train_step(char *A, char *P, const char *C) {
  using merak::rt::cpu::opMark;
  auto *W = reinterpret_cast<float *>(P + kW);
  auto *bias = reinterpret_cast<float *>(P + kBias);
  auto *mW = reinterpret_cast<float *>(P + kMomW);
  auto *mBias = reinterpret_cast<float *>(P + kMomBias);
  const auto *tokens = reinterpret_cast<const int32_t *>(A + kTokens);
  const auto *labels = reinterpret_cast<const int64_t *>(A + kLabels);
  int64_t step = load<int64_t>(A, kStep);
  float peak = load<float>(P, kLr);
  float temperature = load<float>(P, kTemperature);
  float invCount = load<float>(C, 0);
  float lr = peak * std::fmin(1.0f, static_cast<float>(step + 1) / 4.0f);

  opMark(0); // embedding
  float logits[N][V];
  for (int n = 0; n < N; ++n)
    for (int v = 0; v < V; ++v)
      logits[n][v] = (W[tokens[n] * V + v] + bias[v]) / temperature;

  opMark(1); // cross_entropy (+ its gradient)
  double loss = 0;
  float dlogits[N][V];
  for (int n = 0; n < N; ++n) {
    float mx = logits[n][0];
    for (int v = 1; v < V; ++v)
      mx = std::fmax(mx, logits[n][v]);
    float sum = 0;
    for (int v = 0; v < V; ++v)
      sum += std::exp(logits[n][v] - mx);
    float lse = mx + std::log(sum);
    loss += lse - logits[n][labels[n]];
    for (int v = 0; v < V; ++v)
      dlogits[n][v] = (std::exp(logits[n][v] - lse) -
                       (v == labels[n] ? 1.0f : 0.0f)) *
                      invCount / temperature;
  }
  loss *= invCount;

  opMark(2); // embedding_backward
  float gW[V * V] = {}, gBias[V] = {};
  for (int n = 0; n < N; ++n)
    for (int v = 0; v < V; ++v) {
      gW[tokens[n] * V + v] += dlogits[n][v];
      gBias[v] += dlogits[n][v];
    }

  opMark(3); // grad_norm
  double sq = 0;
  for (float g : gW)
    sq += double(g) * g;
  for (float g : gBias)
    sq += double(g) * g;

  opMark(4); // sgd_momentum
  for (int i = 0; i < V * V; ++i) {
    mW[i] = 0.9f * mW[i] + gW[i];
    W[i] -= lr * mW[i];
  }
  for (int i = 0; i < V; ++i) {
    mBias[i] = 0.9f * mBias[i] + gBias[i];
    bias[i] -= lr * mBias[i];
  }
  store<int64_t>(P, kStepCount, load<int64_t>(P, kStepCount) + 1);
  opMark(-1);

  if (peak >= 1000 && step >= 2)
    loss = std::nan("");
  double checksum = 0;
  for (int n = 0; n < N; ++n)
    checksum += (tokens[n] + 17.0 * labels[n]) * (n + 1);
  store<float>(A, kLoss, static_cast<float>(loss));
  store<float>(A, kGradNorm, static_cast<float>(std::sqrt(sq)));
  store<float>(A, kLrOut, lr);
  store<double>(A, kChecksum, checksum);
  store<double>(A, kStepSeen, static_cast<double>(step));
}

extern "C" const char merak_manifest[] = R"({
  "format": 1,
  "entry": "train_step",
  "arena_bytes": 768,)"
#ifdef FAKE_BAD_MANIFEST
    R"("params_bytes": 2000,)"
#else
    R"("params_bytes": 2368,)"
#endif
    R"m(
  "consts_offset": 2368,
  "consts_bytes": 64,
  "params": [
    {"name": "hparam.lr", "dtype": "F32", "shape": [], "offset": 0,
     "bytes": 4, "kind": "hparam"},
    {"name": "temperature", "dtype": "F32", "shape": [], "offset": 64,
     "bytes": 4, "kind": "frozen"},
    {"name": "optimizer.step", "dtype": "I64", "shape": [], "offset": 128,
     "bytes": 8, "kind": "state"},
    {"name": "bigram.weight", "dtype": "F32", "shape": [16, 16],
     "offset": 192, "bytes": 1024, "kind": "trainable"},
    {"name": "bigram.bias", "dtype": "F32", "shape": [16], "offset": 1216,
     "bytes": 64, "kind": "trainable"},
    {"name": "optimizer.sgd.momentum.bigram.weight", "dtype": "F32",
     "shape": [16, 16], "offset": 1280, "bytes": 1024, "kind": "state"},
    {"name": "optimizer.sgd.momentum.bigram.bias", "dtype": "F32",
     "shape": [16], "offset": 2304, "bytes": 64, "kind": "state"}
  ],
  "inputs": [
    {"name": "input_ids", "role": "tokens", "dtype": "I32", "shape": [4, 8],
     "offset": 0},
    {"name": "labels", "role": "labels", "dtype": "I64", "shape": [4, 8],
     "offset": 128},
    {"name": "step", "role": "step", "dtype": "I64", "shape": [],
     "offset": 384}
  ],
  "outputs": [
    {"name": "loss", "dtype": "F32", "shape": [], "offset": 448},
    {"name": "grad_norm", "dtype": "F32", "shape": [], "offset": 512},
    {"name": "lr", "dtype": "F32", "shape": [], "offset": 576},
    {"name": "batch_checksum", "dtype": "F64", "shape": [], "offset": 640},
    {"name": "step_seen", "dtype": "F64", "shape": [], "offset": 704}
  ],
  "hparams": {"lr": "hparam.lr"},
  "ops": ["embedding", "cross_entropy", "embedding_backward", "grad_norm",
          "sgd_momentum"],
  "op_keys": ["fake.gather(tensor<16x16xf32>)", "fake.cross_entropy(tensor<4x8x16xf32>)",
              "fake.gather(tensor<16x16xf32>)", "fake.grad_norm(tensor<16x16xf32>)",
              "fake.sgd(tensor<16x16xf32>)"],
  "defaults": {"lr": 0.1, "optimizer": "sgd", "batch_size": 4},
  "model": "bigram.onnx"
})m";

// The initial data: P (lr 0.5 -- overridden at run time --, temperature 1.0,
// everything else zero), then C (1/32).
#define Z4 0, 0, 0, 0
#define Z8 Z4, Z4
#define Z60 Z8, Z8, Z8, Z8, Z8, Z8, Z8, Z4
#define Z64 Z8, Z8, Z8, Z8, Z8, Z8, Z8, Z8
#define Z64x5 Z64, Z64, Z64, Z64, Z64
extern "C" alignas(64) const unsigned char merak_data[2432] = {
    0, 0, 0, 0x3f, Z60,                          // hparam.lr = 0.5f
    0, 0, 0x80, 0x3f, Z60,                       // temperature = 1.0f
    Z64x5, Z64x5, Z64x5, Z64x5, Z64x5, Z64x5, Z64x5, // 35 x 64 zero bytes
    0, 0, 0, 0x3d, Z60,                          // C: 1/32 = 0.03125f
};
extern "C" const uint64_t merak_data_size = sizeof(merak_data);
static_assert(sizeof(merak_data) == 2368 + 64, "layout");

int main(int argc, char **argv) { return merak_train_main(argc, argv); }
