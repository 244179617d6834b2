"""From a torch.nn.Module to the ONNX file merak compiles, and the names
that connect them.

The export is the one merak's tests use: training mode (dropout and
BatchNorm as in training), no constant folding (which would rename and
pre-transpose weights), parameter names kept, so that the program's
parameters (and its checkpoints) carry the module's state_dict names. A
weight tied to another (an LM head sharing the embedding) is exported once,
under one of its names; `aliases` gives every name of each tensor.

With torch >= 2.5 the dynamo exporter (torch.export) is tried first: it
refuses data-dependent control flow itself. Otherwise, or when it fails,
the TorchScript exporter traces the module. Either way trace_checks watches
the export and refuses what the ONNX file would not compute faithfully
(control flow on tensor values, custom autograd Functions).

A Hugging Face transformers model object (AutoModelForCausalLM.from_config
and the like) is exported as it trains: without the key/value cache
(use_cache=False; neither exporter takes transformers' DynamicCache), given
token ids alone with an all-ones attention mask (as a tokenizer gives for
unpadded rows), returning its logits alone (the ModelOutput's `logits`),
under its own parameter names, so that Program.load_into puts the weights
back into it.
"""
import contextlib
import functools
import inspect
import io
import warnings

from .trace_checks import ExportGuard


def _input_names(model, count):
    """The names of forward's first `count` parameters (input_0.. if unknown)."""
    try:
        params = [p for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    return names + ["input_%d" % i for i in range(len(names), count)]


def frozen_names(model):
    """What must not train: buffers (masks, rotary tables, running
    statistics) and parameters with requires_grad=False."""
    names = [n for n, _ in model.named_buffers()]
    names += [n for n, p in model.named_parameters() if not p.requires_grad]
    return names


def export_module(model, example_inputs, path, input_names=None, output_names=None, opset=17,
                  verbose=False, allow_trace_specialization=False):
    """Exports `model` to `path` with a dynamic batch (the leading
    dimension of every input), bound at compile time to the example's
    (merak-split-batch then takes each rank's micro-batch of it, as it
    does for a static-batch export). Returns (the
    names to freeze, {input name: example shape} to bind the batch to, the
    exporter used: "dynamo" or "torchscript"). Raises
    trace_checks.ExportRefused when the export would not compute what the
    module does (with allow_trace_specialization, control flow on tensor
    values is a TraceSpecializationWarning instead)."""
    import torch

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        raise TypeError("example_inputs must be tensors (a tensor or a tuple of tensors)")
    input_names = list(input_names or _input_names(model, len(example_inputs)))
    common = dict(opset_version=opset, input_names=input_names,
                  output_names=list(output_names) if output_names else None,
                  export_params=True,
                  dynamic_axes={n: {0: "batch"} for n, t in zip(input_names, example_inputs)
                                if t.dim() > 0})
    shapes = {n: list(t.shape) for n, t in zip(input_names, example_inputs) if t.dim() > 0}
    guard = ExportGuard(allow_trace_specialization, verbose)
    # The export runs one forward in training mode, which would update
    # BatchNorm's running statistics: the module's buffers are put back.
    saved = {n: b.detach().clone() for n, b in model.named_buffers()}
    try:
        with _logits_of_transformers_model(model):
            exporter = _export(torch, guard, model, example_inputs, path, common,
                               lambda: _restore_buffers(model, saved), verbose)
    finally:
        _restore_buffers(model, saved)
    guard.check()
    return frozen_names(model), shapes, exporter


def _export(torch, guard, model, example_inputs, path, common, restore, verbose):
    """Writes `path` with the dynamo exporter where torch has one (its
    torch.onnx.export takes dynamo=), else, or when it fails, with the
    TorchScript exporter; returns which one wrote it."""
    # torch 1.13 prints a diagnostic summary; keep that for verbose=True
    # (the warnings are recorded by `guard`, shown by its check()).
    def quiet():
        return contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO())

    parameters = inspect.signature(torch.onnx.export).parameters
    if "dynamo" in parameters:
        # torch >= 2.5 (the project venv's 2.15: the torch2-front-door-* ctests).
        options = {k: False for k in ("optimize", "fallback") if k in parameters}
        try:
            with quiet(), guard.recording(classify=False), guard.watching_functions(), \
                    _training(model):
                torch.onnx.export(model, example_inputs, path, dynamo=True, **common, **options)
            return "dynamo"
        except Exception as e:  # noqa: BLE001  (any failure: TorchScript may still do)
            restore()
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            warnings.warn("merak.compile: the dynamo exporter failed (%s); exporting with "
                          "TorchScript" % first)
    # torch >= 2.9 exports with dynamo unless told otherwise.
    torchscript = {"dynamo": False} if "dynamo" in parameters else {}
    with quiet(), guard.recording(), guard.watching_functions():
        torch.onnx.export(model, example_inputs, path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, **common, **torchscript)
    return "torchscript"


def _is_transformers_model(model):
    try:
        from transformers import PreTrainedModel
    except ImportError:
        return False
    return isinstance(model, PreTrainedModel)


@contextlib.contextmanager
def _logits_of_transformers_model(model):
    """For a transformers model: its forward, while exporting, called with
    use_cache=False and returning the output's logits (an instance
    attribute over the class's forward, removed afterwards)."""
    if not _is_transformers_model(model):
        yield
        return
    import torch
    forward = model.forward
    takes = inspect.signature(forward).parameters

    @functools.wraps(forward)  # its signature: the exporters name the inputs by it
    def logits_only(*args, **kwargs):
        if "use_cache" in takes:
            kwargs.setdefault("use_cache", False)
        # Token ids alone: an all-ones mask, as a tokenizer gives for
        # unpadded rows (without one, transformers 5 looks for packed
        # sequences with torch.diff, which neither exporter takes).
        if "attention_mask" in takes and len(args) == 1 and not args[0].is_floating_point():
            kwargs.setdefault("attention_mask", torch.ones_like(args[0]))
        out = forward(*args, **kwargs)
        logits = getattr(out, "logits", None)
        if logits is None:
            raise TypeError("merak.compile: %s returned %s without logits; pass a module "
                            "whose forward returns the logits" % (type(model).__name__,
                                                                   type(out).__name__))
        return logits

    model.forward = logits_only
    try:
        yield
    finally:
        del model.forward


@contextlib.contextmanager
def _training(model):
    """The module (every submodule) in training mode, then as it was."""
    modes = [(m, m.training) for m in model.modules()]
    model.train()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def _restore_buffers(model, saved):
    import torch
    with torch.no_grad():
        for n, b in model.named_buffers():
            if n in saved:
                b.copy_(saved[n])


def aliases(model):
    """{state_dict name: [every state_dict name of the same tensor]}."""
    by_tensor = {}
    for name, t in model.state_dict(keep_vars=True).items():
        by_tensor.setdefault(id(t), []).append(name)
    return {n: group for group in by_tensor.values() for n in group}


def non_parameter_initializers(path, model):
    """The initializers of `path` that are not trainable parameters of
    `model`: the dynamo exporter names a lifted buffer after the op that
    made it (a sliced causal mask becomes "alias"), so frozen_names' buffer
    names miss it, and an unfrozen mask would train (and not fuse)."""
    initializers = initializer_names(path)
    if initializers is None:  # onnx missing: the buffer names must do
        return []
    names = aliases(model)  # a tied weight is a parameter under every name
    trainable = {a for n, p in model.named_parameters() if p.requires_grad
                 for a in names.get(n, [n])}
    return [n for n in initializers if n not in trainable]


def initializer_names(path):
    """The initializers of the ONNX file `path`, or None without the onnx
    package (or for a text model)."""
    try:
        import onnx
        return [t.name for t in onnx.load(path, load_external_data=False).graph.initializer]
    except Exception:  # noqa: BLE001
        return None


def onnx_parameter_names(path, model):
    """{program parameter name: [the module's names for it]}: the ONNX
    initializers, matched to the module's state_dict (tied weights under
    every name). Without a module (an ONNX file given) each name maps to
    itself; without the onnx package, the module's names are used as is."""
    initializers = initializer_names(path)
    if model is None:
        return {n: [n] for n in initializers or []}
    names = aliases(model)
    if initializers is None:
        initializers = list(names)
    return {n: names.get(n, [n]) for n in initializers}
