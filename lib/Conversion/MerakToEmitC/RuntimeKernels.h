//===- RuntimeKernels.h - The entry points merak-to-emitc calls -*- C++ -*-===//
//
// One constant per entry point of the runtime's ABI table
// (runtime/include/merak_rt/kernels.def, which the CPU and GPU runtime
// headers expand into their declarations): `e.call(kernels::binary)`. The
// emitter takes only these, so a call of a misspelt or removed entry point
// does not compile. CMake copies the table into the build tree
// (include/merak/Conversion/MerakToEmitC/CMakeLists.txt), so that the
// compiler includes no runtime header.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_CONVERSION_MERAKTOEMITC_RUNTIMEKERNELS_H
#define MERAK_LIB_CONVERSION_MERAKTOEMITC_RUNTIMEKERNELS_H

namespace mlir::merak::emitc_lowering {

/// A runtime entry point generated code calls.
struct Kernel {
  const char *name;
  /// Declared by the CPU runtime only (MERAK_CPU_KERNEL): --target cuda has
  /// no such entry point.
  bool cpuOnly;
  /// Declared in merak_rt/collectives.h (MERAK_COLLECTIVE*) rather than
  /// merak_rt/ops.h.
  bool collective;
};

namespace kernels {
#define MERAK_KERNEL_CONSTANT(n, cpuOnly, collective)                          \
  inline constexpr Kernel n{#n, cpuOnly, collective};
#define MERAK_KERNEL(n, ret, params) MERAK_KERNEL_CONSTANT(n, false, false)
#define MERAK_CPU_KERNEL(n, ret, params) MERAK_KERNEL_CONSTANT(n, true, false)
#define MERAK_COLLECTIVE(n, ret, params) MERAK_KERNEL_CONSTANT(n, false, true)
#define MERAK_COLLECTIVE_VARIADIC(n) MERAK_KERNEL_CONSTANT(n, false, true)
#include "merak/Conversion/MerakToEmitC/RuntimeKernels.def"
#undef MERAK_KERNEL_CONSTANT
} // namespace kernels

} // namespace mlir::merak::emitc_lowering

#endif
