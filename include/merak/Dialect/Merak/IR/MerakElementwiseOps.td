//===- MerakElementwiseOps.td - elementwise ops ------------*- tablegen -*-===//
//
// Binary ops with numpy broadcasting (arithmetic, comparisons, logical and
// bitwise), the three-operand where, and the unary ops; included from
// MerakOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_ELEMENTWISE_OPS_TD
#define MERAK_ELEMENTWISE_OPS_TD

//===----------------------------------------------------------------------===//
// Elementwise binary ops (numpy broadcasting)
//===----------------------------------------------------------------------===//

class Merak_BinaryOp<string mnemonic, Type operandType, string kind,
                     list<Trait> traits = []>
    : Merak_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let description = "Elementwise with numpy broadcasting of the two operands; "
                    "both operands have the same element type. " # kind;
}

class Merak_ArithOp<string mnemonic, string summaryText, list<Trait> traits = []>
    : Merak_BinaryOp<mnemonic, Merak_NumericTensor,
                     "The result has the operands' element type.", traits> {
  let summary = summaryText;
}
class Merak_CompareOp<string mnemonic, string summaryText>
    : Merak_BinaryOp<mnemonic, Merak_Tensor, "The result is `i1`."> {
  let summary = summaryText;
}
class Merak_LogicalOp<string mnemonic, string summaryText>
    : Merak_BinaryOp<mnemonic, Merak_BoolTensor, "Operands and result are `i1`."> {
  let summary = summaryText;
}
class Merak_BitwiseOp<string mnemonic, string summaryText>
    : Merak_BinaryOp<mnemonic, Merak_IntegerTensor,
                     "Integers; the result has the operands' element type."> {
  let summary = summaryText;
}

def Merak_AddOp : Merak_ArithOp<"add", "Elementwise addition", [Merak_AutocastBinary,
    DeclareOpInterfaceMethods<Merak_InPlaceOpInterface>]>;
def Merak_SubOp : Merak_ArithOp<"sub", "Elementwise subtraction", [Merak_AutocastBinary]>;
def Merak_MulOp : Merak_ArithOp<"mul", "Elementwise multiplication", [Merak_AutocastBinary]> {
  let hasFolder = 1;
}
def Merak_DivOp : Merak_ArithOp<"div", "Elementwise division (integer division truncates)"> {
  let hasFolder = 1;
}
def Merak_PowOp : Merak_ArithOp<"pow", "Elementwise power">;
def Merak_MaxOp : Merak_ArithOp<"max", "Elementwise maximum">;
def Merak_MinOp : Merak_ArithOp<"min", "Elementwise minimum">;
def Merak_RemOp : Merak_ArithOp<"rem",
    "Elementwise remainder with the sign of the dividend (C fmod / %)">;
def Merak_EqOp : Merak_CompareOp<"eq", "Elementwise equality">;
def Merak_NeOp : Merak_CompareOp<"ne", "Elementwise inequality">;
def Merak_LtOp : Merak_CompareOp<"lt", "Elementwise less-than">;
def Merak_LeOp : Merak_CompareOp<"le", "Elementwise less-or-equal">;
def Merak_GtOp : Merak_CompareOp<"gt", "Elementwise greater-than">;
def Merak_GeOp : Merak_CompareOp<"ge", "Elementwise greater-or-equal">;
def Merak_AndOp : Merak_LogicalOp<"and", "Elementwise logical and"> {
  // and(x, true) is x, broadcast to the result's shape.
  let hasCanonicalizeMethod = 1;
}
def Merak_BitAndOp : Merak_BitwiseOp<"bit_and", "Elementwise bitwise and">;
def Merak_BitOrOp : Merak_BitwiseOp<"bit_or", "Elementwise bitwise or">;
def Merak_BitXorOp : Merak_BitwiseOp<"bit_xor", "Elementwise bitwise exclusive or">;
def Merak_ShiftLeftOp : Merak_BitwiseOp<"shift_left",
    "Elementwise left shift of lhs's bits by rhs (0 when rhs is negative or at least the "
    "width)">;
def Merak_ShiftRightOp : Merak_BitwiseOp<"shift_right",
    "Elementwise right shift of lhs's bits by rhs: logical for unsigned types, arithmetic "
    "for signed ones (a shift by a negative count or at least the width gives 0, or -1 "
    "for a negative signed lhs)">;
def Merak_OrOp : Merak_LogicalOp<"or", "Elementwise logical or">;
def Merak_XorOp : Merak_LogicalOp<"xor", "Elementwise logical xor">;

def Merak_WhereOp : Merak_Op<"where", [Pure, InferTypeOpAdaptor]> {
  let summary = "Elementwise select with numpy broadcasting of all three operands";
  let arguments = (ins Merak_BoolTensor:$condition, Merak_Tensor:$lhs,
                       Merak_Tensor:$rhs);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $lhs `,` $rhs attr-dict `:` type($condition) `,` type($lhs) `,` type($rhs)
  }];
  // where(broadcast(c), x, y) is broadcast(where(c, x, y)) when x and y
  // broadcast to c's shape: a mask selected at its own size.
  let hasCanonicalizeMethod = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

class Merak_UnaryOp<string mnemonic, Type type, string summaryText,
                    list<Trait> traits = []>
    : Merak_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType], traits)> {
  let summary = summaryText;
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Merak_ExpOp : Merak_UnaryOp<"exp", Merak_FloatTensor, "e^x">;
def Merak_LogOp : Merak_UnaryOp<"log", Merak_FloatTensor, "Natural logarithm">;
def Merak_SqrtOp : Merak_UnaryOp<"sqrt", Merak_FloatTensor, "Square root">;
def Merak_RsqrtOp : Merak_UnaryOp<"rsqrt", Merak_FloatTensor, "1 / sqrt(x)">;
def Merak_TanhOp : Merak_UnaryOp<"tanh", Merak_FloatTensor, "Hyperbolic tangent">;
def Merak_ErfOp : Merak_UnaryOp<"erf", Merak_FloatTensor, "Gauss error function">;
def Merak_SigmoidOp : Merak_UnaryOp<"sigmoid", Merak_FloatTensor, "1 / (1 + e^-x)">;
def Merak_SoftplusOp : Merak_UnaryOp<"softplus", Merak_FloatTensor,
    "log(1 + e^x), computed as max(x, 0) + log1p(e^-|x|)">;
def Merak_Expm1Op : Merak_UnaryOp<"expm1", Merak_FloatTensor,
    "e^x - 1, exact near 0 (torch.expm1; exporters write exp(x) - 1)">;
def Merak_Log1pOp : Merak_UnaryOp<"log1p", Merak_FloatTensor,
    "log(1 + x), exact near 0 (torch.log1p; exporters write log(x + 1))">;
def Merak_ReciprocalOp : Merak_UnaryOp<"reciprocal", Merak_FloatTensor, "1 / x">;
def Merak_SinOp : Merak_UnaryOp<"sin", Merak_FloatTensor, "Sine">;
def Merak_CosOp : Merak_UnaryOp<"cos", Merak_FloatTensor, "Cosine">;
def Merak_AsinOp : Merak_UnaryOp<"asin", Merak_FloatTensor, "Arcsine (NaN outside [-1, 1])">;
def Merak_AcosOp : Merak_UnaryOp<"acos", Merak_FloatTensor, "Arccosine (NaN outside [-1, 1])">;
def Merak_AtanOp : Merak_UnaryOp<"atan", Merak_FloatTensor, "Arctangent">;
def Merak_FloorOp : Merak_UnaryOp<"floor", Merak_FloatTensor, "Round down">;
def Merak_CeilOp : Merak_UnaryOp<"ceil", Merak_FloatTensor, "Round up">;
def Merak_ReluOp : Merak_UnaryOp<"relu", Merak_NumericTensor, "max(x, 0)">;
def Merak_NegOp : Merak_UnaryOp<"neg", Merak_NumericTensor, "-x"> {
  let hasFolder = 1;
}
def Merak_AbsOp : Merak_UnaryOp<"abs", Merak_NumericTensor, "|x|">;
def Merak_SignOp : Merak_UnaryOp<"sign", Merak_NumericTensor, "-1, 0 or 1">;
def Merak_BitNotOp : Merak_UnaryOp<"bit_not", Merak_IntegerTensor, "Bitwise negation (~x)">;
def Merak_NotOp : Merak_UnaryOp<"not", Merak_BoolTensor, "Logical negation"> {
  let hasFolder = 1;
}

def Merak_GeluOp : Merak_UnaryOp<"gelu", Merak_FloatTensor,
    "Gaussian error linear unit", [Merak_AutocastKeepsInput]> {
  let description = [{
    `x * 0.5 * (1 + erf(x / sqrt(2)))`, or with `approximate_tanh` the tanh
    form `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
  }];
  let arguments = (ins Merak_FloatTensor:$input, UnitAttr:$approximate_tanh);
}

def Merak_LeakyReluOp : Merak_UnaryOp<"leaky_relu", Merak_FloatTensor,
    "x if x >= 0 else alpha * x"> {
  let arguments = (ins Merak_FloatTensor:$input, F64Attr:$alpha);
}

def Merak_ClampOp : Merak_UnaryOp<"clamp", Merak_NumericTensor,
    "Clamps into [min, max]; a missing bound is unbounded"> {
  let arguments = (ins Merak_NumericTensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
}

def Merak_CastOp : Merak_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "Converts the element type";
  let description = [{
    Float to integer truncates toward zero; anything to `i1` is `x != 0`.
  }];
  let arguments = (ins Merak_Tensor:$input);
  let results = (outs Merak_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

#endif // MERAK_ELEMENTWISE_OPS_TD
