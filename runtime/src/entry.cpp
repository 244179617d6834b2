//===- entry.cpp - main() of generated training programs -------------------===//
//
// In its own archive (merak_runtime_main) so that only generated programs,
// not the runtime's tests, get this main.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/program.h"

int main(int argc, char **argv) { return merak_train_main(argc, argv); }
