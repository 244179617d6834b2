#!/usr/bin/env bash
# Builds the CUDA runtime, its GPU tests and the kernel benchmark with nvcc and
# g++ alone (no cmake, no MLIR/LLVM): what bench/gpu/run.sh uses on a bare GPU
# machine.
#
#   bench/gpu/build_standalone.sh OUTDIR
#
# Produces OUTDIR/bin/merak_cuda_train_tests (attention, mixed-precision
# casts, NCCL when nccl.h/libnccl are found), OUTDIR/bin/merak_gpu_bench, and,
# when OpenBLAS's cblas.h is there (the CPU backend is the reference),
# OUTDIR/bin/merak_cuda_kernel_tests. Objects go to OUTDIR/obj; each
# source's log to OUTDIR/obj/*.log. A source that does not compile (e.g. a
# newer runtime file needing the CPU runtime) is reported and left out;
# the exit status is non-zero only when a requested binary cannot be built.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=${1:?usage: build_standalone.sh OUTDIR}
mkdir -p "$OUTDIR/obj" "$OUTDIR/bin"
OUTDIR=$(cd "$OUTDIR" && pwd)

NVCC=${NVCC:-}
for c in "$NVCC" /usr/local/cuda/bin/nvcc "$(command -v nvcc 2>/dev/null)" /usr/local/cuda-*/bin/nvcc; do
  if [ -n "$c" ] && [ -x "$c" ]; then NVCC=$c; break; fi
done
if [ -z "$NVCC" ] || [ ! -x "$NVCC" ]; then
  echo "build_standalone: no nvcc (looked in /usr/local/cuda/bin, PATH, /usr/local/cuda-*/bin)"
  exit 1
fi
CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)
HOSTCXX=${HOSTCXX:-$(command -v g++-12 || command -v g++ || true)}
if [ -z "$HOSTCXX" ]; then
  echo "build_standalone: no g++ (nvcc's host compiler)"
  exit 1
fi
CUDA_LIB=$CUDA_HOME/lib64
[ -d "$CUDA_LIB" ] || CUDA_LIB=$CUDA_HOME/lib
NCCL_INC="" NCCL_LIB=""
for d in "$CUDA_HOME/include" /usr/include /usr/local/include; do
  [ -f "$d/nccl.h" ] && { NCCL_INC=$d; break; }
done
for d in "$CUDA_LIB" /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/lib; do
  ls "$d"/libnccl.so* >/dev/null 2>&1 && { NCCL_LIB=$d; break; }
done
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
echo "build_standalone: nvcc $NVCC ($("$NVCC" --version | tail -1)), host $HOSTCXX, $JOBS jobs"
if [ -n "$NCCL_INC" ] && [ -n "$NCCL_LIB" ]; then
  echo "build_standalone: NCCL headers in $NCCL_INC, library in $NCCL_LIB"
else
  echo "build_standalone: no NCCL (nccl.h and libnccl.so): built without the NCCL communicator"
fi

INC=(-I"$ROOT/runtime/include" -I"$ROOT/runtime/cuda" -I"$CUDA_HOME/include")
NVFLAGS=(-O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -lineinfo -ccbin "$HOSTCXX" -Xcompiler -fPIC)
CXXFLAGS=(-O2 -std=c++17 -fPIC)
DEFS=()
HAVE_NCCL=0
if [ -n "$NCCL_INC" ] && [ -n "$NCCL_LIB" ]; then
  HAVE_NCCL=1
  DEFS=(-DMERAK_HAVE_NCCL=1)
  INC+=(-I"$NCCL_INC")
fi

# The runtime's CUDA sources (every .cu, the host .cpp files; nccl.cpp only
# with NCCL), the tests and the benchmark, compiled in parallel.
SRCS=()
for f in "$ROOT"/runtime/cuda/*.cu "$ROOT"/runtime/cuda/*.cpp; do
  [ -e "$f" ] || continue
  # nccl*.cpp only with NCCL; nccl_mesh.cpp (MPI) is never linked into the
  # programs built here, the archive keeps it harmlessly.
  if [[ $(basename "$f") == nccl*.cpp ]] && [ "$HAVE_NCCL" = 0 ]; then continue; fi
  SRCS+=("$f")
done
TESTS=("$ROOT"/runtime/cuda/test/train_test.cpp "$ROOT"/runtime/cuda/test/attention_test.cpp
       "$ROOT"/runtime/cuda/test/mixed_test.cpp "$ROOT"/runtime/cuda/test/nccl_test.cpp)
BENCH=("$ROOT"/bench/gpu/bench_kernels.cu)
objname() { local b; b=$(basename "$1"); echo "$OUTDIR/obj/${b%.*}.$( [[ $1 == *.cu ]] && echo cu || echo cc).o"; }

# One compile per source, in parallel: OUTDIR/obj/compile.sh SRC.
{
  echo 'src=$1; b=$(basename "$src"); ext=cc; [[ $src == *.cu ]] && ext=cu'
  echo "obj=$OUTDIR/obj/\${b%.*}.\$ext.o"
  printf 'if [[ $src == *.cu ]]; then set -- %q' "$NVCC"
  printf ' %q' "${NVFLAGS[@]}" "${INC[@]}" "${DEFS[@]}"
  printf '; else set -- %q' "$HOSTCXX"
  printf ' %q' "${CXXFLAGS[@]}" "${INC[@]}" "${DEFS[@]}"
  echo '; fi'
  echo '"$@" -c "$src" -o "$obj" >"$obj.log" 2>&1 ||'
  echo '  { echo "build_standalone: FAILED to compile $src (log: $obj.log)"; rm -f "$obj"; }'
} >"$OUTDIR/obj/compile.sh"
printf '%s\n' "${SRCS[@]}" "${TESTS[@]}" "${BENCH[@]}" |
  xargs -P "$JOBS" -n 1 bash "$OUTDIR/obj/compile.sh"

# The runtime objects that compiled go into one archive: the linker takes
# only what the programs need.
RT_OBJS=()
for f in "${SRCS[@]}"; do o=$(objname "$f"); [ -f "$o" ] && RT_OBJS+=("$o"); done
rm -f "$OUTDIR/obj/libmerak_cuda.a"
ar rcs "$OUTDIR/obj/libmerak_cuda.a" "${RT_OBJS[@]}"
LIBS=(-L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" -lcudart -lcublasLt)
if [ "$HAVE_NCCL" = 1 ]; then LIBS+=(-L"$NCCL_LIB" -Wl,-rpath,"$NCCL_LIB" -lnccl); fi
LIBS+=(-lpthread -ldl -lrt)

status=0
link() { # name objs...
  local name=$1; shift
  if "$HOSTCXX" -o "$OUTDIR/bin/$name" "$@" "$OUTDIR/obj/libmerak_cuda.a" "${LIBS[@]}" \
       >"$OUTDIR/obj/$name.link.log" 2>&1; then
    echo "build_standalone: built bin/$name"
  else
    echo "build_standalone: FAILED to link $name:"; tail -20 "$OUTDIR/obj/$name.link.log"
    status=1
  fi
}
TOBJS=(); for f in "${TESTS[@]}"; do TOBJS+=("$(objname "$f")"); done
link merak_cuda_train_tests "${TOBJS[@]}"
link merak_gpu_bench "$(objname "${BENCH[0]}")"

# The kernel tests compare with the CPU backend: its kernels need OpenBLAS's
# CBLAS (and OpenMP); without cblas.h they are not built.
CBLAS_INC=""
for d in /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas /usr/include; do
  [ -f "$d/cblas.h" ] && { CBLAS_INC=$d; break; }
done
if [ -z "$CBLAS_INC" ]; then
  echo "build_standalone: no cblas.h (OpenBLAS): merak_cuda_kernel_tests (vs the CPU backend) not built"
else
  CPU_OBJS=()
  for f in "$ROOT"/runtime/src/*.cpp; do
    [[ $(basename "$f") == comm.cpp ]] && continue # MPI
    o=$OUTDIR/obj/cpu_$(basename "${f%.cpp}").o
    CPU_OBJS+=("$o")
  done
  {
    echo 'src=$1; b=$(basename "$src" .cpp)'
    echo "obj=$OUTDIR/obj/cpu_\$b.o"
    printf '%q' "$HOSTCXX"
    printf ' %q' -O2 -std=c++17 -fopenmp -I"$ROOT/runtime/include" -I"$CBLAS_INC"
    echo ' -c "$src" -o "$obj" >"$obj.log" 2>&1 || rm -f "$obj"'
  } >"$OUTDIR/obj/compile_cpu.sh"
  printf '%s\n' "$ROOT"/runtime/src/*.cpp | grep -v '/comm.cpp$' |
    xargs -P "$JOBS" -n 1 bash "$OUTDIR/obj/compile_cpu.sh"
  have=(); for o in "${CPU_OBJS[@]}"; do [ -f "$o" ] && have+=("$o"); done
  rm -f "$OUTDIR/obj/libmerak_cpu.a"; ar rcs "$OUTDIR/obj/libmerak_cpu.a" "${have[@]}"
  if "$HOSTCXX" "${CXXFLAGS[@]}" "${INC[@]}" -c "$ROOT/runtime/cuda/test/kernel_test.cpp" \
       -o "$OUTDIR/obj/kernel_test.o" >"$OUTDIR/obj/kernel_test.log" 2>&1 &&
     "$HOSTCXX" -o "$OUTDIR/bin/merak_cuda_kernel_tests" "$OUTDIR/obj/kernel_test.o" \
       "$OUTDIR/obj/libmerak_cuda.a" "$OUTDIR/obj/libmerak_cpu.a" -fopenmp -lopenblas \
       "${LIBS[@]}" >"$OUTDIR/obj/merak_cuda_kernel_tests.link.log" 2>&1; then
    echo "build_standalone: built bin/merak_cuda_kernel_tests"
  else
    echo "build_standalone: merak_cuda_kernel_tests not built (the CPU backend needs more than" \
         "OpenBLAS here; see $OUTDIR/obj/merak_cuda_kernel_tests.link.log)"
    tail -5 "$OUTDIR/obj/merak_cuda_kernel_tests.link.log" "$OUTDIR/obj/kernel_test.log" 2>/dev/null
  fi
fi
exit $status
