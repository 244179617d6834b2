"""From a torch.nn.Module to the ONNX file merak compiles, and the names
that connect them.

The export is the one merak's tests use: training mode (dropout and
BatchNorm as in training), no constant folding (which would rename and
pre-transpose weights), parameter names kept, so that the program's
parameters (and its checkpoints) carry the module's state_dict names. A
weight tied to another (an LM head sharing the embedding) is exported once,
under one of its names; `aliases` gives every name of each tensor.
"""
import contextlib
import inspect
import io
import warnings


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
                  verbose=False):
    """Exports `model` to `path` with a dynamic batch (the leading
    dimension of every input), so that merak can re-import it with the
    per-rank batch of data parallelism and micro-batches. Returns (the
    names to freeze, {input name: example shape} to bind the batch to)."""
    import torch

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        raise TypeError("example_inputs must be tensors (a tensor or a tuple of tensors)")
    input_names = list(input_names or _input_names(model, len(example_inputs)))
    dynamic = {n: {0: "batch"} for n, t in zip(input_names, example_inputs) if t.dim() > 0}
    shapes = {n: list(t.shape) for n, t in zip(input_names, example_inputs) if t.dim() > 0}
    # The export traces one forward in training mode, which would update
    # BatchNorm's running statistics: the module's buffers are put back.
    saved = {n: b.detach().clone() for n, b in model.named_buffers()}
    # torch 1.13 prints a diagnostic summary and warns about training-mode
    # exports; keep that for verbose=True.
    quiet = contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO())
    try:
        with quiet, warnings.catch_warnings():
            if not verbose:
                warnings.simplefilter("ignore")
            torch.onnx.export(model, example_inputs, path, opset_version=opset,
                              input_names=input_names,
                              output_names=list(output_names) if output_names else None,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, export_params=True,
                              dynamic_axes=dynamic)
    finally:
        with torch.no_grad():
            for n, b in model.named_buffers():
                if n in saved:
                    b.copy_(saved[n])
    return frozen_names(model), shapes


def aliases(model):
    """{state_dict name: [every state_dict name of the same tensor]}."""
    by_tensor = {}
    for name, t in model.state_dict(keep_vars=True).items():
        by_tensor.setdefault(id(t), []).append(name)
    return {n: group for group in by_tensor.values() for n in group}


def onnx_parameter_names(path, model):
    """{program parameter name: [the module's names for it]}: the ONNX
    initializers, matched to the module's state_dict (tied weights under
    every name). Without a module (an ONNX file given) each name maps to
    itself; without the onnx package, the module's names are used as is."""
    try:
        import onnx
        graph = onnx.load(path, load_external_data=False).graph
        initializers = [t.name for t in graph.initializer]
    except Exception:  # noqa: BLE001  (onnx missing, or a text model)
        initializers = None
    if model is None:
        return {n: [n] for n in initializers or []}
    names = aliases(model)
    if initializers is None:
        initializers = list(names)
    return {n: names.get(n, [n]) for n in initializers}
