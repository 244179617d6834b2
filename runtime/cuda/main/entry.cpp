//===- entry.cpp - main() of --target cuda training programs ----------------===//
//
// In its own archive (merak_runtime_main_cuda), as runtime/src/entry.cpp.
//
//===----------------------------------------------------------------------===//
extern "C" int merak_train_main_cuda(int argc, char **argv);

int main(int argc, char **argv) { return merak_train_main_cuda(argc, argv); }
