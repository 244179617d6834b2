//===- OpRegistry.cpp - versioned table of ONNX op handlers ---------------===//
#include "ImporterImpl.h"

#include "llvm/Support/ErrorHandling.h"

#include <map>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

ArrayRef<int64_t> OpRegistry::onnxVersions(StringRef opType) {
  static const auto *versions = [] {
    auto *m = new llvm::StringMap<SmallVector<int64_t, 4>>;
#define ONNX_OP(name, ...) (*m)[name] = {__VA_ARGS__};
#include "OnnxOpVersions.inc"
#undef ONNX_OP
    return m;
  }();
  auto it = versions->find(opType);
  return it == versions->end() ? ArrayRef<int64_t>() : ArrayRef<int64_t>(it->second);
}

std::optional<OpRegistry::Arity> OpRegistry::onnxArity(StringRef opType, int64_t version) {
  static const auto *arities = [] {
    auto *m = new llvm::StringMap<std::map<int64_t, Arity>>;
#define ONNX_ARITY(name, since, minInputs, formals, required)                                      \
  (*m)[name][since] = Arity{minInputs, formals, required};
#include "OnnxOpArity.inc"
#undef ONNX_ARITY
    return m;
  }();
  auto it = arities->find(opType);
  if (it == arities->end())
    return std::nullopt;
  auto v = it->second.find(version);
  return v == it->second.end() ? std::nullopt : std::optional<Arity>(v->second);
}

/// Registration mistakes are programming errors, caught by any import.
static void checkVersion(StringRef opType, int64_t version) {
  if (!llvm::is_contained(OpRegistry::onnxVersions(opType), version))
    llvm::report_fatal_error(Twine("merak's ONNX op table: ") + opType + "-" +
                             Twine(version) + " is not an ONNX op version");
}

void OpRegistry::add(StringRef opType, int64_t since, Handler fn) {
  checkVersion(opType, since);
  table[opType][since].fn = fn;
}

void OpRegistry::sameAs(StringRef opType, int64_t version, int64_t base) {
  checkVersion(opType, version);
  auto &entries = table[opType];
  auto it = entries.find(base);
  if (it == entries.end() || !it->second.fn || base >= version)
    llvm::report_fatal_error(Twine("merak's ONNX op table: ") + opType + "-" +
                             Twine(version) + " refers to " + Twine(base) +
                             ", which has no handler");
  entries[version].base = base;
}

OpRegistry::Resolution OpRegistry::lookup(StringRef opType, int64_t opset) const {
  Resolution r;
  for (int64_t v : onnxVersions(opType))
    if (v <= opset)
      r.version = v;
  auto it = table.find(opType);
  if (!r.version || it == table.end())
    return r;
  const auto &entries = it->second;
  if (auto e = entries.find(r.version); e != entries.end()) {
    r.sameAs = e->second.fn ? 0 : e->second.base;
    r.fn = e->second.fn ? e->second.fn : entries.at(e->second.base).fn;
    return r;
  }
  if (r.version > kAuditedOpset)
    return r;
  // The latest handler written for an earlier version covers it.
  for (const auto &[since, e] : entries)
    if (since <= r.version && e.fn)
      r.fn = e.fn;
  return r;
}

const OpRegistry &OpRegistry::get() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    registerElementwiseOps(r);
    registerShapeOps(r);
    registerNNOps(r);
    registerLossOps(r);
    registerLegacyOps(r);
    registerSequenceOps(r);
    registerIndexingOps(r);
    registerRecurrentOps(r);
    registerAttentionOps(r);
    registerDropoutOps(r);
    registerRandomOps(r);
    registerResizeOps(r);
    registerEinsumOps(r);
    registerMathOps(r);
    registerGridSampleOps(r);
    registerControlOps(r);
    registerSignalOps(r);
    registerLinearAttentionOps(r);
    return r;
  }();
  return registry;
}
