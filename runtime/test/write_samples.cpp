//===- write_samples.cpp - files for the Python format checks -------------===//
//
// Usage: merak_runtime_write_samples OUTDIR
// Writes sample.safetensors, ckpt/, trace.json, metrics.jsonl, tokens.bin and
// windows.txt into OUTDIR (which must exist); check_formats.py reads them
// with nothing but the Python standard library and numpy.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/data.h"
#include "merak_rt/metrics.h"
#include "merak_rt/safetensors.h"
#include "merak_rt/trace.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace merak::rt;

static int check(const Status &s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  std::string out = argv[1];

  // Tensors of every dtype with values the Python side recomputes.
  std::vector<float> f32(12);
  for (int i = 0; i < 12; ++i)
    f32[i] = i * 0.25f - 1.0f;
  std::vector<uint16_t> f16 = {0x0000, 0x3C00, 0xC000, 0x3800, 0x7BFF};
  std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x3F00, 0x4040};
  double f64 = M_PI;
  std::vector<int64_t> i64 = {-3, -2, -1, 0, 1, int64_t(1) << 40};
  std::vector<int32_t> i32 = {0, -1000, -2000, -3000};
  std::vector<uint8_t> mask = {1, 0, 0, 1};
  std::vector<uint16_t> u16 = {0, 1, 65535};
  float answer = 42.0f;
  std::vector<TensorRef> tensors = {
      {"transformer.h.0.attn.c_attn.weight", DType::F32, {3, 4}, f32.data()},
      {"f16", DType::F16, {5}, f16.data()},
      {"bf16", DType::BF16, {2, 2}, bf16.data()},
      {"f64", DType::F64, {}, &f64},
      {"optimizer.adamw.m.transformer.wte.weight", DType::I64, {2, 3},
       i64.data()},
      {"i32", DType::I32, {4}, i32.data()},
      {"mask", DType::BOOL, {2, 2}, mask.data()},
      {"u16", DType::U16, {3}, u16.data()},
      {"\xe6\x97\xa5\xe6\x9c\xac.\xc3\xbc \"q\"", DType::F32, {1}, &answer},
      {"empty", DType::F32, {0, 4}, nullptr},
  };
  Metadata meta = {{"format", "pt"}, {"note", "quote\" backslash\\"}};
  if (check(writeSafetensors(out + "/sample.safetensors", tensors, meta)))
    return 1;
  if (check(saveCheckpoint(out + "/ckpt", 4, tensors, meta)) ||
      check(saveCheckpoint(out + "/ckpt", 5, tensors, meta)))
    return 1;

  // A trace of a made-up step.
  TraceWriter trace(1);
  trace.setProcessName("rank 1");
  trace.setThreadName(0, "compute");
  trace.setThreadName(1, "comm");
  trace.complete("forward", "phase", 0, 100, 0);
  trace.complete("matmul", "kernel", 10, 20.5, 0, {{"m", 64}, {"n", 128}});
  trace.complete("allreduce", "comm", 100, 50, 1);
  TraceWriter::Span span = trace.begin("backward", "phase", 0);
  trace.end(span);
  if (check(trace.write(out + "/trace.json")))
    return 1;

  // Metrics: three steps, one of them non-finite.
  Result<MetricsWriter> metrics = MetricsWriter::open(out + "/metrics.jsonl");
  if (check(metrics.status()))
    return 1;
  for (int step = 0; step < 3; ++step) {
    StepMetrics m;
    m.step = step;
    m.loss = step == 2 ? NAN : 10.0 / (step + 1);
    m.lr = 6e-4;
    m.gradNorm = 1.5;
    m.tokensPerSecond = 1024.0 * (step + 1);
    m.timeMs = 100.25;
    m.extra = {{"val_loss", 3.5}};
    if (check(metrics->write(m)))
      return 1;
  }

  // A token file and the windows of both samplers.
  const int64_t n = 500, t = 16, b = 4;
  std::vector<uint16_t> tokens(n);
  for (int64_t i = 0; i < n; ++i)
    tokens[i] = static_cast<uint16_t>((i * 7919) % 65521);
  std::FILE *f = std::fopen((out + "/tokens.bin").c_str(), "wb");
  if (!f || std::fwrite(tokens.data(), 2, n, f) != size_t(n))
    return 1;
  std::fclose(f);
  std::FILE *w = std::fopen((out + "/windows.txt").c_str(), "w");
  for (Sampler sampler : {Sampler::Sequential, Sampler::Random}) {
    Result<TokenDataset> d =
        TokenDataset::open(out + "/tokens.bin", t, sampler, 7);
    if (check(d.status()))
      return 1;
    std::vector<int64_t> in(b * t), lab(b * t);
    for (int64_t s = 0; s < 5; ++s) {
      if (check(d->fill(s, b, in.data(), lab.data())))
        return 1;
      for (int64_t r = 0; r < b; ++r) {
        std::fprintf(w, "%s %lld %lld", samplerName(sampler), (long long)s,
                     (long long)r);
        for (int64_t k = 0; k < t; ++k)
          std::fprintf(w, " %lld", (long long)in[r * t + k]);
        std::fprintf(w, " |");
        for (int64_t k = 0; k < t; ++k)
          std::fprintf(w, " %lld", (long long)lab[r * t + k]);
        std::fprintf(w, "\n");
      }
    }
  }
  std::fclose(w);
  return 0;
}
