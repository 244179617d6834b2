//===- stop_signals.h - Preemption: a signal asks ./train to stop -*- C++ -*-===//
//
// Slurm and Kubernetes preempt a job with a signal (SIGTERM) and a grace
// period before SIGKILL. ./train turns the first of its stop signals
// (--stop-signals, default TERM,INT,USR1) into a request: the current step
// finishes, every rank agrees to stop after the same step (agreedStopSignal,
// one tiny all-reduce per step), a coordinated checkpoint is written, and the
// program exits 128 + the signal (143 for SIGTERM). A second stop signal
// exits at once with that code, without a checkpoint (the checkpoint protocol
// keeps the previous one intact).
//
// Under Open MPI's mpirun, SIGUSR1 sent to mpirun is forwarded to every rank;
// SIGTERM or SIGINT sent to mpirun makes mpirun itself abort the job (SIGTERM
// to the ranks, SIGKILL one second later), too soon for a checkpoint. Slurm's
// srun signals every task directly (`scancel --signal=TERM`, `--signal=USR1@T`).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_STOP_SIGNALS_H
#define MERAK_RT_STOP_SIGNALS_H

#include "merak_rt/status.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace merak::rt {

class Comm;

/// "TERM,INT,USR1" (names with or without the SIG prefix, any case, or
/// numbers) or "none"; nullopt when a name is unknown, a signal cannot be
/// caught (KILL, STOP) or is repeated.
std::optional<std::vector<int>> parseStopSignals(std::string_view list);
/// "SIGTERM"; "signal N" for one without a name here.
std::string stopSignalName(int signal);
/// "TERM,INT,USR1"; "none" for an empty list.
std::string formatStopSignals(const std::vector<int> &signals);

/// Installs the handlers (sigaction, SA_RESTART): the first signal records
/// a stop request; a second one exits at once with 128 + that signal.
void installStopHandlers(const std::vector<int> &signals);
/// The first stop signal received by this process, or 0.
int stopSignalReceived();
/// The stop signal every rank agrees on (the largest received on any rank),
/// or 0: an all-reduce over the world, so every rank must call it after the
/// same steps. Without `comm`, this process's own.
Result<int> agreedStopSignal(Comm *comm);

} // namespace merak::rt

#endif // MERAK_RT_STOP_SIGNALS_H
