//===- MerakModule.cpp - the extension module merak._merak ----------------===//
//
// Exposes mlir::merak::compileModel (merak/Tools/Compile.h) to Python: an
// options object with one attribute per merak-compile flag, and a result
// with the status, the diagnostics and the report. The pure-Python package
// (merak/compiler.py) turns a failed result into merak.CompileError.
//
// Built with exceptions and RTTI (pybind11 needs both), unlike the compiler
// library; the two meet only in Compile.h, which has standard types alone
// and through which nothing is thrown.
//
//===----------------------------------------------------------------------===//
#include "merak/Tools/Compile.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>

namespace py = pybind11;
using mlir::merak::CompileOptions;
using mlir::merak::CompilePhase;
using mlir::merak::CompileResult;

namespace {
constexpr std::pair<const char *, CompilePhase> kPhases[] = {
    {"import", CompilePhase::Import},     {"training", CompilePhase::Training},
    {"shard", CompilePhase::Shard},       {"pipeline", CompilePhase::Pipeline},
    {"recompute", CompilePhase::Recompute}, {"schedule", CompilePhase::Schedule},
    {"overlap", CompilePhase::Overlap},
    {"lower", CompilePhase::Lower},
    {"emit", CompilePhase::Emit},         {"binary", CompilePhase::Binary},
};

std::string phaseName(CompilePhase phase) {
  for (const auto &[name, p] : kPhases)
    if (p == phase)
      return name;
  return "?";
}

CompilePhase parsePhase(const std::string &name) {
  for (const auto &[n, p] : kPhases)
    if (name == n)
      return p;
  throw py::value_error("unknown phase '" + name +
                        "' (expected import, training, shard, pipeline, recompute, schedule, "
                        "lower, emit or binary)");
}
} // namespace

PYBIND11_MODULE(_merak, m) {
  m.doc() = "merak's compiler, called in process (use the merak package, not this module)";

  py::class_<CompileOptions>(m, "CompileOptions",
                             "merak-compile's options; see docs/user-guide.md for each flag")
      .def(py::init<>())
      .def_readwrite("input", &CompileOptions::input)
      .def_readwrite("output", &CompileOptions::output)
      .def_property(
          "compile_to", [](const CompileOptions &o) { return phaseName(o.compileTo); },
          [](CompileOptions &o, const std::string &name) {
            o.compileTo = parsePhase(name);
            o.compileToGiven = true;
          })
      .def_readwrite("input_shapes", &CompileOptions::inputShapes)
      .def_readwrite("loss", &CompileOptions::loss)
      .def_readwrite("logits", &CompileOptions::logits)
      .def_readwrite("labels", &CompileOptions::labels)
      .def_readwrite("frozen", &CompileOptions::frozen)
      .def_readwrite("optimizer", &CompileOptions::optimizer)
      .def_readwrite("optimizer_options", &CompileOptions::optimizerOptions)
      .def_readwrite("dp", &CompileOptions::dp)
      .def_readwrite("tp", &CompileOptions::tp)
      .def_readwrite("pp", &CompileOptions::pp)
      .def_readwrite("microbatches", &CompileOptions::microbatches)
      .def_readwrite("devices", &CompileOptions::devices)
      .def_readwrite("target", &CompileOptions::target)
      .def_readwrite("vocab_parallel", &CompileOptions::vocabParallel)
      .def_readwrite("sequence_parallel", &CompileOptions::sequenceParallel)
      .def_readwrite("schedule", &CompileOptions::schedule)
      .def_readwrite("virtual_stages", &CompileOptions::virtualStages)
      .def_readwrite("recompute", &CompileOptions::recompute)
      .def_readwrite("memory_per_device", &CompileOptions::memoryPerDevice)
      .def_readwrite("simulate", &CompileOptions::simulate)
      .def_readwrite("simulate_trace", &CompileOptions::simulateTrace)
      .def_readwrite("op_costs", &CompileOptions::opCosts)
      .def_readwrite("device_profile", &CompileOptions::deviceProfile)
      .def_readwrite("stage_boundaries", &CompileOptions::stageBoundaries)
      .def_readwrite("zero", &CompileOptions::zero)
      .def_readwrite("bucket_mb", &CompileOptions::bucketMb)
      .def_readwrite("tp_overlap", &CompileOptions::tpOverlap)
      .def_readwrite("dp_overlap", &CompileOptions::dpOverlap)
      .def_readwrite("fused_attention", &CompileOptions::fusedAttention)
      .def_readwrite("sync_batchnorm", &CompileOptions::syncBatchNorm)
      .def_readwrite("moe_aux_loss", &CompileOptions::moeAuxLoss)
      .def_readwrite("moe_capacity_factor", &CompileOptions::moeCapacityFactor)
      .def_readwrite("moe_drop_policy", &CompileOptions::moeDropPolicy)
      .def_readwrite("fused_experts", &CompileOptions::fusedExperts)
      .def_readwrite("fused_scan", &CompileOptions::fusedScan)
      .def_readwrite("ep", &CompileOptions::ep)
      .def_readwrite("moe_dispatcher", &CompileOptions::moeDispatcher)
      .def_readwrite("moe_shadow", &CompileOptions::moeShadow)
      .def_readwrite("moe_shadow_min_rows", &CompileOptions::moeShadowMinRows)
      .def_readwrite("moe_rebalance_every", &CompileOptions::moeRebalanceEvery)
      .def_readwrite("moe_chunks", &CompileOptions::moeChunks)
      .def_readwrite("moe_all_to_all", &CompileOptions::moeAllToAll)
      .def_readwrite("precision", &CompileOptions::precision)
      .def_readwrite("grad_reduce", &CompileOptions::gradReduce)
      .def_readwrite("verbose", &CompileOptions::verbose)
      .def_readwrite("emit_bytecode", &CompileOptions::emitBytecode)
      .def_readwrite("no_cleanup", &CompileOptions::noCleanup)
      .def_readwrite("report", &CompileOptions::report)
      .def_readwrite("report_file", &CompileOptions::reportFile)
      .def_readwrite("runtime_dir", &CompileOptions::runtimeDir);

  py::class_<CompileResult>(m, "CompileResult")
      .def_readonly("ok", &CompileResult::ok)
      .def_readonly("diagnostics", &CompileResult::diagnostics)
      .def_readonly("report", &CompileResult::report)
      .def("__bool__", [](const CompileResult &r) { return r.ok; });

  m.def(
      "compile",
      [](const CompileOptions &options) {
        // Compiling takes seconds and touches no Python object.
        py::gil_scoped_release release;
        return mlir::merak::compileModel(options);
      },
      py::arg("options"),
      "Runs merak-compile in this process; returns a CompileResult (never raises for a "
      "compile error).");
}
