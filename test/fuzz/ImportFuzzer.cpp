//===- ImportFuzzer.cpp - libFuzzer targets for the ONNX importer ---------===//
//
// One input is one model: binary ModelProto bytes (merak-fuzz-onnx) or ONNX
// text (merak-fuzz-onnxtxt, built with MERAK_FUZZ_TEXT=1). It goes through
// importOnnxBuffer, the code importOnnxFile (merak-opt's and merak-run's and
// merak-compile's entry point) runs after reading the file; a module that
// comes back is verified, printed and parsed back, as merak-opt would.
// Rejecting an input with a diagnostic is fine; a crash, a sanitizer report,
// an invalid module or one that does not read back is a bug.
//
// Diagnostics are swallowed so that the fuzzer spends its time importing.
// Every input gets a fresh MLIRContext: a shared one would keep each
// input's types, attributes and resource blobs alive and grow without bound.
//
//===----------------------------------------------------------------------===//
#include "merak/Import/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace mlir;

#ifndef MERAK_FUZZ_TEXT
#define MERAK_FUZZ_TEXT 0
#endif

namespace {
/// A directory with one small file, `weights.bin` (256 bytes), that external
/// data may name: the offset/length/location checks get exercised without
/// the fuzzer reading anything outside it.
std::string &externalDataDir() {
  static std::string dir;
  return dir;
}

/// The last error (or, after an internal error, the one before it: what
/// failed), for the report of a bug.
std::string &lastDiagnostic() {
  static std::string message;
  return message;
}

void removeExternalDataDir() {
  if (externalDataDir().empty())
    return;
  SmallString<128> file(externalDataDir());
  llvm::sys::path::append(file, "weights.bin");
  llvm::sys::fs::remove(file);
  llvm::sys::fs::remove(externalDataDir());
}

[[noreturn]] void bug(const char *what, ModuleOp module) {
  std::fprintf(stderr, "merak import fuzzer: %s\n", what);
  if (!lastDiagnostic().empty())
    std::fprintf(stderr, "last diagnostic: %s\n", lastDiagnostic().c_str());
  if (module) {
    module->print(llvm::errs(), OpPrintingFlags().elideLargeElementsAttrs(16));
    llvm::errs() << "\n";
  }
  std::abort();
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("merak-fuzz", dir))
    return 0; // external data is then refused as missing
  SmallString<128> file(dir);
  llvm::sys::path::append(file, "weights.bin");
  std::error_code ec;
  llvm::raw_fd_ostream os(file, ec);
  for (int i = 0; !ec && i < 256; ++i)
    os << (char)i;
  externalDataDir() = dir.str().str();
  std::atexit(removeExternalDataDir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext ctx(MLIRContext::Threading::DISABLED);
  ctx.printOpOnDiagnostic(false);
  // The importer's "internal: ..." errors (an output a handler did not
  // define, a module that does not verify, an exception) are its own bugs.
  bool internalError = false, anyError = false;
  ScopedDiagnosticHandler quiet(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return success();
    anyError = true;
    std::string message = diag.str();
    if (StringRef(message).starts_with("internal"))
      internalError = true;
    if (!internalError || lastDiagnostic().empty())
      lastDiagnostic() = message;
    return success();
  });
  lastDiagnostic().clear();
  StringRef bytes(reinterpret_cast<const char *>(data), size);
  merak::ImportOptions options;
  OwningOpRef<ModuleOp> module =
      merak::importOnnxBuffer(bytes, MERAK_FUZZ_TEXT, "fuzz-input", externalDataDir(),
                              &ctx, options);
  if (internalError)
    bug("the importer reported an internal error", *module);
  if (!module)
    return 0;
  if (anyError)
    bug("the importer reported an error but returned a module", *module);
  // The importer verifies before returning; a module that fails here was
  // changed behind the verifier's back.
  if (failed(verify(*module)))
    bug("the imported module does not verify", *module);
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    module->print(os);
  }
  OwningOpRef<ModuleOp> reparsed = parseSourceString<ModuleOp>(text, &ctx);
  if (!reparsed)
    bug("the imported module, printed, does not parse back", *module);
  if (failed(verify(*reparsed)))
    bug("the imported module, printed and parsed back, does not verify", *module);
  return 0;
}
