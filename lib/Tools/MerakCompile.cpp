//===- MerakCompile.cpp - the merak-compile command line ------------------===//
//
// merak-compile MODEL.onnx [--compile-to=PHASE] [-o FILE] [--dp ...] ...
//
// Parses the command line into CompileOptions and calls runCompile
// (Compile.cpp), which the Python module calls too.
//
//===----------------------------------------------------------------------===//
#include "merak/Tools/Compile.h"
#include "merak/Tools/Drivers.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::merak;
namespace cl = llvm::cl;

namespace {
struct CommandLine {
  cl::OptionCategory cat{"merak-compile options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<model.onnx | model.onnxtxt>"),
                             cl::Required, cl::cat(cat)};
  cl::opt<std::string> output{"o", cl::desc("Output file ('-' for stdout)"),
                              cl::value_desc("file"), cl::init("-"), cl::cat(cat)};
  cl::opt<CompilePhase> compileTo{
      "compile-to",
      cl::desc("Stop after this phase and print its IR (default: binary, the executable)"),
      cl::values(clEnumValN(CompilePhase::Import, "import",
                            "ONNX -> merak dialect, shapes static, shape "
                            "arithmetic folded, parameters as merak.param"),
                 clEnumValN(CompilePhase::Training, "training",
                            "adds @loss (the training loss), @loss_grad (loss "
                            "and the gradient of every trainable parameter) and "
                            "@train_step (gradients, clipping, LR schedule and "
                            "the optimizer update)"),
                 clEnumValN(CompilePhase::Shard, "shard",
                            "with --tp/--dp/--zero: the training IR after sharding "
                            "(merak-tensor-parallel runs on @forward before the loss is "
                            "attached, merak-data-parallel after autodiff), with "
                            "merak.shard attributes and the inserted collectives"),
                 clEnumValN(CompilePhase::Pipeline, "pipeline",
                            "with --pp/--microbatches: the stage assignment "
                            "(comment lines) and the IR of every stage's fragments"),
                 clEnumValN(CompilePhase::Recompute, "recompute",
                            "with --pp/--microbatches/--recompute: the fragments after "
                            "merak-recompute (the choice per stage as comment lines)"),
                 clEnumValN(CompilePhase::Schedule, "schedule",
                            "with --pp/--microbatches: every stage's instruction list"),
                 clEnumValN(CompilePhase::Overlap, "overlap",
                            "the training IR with collectives split into start and wait "
                            "(merak-overlap: --dp-overlap, --tp-overlap)"),
                 clEnumValN(CompilePhase::Lower, "lower",
                            "plans the memory of @train_step: arena offsets by "
                            "liveness, parameter and constant storage (prints the "
                            "planned merak IR and the peak arena bytes)"),
                 clEnumValN(CompilePhase::Emit, "emit",
                            "the C++ host code of the step (EmitC), calling the "
                            "runtime's kernels"),
                 clEnumValN(CompilePhase::Binary, "binary",
                            "the training executable (-o, default ./train): the "
                            "step compiled by the host C++ compiler, linked with the "
                            "CPU runtime, parameters embedded")),
      cl::init(CompilePhase::Binary), cl::cat(cat)};
  cl::list<std::string> inputShapes{
      "input-shape", cl::desc("Bind a graph input's shape (dynamic dims), e.g. input_ids=8x128"),
      cl::value_desc("NAME=DIMS"), cl::cat(cat)};
  cl::opt<int64_t> batchSize{
      "batch-size",
      cl::desc("Bind the dynamic batch (leading) dimension of the graph inputs that "
               "--input-shape does not bind; the global batch, split by --dp and "
               "--microbatches"),
      cl::value_desc("N"), cl::init(0), cl::cat(cat)};
  cl::opt<std::string> loss{"loss",
                            cl::desc("Training loss: cross-entropy (of the logits output) "
                                     "or model-output (the model returns its loss)"),
                            cl::init("cross-entropy"), cl::cat(cat)};
  cl::opt<std::string> logits{"logits",
                              cl::desc("Output holding the logits (or the loss); default: the first"),
                              cl::init(""), cl::cat(cat)};
  cl::opt<std::string> labels{"labels",
                              cl::desc("next-token (labels are an extra input shaped like the "
                                       "logits without the class axis, supplied by the data "
                                       "loader) or the name of a graph input"),
                              cl::init("next-token"), cl::cat(cat)};
  cl::list<std::string> frozen{"frozen",
                               cl::desc("Glob of parameters that do not train (buffers such as "
                                        "causal masks); repeatable"),
                               cl::value_desc("GLOB"), cl::cat(cat)};
  cl::opt<std::string> optimizer{"optimizer", cl::desc("sgd, adamw (default) or adan"),
                                 cl::init("adamw"), cl::cat(cat)};
  cl::list<std::string> optimizerOptions{
      "opt", cl::desc("Optimizer/schedule option KEY=VALUE (repeatable): lr, beta1, beta2, "
                      "beta3, eps, weight-decay, momentum, nesterov, clip-norm, schedule "
                      "(constant|linear-warmup|cosine), warmup-steps, total-steps, min-lr; "
                      "see merak-opt --help for --merak-optimizer"),
      cl::value_desc("KEY=VALUE"), cl::cat(cat)};
  cl::opt<int64_t> dp{"dp", cl::desc("Data-parallel ranks: the batch is split over them and "
                                      "gradients are averaged (run with mpirun -np dp*tp*pp)"),
                      cl::init(1), cl::cat(cat)};
  cl::opt<int64_t> tp{"tp", cl::desc("Tensor-parallel ranks: Megatron-style column/row-parallel MLPs "
                                      "and head-split attention (run with mpirun -np dp*tp*pp)"),
                      cl::init(1), cl::cat(cat)};
  cl::opt<int64_t> ep{"ep",
                      cl::desc("Expert-parallel ranks of a Mixture-of-Experts model: the experts "
                               "are split over groups of ep data-parallel ranks (divides --dp; "
                               "adds no processes)"),
                      cl::init(1), cl::cat(cat)};
  cl::opt<std::string> moeDispatcher{
      "moe-dispatcher",
      cl::desc("With --ep: how tokens reach their experts' ranks: alltoall (each row sent to "
               "the rank holding its expert; Megatron-LM's alltoall dispatcher) or allgather "
               "(every rank gathers the group's tokens); the same values either way"),
      cl::value_desc("alltoall|allgather"), cl::init("alltoall"), cl::cat(cat)};
  cl::opt<int64_t> moeShadow{
      "moe-shadow",
      cl::desc("With --ep: FasterMoE's dynamic shadowing. Every step, up to N experts per "
               "layer whose rows from other ranks cost more on the all-to-all than their "
               "weights are copied to every rank of the ep group, which then computes its own "
               "rows of them (0: off). The losses do not change"),
      cl::value_desc("N"), cl::init(0), cl::cat(cat)};
  cl::opt<int64_t> moeShadowMinRows{
      "moe-shadow-min-rows",
      cl::desc("With --moe-shadow: shadow an expert once at least this many rows of other "
               "ranks are routed to it (0: where that costs what its weights do)"),
      cl::value_desc("ROWS"), cl::init(0), cl::cat(cat)};
  cl::opt<std::string> moeChunks{
      "moe-chunks",
      cl::desc("With --ep (alltoall dispatcher, no shadowing): FasterMoE's smart scheduling. "
               "Split every expert GEMM's rows and all-to-alls into K chunks whose exchanges "
               "run while the previous chunk's GEMM computes (1: whole; auto: the K of 1, 2, "
               "4, 8 that the --device-profile's link and GEMM costs favour). The losses do "
               "not change"),
      cl::value_desc("K|auto"), cl::init("1"), cl::cat(cat)};
  cl::opt<int64_t> moeRebalanceEvery{
      "moe-rebalance-every",
      cl::desc("With --ep: FlexMoE's dynamic placement. Every K steps the program moves "
               "experts (weights and optimizer state) between the ranks of their ep group "
               "so that each rank gets a similar share of the rows, when the move pays for "
               "itself (./train --moe-rebalance-every overrides K; 0: off). The losses do "
               "not change"),
      cl::value_desc("K"), cl::init(0), cl::cat(cat)};
  cl::opt<std::string> moeHistogram{
      "moe-histogram",
      cl::desc("With --simulate (or --devices) and --ep: the experts' shares of the routed "
               "rows recorded by a run (./train --moe-histogram FILE) instead of --moe-skew's "
               "Zipf shares"),
      cl::value_desc("FILE"), cl::init(""), cl::cat(cat)};
  cl::opt<std::string> moeAllToAll{
      "moe-all-to-all",
      cl::desc("With --ep and the alltoall dispatcher: flat (one exchange over the ep group) "
               "or hierarchical (Tutel's 2DH / MoNTA: within each node to the rank with the "
               "destination's local index, then across nodes; fewer, larger inter-node "
               "messages, the same values). Nodes are MPI's shared-memory nodes, or "
               "world rank / MERAK_RANKS_PER_NODE"),
      cl::value_desc("flat|hierarchical"), cl::init("flat"), cl::cat(cat)};
  cl::opt<double> moeSkew{
      "moe-skew",
      cl::desc("With --simulate and --ep: uneven routing, expert e getting a share of the "
               "rows proportional to (e + 1)^-S (Zipf; 0 uniform, about 1 heavy); the busiest "
               "rank's expert GEMMs and all-to-alls set the pace"),
      cl::value_desc("S"), cl::init(0.0), cl::cat(cat)};
  cl::opt<bool> vocabParallel{
      "vocab-parallel",
      cl::desc("With --tp: also split the vocabulary (tied embedding / LM head and the "
               "cross-entropy; Megatron-LM). The default when the vocabulary divides by tp "
               "(otherwise replicated, with a note); --vocab-parallel=false keeps it "
               "replicated, an explicit --vocab-parallel makes a vocabulary that cannot be "
               "split an error"),
      cl::init(true), cl::cat(cat)};
  cl::opt<int64_t> pp{"pp", cl::desc("Pipeline stages: the model is cut into pp stages of "
                                      "balanced cost (run with mpirun -np dp*tp*pp)"),
                      cl::init(1), cl::cat(cat)};
  cl::opt<int64_t> microbatches{
      "microbatches", cl::desc("Micro-batches per step (pipelining; with --pp 1, gradient "
                               "accumulation); the batch must divide by dp * microbatches"),
      cl::init(1), cl::cat(cat)};
  cl::opt<std::string> target{
      "target",
      cl::desc("Where the program runs: cpu (default; OpenBLAS + MPI) or cuda (NVIDIA GPUs "
               "through the CUDA runtime, one per rank; --dp/--tp/--zero with NCCL or "
               "host-staged MPI collectives; pipelines with stage messages host-staged "
               "over MPI)"),
      cl::init("cpu"), cl::cat(cat)};
  cl::opt<std::string> schedule{
      "schedule",
      cl::desc("Pipeline schedule: gpipe, 1f1b (default), interleaved (with --virtual-stages), "
               "zb-h1, zb-h2 (zero bubble: the backward split into input and weight "
               "gradients) or shifted-critical-path (Merak's: the recomputation ahead of the "
               "gradient's arrival; --recompute full by default)"),
      cl::init("1f1b"), cl::cat(cat)};
  cl::opt<std::string> recompute{
      "recompute",
      cl::desc("What pipeline backwards recompute: none (stash every activation), "
               "selective (the attention core), full (the whole stage forward) or "
               "stage-aware (per stage the least that fits --memory-per-device); default: "
               "stage-aware with --memory-per-device, none without. Other than none it "
               "takes the pipelined path (one stage) for a serial program"),
      cl::init(""), cl::cat(cat)};
  cl::opt<std::string> memoryPerDevice{
      "memory-per-device",
      cl::desc("Memory of one device, for --recompute stage-aware and --devices (default "
               "there: the --device-profile's memory_bytes): bytes, or with a suffix "
               "KB/MB/GB (10^3) or KiB/MiB/GiB (2^10), e.g. 80GB"),
      cl::init(""), cl::cat(cat)};
  cl::opt<int64_t> virtualStages{
      "virtual-stages",
      cl::desc("With --schedule interleaved: model chunks per pipeline stage (default 1)"),
      cl::init(1), cl::cat(cat)};
  cl::opt<bool> simulate{
      "simulate",
      cl::desc("With --pp/--microbatches: run the schedule on the pipeline simulator "
               "(costs from --device-profile, placeholder costs without: 1e11 FLOP/s, "
               "10 GB/s + 10 us per message) and print the step time, bubble and per-stage "
               "peak in-flight micro-batches and memory (to stderr; --report=json: "
               "\"simulated\")"),
      cl::init(false), cl::cat(cat)};
  cl::opt<std::string> simulateTrace{
      "simulate-trace",
      cl::desc("With --simulate: write the simulated timeline as a Chrome trace "
               "(chrome://tracing, Perfetto; one row per stage)"),
      cl::value_desc("file"), cl::cat(cat)};
  cl::alias traceSim{"trace-sim", cl::desc("Alias for --simulate-trace"),
                     cl::aliasopt(simulateTrace), cl::cat(cat)};
  cl::opt<std::string> deviceProfile{
      "device-profile",
      cl::desc("With --simulate: the device profile JSON (profiles/h200-node.json, or one "
               "written by merak-calibrate)"),
      cl::value_desc("file"), cl::cat(cat)};
  cl::opt<std::string> opCosts{
      "op-costs",
      cl::desc("With --simulate: measured op costs (the file a training program writes "
               "with --profile-ops); ops whose shape it timed cost what was measured, the "
               "others the device profile's roofline. With --devices: the planner's best "
               "plans are compiled and re-ranked by their simulation with these costs"),
      cl::value_desc("file"), cl::cat(cat)};
  cl::list<int64_t> stageBoundaries{
      "stage-boundaries",
      cl::desc("Override the partitioner: pp x virtual-stages - 1 increasing cut-point indices "
               "(as numbered by --compile-to=pipeline), stage (chunk) s ending at cut point s"),
      cl::CommaSeparated, cl::value_desc("I,J,..."), cl::cat(cat)};
  cl::opt<int64_t> zero{"zero",
                        cl::desc("ZeRO stage with --dp: 0 (default) or 1 (gradients reduce-scattered, "
                                 "optimizer state sharded over dp, updated parameters all-gathered)"),
                        cl::value_desc("0|1"), cl::init(0), cl::cat(cat)};
  cl::opt<double> bucketMb{"bucket-mb",
                           cl::desc("Gradient all-reduce bucket size in MB (default 25)"),
                           cl::init(25.0), cl::cat(cat)};
  cl::opt<std::string> tpOverlap{
      "tp-overlap",
      cl::desc("none (default) or sub-pipeline: split each tp all-reduce's matmul in two "
               "halves along the batch so one half's all-reduce runs under the other's matmul"),
      cl::value_desc("none|sub-pipeline"), cl::init("none"), cl::cat(cat)};
  cl::opt<std::string> dpOverlap{
      "dp-overlap",
      cl::desc("on (default) or off: start each dp gradient bucket's collective when its "
               "last gradient is computed and wait for it when the optimizer reads it"),
      cl::value_desc("on|off"), cl::init("on"), cl::cat(cat)};
  cl::opt<std::string> weightCastCache{
      "weight-cast-cache",
      cl::desc("on (default) or off: with --precision bf16 in a pipelined program (--pp, "
               "--microbatches), each stage casts its weights to bf16 once a step into a copy "
               "that every micro-batch reads (merak-cache-param-casts; 2 more bytes per "
               "weight), instead of in every micro-batch's forward and backward"),
      cl::value_desc("on|off"), cl::init("on"), cl::cat(cat)};
  cl::opt<std::string> gradAccumulationFusion{
      "grad-accumulation-fusion",
      cl::desc("on (default) or off: a weight gradient's GEMM adds into its micro-batch "
               "accumulator (BLAS / cuBLASLt beta = 1, merak-fuse-grad-accumulation) instead "
               "of a product buffer, an add and a copy back"),
      cl::value_desc("on|off"), cl::init("on"), cl::cat(cat)};
  cl::opt<std::string> sequenceParallel{
      "sequence-parallel",
      cl::desc("on or off (default): with --tp > 1, split the ops between the tensor-parallel "
               "blocks (residual adds, layer norms) over the tokens (Megatron-LM's sequence "
               "parallelism, merak-sequence-parallel): each block's all-reduce becomes a "
               "reduce-scatter and an all-gather, and those activations shrink tp-fold; with "
               "--devices the planner searches both unless this is given"),
      cl::value_desc("on|off"), cl::init("off"), cl::cat(cat)};
  cl::opt<std::string> fusedAttention{
      "fused-attention",
      cl::desc("on (default) or off: replace the exported attention (matmul, scale, causal "
               "mask, softmax, matmul; on the CPU also sliding windows, soft-capping and a "
               "trainable score bias such as T5's) by merak.attention, which never stores "
               "the T x T scores"),
      cl::value_desc("on|off"), cl::init("on"), cl::cat(cat)};
  cl::opt<bool> syncBatchNorm{
      "sync-batchnorm",
      cl::desc("with --dp N: training-mode BatchNorm normalises with the mean and variance of "
               "all N ranks' rows (PyTorch's nn.SyncBatchNorm; its running statistics too) "
               "instead of each rank's own (DDP's default)"),
      cl::init(false), cl::cat(cat)};
  cl::opt<std::string> fusedExperts{
      "fused-experts",
      cl::desc("on (default) or off: replace a Mixture-of-Experts layer's gathered expert "
               "weights and batched matmul by merak.expert_matmul, a grouped GEMM that never "
               "gathers the weights"),
      cl::value_desc("on|off"), cl::init("on"), cl::cat(cat)};
  cl::opt<std::string> fusedScan{
      "fused-scan",
      cl::desc("on (default) or off: fuse Mamba's selective scan (its [B, D, T, N] decay, "
               "input and states, as the exporters write PyTorch's reference path) into "
               "merak.selective_scan, whose kernels never store them"),
      cl::value_desc("on|off"), cl::init("on"), cl::cat(cat)};
  cl::opt<double> moeAuxLoss{
      "moe-aux-loss",
      cl::desc("Add the Mixture-of-Experts load-balancing loss (Switch Transformer, as "
               "transformers' router_aux_loss_coef) with this coefficient, e.g. 0.02; 0 "
               "(default): none"),
      cl::value_desc("coef"), cl::init(0.0), cl::cat(cat)};
  cl::opt<double> moeCapacityFactor{
      "moe-capacity-factor",
      cl::desc("Expert capacity with token dropping (Megatron's --moe-expert-capacity-factor): "
               "in every Mixture-of-Experts layer each expert takes at most ceil(C x rows / "
               "experts) of one rank's micro-batch rows (a row: a token's top-k choice); the "
               "rest are dropped (add nothing, get no gradient). 0 (default): dropless"),
      cl::value_desc("C"), cl::init(0.0), cl::cat(cat)};
  cl::opt<std::string> moeDropPolicy{
      "moe-drop-policy",
      cl::desc("With --moe-capacity-factor: which of an expert's rows beyond its capacity are "
               "dropped: probs (default; the lowest routing weights) or position (the later "
               "tokens)"),
      cl::value_desc("probs|position"), cl::init("probs"), cl::cat(cat)};
  cl::opt<std::string> precision{
      "precision",
      cl::desc("fp32 (default) or bf16: bf16 GEMMs with float32 accumulation, float32 "
               "master weights, gradients, optimizer and everything but the GEMMs "
               "(merak-mixed-precision)"),
      cl::value_desc("fp32|bf16"), cl::init("fp32"), cl::cat(cat)};
  cl::opt<std::string> gradReduce{
      "grad-reduce",
      cl::desc("fp32 (default) or bf16: the data-parallel gradient reduction communicates "
               "bf16 (half the bytes), accumulation and the optimizer stay float32 "
               "(merak-grad-reduce-precision)"),
      cl::value_desc("fp32|bf16"), cl::init("fp32"), cl::cat(cat)};
  cl::opt<bool> verbose{"v", cl::desc("Print the host compiler and linker commands"),
                        cl::init(false), cl::cat(cat)};
  cl::opt<bool> emitBytecode{"emit-bytecode", cl::desc("Write MLIR bytecode instead of text"),
                             cl::init(false), cl::cat(cat)};
  cl::opt<bool> noCleanup{"no-cleanup",
                          cl::desc("Print the importer's raw output (skip folding/canonicalisation)"),
                          cl::init(false), cl::cat(cat)};
  cl::opt<std::string> report{
      "report", cl::ValueOptional, cl::value_desc("text|json"),
      cl::desc("Print the parallel plan (mesh, per stage: ONNX nodes, parameters, memory, "
               "FLOPs, collectives; tensor-parallel splits, data-parallel buckets); alone, "
               "implies --compile-to=training; replaces the IR on stdout"),
      cl::cat(cat)};
  cl::opt<int64_t> devices{"devices",
                           cl::desc("Plan dp x tp x pp, micro-batches and schedule for N devices "
                                    "(the fastest simulated plan that fits) and compile it"),
                           cl::value_desc("N"), cl::init(0), cl::cat(cat)};
  cl::opt<std::string> plannerSpace{
      "planner-space",
      cl::desc("--devices: 'auto' (default), 'megatron' (Megatron-LM's fixed policy: 1F1B, "
               "full recomputation, uniform layer split, no overlap) or 'megatron-best' "
               "(Megatron-LM as an expert configures it: 1F1B or interleaved, no, selective "
               "or full recomputation, overlapped gradient reduction, the distributed "
               "optimizer, uniform layer split; searched)"),
      cl::init("auto"), cl::cat(cat)};
  cl::opt<std::string> reportFile{"report-file", cl::desc("Write --report here (default stdout)"),
                                  cl::value_desc("file"), cl::init("-"), cl::cat(cat)};
  cl::opt<std::string> runtimeDir{
      "runtime-dir",
      cl::desc("--compile-to=binary: link with the runtime in DIR (DIR/include and DIR/lib as "
               "`cmake --install` lays them out) instead of the build tree's"),
      cl::value_desc("DIR"), cl::init(""), cl::cat(cat)};
};

/// An on|off flag's value into `out`; false (with the error printed) for
/// anything else.
bool readOnOff(const cl::opt<std::string> &flag, bool &out) {
  if (flag != "on" && flag != "off") {
    llvm::errs() << "merak-compile: error: --" << flag.ArgStr << " must be on or off, got '"
                 << flag.getValue() << "'\n";
    return false;
  }
  out = flag == "on";
  return true;
}

} // namespace

int mlir::merak::merakCompileMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  CommandLine opts;
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  cl::HideUnrelatedOptions(opts.cat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "merak-compile: compiles an ONNX model (exported from PyTorch) into a "
      "parallel training program.\n\n"
      "  merak-compile model.onnx\n"
      "      writes the training executable ./train (-o to name it); run it with\n"
      "      ./train --data tokens.bin --steps 1000 (mpirun -np N for --dp/--tp/--pp).\n"
      "  merak-compile model.onnx --compile-to=import -o model.mlir\n"
      "      imports the model into the merak dialect and prints the IR;\n"
      "      inspect or transform it further with merak-opt, evaluate it with merak-run.\n"
      "  merak-compile model.onnx --input-shape input_ids=8x128 --compile-to=import\n"
      "      binds a dynamic input dimension (every dynamic one must be bound).\n"
      "  merak-compile model.onnx --compile-to=training --frozen '*.attn.bias' \\\n"
      "      --optimizer adamw --opt lr=3e-4 --opt clip-norm=1.0 -o train.mlir\n"
      "      builds the training step; run it with\n"
      "      merak-run train.mlir --entry train_step --input ids.npy --input labels.npy --steps 10\n");

  CompileOptions o;
  o.input = opts.input;
  o.output = opts.output;
  o.compileTo = opts.compileTo;
  o.compileToGiven = opts.compileTo.getNumOccurrences() > 0;
  o.inputShapes.assign(opts.inputShapes.begin(), opts.inputShapes.end());
  o.batchSize = opts.batchSize;
  o.loss = opts.loss;
  o.logits = opts.logits;
  o.labels = opts.labels;
  o.frozen.assign(opts.frozen.begin(), opts.frozen.end());
  o.optimizer = opts.optimizer;
  o.optimizerOptions.assign(opts.optimizerOptions.begin(), opts.optimizerOptions.end());
  o.dp = opts.dp;
  o.tp = opts.tp;
  o.ep = opts.ep;
  o.moeDispatcher = opts.moeDispatcher;
  o.moeShadow = opts.moeShadow;
  o.moeShadowMinRows = opts.moeShadowMinRows;
  o.moeRebalanceEvery = opts.moeRebalanceEvery;
  // auto: 0; not a positive count: -1 (refused with the cause).
  int64_t chunks = -1;
  if (opts.moeChunks == "auto")
    chunks = 0;
  else if (StringRef(opts.moeChunks).getAsInteger(10, chunks) || chunks < 1)
    chunks = -1;
  o.moeChunks = chunks;
  o.moeAllToAll = opts.moeAllToAll;
  o.moeHistogram = opts.moeHistogram;
  o.moeSkew = opts.moeSkew;
  o.pp = opts.pp;
  o.microbatches = opts.microbatches;
  o.target = opts.target;
  o.runtimeDir = opts.runtimeDir;
  o.vocabParallel = opts.vocabParallel.getNumOccurrences() ? (opts.vocabParallel ? 1 : 0) : -1;
  o.schedule = opts.schedule;
  o.virtualStages = opts.virtualStages;
  o.recompute = opts.recompute;
  o.simulate = opts.simulate;
  o.simulateTrace = opts.simulateTrace;
  o.deviceProfile = opts.deviceProfile;
  o.opCosts = opts.opCosts;
  o.stageBoundaries.assign(opts.stageBoundaries.begin(), opts.stageBoundaries.end());
  o.zero = opts.zero;
  o.bucketMb = opts.bucketMb;
  o.tpOverlap = opts.tpOverlap;
  if (!readOnOff(opts.dpOverlap, o.dpOverlap) ||
      !readOnOff(opts.fusedAttention, o.fusedAttention) ||
      !readOnOff(opts.weightCastCache, o.weightCastCache) ||
      !readOnOff(opts.gradAccumulationFusion, o.gradAccumulationFusion) ||
      !readOnOff(opts.fusedExperts, o.fusedExperts) || !readOnOff(opts.fusedScan, o.fusedScan))
    return 1;
  if (opts.sequenceParallel.getNumOccurrences()) {
    bool on = false;
    if (!readOnOff(opts.sequenceParallel, on))
      return 1;
    o.sequenceParallel = on ? 1 : 0;
  }
  o.syncBatchNorm = opts.syncBatchNorm;
  o.moeAuxLoss = opts.moeAuxLoss;
  o.moeCapacityFactor = opts.moeCapacityFactor;
  o.moeDropPolicy = opts.moeDropPolicy;
  if (opts.moeDropPolicy.getNumOccurrences() && opts.moeCapacityFactor == 0) {
    llvm::errs() << "merak-compile: error: --moe-drop-policy needs --moe-capacity-factor "
                    "(without a capacity no row is dropped)\n";
    return 1;
  }
  if (opts.precision != "fp32" && opts.precision != "bf16") {
    llvm::errs() << "merak-compile: error: --precision must be fp32 or bf16, got '"
                 << opts.precision << "'\n";
    return 1;
  }
  o.precision = opts.precision;
  o.gradReduce = opts.gradReduce;
  o.verbose = opts.verbose;
  o.emitBytecode = opts.emitBytecode;
  o.noCleanup = opts.noCleanup;
  if (opts.report.getNumOccurrences() || opts.reportFile.getNumOccurrences())
    o.report = opts.report.empty() ? "text" : opts.report.getValue();
  o.reportFile = opts.reportFile;
  // --devices 0 (or less) given is an error (runPlannedCompile says so).
  o.devices = opts.devices.getNumOccurrences() ? std::max<int64_t>(-1, opts.devices) : 0;
  if (opts.devices.getNumOccurrences() && opts.devices == 0)
    o.devices = -1;
  o.memoryPerDevice = opts.memoryPerDevice;
  o.plannerSpace = opts.plannerSpace;
  o.meshGiven = opts.dp.getNumOccurrences() || opts.tp.getNumOccurrences() ||
                opts.ep.getNumOccurrences() ||
                opts.pp.getNumOccurrences() || opts.microbatches.getNumOccurrences() ||
                opts.schedule.getNumOccurrences() || opts.virtualStages.getNumOccurrences();
  o.commandLinePassOptions = true;
  return runCompile(o, llvm::errs(), nullptr);
}
