# Instrumented builds: libFuzzer targets for the ONNX importer and a runtime
# under AddressSanitizer and UndefinedBehaviorSanitizer (docs/user-guide.md,
# "Fuzzing and sanitizers"). Both options are OFF by default and belong in a
# build directory of their own: test/fuzz/build_instrumented.sh configures
# one with both ON and builds only the targets they need. The system
# LLVM/MLIR, protobuf and onnx libraries are linked as they are; only our
# code is instrumented.

option(MERAK_ENABLE_FUZZERS
  "Build the importer's libFuzzer targets (test/fuzz), compiling lib/ with \
-fsanitize=fuzzer-no-link,address,undefined and assertions on (clang only)" OFF)
option(MERAK_RUNTIME_SANITIZE
  "Build the runtime, its tests and the programs linked against it with \
-fsanitize=address,undefined -fno-sanitize-recover=undefined" OFF)

# What both share: reports name lines, UB stops the program (a fuzzer or a
# test only notices a report that ends the process).
set(_merak_sanitize -fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer -gline-tables-only)

# The runtime (applied in runtime/CMakeLists.txt, to its own targets only:
# that directory drops the compiler's options). It has RTTI, so UBSan's vptr
# check stays on.
set(MERAK_RT_SANITIZE_COMPILE_FLAGS ${_merak_sanitize})
set(MERAK_RT_SANITIZE_LINK_FLAGS -fsanitize=address,undefined)

# The compiler's code (lib/, tools/, test/fuzz), applied after the runtime's
# directory. LLVM and MLIR are built without RTTI, so the vptr check (which
# reads the type info of polymorphic objects) is off. Assertions are on in
# our code (-UNDEBUG: LLVM's ABI-breaking checks are fixed at 0 by the
# packaged llvm/Config/abi-breaking.h, so this does not change any layout):
# cast<>, ArrayRef and SmallVector bounds in the headers we inline check too.
set(MERAK_FUZZ_COMPILE_FLAGS -fsanitize=fuzzer-no-link ${_merak_sanitize}
    -fno-sanitize=vptr -UNDEBUG)
set(MERAK_FUZZ_LINK_FLAGS -fsanitize=address,undefined)

if(MERAK_ENABLE_FUZZERS AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "MERAK_ENABLE_FUZZERS needs clang (libFuzzer); "
    "configure with -DCMAKE_CXX_COMPILER=clang++-22 -DCMAKE_C_COMPILER=clang-22")
endif()
if(MERAK_ENABLE_FUZZERS OR MERAK_RUNTIME_SANITIZE)
  # libFuzzer and the sanitizers' runtimes ship in libclang-rt-22-dev.
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=address,undefined")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=address,undefined")
  check_cxx_source_compiles("int main() { return 0; }" MERAK_HAVE_SANITIZER_RUNTIME)
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT MERAK_HAVE_SANITIZER_RUNTIME)
    message(FATAL_ERROR "merak: ${CMAKE_CXX_COMPILER} cannot link "
      "-fsanitize=address,undefined programs (install libclang-rt-22-dev)")
  endif()
endif()
