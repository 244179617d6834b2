//===- cli.cpp - Command line of generated training programs --------------===//
//
// CLI11 holds the flags: it matches them, splits --flag=VALUE, runs each
// flag's callback in command-line order (which checks and converts the
// value, naming the flag) and lays out --help (UsageFormatter). ./train's
// rules where CLI11 has others are settled before it reads the arguments
// (prepare): --help/-h ends the command line; an unknown flag (a bare `--`
// too: CLI11's end of the flags), a positional argument or a flag given
// twice is an error; a flag that takes a value followed by nothing or by
// --something is missing it (CLI11 would take "--steps" as --data's value);
// `--flag=` is an empty value (CLI11 reads it as `--flag`). The first error
// in the command line is the one reported. After it: the requirements
// between flags.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/cli.h"

#include "stop_signals.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

namespace merak::rt {

namespace {

[[noreturn]] void fail(const std::string &message) { throw CLI::ValidationError(message); }

[[noreturn]] void badValue(const std::string &flag, const std::string &expected,
                           const std::string &value) {
  fail(flag + ": expected " + expected + ", got '" + value + "'");
}

/// `value`, entirely a decimal number of type T (from_chars: no sign
/// prefix, no hex), or nullopt.
template <class T> std::optional<T> number(const std::string &value) {
  T v{};
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || ptr != value.data() + value.size())
    return std::nullopt;
  return v;
}

void parseInt(const std::string &flag, const std::string &value, int64_t minimum, int64_t &out) {
  std::optional<int64_t> v = number<int64_t>(value);
  if (!v || *v < minimum)
    badValue(flag, minimum == 0 ? "a non-negative integer"
                                : "an integer >= " + std::to_string(minimum),
             value);
  out = *v;
}

void parseName(const std::string &flag, const char *what, const std::string &value,
               std::string &out) {
  if (value.empty())
    badValue(flag, what, value);
  out = value;
}

std::string formatDouble(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.10g", v);
  return buffer;
}

/// --help's layout: the synopsis, the description, one line per flag
/// ("  --name VALUE" padded to 26 columns, then its help).
class UsageFormatter : public CLI::Formatter {
public:
  UsageFormatter() { column_width(26); }
  std::string make_help(const CLI::App *app, std::string name, CLI::AppFormatMode) const override {
    std::string out =
        "usage: " + name + " --data FILE --steps N [--lr X] [--seed S]\n"
        "         [--sampler random|sequential]\n"
        "         [--checkpoint-dir DIR [--checkpoint-every K] [--checkpoint-keep N] [--resume]]\n"
        "         [--metrics FILE] [--trace FILE | --profile-ops FILE] [--log-every K]\n"
        "         [--help]\n"
        "\n" + app->get_description() + "\n\n";
    for (const CLI::Option *opt : app->get_options())
      out += make_option(opt, false);
    return out;
  }
  std::string make_option_name(const CLI::Option *opt, bool) const override {
    std::string names;
    for (const std::string &n : opt->get_lnames())
      names += (names.empty() ? "--" : ", --") + n;
    for (const std::string &n : opt->get_snames())
      names += (names.empty() ? "-" : ", -") + n;
    return names;
  }
  std::string make_option_opts(const CLI::Option *opt) const override {
    return opt->get_type_name().empty() ? "" : " " + opt->get_type_name();
  }
};

/// The flags, writing into `o`; `d` (the defaults) fills in the help.
void addFlags(CLI::App &app, TrainOptions &o, const TrainOptions &d) {
  // A flag taking a value; `set` checks and stores it.
  auto value = [&](const char *flag, const char *valueName, const std::string &help,
                   std::function<void(const std::string &)> set) {
    app.add_option(
           flag,
           [set](const CLI::results_t &r) {
             set(r.front());
             return true;
           },
           help)
        ->type_name(valueName)
        ->trigger_on_parse(); // checked in command-line order
  };
  auto orNone = [](const std::string &s, const char *none) { return s.empty() ? none : s; };
  value("--data", "FILE",
        "uint16 token file (nanoGPT .bin)" +
            (d.data.empty() ? std::string(" [required]") : " [default: " + d.data + "]"),
        [&](const std::string &v) { parseName("--data", "a file name", v, o.data); });
  value("--steps", "N",
        "optimizer steps to run in total" +
            (d.steps < 0 ? std::string(" [required]")
                         : " [default: " + std::to_string(d.steps) + "]"),
        [&](const std::string &v) { parseInt("--steps", v, 0, o.steps); });
  value("--lr", "X", "peak learning rate [default: " + formatDouble(d.lr) + "]",
        [&](const std::string &v) {
          std::optional<double> lr = number<double>(v);
          if (!lr || !std::isfinite(*lr) || *lr < 0)
            badValue("--lr", "a non-negative number", v);
          o.lr = *lr;
        });
  value("--seed", "S",
        "seed of the random sampler [default: " + std::to_string(d.seed) + "]",
        [&](const std::string &v) {
          std::optional<uint64_t> seed = number<uint64_t>(v);
          if (!seed)
            badValue("--seed", "a non-negative integer below 2^64", v);
          o.seed = *seed;
        });
  value("--sampler", "NAME",
        std::string("random | sequential [default: ") + samplerName(d.sampler) + "]",
        [&](const std::string &v) {
          std::optional<Sampler> s = parseSampler(v);
          if (!s)
            badValue("--sampler", "'random' or 'sequential'", v);
          o.sampler = *s;
        });
  value("--checkpoint-dir", "DIR",
        "write safetensors checkpoints to DIR [default: " + orNone(d.checkpointDir, "none") +
            "]",
        [&](const std::string &v) {
          parseName("--checkpoint-dir", "a directory", v, o.checkpointDir);
        });
  value("--checkpoint-every", "K",
        "checkpoint every K steps (needs --checkpoint-dir) [default: " +
            (d.checkpointEvery > 0 ? std::to_string(d.checkpointEvery)
                                   : std::string("at the end only")) +
            "]",
        [&](const std::string &v) { parseInt("--checkpoint-every", v, 1, o.checkpointEvery); });
  value("--checkpoint-keep", "N",
        "keep the newest N checkpoints and delete older ones after each new one (needs "
        "--checkpoint-dir) [default: " +
            (d.checkpointKeep > 0 ? std::to_string(d.checkpointKeep) : std::string("all")) + "]",
        [&](const std::string &v) { parseInt("--checkpoint-keep", v, 1, o.checkpointKeep); });
  value("--moe-histogram", "FILE",
        "a Mixture-of-Experts program compiled with --ep: write the rows routed to each "
        "expert that rank 0's token dispatches saw (JSON; merak-compile --simulate "
        "--moe-histogram FILE) [default: none]",
        [&](const std::string &v) {
          parseName("--moe-histogram", "a file", v, o.moeHistogramPath);
        });
  value("--moe-rebalance-every", "K",
        "a program compiled with --moe-rebalance-every: move experts between the ranks of "
        "their ep group every K steps when that balances the rows enough to pay for the "
        "move (0: never) [default: " +
            std::to_string(d.moeRebalanceEvery) + "]",
        [&](const std::string &v) {
          parseInt("--moe-rebalance-every", v, 0, o.moeRebalanceEvery);
        });
  value("--moe-rebalance-min-rows", "ROWS",
        "with --moe-rebalance-every: move experts only when the busiest rank's rows over the "
        "next K steps drop by at least ROWS per moved expert [default: what moving its "
        "weights and optimizer state costs on the all-to-all]",
        [&](const std::string &v) {
          parseInt("--moe-rebalance-min-rows", v, 0, o.moeRebalanceMinRows);
        });
  app.add_flag("--resume", o.resume, "continue from DIR/latest (needs --checkpoint-dir)");
  app.add_flag("--allow-partial-resume", o.allowPartialResume,
               "with --resume: restore the tensors that match the program and keep the "
               "others at their initial values (fine-tuning another model's checkpoint)");
  value("--metrics", "FILE",
        "write one JSON line per step to FILE [default: " + orNone(d.metricsPath, "none") + "]",
        [&](const std::string &v) { parseName("--metrics", "a file name", v, o.metricsPath); });
  value("--trace", "FILE",
        "write a Chrome trace of one step to FILE [default: " + orNone(d.tracePath, "none") +
            "]",
        [&](const std::string &v) { parseName("--trace", "a file name", v, o.tracePath); });
  value("--profile-ops", "FILE",
        "time every op of the steps after the first and merge the medians by op shape into "
        "the op-cost file FILE, for merak-compile --op-costs [default: none]",
        [&](const std::string &v) {
          parseName("--profile-ops", "a file name", v, o.profileOpsPath);
        });
  value("--log-every", "K",
        "progress line every K steps when not on a terminal [default: " +
            std::to_string(d.logEvery) + "]",
        [&](const std::string &v) { parseInt("--log-every", v, 1, o.logEvery); });
  value("--stop-signals", "LIST",
        "signals that stop after the current step with a checkpoint, exit 128+signal; "
        "'none' [default: " + formatStopSignals(d.stopSignals) + "]",
        [&](const std::string &v) {
          std::optional<std::vector<int>> signals = parseStopSignals(v);
          if (!signals)
            badValue("--stop-signals",
                     "a comma-separated list of TERM, INT, USR1, USR2, HUP, QUIT, XCPU, ALRM "
                     "without repeats, or 'none'",
                     v);
          o.stopSignals = *signals;
        });
  app.set_help_flag("--help,-h", "show this text"); // (last in --help)
}

/// An App for `o` with the flags and the --help layout.
std::unique_ptr<CLI::App> makeApp(const std::string &program, TrainOptions &o,
                                  const TrainOptions &defaults) {
  auto app = std::make_unique<CLI::App>("Trains the compiled model on a token file.", program);
  app->formatter(std::make_shared<UsageFormatter>());
  addFlags(*app, o, defaults);
  return app;
}

/// The command line after ./train's own rules (see the top of the file).
struct Prepared {
  std::vector<std::string> args; ///< for CLI11, reversed (as App::parse takes it)
  std::set<std::string> seen;    ///< the flags given
  std::string error;             ///< the first argument the rules reject; args stop there
  bool help = false;             ///< --help ended the command line
};

Prepared prepare(const CLI::App &app, int argc, const char *const *argv) {
  Prepared p;
  for (int i = 1; i < argc && p.error.empty(); ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    if (arg == "--help" || arg == "-h") {
      p.help = true;
      break;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    const CLI::Option *opt = arg.rfind("--", 0) == 0 ? app.get_option_no_throw(name) : nullptr;
    bool flag = opt && opt->get_expected_max() == 0; // takes no value
    if (!opt && arg.rfind("--", 0) == 0)
      p.error = "unknown flag '" + name + "' (see --help)";
    else if (!opt)
      p.error = "unexpected argument '" + arg + "' (flags start with --; see --help)";
    else if (!p.seen.insert(name).second)
      p.error = name + " given more than once";
    else if (flag && eq != std::string::npos)
      p.error = name + " takes no value";
    else if (flag)
      p.args.push_back(arg);
    else if (eq != std::string::npos) // --flag=VALUE, VALUE possibly empty
      p.args.insert(p.args.end(), {name, arg.substr(eq + 1)});
    else if (i + 1 >= argc || !argv[i + 1] || std::string_view(argv[i + 1]).rfind("--", 0) == 0)
      p.error = name + ": missing value";
    else
      p.args.insert(p.args.end(), {arg, argv[++i]});
  }
  std::reverse(p.args.begin(), p.args.end());
  return p;
}

Result<TrainOptions> parseImpl(int argc, const char *const *argv,
                               const TrainOptions &defaults) {
  TrainOptions o = defaults;
  o.help = false;
  std::unique_ptr<CLI::App> app = makeApp("train", o, defaults);
  Prepared p = prepare(*app, argc, argv);
  app->parse(std::move(p.args)); // throws the first bad value before p.error
  if (!p.error.empty())
    return Result<TrainOptions>::error(p.error);
  if (p.help) {
    o.help = true;
    return o;
  }

  if (o.data.empty())
    return Result<TrainOptions>::error(
        "missing required flag --data FILE (see --help)");
  if (o.steps < 0)
    return Result<TrainOptions>::error(
        "missing required flag --steps N (see --help)");
  if (p.seen.count("--checkpoint-every") && o.checkpointDir.empty())
    return Result<TrainOptions>::error(
        "--checkpoint-every requires --checkpoint-dir");
  if (p.seen.count("--checkpoint-keep") && o.checkpointDir.empty())
    return Result<TrainOptions>::error("--checkpoint-keep requires --checkpoint-dir");
  if (o.resume && o.checkpointDir.empty())
    return Result<TrainOptions>::error("--resume requires --checkpoint-dir");
  if (o.allowPartialResume && !o.resume)
    return Result<TrainOptions>::error("--allow-partial-resume requires --resume");
  if (!o.tracePath.empty() && !o.profileOpsPath.empty())
    return Result<TrainOptions>::error(
        "--trace and --profile-ops cannot be combined (both time every op; run twice)");
  return o;
}

} // namespace

Result<TrainOptions> parseTrainArgs(int argc, const char *const *argv,
                                    const TrainOptions &defaults) {
  try {
    return parseImpl(argc, argv, defaults);
  } catch (const CLI::ParseError &e) {
    return Result<TrainOptions>::error(e.what());
  } catch (const std::exception &e) {
    return Result<TrainOptions>::error(std::string("cannot parse arguments: ") +
                                       e.what());
  }
}

std::string trainUsage(const std::string &program, const TrainOptions &d) {
  TrainOptions o = d;
  return makeApp(program, o, d)->help();
}

} // namespace merak::rt
