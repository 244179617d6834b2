//===- cli.cpp - Command line of generated training programs --------------===//
#include "merak_rt/cli.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <set>
#include <string_view>

namespace merak::rt {

namespace {

enum class Flag {
  Data, Steps, Lr, Seed, Sampler, CheckpointDir, CheckpointEvery, Resume,
  Metrics, Trace, LogEvery, Help
};

struct FlagInfo {
  const char *name;
  Flag flag;
  bool takesValue;
};

constexpr FlagInfo kFlags[] = {
    {"--data", Flag::Data, true},
    {"--steps", Flag::Steps, true},
    {"--lr", Flag::Lr, true},
    {"--seed", Flag::Seed, true},
    {"--sampler", Flag::Sampler, true},
    {"--checkpoint-dir", Flag::CheckpointDir, true},
    {"--checkpoint-every", Flag::CheckpointEvery, true},
    {"--resume", Flag::Resume, false},
    {"--metrics", Flag::Metrics, true},
    {"--trace", Flag::Trace, true},
    {"--log-every", Flag::LogEvery, true},
    {"--help", Flag::Help, false},
    {"-h", Flag::Help, false},
};

Status badValue(const std::string &flag, const std::string &expected,
                const std::string &value) {
  return Status::error(flag + ": expected " + expected + ", got '" + value +
                       "'");
}

Status parseInt(const std::string &flag, const std::string &value,
                int64_t minimum, int64_t &out) {
  std::string expected = minimum == 0 ? "a non-negative integer"
                                      : "an integer >= " +
                                            std::to_string(minimum);
  int64_t v = 0;
  auto [ptr, ec] =
      std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() ||
      ptr != value.data() + value.size() || v < minimum)
    return badValue(flag, expected, value);
  out = v;
  return Status::success();
}

Status parseValue(Flag flag, const std::string &name, const std::string &value,
                  TrainOptions &o) {
  switch (flag) {
  case Flag::Data:
    if (value.empty())
      return badValue(name, "a file name", value);
    o.data = value;
    return Status::success();
  case Flag::Steps:
    return parseInt(name, value, 0, o.steps);
  case Flag::Lr: {
    double v = 0;
    auto [ptr, ec] =
        std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() ||
        ptr != value.data() + value.size() || !std::isfinite(v) || v < 0)
      return badValue(name, "a non-negative number", value);
    o.lr = v;
    return Status::success();
  }
  case Flag::Seed: {
    uint64_t v = 0;
    auto [ptr, ec] =
        std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() ||
        ptr != value.data() + value.size())
      return badValue(name, "a non-negative integer below 2^64", value);
    o.seed = v;
    return Status::success();
  }
  case Flag::Sampler: {
    std::optional<Sampler> s = parseSampler(value);
    if (!s)
      return badValue(name, "'random' or 'sequential'", value);
    o.sampler = *s;
    return Status::success();
  }
  case Flag::CheckpointDir:
    if (value.empty())
      return badValue(name, "a directory", value);
    o.checkpointDir = value;
    return Status::success();
  case Flag::CheckpointEvery:
    return parseInt(name, value, 1, o.checkpointEvery);
  case Flag::Metrics:
    if (value.empty())
      return badValue(name, "a file name", value);
    o.metricsPath = value;
    return Status::success();
  case Flag::Trace:
    if (value.empty())
      return badValue(name, "a file name", value);
    o.tracePath = value;
    return Status::success();
  case Flag::LogEvery:
    return parseInt(name, value, 1, o.logEvery);
  case Flag::Resume:
  case Flag::Help:
    break;
  }
  return Status::success();
}

Result<TrainOptions> parseImpl(int argc, const char *const *argv,
                               const TrainOptions &defaults) {
  TrainOptions o = defaults;
  o.help = false;
  std::set<Flag> seen;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    std::string name = arg, value;
    bool inlineValue = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inlineValue = true;
      }
    } else if (arg != "-h") {
      return Result<TrainOptions>::error(
          "unexpected argument '" + arg + "' (flags start with --; see --help)");
    }
    const FlagInfo *info = nullptr;
    for (const FlagInfo &f : kFlags)
      if (name == f.name)
        info = &f;
    if (!info)
      return Result<TrainOptions>::error("unknown flag '" + name +
                                         "' (see --help)");
    if (info->flag == Flag::Help) {
      o.help = true;
      return o;
    }
    if (!seen.insert(info->flag).second)
      return Result<TrainOptions>::error(name + " given more than once");
    if (!info->takesValue) {
      if (inlineValue)
        return Result<TrainOptions>::error(name + " takes no value");
      o.resume = true; // the only boolean flag besides --help
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= argc || !argv[i + 1] ||
          std::string_view(argv[i + 1]).rfind("--", 0) == 0)
        return Result<TrainOptions>::error(name + ": missing value");
      value = argv[++i];
    }
    if (Status s = parseValue(info->flag, name, value, o); !s.ok())
      return s;
  }

  if (o.data.empty())
    return Result<TrainOptions>::error(
        "missing required flag --data FILE (see --help)");
  if (o.steps < 0)
    return Result<TrainOptions>::error(
        "missing required flag --steps N (see --help)");
  if (seen.count(Flag::CheckpointEvery) && o.checkpointDir.empty())
    return Result<TrainOptions>::error(
        "--checkpoint-every requires --checkpoint-dir");
  if (o.resume && o.checkpointDir.empty())
    return Result<TrainOptions>::error("--resume requires --checkpoint-dir");
  return o;
}

std::string formatDouble(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.10g", v);
  return buffer;
}

} // namespace

Result<TrainOptions> parseTrainArgs(int argc, const char *const *argv,
                                    const TrainOptions &defaults) {
  try {
    return parseImpl(argc, argv, defaults);
  } catch (const std::exception &e) {
    return Result<TrainOptions>::error(std::string("cannot parse arguments: ") +
                                       e.what());
  }
}

std::string trainUsage(const std::string &program,
                       const TrainOptions &d) {
  auto orNone = [](const std::string &s, const char *none) {
    return s.empty() ? std::string(none) : s;
  };
  std::string u;
  u += "usage: " + program +
       " --data FILE --steps N [--lr X] [--seed S]\n"
       "         [--sampler random|sequential]\n"
       "         [--checkpoint-dir DIR [--checkpoint-every K] [--resume]]\n"
       "         [--metrics FILE] [--trace FILE] [--log-every K] [--help]\n"
       "\n"
       "Trains the compiled model on a token file.\n"
       "\n"
       "  --data FILE             uint16 token file (nanoGPT .bin)" +
       (d.data.empty() ? std::string(" [required]")
                       : " [default: " + d.data + "]") +
       "\n"
       "  --steps N               optimizer steps to run in total" +
       (d.steps < 0 ? std::string(" [required]")
                    : " [default: " + std::to_string(d.steps) + "]") +
       "\n"
       "  --lr X                  peak learning rate [default: " +
       formatDouble(d.lr) +
       "]\n"
       "  --seed S                seed of the random sampler [default: " +
       std::to_string(d.seed) +
       "]\n"
       "  --sampler NAME          random | sequential [default: " +
       samplerName(d.sampler) +
       "]\n"
       "  --checkpoint-dir DIR    write safetensors checkpoints to DIR [default: " +
       orNone(d.checkpointDir, "none") +
       "]\n"
       "  --checkpoint-every K    checkpoint every K steps (needs "
       "--checkpoint-dir) [default: " +
       (d.checkpointEvery > 0 ? std::to_string(d.checkpointEvery)
                              : std::string("at the end only")) +
       "]\n"
       "  --resume                continue from DIR/latest (needs "
       "--checkpoint-dir)\n"
       "  --metrics FILE          write one JSON line per step to FILE [default: " +
       orNone(d.metricsPath, "none") +
       "]\n"
       "  --trace FILE            write a Chrome trace of one step to FILE [default: " +
       orNone(d.tracePath, "none") +
       "]\n"
       "  --log-every K           progress line every K steps when not on a "
       "terminal [default: " +
       std::to_string(d.logEvery) +
       "]\n"
       "  --help, -h              show this text\n";
  return u;
}

} // namespace merak::rt
