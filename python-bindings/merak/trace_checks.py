"""What an export of a torch.nn.Module cannot capture, found while it runs.

torch.onnx.export records one forward on the example inputs. Two things in
a forward are then lost without an error:

- control flow on tensor values (`if x.sum() > 0`, `range(int(n))`,
  `x.item()`, iterating over a tensor): the TorchScript tracer keeps the
  path taken on the example and says so only with a TracerWarning;
- a custom torch.autograd.Function without an ONNX `symbolic`: the exporter
  inlines its forward and drops its backward, so the program would train
  with the gradient of the forward's operations, not the Function's.

`ExportGuard` is a context manager around the export. It records every
warning (with the file and line torch gives it: the user's code for these
TracerWarnings) and every custom Function applied; for each tensor
converted to a Python value during a trace it asks the trace what the value
came from. `check()` afterwards raises ExportRefused for control flow on
values and for custom Functions (control flow on values is reported as
TraceSpecializationWarning instead with allow_trace_specialization), and
reports the rest as warnings:

- a conversion that only sizes and constants lead to (`assert t <=
  block_size` with `t` from `x.size()`) fixes a shape, which the program
  keeps anyway (all but the batch dimension): a warning;
- TracerWarnings raised in torch's own files (nn.MultiheadAttention checks
  its arguments' shapes) are torch's business: shown with verbose only.
"""
import contextlib
import inspect
import linecache
import os
import re
import sys
import threading
import warnings


class ExportRefused(Exception):
    """The export would not compute what the module does (the message says
    where and why); merak.compile raises it as CompileError."""


class TraceSpecializationWarning(UserWarning):
    """The exported graph keeps a value or a shape of the example inputs
    where the module's forward reads it (file and line of the forward)."""


# TracerWarnings (torch 1.x, 2.x TorchScript) that mean the trace kept a
# value of the example: the prefix, and what the forward did.
_TRACER_MESSAGES = (
    (re.compile(r"Converting a tensor to a (Python \w+|NumPy array)"), "converts a tensor to a %s"),
    (re.compile(r"Iterating over a tensor"),
     "iterates over a tensor (as many times as its first dimension, the batch for an input)"),
    (re.compile(r"Using len to get tensor shape"),
     "takes len() of a tensor (its first dimension, the batch for an input)"),
)
# The Tensor methods that turn a traced tensor into a Python value (each
# raises one of the TracerWarnings above while tracing).
_CONVERSIONS = ("__bool__", "__int__", "__index__", "__float__", "__complex__", "item", "tolist",
                "numpy")
_SIZE_NODES = ("aten::size", "aten::dim", "aten::numel")
_DATA_NODES = ("prim::Param", "prim::TracedAttr", "prim::GetAttr")


def _torch_dir():
    import torch
    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _is_torch_code(filename, torch_dir):
    return os.path.abspath(filename).startswith(torch_dir)


def _specialization(record):
    """What the forward did (a phrase), if `record` is a TracerWarning that
    fixes a value of the example; None otherwise."""
    import torch
    if not issubclass(record.category, torch.jit.TracerWarning):
        return None
    text = str(record.message)
    for pattern, what in _TRACER_MESSAGES:
        m = pattern.match(text)
        if m:
            return what % m.group(1) if m.groups() else what
    return None


def _shape_only(tensor):
    """Whether only tensor sizes and constants lead to `tensor` in the trace
    being recorded (not an input, a parameter or a random draw)."""
    import torch
    try:
        start = torch._C._get_value_trace(tensor)
    except Exception:  # noqa: BLE001  (not traced: say nothing good about it)
        return False
    todo, seen, sizes = [start], {start.unique()}, False
    while todo:
        node = todo.pop().node()
        kind = node.kind()
        if kind in _SIZE_NODES:
            sizes = True
            continue
        if kind == "prim::Constant":
            continue
        if kind in _DATA_NODES or node.isNondeterministic():
            return False
        for v in node.inputs():
            if v.unique() not in seen:
                seen.add(v.unique())
                todo.append(v)
    return sizes


def _location(filename, lineno):
    """'file:line', and the line itself on the next line when it can be read."""
    source = linecache.getline(filename, lineno).strip()
    return "%s:%d%s" % (filename, lineno, "\n      " + source if source else "")


def _user_frame(frame, torch_dir):
    """The innermost frame, from `frame` outwards, outside torch's files."""
    while frame is not None and _is_torch_code(frame.f_code.co_filename, torch_dir):
        frame = frame.f_back
    return frame


class ExportGuard:
    """Records what an export loses (see the module's docstring). Use
    `with guard.recording():` around TorchScript exports and
    `with guard.watching_functions():` around any export; then `check()`."""

    def __init__(self, allow_trace_specialization=False, verbose=False):
        self.allow = allow_trace_specialization
        self.verbose = verbose
        self.records = []            # warnings.WarningMessage, in order
        self.shape_only = set()      # indices into records
        self.functions = {}          # Function class -> (filename, lineno) of its first apply

    @contextlib.contextmanager
    def recording(self, classify=True):
        """Records every warning (none is shown or lost: "always") and, with
        `classify` (TorchScript tracing only: the dynamo exporter must not
        meet the hooks), which tensors converted to Python values during a
        trace come from shapes alone."""
        pending = set()
        with warnings.catch_warnings(record=True) as records, \
                (self._classifying(records, pending) if classify else contextlib.nullcontext()):
            warnings.simplefilter("always")
            try:
                yield
            finally:
                start = len(self.records)
                self.records.extend(records)
                self.shape_only.update(start + i for i in pending)

    @staticmethod
    @contextlib.contextmanager
    def _classifying(records, pending):
        """Wraps the Tensor methods that convert to Python values: when one
        raised warnings (into `records`) during a trace and only shapes lead
        to its tensor, their indices go into `pending`. A warning raised by
        the method itself (torch's C++ code) names the innermost Python
        frame, the wrapper: it is given its caller's file and line back."""
        import torch
        names = [n for n in _CONVERSIONS if hasattr(torch.Tensor, n)]
        saved = {name: torch.Tensor.__dict__.get(name) for name in names}

        def hook(original):
            def conversion(tensor, *args, **kwargs):
                before = len(records)
                result = original(tensor, *args, **kwargs)
                if len(records) > before:
                    caller = sys._getframe(1)
                    for record in records[before:]:
                        if record.filename == conversion.__code__.co_filename:
                            record.filename, record.lineno = (caller.f_code.co_filename,
                                                              caller.f_lineno)
                    if torch._C._is_tracing() and _shape_only(tensor):
                        pending.update(range(before, len(records)))
                return result
            return conversion

        for name in names:
            setattr(torch.Tensor, name, hook(getattr(torch.Tensor, name)))
        try:
            yield
        finally:
            for name, original in saved.items():
                if original is None:
                    delattr(torch.Tensor, name)
                else:
                    setattr(torch.Tensor, name, original)

    @contextlib.contextmanager
    def watching_functions(self):
        """Records each custom torch.autograd.Function (one not defined in
        torch itself) without a `symbolic` that this thread applies."""
        import torch
        function = torch.autograd.Function
        own = function.__dict__.get("apply")  # torch 2.x; 1.x inherits _C._FunctionBase's
        original = inspect.getattr_static(function, "apply")
        thread, found, torch_dir = threading.get_ident(), self.functions, _torch_dir()

        def apply(cls, *args, **kwargs):
            if (threading.get_ident() == thread and cls not in found
                    and not callable(getattr(cls, "symbolic", None))
                    and cls.__module__.split(".")[0] != "torch"):
                caller = _user_frame(sys._getframe(1), torch_dir)
                found[cls] = (caller.f_code.co_filename, caller.f_lineno) if caller else None
            return original.__get__(None, cls)(*args, **kwargs)

        function.apply = classmethod(apply)
        try:
            yield
        finally:
            if own is None:
                del function.apply
            else:
                function.apply = own

    def check(self):
        """Raises ExportRefused for what cannot be compiled faithfully;
        reports the specializations allowed as TraceSpecializationWarning
        (and, with verbose, every other warning of the export)."""
        problems = []
        for cls, where in self.functions.items():
            at = " (applied at %s)" % ("%s:%d" % where) if where else ""
            problems.append(
                "the module applies the custom torch.autograd.Function %s.%s%s, which has no "
                "ONNX `symbolic`: the export would keep its forward and drop its backward, so "
                "training would not use its gradient. Give it a `symbolic` staticmethod (its "
                "ONNX form) or write it with torch operations" % (
                    cls.__module__, cls.__qualname__, at))

        torch_dir, values, seen = _torch_dir(), [], set()
        for i, record in enumerate(self.records):
            what = _specialization(record)
            if what is None or _is_torch_code(record.filename, torch_dir):
                if self.verbose:
                    self._reissue(record, record.category, str(record.message))
                continue
            key = (record.filename, record.lineno, what)
            if key in seen:
                continue
            seen.add(key)
            if i in self.shape_only:
                self._reissue(record, TraceSpecializationWarning,
                              "merak.compile: the forward %s that depends only on tensor shapes; "
                              "the program keeps the example's value (fine unless it depends on "
                              "the batch size, which dp and micro-batches divide)" % what)
            else:
                values.append((record, what))

        if values and self.allow:
            for record, what in values:
                self._reissue(record, TraceSpecializationWarning,
                              "merak.compile: the forward %s; the program keeps the value of "
                              "the example inputs here (allow_trace_specialization=True)" % what)
        elif values:
            lines = ["  the forward %s at %s" % (what, _location(r.filename, r.lineno))
                     for r, what in values]
            problems.append(
                "the forward's control flow depends on tensor values:\n%s\nThe trace keeps the "
                "branch taken and the loop count seen on the example inputs, so the program "
                "would not compute what the module does for other data. Compute with tensor "
                "operations instead (torch.where, masks), or pass "
                "allow_trace_specialization=True to compile the path traced" % "\n".join(lines))
        if problems:
            raise ExportRefused("merak.compile: the module cannot be compiled faithfully: " +
                                "\n".join(problems))

    @staticmethod
    def _reissue(record, category, message):
        warnings.warn_explicit(message, category, record.filename, record.lineno)
