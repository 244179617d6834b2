//===- merak-run.cpp - merak's reference evaluator ------------------------===//
#include "merak/Tools/Drivers.h"

int main(int argc, char **argv) { return mlir::merak::merakRunMain(argc, argv); }
