# Compiles every runtime/cuda/*.cu's device code for sm_90 with -Xptxas -v,
# writes the report to OUT and fails when any kernel has a stack frame,
# spill stores or loads, or local memory (lmem) > 0 bytes.
# Usage: cmake -DNVCC=... -DHOST_CXX=... -DSRC_DIR=... -DINCLUDE_DIR=...
#              -DOUT=report.txt -P check_ptxas.cmake
file(GLOB kernels ${SRC_DIR}/*.cu)
if(NOT kernels)
  message(FATAL_ERROR "no .cu files in ${SRC_DIR}")
endif()
get_filename_component(outdir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${outdir})
set(report "")
set(bad "")
set(nkernels 0)
foreach(cu IN LISTS kernels)
  get_filename_component(name ${cu} NAME_WE)
  # -cubin: the device code alone (ptxas's report is the same as a full
  # compile's, without the host compilation: a third of the time).
  set(args -std=c++17 -arch=sm_90 -Xptxas=-v --expt-relaxed-constexpr
           -I${INCLUDE_DIR} -cubin ${cu} -o ${outdir}/ptxas_${name}.cubin)
  if(HOST_CXX)
    list(PREPEND args -ccbin ${HOST_CXX})
  endif()
  execute_process(COMMAND ${NVCC} ${args} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(APPEND report "=== ${name}.cu\n${out}${err}")
  if(NOT rc EQUAL 0)
    list(APPEND bad "${name}.cu: nvcc failed (${rc})")
    continue()
  endif()
  string(REGEX MATCHALL "Compiling entry function '[^']+'" entries "${err}")
  list(LENGTH entries n)
  math(EXPR nkernels "${nkernels} + ${n}")
  string(REGEX MATCHALL "[1-9][0-9]* bytes (stack frame|spill stores|spill loads|lmem)"
         hits "${err}")
  if(hits)
    list(APPEND bad "${name}.cu: ${hits}")
  endif()
endforeach()
file(WRITE ${OUT} "${report}")
if(bad)
  string(REPLACE ";" "\n" bad "${bad}")
  message(FATAL_ERROR "ptxas resource check failed (see ${OUT}):\n${bad}")
endif()
if(nkernels EQUAL 0)
  message(FATAL_ERROR "ptxas printed no kernel entries (see ${OUT})")
endif()
message(STATUS "ptxas: ${nkernels} kernels, no stack frame, spills or lmem "
               "(report: ${OUT})")
