//===- TensorProtoIO.h - ONNX TensorProto and .npy files --------*- C++ -*-===//
//
// Reading and writing the tensor files `merak-run` exchanges: ONNX
// TensorProto `.pb` (the format of ONNX's test data) and numpy `.npy`.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_IMPORT_TENSORPROTOIO_H
#define MERAK_IMPORT_TENSORPROTOIO_H

#include "merak/Evaluator/HostTensor.h"
#include <string>

namespace mlir::merak {

/// Reads a `.pb` TensorProto or a `.npy` file (chosen by extension).
/// On failure returns failure and sets `error`.
/// `name`, when given, receives the TensorProto's name (empty for .npy).
FailureOr<HostTensor> readTensorFile(MLIRContext *ctx, StringRef path,
                                     std::string &error,
                                     std::string *name = nullptr);
/// Writes `.pb` or `.npy` by extension (`name` is the TensorProto name).
LogicalResult writeTensorFile(const HostTensor &t, StringRef path,
                              StringRef name, std::string &error);

} // namespace mlir::merak

#endif
