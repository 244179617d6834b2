//===- Drivers.h - entry points of the merak command-line tools -*- C++ -*-===//
#ifndef MERAK_TOOLS_DRIVERS_H
#define MERAK_TOOLS_DRIVERS_H

namespace mlir::merak {
int merakRunMain(int argc, char **argv);
int merakCompileMain(int argc, char **argv);
} // namespace mlir::merak

#endif
