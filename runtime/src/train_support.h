//===- train_support.h - ./train's exit codes and messages ------*- C++ -*-===//
//
// Shared by the files of ./train (train_main.cpp, train_checkpoint.cpp):
// every error is one "train: error: ..." line on stderr, then the run ends
// by throwing ExitRun, which merak_train_main turns into the exit code.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_TRAIN_SUPPORT_H
#define MERAK_RT_TRAIN_SUPPORT_H

#include <cstdio>
#include <string>

namespace merak::rt::train {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInternal = 3;

/// Ends the run with an exit code after the message was printed.
struct ExitRun {
  int code;
};

inline void printError(const std::string &message) {
  std::fprintf(stderr, "train: error: %s\n", message.c_str());
  std::fflush(stderr);
}

inline void printWarning(const std::string &message) {
  std::fprintf(stderr, "train: warning: %s\n", message.c_str());
  std::fflush(stderr);
}

[[noreturn]] inline void die(int code, const std::string &message) {
  printError(message);
  throw ExitRun{code};
}

[[noreturn]] inline void internalError(const std::string &message) {
  die(kExitInternal, "internal error: " + message +
                         " (the program is inconsistent; a merak-compile bug)");
}

} // namespace merak::rt::train

#endif // MERAK_RT_TRAIN_SUPPORT_H
