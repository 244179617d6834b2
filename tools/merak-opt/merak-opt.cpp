//===- merak-opt.cpp - merak's opt driver ---------------------------------===//
#include "merak/Pipelines/Registration.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::merak::registerMerakDialects(registry);
  mlir::merak::registerAllMerakPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "merak optimizer driver\n", registry));
}
