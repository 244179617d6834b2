//===- Program.h - Packaging and building generated programs ----*- C++ -*-===//
//
// The last phases of merak-compile: from a module planned by
// merak-plan-memory, the manifest and initial data of the generated program
// (runtime/include/merak_rt/program.h describes both), the C++ source of the
// step (merak-to-emitc, then EmitC's C++ translation), and the executable
// (the host C++ compiler, linked with the CPU runtime).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_TARGET_PROGRAM_H
#define MERAK_TARGET_PROGRAM_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace mlir::merak {

/// Compile-time facts recorded in the manifest.
struct ProgramInfo {
  std::string entry = "train_step";
  std::string model;     ///< source model file name
  std::string optimizer; ///< optimizer name
  std::string target = "cpu";     ///< "cpu" or "cuda" (merak-to-emitc's target)
  /// The initial data's safetensors file next to the executable (a file
  /// name) and this compilation's id; empty: embedded in the executable.
  std::string weightsFile, weightsId;
};

/// Whether this merak was built with the CUDA runtime (--target cuda can
/// build executables).
bool cudaRuntimeAvailable();

/// Writes the manifest (JSON) and the initial data (parameter storage, then
/// constants) of `planned`. Failure after a diagnostic.
LogicalResult writeProgramData(ModuleOp planned, const ProgramInfo &info,
                               llvm::raw_ostream &manifest, llvm::raw_ostream &data);

/// Lowers `planned` in place with merak-to-emitc and prints its C++.
LogicalResult emitProgramSource(ModuleOp planned, const ProgramInfo &info,
                                llvm::raw_ostream &os);

/// Writes the initial data `dataPath` (laid out as `manifestPath` says:
/// parameters at their offsets below params_init_bytes, the constants at
/// consts_offset, the full tensors of tensor-parallel shards at their
/// data_offset) to `outPath` as a safetensors file: one tensor per
/// parameter with data (its name, dtype and shape; a sharded one's full
/// global tensor), the constants as "merak.constants" (U8, first, 64-byte
/// aligned), metadata "merak.program" = `id`. The data is read through a
/// memory map, never held whole. Returns an error message or "".
std::string writeWeightsFile(llvm::StringRef manifestPath, llvm::StringRef dataPath,
                             llvm::StringRef outPath, llvm::StringRef id);

/// Compiles `cppPath` and the data object, links them with the runtime into
/// `outPath`. Files are written in `workDir`; `log` receives the compiler's
/// output on failure. `runtimeDir`, when not empty, holds an installed
/// runtime (include/, lib/libmerak_runtime_{cpu,main}.a) to use instead of
/// the build tree's; with `verbose` the commands are printed to `log`.
/// Returns an error message, or "" on success.
std::string buildExecutable(llvm::StringRef workDir, llvm::StringRef cppPath,
                            llvm::StringRef manifestPath, llvm::StringRef dataPath,
                            uint64_t dataBytes, llvm::StringRef outPath, bool verbose,
                            llvm::StringRef runtimeDir, llvm::raw_ostream &log,
                            llvm::StringRef target = "cpu");

} // namespace mlir::merak

#endif
