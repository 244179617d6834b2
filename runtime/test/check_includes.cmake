# Fails if any runtime source includes an MLIR or LLVM header.
# Usage: cmake -DDIR=<runtime source dir> -P check_includes.cmake
file(GLOB_RECURSE sources
  ${DIR}/*.h ${DIR}/*.hpp ${DIR}/*.cpp ${DIR}/*.cc ${DIR}/*.c ${DIR}/*.cu
  ${DIR}/*.cuh ${DIR}/*.inc ${DIR}/*.def)
set(bad "")
foreach(f IN LISTS sources)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](mlir|llvm|llvm-c)/")
  if(lines)
    list(APPEND bad "${f}: ${lines}")
  endif()
endforeach()
if(bad)
  string(REPLACE ";" "\n" bad "${bad}")
  message(FATAL_ERROR "runtime sources include MLIR/LLVM headers:\n${bad}")
endif()
list(LENGTH sources n)
message(STATUS "checked ${n} runtime sources: no MLIR/LLVM includes")
