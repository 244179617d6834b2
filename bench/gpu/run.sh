#!/usr/bin/env bash
# The GPU check: one script, run once on a bare GPU machine (no network)
# from a copy of this repository, within about 9 minutes.
#
#   bash bench/gpu/run.sh [--quick]        (OUT=/path to choose the output dir)
#
# Phases (each with its own timeout; a failing phase does not stop the later
# ones; every phase logs to $OUT/<phase>.log):
#   env        what is there: GPU, nvcc, g++, cmake, ninja, clang-22, MLIR 22,
#              Open MPI, OpenBLAS, gtest, python3 + torch (nothing installed)
#   build-full (background, only with cmake + ninja + clang-22 + MLIR 22)
#              the whole project (scripts/build.sh into $OUT/build)
#   build      the CUDA runtime, its GPU tests and the kernel benchmark with
#              nvcc + g++ alone (bench/gpu/build_standalone.sh)
#   test-train attention (fwd/bwd vs naive attention in double), mixed-
#              precision casts, single-rank NCCL (merak_cuda_train_tests)
#   test-kernels  every kernel vs the CPU backend (merak_cuda_kernel_tests;
#              needs OpenBLAS, or the full build)
#   bench      attention + cuBLASLt GEMM TFLOP/s on GPT-2-124M shapes
#   e2e        when merak-compile --target cuda exists (full build): small
#              fp32 model GPU vs CPU program, GPT-2 124M bf16 vs PyTorch,
#              tokens/s, MFU and ratios vs eager / torch.compile
#              (bench/gpu/e2e.py)
#   parallel-dp2, parallel-tp2  (with e2e and mpirun) the small GPT at --dp 2
#              and --tp 2, mpirun -np 2 on the one GPU (host-staged MPI
#              collectives) vs the CPU programs, losses within 1e-3 over 10
#              steps (test/cuda/cuda_program_check.py par-vs-cpu-*)
#   parallel-pp2-1f1b  the same for the pipelined program (--pp 2, 4
#              micro-batches, 1F1B; stage messages host-staged over MPI)
#   bf16-vs-cpu  (with e2e) the bundled GPT at --precision bf16, GPU vs
#              CPU program, losses within 1e-2 over 10 steps
#   torch      otherwise: the PyTorch GPT-2 124M baseline alone
#              (bench/gpu/torch_ref.py)
# --quick: fewer repetitions and steps, batch 8 for GPT-2, no full build
# unless a previous one is in $OUT/build.
# Everything goes to $OUT (default bench/gpu/out); $OUT/summary.txt has one
# line per phase and the headline numbers.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
QUICK=0
for a in "$@"; do
  case $a in
    --quick) QUICK=1 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $a"; exit 2 ;;
  esac
done
OUT=${OUT:-$ROOT/bench/gpu/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUDGET=${MERAK_GPU_BUDGET:-540}   # seconds for the whole script
T0=$(date +%s)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
PY=${PYTHON:-}
for p in "$PY" python3 /usr/bin/python3 python; do
  if [ -n "$p" ] && command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' 2>/dev/null; then
    PY=$p; break
  fi
done

say() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/run.log"; }
left() { echo $((BUDGET - ($(date +%s) - T0))); }
note() { echo "$*" >>"$SUMMARY"; say "$*"; }
# phase NAME TIMEOUT CMD...: runs CMD with output to $OUT/NAME.log, capped
# by what is left of the budget; records PASS / FAIL (rc) / TIMEOUT / SKIP.
phase() {
  local name=$1 limit=$2; shift 2
  local rem; rem=$(left)
  if [ "$rem" -lt 10 ]; then note "$name: SKIP (budget spent)"; return 1; fi
  [ "$limit" -gt $((rem - 5)) ] && limit=$((rem - 5))
  say "== $name (timeout ${limit}s)"
  local t=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local dt=$(($(date +%s) - t))
  case $rc in
    0) note "$name: PASS (${dt}s)" ;;
    77) note "$name: SKIP ($(grep -m1 -i skip "$OUT/$name.log" || echo 'exit 77'))" ;;
    124|137) note "$name: TIMEOUT after ${dt}s (log: $OUT/$name.log)" ;;
    *) note "$name: FAIL rc=$rc (${dt}s; log: $OUT/$name.log)"; tail -15 "$OUT/$name.log" | sed 's/^/    /' ;;
  esac
  return $rc
}

# --- env ------------------------------------------------------------------------
{
  echo "date: $(date -u)"; echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi: none')"
  NV=$(ls /usr/local/cuda/bin/nvcc 2>/dev/null || command -v nvcc || ls /usr/local/cuda-*/bin/nvcc 2>/dev/null | head -1)
  echo "nvcc: ${NV:-MISSING} $([ -n "$NV" ] && "$NV" --version | tail -1)"
  echo "g++: $(command -v g++-12 || command -v g++ || echo MISSING)"
  for t in cmake ninja clang++-22 ld.lld protoc mpirun; do echo "$t: $(command -v $t || echo MISSING)"; done
  echo "mlir-22: $([ -f /usr/lib/llvm-22/lib/cmake/mlir/MLIRConfig.cmake ] && echo /usr/lib/llvm-22 || echo MISSING)"
  echo "openblas: $(ls /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h /usr/include/cblas.h /usr/include/openblas/cblas.h 2>/dev/null | head -1 || true)"
  echo "gtest: $([ -d /usr/include/gtest ] && echo yes || echo MISSING)"
  echo "nccl: $(ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h 2>/dev/null | head -1 || true)"
  echo "python: ${PY:-MISSING (no python with torch)} $([ -n "$PY" ] && "$PY" -c 'import torch,sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1)"
  echo "cpus: $(nproc)"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt" | tee -a "$OUT/run.log"
grep -q "MISSING" "$OUT/env.txt" && note "env: missing: $(grep MISSING "$OUT/env.txt" | cut -d: -f1 | tr '\n' ' ')"

# --- full build in the background (needs the whole toolchain) --------------------
FULL=0
need=()
for t in cmake ninja clang++-22 ld.lld protoc mpicc; do command -v $t >/dev/null || need+=("$t"); done
[ -f /usr/lib/llvm-22/lib/cmake/mlir/MLIRConfig.cmake ] || need+=("MLIR-22")
[ -f /usr/include/onnx/onnx_pb.h ] || need+=("libonnx-dev")
blas=0
for f in /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h /usr/include/cblas.h /usr/include/openblas/cblas.h; do
  [ -f "$f" ] && blas=1
done
[ "$blas" = 1 ] || need+=("OpenBLAS")
if [ ${#need[@]} -gt 0 ]; then
  note "build-full: SKIP (missing ${need[*]}; runtime-only build instead)"
elif [ "$QUICK" = 1 ] && [ ! -f "$OUT/build/build.ninja" ]; then
  note "build-full: SKIP (--quick and no previous build in $OUT/build)"
else
  FULL=1
  say "== build-full (background, timeout 300s): scripts/build.sh into $OUT/build"
  ( MERAK_BUILD_DIR="$OUT/build" timeout --kill-after=5 300 nice bash scripts/build.sh \
      >"$OUT/build-full.log" 2>&1; echo $? >"$OUT/build-full.rc" ) &
  FULL_PID=$!
fi

# --- standalone runtime build + tests + kernel benchmark -------------------------
phase build 240 bash bench/gpu/build_standalone.sh "$OUT/sa"
BIN=$OUT/sa/bin
if [ -x "$BIN/merak_cuda_train_tests" ]; then
  phase test-train 120 "$BIN/merak_cuda_train_tests"
  grep -E "^(FAIL|ok  ) attention O bf16 B1 H1 T1024|checks," "$OUT/test-train.log" >>"$SUMMARY" 2>/dev/null
else
  note "test-train: SKIP (not built)"
fi
if [ -x "$BIN/merak_cuda_kernel_tests" ]; then
  phase test-kernels 120 "$BIN/merak_cuda_kernel_tests"
elif [ "$FULL" = 1 ]; then
  say "test-kernels: after the full build"
else
  note "test-kernels: SKIP (needs OpenBLAS or the full build)"
fi
if [ -x "$BIN/merak_gpu_bench" ]; then
  BQ=(); [ "$QUICK" = 1 ] && BQ=(--quick)
  phase bench 120 "$BIN/merak_gpu_bench" "${BQ[@]}" --json "$OUT/bench.json"
  grep -E "attention|gemm bf16 (qkv|mlp fc|lm head) fwd" "$OUT/bench.log" >>"$SUMMARY" 2>/dev/null
else
  note "bench: SKIP (not built)"
fi

# --- full build results, end to end ----------------------------------------------
E2E=0
if [ "$FULL" = 1 ]; then
  say "waiting for build-full"
  wait "$FULL_PID"
  rc=$(cat "$OUT/build-full.rc" 2>/dev/null || echo 1)
  if [ "$rc" = 0 ]; then
    note "build-full: PASS"
    if [ ! -x "$BIN/merak_cuda_kernel_tests" ] && [ -x "$OUT/build/runtime/cuda/merak_cuda_kernel_tests" ]; then
      phase test-kernels 120 "$OUT/build/runtime/cuda/merak_cuda_kernel_tests"
    fi
    if "$OUT/build/bin/merak-compile" --help 2>&1 | grep -q -- "--target"; then E2E=1; fi
  else
    note "build-full: FAIL rc=$rc (log: $OUT/build-full.log)"; tail -15 "$OUT/build-full.log" | sed 's/^/    /'
  fi
fi
if [ -z "$PY" ]; then
  note "e2e/torch: SKIP (no python3 with torch)"
elif [ "$E2E" = 1 ]; then
  # dp 2, tp 2 and pp 2 (1F1B, 4 micro-batches) of the small GPT under
  # mpirun -np 2 (one GPU: the host-staged MPI collectives and stage
  # messages) vs the CPU programs, 10 steps, 1e-3; short, so before e2e.
  if command -v mpirun >/dev/null 2>&1; then
    for mesh in dp2 tp2 pp2-1f1b; do
      MERAK_COMM_TIMEOUT=20 phase "parallel-$mesh" 90 "$PY" test/cuda/cuda_program_check.py \
        --bin "$OUT/build/bin" --src "$ROOT" --workdir "$OUT/parallel-$mesh" "par-vs-cpu-$mesh"
      grep -E "^(ok|FAIL|train: GPU collectives)" "$OUT/parallel-$mesh.log" \
        | sed "s/^/parallel-$mesh: /" >>"$SUMMARY" 2>/dev/null
    done
  else
    note "parallel: SKIP (no mpirun)"
  fi
  # --precision bf16 (bf16 GEMMs on tensor cores) vs the CPU's bf16 program.
  phase bf16-vs-cpu 120 "$PY" test/cuda/cuda_program_check.py \
    --bin "$OUT/build/bin" --src "$ROOT" --workdir "$OUT/bf16-vs-cpu" vs-cpu-gpt-bf16
  grep -E "^(ok|FAIL)" "$OUT/bf16-vs-cpu.log" | sed "s/^/bf16-vs-cpu: /" >>"$SUMMARY" 2>/dev/null
  EQ=(); [ "$QUICK" = 1 ] && EQ=(--quick --steps 6)
  phase e2e 300 "$PY" bench/gpu/e2e.py --bin "$OUT/build/bin" --out "$OUT/e2e" --timeout 200 "${EQ[@]}"
  grep "^e2e:" "$OUT/e2e.log" >>"$SUMMARY" 2>/dev/null
else
  [ "$FULL" = 1 ] && note "e2e: SKIP (merak-compile has no --target cuda)"
  B=16 S=8; [ "$QUICK" = 1 ] && B=8 S=5
  phase torch 200 "$PY" bench/gpu/torch_ref.py --device cuda --dtype bf16 --modes eager,compile \
    --batch $B --steps $S --warmup 2 --json "$OUT/torch.json"
  grep "^torch" "$OUT/torch.log" >>"$SUMMARY" 2>/dev/null
fi

say "done in $(($(date +%s) - T0))s; summary:"
cat "$SUMMARY"
if grep -qE ": (FAIL|TIMEOUT)" "$SUMMARY"; then exit 1; fi
exit 0
