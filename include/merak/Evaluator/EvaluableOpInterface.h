//===- EvaluableOpInterface.h - ops the evaluator runs ----------*- C++ -*-===//
#ifndef MERAK_EVALUATOR_EVALUABLEOPINTERFACE_H
#define MERAK_EVALUATOR_EVALUABLEOPINTERFACE_H

#include "merak/Evaluator/HostTensor.h"
#include "mlir/IR/OpDefinition.h"

#include "merak/Evaluator/EvaluableOpInterface.h.inc"

#endif
