"""merak.compile: a torch.nn.Module or an ONNX file in, a Program out.

The compiler runs in this process (merak._merak.compile, the same driver as
merak-compile); its diagnostics become the message of CompileError.
"""
import os
import re
import shutil
import sys
import tempfile
import weakref

from . import _merak
from .export import export_module, non_parameter_initializers, onnx_parameter_names
from .program import Program
from .trace_checks import ExportRefused


class CompileError(RuntimeError):
    """merak could not compile the model. The message holds the compiler's
    errors (each with the ONNX node or flag it is about, and the lines that
    belong to it), or why the module cannot be exported faithfully;
    `diagnostics` is everything the compiler printed."""

    def __init__(self, message, diagnostics=""):
        super().__init__(message)
        self.diagnostics = diagnostics


def _opt_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _shape_spec(name, shape):
    if isinstance(shape, str):
        return "%s=%s" % (name, shape)
    return "%s=%s" % (name, "x".join(str(int(d)) for d in shape))


def _glob_escape(name):
    """A parameter name as a --frozen glob that matches only itself."""
    return "".join("\\" + c if c in "*?[]{}\\" else c for c in name)


_SEVERITY = re.compile(r"\b(error|warning|remark|note): ")


def _error_message(diagnostics):
    """The compiler's errors, each with the lines that follow it up to the
    next warning or remark (its notes, the source line and caret of a .mlir
    input, a message's continuation lines); the whole text if no line is
    marked as an error."""
    lines, keep = [], False
    for line in diagnostics.splitlines():
        m = _SEVERITY.search(line)
        if m and m.group(1) != "note":
            keep = m.group(1) == "error"
        if keep:
            lines.append(line)
    return "\n".join(lines) if lines else diagnostics.strip() or "compilation failed"


def compile(model, example_inputs=None, *, dp=None, tp=None, pp=None, microbatches=None,
            devices=None, memory_per_device=None, device_profile=None, schedule=None,
            virtual_stages=None,
            stage_boundaries=None, zero=0, vocab_parallel=None, sequence_parallel=None,
            bucket_mb=25.0, tp_overlap="none", dp_overlap=True, fused_attention=True,
            sync_batchnorm=False, fused_experts=True, fused_scan=True, moe_aux_loss=0.0, ep=1, moe_dispatcher="alltoall",
            moe_shadow=0, moe_shadow_min_rows=0, moe_rebalance_every=0, moe_chunks=1,
            moe_all_to_all="flat",
            precision="fp32",
            grad_reduce="fp32",
            optimizer="adamw", lr=None,
            opt=None, loss="cross-entropy",
            logits=None, labels="next-token", frozen=(), input_shapes=None, target="cpu",
            workdir=None, output=None, input_names=None, output_names=None, opset=17,
            verbose=False, recompute=None, allow_trace_specialization=False):
    """Compiles `model` (a torch.nn.Module, or the path of an .onnx/.onnxtxt
    file) into a training executable and returns its Program.

    A module is exported with torch.onnx.export (training mode, no constant
    folding, parameter names kept) on `example_inputs` (a tensor or a tuple:
    their shapes are the program's; the batch is the global batch), and its
    buffers and parameters with requires_grad=False are frozen.

    Keywords follow merak-compile's flags (docs/user-guide.md): dp, tp, pp,
    microbatches, schedule ("gpipe"|"1f1b"|"interleaved"|"zb-h1"|"zb-h2"|
    "shifted-critical-path"), virtual_stages (interleaved), stage_boundaries, zero (0|1),
    vocab_parallel (None: the default, True, False), sequence_parallel (None:
    off for a given mesh and searched with devices=, True, False), bucket_mb, tp_overlap
    ("none"|"sub-pipeline"), dp_overlap (bool), fused_attention (bool), sync_batchnorm
    (bool: BatchNorm statistics over every dp rank's rows), fused_experts (bool), fused_scan (bool: Mamba's fused selective scan), moe_aux_loss (the MoE load-balancing loss coefficient; 0: none), ep
    (expert-parallel ranks of a MoE model, dividing dp), moe_dispatcher
    ("alltoall"|"allgather"), moe_shadow and moe_shadow_min_rows (dynamic
    shadowing of hot experts with ep; 0: off / from the cost model),
    moe_rebalance_every (dynamic expert placement with ep: the trainer's K; 0: off),
    moe_chunks (the expert all-to-alls in pipelined chunks; 1: whole, 0: auto from
    device_profile),
    moe_all_to_all ("flat"|"hierarchical"), precision
    ("fp32"|"bf16"), grad_reduce ("fp32"|"bf16": the dp
    gradient reduction's wire type), optimizer
    ("sgd"|"adamw"|"adan"), lr and opt (a dict of --opt KEY=VALUE, e.g.
    {"weight_decay": 0.01, "clip_norm": 1.0}; "_" may stand for "-"), loss,
    logits, labels, frozen (extra globs), input_shapes ({name: shape}),
    recompute ("none"|"full"|"selective"|"stage-aware"; None: the default)
    and memory_per_device (bytes as an int, or a string such as "80GB").
    `devices=N` instead of dp/tp/pp/microbatches/schedule: the planner
    chooses them for N devices (the fastest simulated plan that fits
    `memory_per_device` bytes, or the memory of `device_profile`, a
    profiles/*.json path); the Program's dp/tp/pp and `plan` (the report's
    "planner" object) say what it chose. target ("cpu"|"cuda": the
    executable runs on a GPU per rank; dp/tp/zero and pipelines work). `workdir` keeps the
    export, executable, checkpoints and metrics (default: a temporary
    directory removed with the Program); `output` names the executable.
    Raises CompileError with the compiler's diagnostics on failure.

    A module whose forward cannot be exported faithfully raises
    CompileError naming the file and line: control flow on tensor values
    (`if x.sum() > 0`, `int(n)`, `.item()`, iterating over a tensor), which
    the trace would fix to the example inputs' path, and custom
    torch.autograd.Functions without an ONNX `symbolic` (their backward
    would be dropped). allow_trace_specialization=True compiles the traced
    path of the former and reports each place as a
    merak.TraceSpecializationWarning instead.
    """
    mesh = {"dp": dp, "tp": tp, "pp": pp, "microbatches": microbatches, "schedule": schedule}
    if devices is not None:
        given = sorted(k for k, v in mesh.items() if v is not None)
        if given:
            raise ValueError("merak.compile: devices= chooses %s itself; give either devices= "
                             "or the mesh" % ", ".join(given))
        if not isinstance(devices, int) or devices < 1:
            raise ValueError("merak.compile: devices must be a positive int, got %r" % (devices,))
    # None is the default (1); 0 and negatives are rejected below, not defaulted.
    dp, tp, pp, microbatches = (1 if v is None else v for v in (dp, tp, pp, microbatches))
    schedule = schedule or "1f1b"
    if target not in ("cpu", "cuda"):
        raise ValueError("merak.compile(target=%r): expected 'cpu' or 'cuda'" % (target,))
    for name, value in (("dp", dp), ("tp", tp), ("pp", pp), ("microbatches", microbatches),
                        ("ep", ep)):
        if not isinstance(value, int) or value < 1:
            raise ValueError("merak.compile: %s must be a positive int, got %r" % (name, value))

    cleanup = None
    if workdir is None:
        workdir = cleanup = tempfile.mkdtemp(prefix="merak-")
    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    try:
        source, module_frozen, shapes, names, exporter = _source(
            model, example_inputs, workdir, input_names, output_names, opset, verbose,
            allow_trace_specialization)
        if verbose and exporter:
            sys.stderr.write("merak.compile: exported with the %s exporter\n" % exporter)
        o = _merak.CompileOptions()
        o.input = source
        o.compile_to = "binary"
        o.output = os.path.abspath(output or os.path.join(workdir, "train"))
        o.dp, o.tp, o.pp, o.microbatches = dp, tp, pp, microbatches
        if devices is not None:
            o.devices = devices
        if device_profile and (devices is not None or int(moe_chunks) == 0):
            o.device_profile = os.path.abspath(device_profile)
        o.target = target
        o.schedule = schedule
        if virtual_stages is not None:
            o.virtual_stages = virtual_stages
        o.recompute = recompute or ""
        o.memory_per_device = "" if memory_per_device is None else str(memory_per_device)
        o.stage_boundaries = [int(b) for b in (stage_boundaries or [])]
        o.zero = int(zero)
        o.vocab_parallel = -1 if vocab_parallel is None else int(bool(vocab_parallel))
        o.sequence_parallel = -1 if sequence_parallel is None else int(bool(sequence_parallel))
        o.bucket_mb = float(bucket_mb)
        o.tp_overlap = tp_overlap
        o.dp_overlap = bool(dp_overlap)
        o.fused_attention = bool(fused_attention)
        o.sync_batchnorm = bool(sync_batchnorm)
        o.fused_experts = bool(fused_experts)
        o.fused_scan = bool(fused_scan)
        o.moe_aux_loss = float(moe_aux_loss)
        o.ep = ep
        o.moe_dispatcher = moe_dispatcher
        o.moe_shadow = int(moe_shadow)
        o.moe_shadow_min_rows = int(moe_shadow_min_rows)
        o.moe_rebalance_every = int(moe_rebalance_every)
        o.moe_chunks = int(moe_chunks)
        o.moe_all_to_all = moe_all_to_all
        o.precision = precision
        o.grad_reduce = grad_reduce
        o.optimizer = optimizer
        opts = dict(opt or {})
        if lr is not None:
            opts["lr"] = lr
        o.optimizer_options = ["%s=%s" % (k.replace("_", "-"), _opt_value(v))
                               for k, v in opts.items()]
        o.loss, o.labels, o.logits = loss, labels, logits or ""
        o.frozen = [_glob_escape(n) for n in module_frozen] + (
            [frozen] if isinstance(frozen, str) else list(frozen or ()))
        shapes.update(input_shapes or {})
        o.input_shapes = [_shape_spec(k, v) for k, v in shapes.items()]
        o.verbose = bool(verbose)
        o.report, o.report_file = "json", ""  # the report comes back as a string
        runtime = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime")
        if os.path.isdir(runtime):  # an installed package carries its runtime
            o.runtime_dir = runtime

        result = _merak.compile(o)
        if verbose and result.diagnostics:
            sys.stderr.write(result.diagnostics)
        if not result.ok:
            raise CompileError(_error_message(result.diagnostics), result.diagnostics)
        if not verbose:  # remarks and warnings still reach the user
            for line in result.diagnostics.splitlines():
                if "warning:" in line or "remark:" in line:
                    sys.stderr.write(line + "\n")
        if devices is not None:  # the planner's choice
            import json
            chosen = json.loads(result.report)["planner"]["chosen"]
            dp, tp, pp = chosen["dp"], chosen["tp"], chosen["pp"]
        prog = Program(executable=o.output, dp=dp, tp=tp, pp=pp, workdir=workdir,
                       report_json=result.report, names=names,
                       diagnostics=result.diagnostics, source=source, exporter=exporter)
    except BaseException:
        if cleanup:
            shutil.rmtree(cleanup, ignore_errors=True)
        raise
    if cleanup:
        weakref.finalize(prog, shutil.rmtree, cleanup, True)
    return prog


def _source(model, example_inputs, workdir, input_names, output_names, opset, verbose,
            allow_trace_specialization):
    """(the model file, names to freeze, {input: shape} to bind, parameter
    names, the exporter used or None): the file itself, or the module
    exported into `workdir`."""
    if isinstance(model, (str, os.PathLike)):
        source = os.path.abspath(os.fspath(model))
        if not os.path.isfile(source):
            raise FileNotFoundError("merak.compile: no model file '%s'" % source)
        return source, [], {}, onnx_parameter_names(source, None), None
    if example_inputs is None:
        raise TypeError("merak.compile: a torch.nn.Module needs example_inputs "
                        "(a tensor or a tuple of tensors)")
    source = os.path.join(workdir, "model.onnx")
    try:
        frozen, shapes, exporter = export_module(
            model, example_inputs, source, input_names=input_names, output_names=output_names,
            opset=opset, verbose=verbose, allow_trace_specialization=allow_trace_specialization)
    except ExportRefused as e:
        raise CompileError(str(e)) from None
    except (RuntimeError, ValueError, TypeError) as e:
        raise CompileError("merak.compile: torch.onnx.export failed: %s" % e) from e
    if exporter == "dynamo":
        frozen = list(frozen) + non_parameter_initializers(source, model)
    return source, frozen, shapes, onnx_parameter_names(source, model), exporter
