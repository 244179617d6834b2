//===- manifest_test.cpp - the generated program's manifest ---------------===//
#include "manifest.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <string>

using namespace merak::rt;

namespace {

/// A valid manifest; `patch` replaces the first occurrence of `from` by `to`.
std::string manifest(const std::string &from = "", const std::string &to = "") {
  std::string m = R"({
    "format": 1, "entry": "train_step",
    "arena_bytes": 1024, "params_bytes": 256, "consts_offset": 256,
    "consts_bytes": 16,
    "params": [
      {"name": "w", "dtype": "F32", "shape": [4, 4], "offset": 0,
       "bytes": 64, "kind": "trainable"},
      {"name": "m.w", "dtype": "F32", "shape": [4, 4], "offset": 64,
       "bytes": 64, "kind": "state"},
      {"name": "lr", "dtype": "F32", "shape": [], "offset": 128,
       "bytes": 4, "kind": "hparam"}
    ],
    "inputs": [
      {"name": "ids", "role": "tokens", "dtype": "I64", "shape": [2, 8],
       "offset": 0},
      {"name": "targets", "role": "labels", "dtype": "I32", "shape": [2, 8],
       "offset": 128},
      {"name": "t", "role": "step", "dtype": "I64", "shape": [],
       "offset": 192}
    ],
    "outputs": [
      {"name": "loss", "dtype": "F32", "shape": [], "offset": 256},
      {"name": "lr", "dtype": "F32", "shape": [], "offset": 260}
    ],
    "hparams": {"lr": "lr"},
    "ops": ["matmul", "add"],
    "defaults": {"lr": 0.001, "optimizer": "adamw", "seed": 3,
                 "sampler": "sequential", "warmup": 10},
    "model": "gpt.onnx"
  })";
  if (!from.empty())
    EXPECT_TRUE(merak::rt::testing::replaceFirst(m, from, to)) << from;
  return m;
}

void expectError(const std::string &from, const std::string &to,
                 const std::string &message) {
  Result<Manifest> r = parseManifest(manifest(from, to));
  ASSERT_FALSE(r.ok()) << "expected: " << message;
  EXPECT_EQ(r.message(), message);
}

} // namespace

TEST(Manifest, Valid) {
  Result<Manifest> r = parseManifest(manifest());
  ASSERT_TRUE(r.ok()) << r.message();
  const Manifest &m = *r;
  EXPECT_EQ(m.arenaBytes, 1024u);
  EXPECT_EQ(m.paramsBytes, 256u);
  EXPECT_EQ(m.constsOffset, 256u);
  EXPECT_EQ(m.constsBytes, 16u);
  ASSERT_EQ(m.params.size(), 3u);
  EXPECT_EQ(m.params[1].name, "m.w");
  EXPECT_EQ(m.params[1].kind, "state");
  EXPECT_EQ(m.params[1].offset, 64u);
  EXPECT_EQ(m.params[1].bytes, 64u);
  EXPECT_EQ(m.params[2].shape.size(), 0u);
  EXPECT_EQ(m.params[2].elements, 1u);
  ASSERT_NE(m.inputWithRole("labels"), nullptr);
  EXPECT_EQ(m.inputWithRole("labels")->dtype, DType::I32);
  EXPECT_EQ(m.inputWithRole("tokens")->shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(m.output("loss")->offset, 256u);
  EXPECT_EQ(m.output("grad_norm"), nullptr);
  ASSERT_EQ(m.hparams.size(), 1u);
  EXPECT_EQ(m.hparams[0].second, "lr");
  EXPECT_EQ(m.ops, (std::vector<std::string>{"matmul", "add"}));
  EXPECT_EQ(*m.defaultLr, 0.001);
  EXPECT_EQ(*m.defaultSeed, 3u);
  EXPECT_EQ(*m.defaultSampler, Sampler::Sequential);
  EXPECT_EQ(m.optimizer, "adamw");
  EXPECT_EQ(m.model, "gpt.onnx");
}

TEST(Manifest, OptionalPartsMayBeAbsent) {
  Result<Manifest> r = parseManifest(
      R"({"format": 1, "arena_bytes": 0, "params_bytes": 0,
          "consts_offset": 0, "consts_bytes": 0, "params": [],
          "inputs": [], "outputs": []})");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->defaultLr.has_value());
  EXPECT_TRUE(r->ops.empty());
  EXPECT_EQ(r->inputWithRole("tokens"), nullptr);
}

TEST(Manifest, Errors) {
  EXPECT_FALSE(parseManifest("{").ok());
  EXPECT_FALSE(parseManifest("[]").ok());
  expectError("\"format\": 1", "\"format\": 2",
              "unsupported \"format\" (this runtime reads format 1)");
  expectError("\"arena_bytes\": 1024", "\"arena_bytes\": -1",
              "\"arena_bytes\" must be a non-negative integer");
  expectError("\"consts_offset\": 256", "\"consts_offset\": 128",
              "consts_offset 128 is inside the parameter data "
              "(params_init_bytes 256)");
  // Optimizer state past params_init_bytes has no bytes in the data.
  expectError("\"consts_offset\": 256",
              "\"params_init_bytes\": 512, \"consts_offset\": 256",
              "params_init_bytes 512 exceeds params_bytes 256");
  expectError("\"offset\": 128,\n       \"bytes\": 4",
              "\"offset\": 254,\n       \"bytes\": 4",
              "params[2] ('lr'): offset 254 + 4 bytes exceeds params_bytes "
              "256");
  expectError("\"bytes\": 64, \"kind\": \"trainable\"",
              "\"bytes\": 60, \"kind\": \"trainable\"",
              "params[0] ('w'): bytes is 60 but the shape and dtype need 64");
  expectError("\"dtype\": \"F32\", \"shape\": [4, 4], \"offset\": 0",
              "\"dtype\": \"F8\", \"shape\": [4, 4], \"offset\": 0",
              "params[0] ('w'): unknown dtype 'F8'");
  expectError("[4, 4], \"offset\": 0", "[4, -4], \"offset\": 0",
              "params[0] ('w'): shape dimension must be a non-negative "
              "integer");
  expectError("\"name\": \"m.w\"", "\"name\": \"w\"",
              "params[1]: duplicate name 'w'");
  expectError("\"kind\": \"state\"", "\"kind\": \"weights\"",
              "params[1] ('m.w'): unknown kind 'weights' (expected trainable, "
              "frozen, buffer, state, scratch or hparam)");
  expectError("\"kind\": \"state\"", "\"kinds\": \"state\"",
              "params[1] ('m.w'): missing \"kind\"");
  expectError("\"role\": \"labels\"", "\"role\": \"tokens\"",
              "inputs[1] ('targets'): a second input with role 'tokens'");
  expectError("\"role\": \"step\"", "\"role\": \"mask\"",
              "inputs[2] ('t'): unknown role 'mask' (expected tokens, labels, "
              "step, label_count or other)");
  expectError("\"shape\": [2, 8],\n       \"offset\": 0",
              "\"shape\": [16],\n       \"offset\": 0",
              "the tokens input 'ids' must be an I64 or I32 tensor of shape "
              "[B, T] with B, T >= 1");
  expectError("\"I32\", \"shape\": [2, 8]", "\"I32\", \"shape\": [2, 7]",
              "the labels input 'targets' must be I64 or I32 with the "
              "tokens' shape");
  expectError("\"step\", \"dtype\": \"I64\"", "\"step\", \"dtype\": \"F32\"",
              "the step input 't' must be an I64 or I32 scalar");
  expectError("\"offset\": 192}", "\"offset\": 1020}",
              "inputs[2] ('t'): offset 1020 + 8 bytes exceeds arena_bytes "
              "1024");
  expectError("\"name\": \"loss\", \"dtype\": \"F32\", \"shape\": []",
              "\"name\": \"loss\", \"dtype\": \"F32\", \"shape\": [2]",
              "the output 'loss' must be an F32 or F64 scalar");
  expectError("{\"lr\": \"lr\"}", "{\"lr\": \"nope\"}",
              "hparams.lr names 'nope', which is not a param");
  expectError("{\"lr\": \"lr\"}", "{\"lr\": \"w\"}",
              "hparams.lr names 'w', which is not an F32 or F64 scalar");
  expectError("[\"matmul\", \"add\"]", "[\"matmul\", 3]",
              "ops[1] must be a string, got an integer");
  expectError("\"lr\": 0.001", "\"lr\": -1",
              "defaults.lr must be a finite non-negative number");
  expectError("\"sampler\": \"sequential\"", "\"sampler\": \"shuffle\"",
              "defaults.sampler must be \"random\" or \"sequential\"");
  expectError("\"inputs\"", "\"inputz\"", "manifest: missing \"inputs\"");
}

TEST(Manifest, ExpertShards) {
  // Expert parallelism: a [4, 4] expert weight split on axis 0 over ep 2
  // (rank j holds experts [2j, 2j + 2)); its ZeRO state over dp / ep.
  std::string from = "\"name\": \"m.w\", \"dtype\": \"F32\", \"shape\": [4, 4], \"offset\": 64,\n"
                     "       \"bytes\": 64,";
  std::string shard = "\"name\": \"m.w\", \"dtype\": \"F32\", \"shape\": [2, 4], \"offset\": 64,\n"
                      "       \"bytes\": 32, \"shard\": {\"axis\": 0, \"parts\": 2, \"blocks\": 1,"
                      " \"group\": \"ep\"}, \"global_shape\": [4, 4],";
  std::string m = manifest(from, shard);
  m.replace(m.find("\"model\""), 0, "\"mesh\": {\"dp\": 4, \"ep\": 2},\n    ");
  Result<Manifest> r = parseManifest(m);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->params[1].expertShard);
  EXPECT_EQ(r->meshEp, 2);
  EXPECT_FALSE(r->params[0].expertShard);

  std::string badGroup = m;
  badGroup.replace(badGroup.find("\"group\": \"ep\""), 13, "\"group\": \"xp\"");
  r = parseManifest(badGroup);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "params[1] ('m.w'): shard.group must be \"tp\" or \"ep\", got \"xp\"");

  std::string badEp = m;
  badEp.replace(badEp.find("\"ep\": 2"), 7, "\"ep\": 3");
  r = parseManifest(badEp);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "mesh.ep 3 must divide mesh.dp 4");

  std::string tpParts = m;
  tpParts.replace(tpParts.find(", \"group\": \"ep\""), 15, "");
  r = parseManifest(tpParts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "params[1] ('m.w'): shard.parts 2 differs from mesh.tp 1");
}

TEST(Manifest, RaggedShardBlocks) {
  // A fused GQA projection [16, 4]: q, k, v of 8, 4, 4 rows, each split
  // over tp 2 (this rank: 4 + 2 + 2 rows).
  std::string from = "\"name\": \"m.w\", \"dtype\": \"F32\", \"shape\": [4, 4], \"offset\": 64,\n"
                     "       \"bytes\": 64,";
  std::string shard = "\"name\": \"m.w\", \"dtype\": \"F32\", \"shape\": [8, 4], \"offset\": 64,\n"
                      "       \"bytes\": 128, \"shard\": {\"axis\": 0, \"parts\": 2, \"blocks\": 3,"
                      " \"block_sizes\": [8, 4, 4]}, \"global_shape\": [16, 4],";
  std::string m = manifest(from, shard);
  m.replace(m.find("\"model\""), 0, "\"mesh\": {\"tp\": 2},\n    ");
  Result<Manifest> r = parseManifest(m);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->params[1].shardBlockSizes, (std::vector<int64_t>{8, 4, 4}));
  EXPECT_EQ(r->params[1].shardLocalLength(), 8);
  for (const char *bad : {"[8, 4, 2]", "[8, 3, 5]", "[8, 8]"}) {
    std::string b = m;
    b.replace(b.find("[8, 4, 4]"), 9, bad);
    r = parseManifest(b);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.message(), "params[1] ('m.w'): shard.block_sizes must be shard.blocks lengths, "
                           "each divisible by shard.parts, summing to global_shape[axis]")
        << bad;
  }
}

TEST(Manifest, ZeroParts) {
  // ZeRO-1 state: dp rank r holds part r of the flattened, padded tensor.
  std::string zero = "\"name\": \"m.w\", \"dtype\": \"F32\", \"shape\": [6], \"offset\": 64,\n"
                     "       \"bytes\": 24, \"zero\": {\"parts\": 3}, \"global_shape\": [4, 4],";
  std::string from = "\"name\": \"m.w\", \"dtype\": \"F32\", \"shape\": [4, 4], \"offset\": 64,\n"
                     "       \"bytes\": 64,";
  std::string m = manifest(from, zero);
  m.replace(m.find("\"model\""), 0, "\"mesh\": {\"dp\": 3},\n    ");
  Result<Manifest> r = parseManifest(m);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->params[1].zeroSharded());
  EXPECT_EQ(r->params[1].zeroParts, 3);
  EXPECT_EQ(r->params[1].globalShape, (std::vector<int64_t>{4, 4}));
  EXPECT_FALSE(r->params[0].zeroSharded());

  std::string wrongDp = m;
  wrongDp.replace(wrongDp.find("\"dp\": 3"), 7, "\"dp\": 2");
  r = parseManifest(wrongDp);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "params[1] ('m.w'): zero.parts 3 differs from mesh.dp 2");

  std::string wrongShape = m;
  wrongShape.replace(wrongShape.find("\"global_shape\": [4, 4]"), 22, "\"global_shape\": [4, 5]");
  r = parseManifest(wrongShape);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(),
            "params[1] ('m.w'): a ZeRO part of 20 elements over 3 ranks must have shape [7]");
}

TEST(Manifest, LabelsIgnoreIndex) {
  // merak-attach-loss's labels skip -100 (PyTorch's ignore_index): a
  // negative integer, unlike the manifest's sizes and offsets.
  std::string text = manifest();
  std::string labels = "\"role\": \"labels\", \"dtype\": \"I32\", \"shape\": [2, 8],\n       "
                       "\"offset\": 128";
  size_t at = text.find(labels);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, labels.size(), labels + ", \"ignore_index\": -100");
  Result<Manifest> r = parseManifest(text);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->inputWithRole("labels")->ignoreIndex, std::optional<int64_t>(-100));
  EXPECT_FALSE(r->inputWithRole("tokens")->ignoreIndex.has_value());
  std::string bad = text;
  bad.replace(bad.find("-100"), 4, "\"x\"");
  Result<Manifest> notInt = parseManifest(bad);
  ASSERT_FALSE(notInt.ok());
  EXPECT_NE(notInt.message().find("ignore_index must be an integer"), std::string::npos)
      << notInt.message();
}

TEST(Manifest, LabelCount) {
  // merak-attach-loss's global-mean: an F32 scalar that ./train fills with
  // the step's count of labels other than the ignore_index.
  std::string text = manifest();
  std::string step = "{\"name\": \"t\", \"role\": \"step\"";
  std::string count = "{\"name\": \"label_count\", \"role\": \"label_count\", \"dtype\": \"F32\", "
                      "\"shape\": [], \"offset\": 200},\n      ";
  text.insert(text.find(step), count);
  Result<Manifest> noIgnore = parseManifest(text);
  ASSERT_FALSE(noIgnore.ok());
  EXPECT_EQ(noIgnore.message(),
            "the label_count input 'label_count' needs labels with an ignore_index to count");
  std::string labels = "\"role\": \"labels\", \"dtype\": \"I32\", \"shape\": [2, 8],\n       "
                       "\"offset\": 128";
  text.replace(text.find(labels), labels.size(), labels + ", \"ignore_index\": -100");
  Result<Manifest> r = parseManifest(text);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->inputWithRole("label_count")->name, "label_count");
  std::string wide = text;
  wide.replace(wide.find("\"F32\", \"shape\": [], \"offset\": 200"), 5, "\"I64\"");
  Result<Manifest> notFloat = parseManifest(wide);
  ASSERT_FALSE(notFloat.ok());
  EXPECT_EQ(notFloat.message(), "the label_count input 'label_count' must be an F32 scalar");
}
