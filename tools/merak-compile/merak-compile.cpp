//===- merak-compile.cpp - merak's compiler driver ------------------------===//
#include "merak/Tools/Drivers.h"

int main(int argc, char **argv) { return mlir::merak::merakCompileMain(argc, argv); }
