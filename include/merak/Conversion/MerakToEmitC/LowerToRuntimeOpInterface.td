//===- LowerToRuntimeOpInterface.td - merak-to-emitc rules -*- tablegen -*-===//
#ifndef MERAK_LOWER_TO_RUNTIME_OP_INTERFACE_TD
#define MERAK_LOWER_TO_RUNTIME_OP_INTERFACE_TD

include "mlir/IR/OpBase.td"

def Merak_LowerToRuntimeOpInterface : OpInterface<"LowerToRuntimeOpInterface"> {
  let cppNamespace = "::mlir::merak";
  let description = [{
    An op that merak-to-emitc can lower to calls of the runtime's ABI
    (runtime/include/merak_rt/kernels.def). `lowerToRuntime` emits the
    calls at the emitter's insertion point, for the target and with the
    state of the function being lowered that the context carries. The
    rules are attached as external models (lib/Conversion/MerakToEmitC,
    one per op, registerMerakToEmitCExternalModels), so the pass never
    switches on op kinds; an op without one has no kernel on any target.
  }];
  let methods = [
    InterfaceMethod<
      [{Emits the op's runtime calls: failure after a diagnostic,
        Lowering::NoKernel (nothing emitted) when the target has no kernel
        for this instance of the op.}],
      "::mlir::FailureOr<::mlir::merak::emitc_lowering::Lowering>", "lowerToRuntime",
      (ins "::mlir::merak::emitc_lowering::Emitter &":$emitter,
           "::mlir::merak::emitc_lowering::LoweringContext &":$context)>,
    InterfaceMethod<
      [{Whether the op's lowering calls a kernel: it is then announced by an
        opMark call and named in the trace's op list (kernelOps).}],
      "bool", "emitsKernel", (ins)>,
    InterfaceMethod<
      [{Whether, while a started collective is in flight, the op's calls
        are followed by a collectiveProgress() poll.}],
      "bool", "pollsCollectives", (ins)>
  ];
}

#endif
