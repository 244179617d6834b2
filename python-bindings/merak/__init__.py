"""merak: compile a PyTorch module (or an ONNX file) into a parallel training
program, train it, and load the trained parameters back.

    import merak
    prog = merak.compile(model, example_inputs=(ids,), dp=1, tp=2, pp=2,
                         microbatches=4, optimizer="adamw", lr=1e-3)
    prog.report()                   # the parallel plan (merak-compile --report=json)
    losses = prog.train(data="tokens.bin", steps=20, sampler="sequential")
    prog.load_into(model)           # trained parameters back into the module

Compiling runs in this process (the compiler library, through the extension
module merak._merak); training runs the generated executable as a separate
process, under mpirun when the program has several ranks. docs/python.md is
the quick start.
"""
from .compiler import CompileError, compile  # noqa: F401  (shadows the builtin on purpose)
from .program import Program, TrainError  # noqa: F401
from .trace_checks import TraceSpecializationWarning  # noqa: F401

__all__ = ["compile", "Program", "CompileError", "TrainError", "TraceSpecializationWarning"]
