//===- cli_test.cpp - command line of generated programs ------------------===//
#include "merak_rt/cli.h"

#include "stop_signals.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

using namespace merak::rt;

namespace {
Result<TrainOptions> parse(std::initializer_list<const char *> args,
                           const TrainOptions &defaults = TrainOptions()) {
  std::vector<const char *> argv = {"./train"};
  argv.insert(argv.end(), args);
  return parseTrainArgs(static_cast<int>(argv.size()), argv.data(), defaults);
}

void expectError(std::initializer_list<const char *> args,
                 const std::string &message,
                 const TrainOptions &defaults = TrainOptions()) {
  Result<TrainOptions> r = parse(args, defaults);
  ASSERT_FALSE(r.ok()) << "expected: " << message;
  EXPECT_EQ(r.message(), message);
}
} // namespace

TEST(Cli, Minimal) {
  TrainOptions defaults;
  defaults.lr = 6e-4;
  defaults.seed = 5;
  defaults.logEvery = 7;
  Result<TrainOptions> r = parse({"--data", "train.bin", "--steps", "20"},
                                 defaults);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->data, "train.bin");
  EXPECT_EQ(r->steps, 20);
  EXPECT_EQ(r->lr, 6e-4);
  EXPECT_EQ(r->seed, 5u);
  EXPECT_EQ(r->sampler, Sampler::Random);
  EXPECT_EQ(r->checkpointDir, "");
  EXPECT_EQ(r->checkpointEvery, 0);
  EXPECT_FALSE(r->resume);
  EXPECT_EQ(r->logEvery, 7);
  EXPECT_FALSE(r->help);
}

TEST(Cli, EveryFlag) {
  Result<TrainOptions> r =
      parse({"--data=d.bin", "--steps", "0", "--lr", "1e-3", "--seed",
             "18446744073709551615", "--sampler", "sequential",
             "--checkpoint-dir", "ck", "--checkpoint-every=5", "--resume",
             "--metrics", "m.jsonl", "--trace", "t.json", "--log-every", "3"});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->data, "d.bin");
  EXPECT_EQ(r->steps, 0);
  EXPECT_EQ(r->lr, 1e-3);
  EXPECT_EQ(r->seed, UINT64_MAX);
  EXPECT_EQ(r->sampler, Sampler::Sequential);
  EXPECT_EQ(r->checkpointDir, "ck");
  EXPECT_EQ(r->checkpointEvery, 5);
  EXPECT_TRUE(r->resume);
  EXPECT_EQ(r->metricsPath, "m.jsonl");
  EXPECT_EQ(r->tracePath, "t.json");
  EXPECT_EQ(r->logEvery, 3);
}

TEST(Cli, DefaultsFromTheCaller) {
  TrainOptions defaults;
  defaults.data = "corpus.bin";
  defaults.steps = 100;
  defaults.checkpointDir = "ckpt";
  Result<TrainOptions> r = parse({"--resume"}, defaults);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->data, "corpus.bin");
  EXPECT_EQ(r->steps, 100);
  EXPECT_TRUE(r->resume);
  r = parse({"--checkpoint-every", "10"}, defaults);
  ASSERT_TRUE(r.ok()) << r.message();
}

TEST(Cli, Help) {
  for (const char *flag : {"--help", "-h"}) {
    Result<TrainOptions> r = parse({flag});
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_TRUE(r->help);
  }
  Result<TrainOptions> r = parse({"--steps", "3", "--help", "--bogus"});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->help);
  TrainOptions defaults;
  defaults.steps = 50;
  defaults.lr = 6e-4;
  std::string usage = trainUsage("./train", defaults);
  EXPECT_EQ(usage.rfind("usage: ./train --data FILE --steps N", 0), 0u);
  for (const char *flag :
       {"--data", "--steps", "--lr", "--seed", "--sampler", "--checkpoint-dir",
        "--checkpoint-every", "--resume", "--metrics", "--trace",
        "--log-every", "--help"})
    EXPECT_NE(usage.find(std::string("  ") + flag), std::string::npos) << flag;
  EXPECT_NE(usage.find("[default: 50]"), std::string::npos);
  EXPECT_NE(usage.find("[default: 0.0006]"), std::string::npos);
  EXPECT_NE(usage.find("[default: random]"), std::string::npos);
}

TEST(Cli, UnknownFlag) {
  expectError({"--data", "d", "--steps", "1", "--learning-rate", "3"},
              "unknown flag '--learning-rate' (see --help)");
  expectError({"--data", "d", "--steps", "1", "--lr-x=3"},
              "unknown flag '--lr-x' (see --help)");
  expectError({"--data", "d", "--steps", "1", "-x"},
              "unexpected argument '-x' (flags start with --; see --help)");
  expectError({"--data", "d", "extra", "--steps", "1"},
              "unexpected argument 'extra' (flags start with --; see --help)");
}

TEST(Cli, MissingValue) {
  expectError({"--data"}, "--data: missing value");
  expectError({"--data", "d", "--steps"}, "--steps: missing value");
  expectError({"--data", "--steps", "3"}, "--data: missing value");
  expectError({"--data", "d", "--steps", "1", "--metrics"},
              "--metrics: missing value");
  expectError({"--data=", "--steps", "1"}, "--data: expected a file name, got ''");
}

TEST(Cli, NonNumeric) {
  expectError({"--data", "d", "--steps", "ten"},
              "--steps: expected a non-negative integer, got 'ten'");
  expectError({"--data", "d", "--steps", "10x"},
              "--steps: expected a non-negative integer, got '10x'");
  expectError({"--data", "d", "--steps", "1.5"},
              "--steps: expected a non-negative integer, got '1.5'");
  expectError({"--data", "d", "--steps", "99999999999999999999"},
              "--steps: expected a non-negative integer, got "
              "'99999999999999999999'");
  expectError({"--data", "d", "--steps", "1", "--lr", "fast"},
              "--lr: expected a non-negative number, got 'fast'");
  expectError({"--data", "d", "--steps", "1", "--lr", "inf"},
              "--lr: expected a non-negative number, got 'inf'");
  expectError({"--data", "d", "--steps", "1", "--lr", "nan"},
              "--lr: expected a non-negative number, got 'nan'");
  expectError({"--data", "d", "--steps", "1", "--seed", "-1"},
              "--seed: expected a non-negative integer below 2^64, got '-1'");
  expectError({"--data", "d", "--steps", "1", "--sampler", "shuffle"},
              "--sampler: expected 'random' or 'sequential', got 'shuffle'");
}

TEST(Cli, NegativeOrZero) {
  expectError({"--data", "d", "--steps", "-5"},
              "--steps: expected a non-negative integer, got '-5'");
  expectError({"--data", "d", "--steps", "1", "--lr", "-0.1"},
              "--lr: expected a non-negative number, got '-0.1'");
  expectError({"--data", "d", "--steps", "1", "--log-every", "0"},
              "--log-every: expected an integer >= 1, got '0'");
  expectError({"--data", "d", "--steps", "1", "--checkpoint-dir", "c",
               "--checkpoint-every", "0"},
              "--checkpoint-every: expected an integer >= 1, got '0'");
  expectError({"--data", "d", "--steps", "1", "--checkpoint-dir", "c",
               "--checkpoint-keep", "0"},
              "--checkpoint-keep: expected an integer >= 1, got '0'");
}

TEST(Cli, Dependencies) {
  expectError({"--data", "d", "--steps", "1", "--checkpoint-every", "5"},
              "--checkpoint-every requires --checkpoint-dir");
  expectError({"--data", "d", "--steps", "1", "--checkpoint-keep", "2"},
              "--checkpoint-keep requires --checkpoint-dir");
  expectError({"--data", "d", "--steps", "1", "--resume"},
              "--resume requires --checkpoint-dir");
  expectError({"--data", "d", "--steps", "1", "--resume=yes"},
              "--resume takes no value");
  expectError({"--steps", "1"}, "missing required flag --data FILE (see --help)");
  expectError({"--data", "d"}, "missing required flag --steps N (see --help)");
  expectError({"--data", "d", "--steps", "1", "--steps", "2"},
              "--steps given more than once");
}

TEST(Cli, StopSignals) {
  Result<TrainOptions> r = parse({"--data", "d", "--steps", "1"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stopSignals, (std::vector<int>{SIGTERM, SIGINT, SIGUSR1}));
  r = parse({"--data", "d", "--steps", "1", "--stop-signals", "sigusr2,Term,1"});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->stopSignals, (std::vector<int>{SIGUSR2, SIGTERM, SIGHUP}));
  r = parse({"--data", "d", "--steps", "1", "--stop-signals", "none"});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stopSignals.empty());
  for (const char *bad : {"KILL", "STOP", "9", "TERM,TERM", "", "TERM,", "BOGUS", "15x"}) {
    r = parse({"--data", "d", "--steps", "1", "--stop-signals", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.message().find("--stop-signals"), std::string::npos) << r.message();
  }
  EXPECT_EQ(formatStopSignals({SIGTERM, SIGUSR1}), "TERM,USR1");
  EXPECT_EQ(stopSignalName(SIGINT), "SIGINT");
}
