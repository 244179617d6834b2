//===- stop_signals.cpp - Preemption: a signal asks ./train to stop -------===//
#include "stop_signals.h"

#include "merak_rt/comm.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstring>
#include <pthread.h>
#include <thread>

#include <unistd.h>

namespace merak::rt {

namespace {

struct NamedSignal {
  const char *name;
  int signal;
};
constexpr NamedSignal kSignals[] = {
    {"TERM", SIGTERM}, {"INT", SIGINT},   {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}, {"ALRM", SIGALRM},
};

volatile std::sig_atomic_t gStopSignal = 0;

extern "C" void onStopSignal(int signal) {
  if (gStopSignal != 0) {
    // Only async-signal-safe calls here: write and _exit.
    static const char message[] =
        "train: a second stop signal: exiting at once, without a checkpoint\n";
    ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
    ::_exit(128 + signal);
  }
  gStopSignal = signal;
}

std::optional<int> parseOne(std::string_view item) {
  std::string upper;
  for (char c : item)
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string_view name = upper;
  if (name.substr(0, 3) == "SIG")
    name.remove_prefix(3);
  for (const NamedSignal &s : kSignals)
    if (name == s.name)
      return s.signal;
  int number = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), number);
  if (name.empty() || ec != std::errc() || end != name.data() + name.size())
    return std::nullopt;
  for (const NamedSignal &s : kSignals)
    if (number == s.signal)
      return number;
  return std::nullopt; // KILL and STOP cannot be caught; others are not stops
}

} // namespace

std::optional<std::vector<int>> parseStopSignals(std::string_view list) {
  std::vector<int> signals;
  if (list == "none")
    return signals;
  while (true) {
    size_t comma = list.find(',');
    std::optional<int> s = parseOne(list.substr(0, comma));
    if (!s || std::find(signals.begin(), signals.end(), *s) != signals.end())
      return std::nullopt;
    signals.push_back(*s);
    if (comma == std::string_view::npos)
      return signals;
    list.remove_prefix(comma + 1);
  }
}

std::string stopSignalName(int signal) {
  for (const NamedSignal &s : kSignals)
    if (s.signal == signal)
      return std::string("SIG") + s.name;
  return "signal " + std::to_string(signal);
}

std::string formatStopSignals(const std::vector<int> &signals) {
  std::string out;
  for (int s : signals)
    out += (out.empty() ? "" : ",") + stopSignalName(s).substr(3);
  return out.empty() ? "none" : out;
}

void installStopHandlers(const std::vector<int> &signals) {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  for (int s : signals) // a stop signal never interrupts the handler of another
    sigaddset(&action.sa_mask, s);
  action.sa_flags = SA_RESTART;
  for (int s : signals)
    ::sigaction(s, &action, nullptr);
  if (signals.empty())
    return;
  // The handler must not run on a computing thread's stack: oneDNN 2.6's
  // JIT GEMM keeps data below the stack pointer, which a signal frame
  // overwrites (then oneDNN frees a garbage pointer: preempt-serial-term
  // aborted in ~15 % of runs). So this thread blocks the stop signals, the
  // threads started from here on (OpenMP's, oneDNN's) inherit the block,
  // and one thread of our own takes them with sigwait. The handler stays
  // for threads started before (MPI's), which run no JIT code.
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals)
    sigaddset(&set, s);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int signal = 0;
      if (::sigwait(&set, &signal) == 0)
        onStopSignal(signal);
    }
  }).detach();
}

int stopSignalReceived() { return gStopSignal; }

Result<int> agreedStopSignal(Comm *comm) {
  double signal = stopSignalReceived();
  if (!comm)
    return static_cast<int>(signal);
  Comm::Request r = comm->allReduceMax(Axis::World, &signal, 1, CommType::F64);
  if (Status st = comm->wait(r, "agreeing on a stop signal"); !st.ok())
    return Result<int>::error(st.message());
  return static_cast<int>(signal);
}

} // namespace merak::rt
