//===- MerakBase.td - merak dialect definition -------------*- tablegen -*-===//
#ifndef MERAK_BASE_TD
#define MERAK_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "merak/Dialect/Merak/IR/MerakInterfaces.td"

def Merak_Dialect : Dialect {
  let name = "merak";
  let cppNamespace = "::mlir::merak";
  let summary = "Tensor-level IR for training PyTorch-exported models.";
  let description = [{
    The `merak` dialect holds the model and, in later phases, the training
    step, on builtin ranked tensors with static shapes. Ops follow numpy /
    ONNX semantics (broadcasting, negative-axis-free normalised attributes),
    so that an ONNX graph imports one node to a few ops and the reference
    evaluator (`merak-run`) can execute every op directly. Trainable
    parameters are module-level `merak.param` symbols whose initial values
    are dense resources, read with `merak.get_param`.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let discardableAttrs = (ins);
}

// The state that parameters (and optimizer state) live in: reads and writes
// of it are ordered, so get_param is not hoisted over set_param.
def Merak_ParamResource : Resource<"::mlir::merak::ParamResource">;
// Where the running program is in training: the step, and this rank's part
// of the batch and of the tensor-parallel split (merak.dropout reads it).
def Merak_TrainingPositionResource : Resource<"::mlir::merak::TrainingPositionResource">;

// Every op has a cost (FLOPs, bytes accessed) for the cost model; ops whose
// cost is not elementwise define getFlops/getBytesAccessed in their
// extraClassDeclaration (MerakCost.cpp).
class Merak_Op<string mnemonic, list<Trait> traits = []>
    : Op<Merak_Dialect, mnemonic, !listconcat(traits, [Merak_CostOpInterface])>;

// Autocast (merak-mixed-precision): the op runs on bf16 operands and keeps
// its result in bf16 when its float32 operands are widened bf16 values.
// KeepsInput: one data operand (activations, views, attention's q, k, v);
// Binary: two operands, one of which may be a float32 parameter-like value
// (a bias), cast to bf16.
def Merak_AutocastKeepsInput : NativeOpTrait<"AutocastKeepsInput"> {
  let cppNamespace = "::mlir::merak";
}
def Merak_AutocastBinary : NativeOpTrait<"AutocastBinary"> {
  let cppNamespace = "::mlir::merak";
}

// Every element of the result is an element of the first operand (views,
// slices, broadcasts): a bound on the result's values (an index limit,
// merak-record-index-limits) is a bound on the operand's.
def Merak_ForwardsElements : NativeOpTrait<"ForwardsElements"> {
  let cppNamespace = "::mlir::merak";
}

// Cost overrides (MerakCost.cpp), spliced into extraClassDeclaration.
defvar Merak_FlopsCost = "int64_t getFlops();";
// A GEMM whose bf16 operands may produce an f32 result (InferTypeOpAdaptor
// then accepts the inferred bf16 type widened to f32).
defvar Merak_WideningResult = [{
  static bool isCompatibleReturnTypes(::mlir::TypeRange inferred, ::mlir::TypeRange actual);
}];
defvar Merak_FlopsAndBytesCost = "int64_t getFlops(); int64_t getBytesAccessed();";

// Element types the dialect supports.
def Merak_Float : AnyTypeOf<[F32, F16, BF16, F64]>;
def Merak_Int : AnyTypeOf<[I64, I32]>;
def Merak_Element : AnyTypeOf<[F32, F16, BF16, F64, I64, I32, I16, I8, UI64, UI32, UI16,
                                UI8, I1]>;

// All merak values have static shapes (dynamic dimensions are bound at
// import), so every later phase can size buffers and shard exactly. The
// narrow and unsigned integers (ONNX's int8/int16/uint8..uint64) are
// values of the importer and the reference evaluator (wrapping at their
// width); the code generator takes float, i64, i32 and i1 only.
def Merak_Tensor : StaticShapeTensorOf<[F32, F16, BF16, F64, I64, I32, I16, I8, UI64, UI32,
                                        UI16, UI8, I1]>;
def Merak_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16, F64]>;
def Merak_NumericTensor : StaticShapeTensorOf<[F32, F16, BF16, F64, I64, I32, I16, I8, UI64,
                                               UI32, UI16, UI8]>;
def Merak_IntTensor : StaticShapeTensorOf<[I64, I32]>;
def Merak_IntegerTensor : StaticShapeTensorOf<[I64, I32, I16, I8, UI64, UI32, UI16, UI8]>;
def Merak_BoolTensor : StaticShapeTensorOf<[I1]>;

#endif // MERAK_BASE_TD
