"""The Python front door (python-bindings/, import merak) against PyTorch.

    PYTHONPATH=BUILD/python-bindings /usr/bin/python3 test/python/front_door_check.py \\
        --bin BUILD/bin --workdir DIR [CHECK...]

Checks:
  gpt-1-1-1, gpt-1-2-2  a GPT-style nn.Module through merak.compile at
                 (dp, tp, pp) = (1,1,1) and (1,2,2) (2 micro-batches), 20 AdamW
                 steps on a token array with the sequential sampler: losses
                 equal PyTorch's (float64) within 1e-4 relative, and after
                 load_into the module's parameters equal PyTorch's (1e-4);
  gpt-1-2-2-sp   the same at (1,2,2) with sequence_parallel=True: the report
                 must show its reduce-scatters;
  mlp            an MLP on feature arrays, the same comparison;
  encoder        an nn.TransformerEncoder trains (losses finite and falling)
                 and load_into sets its parameters;
  transformers, transformers-tp2  a transformers model object
                 (AutoModelForCausalLM.from_config: GPT-2, tied head) compiled
                 as it is (no cache, its logits), at tp 1 and 2: losses and
                 parameters after load_into as gpt-1-1-1's (AdamW lr 1e-3);
  unsupported    a module sampling torch.bernoulli of a computed probability
                 raises merak.CompileError naming the ONNX op (merak draws
                 Bernoulli masks of a constant probability only);
  schedules      the GPT at pp 2 with schedule="zb-h2" and
                 "shifted-critical-path": losses and parameters as above;
  gpt-devices2   the same GPT with devices=2 (the planner picks the mesh;
                 Program.plan says which): losses and parameters as above;
  errors         devices=N together with dp= raises ValueError; a failed run raises
                 merak.TrainError with the rank's error (not the notice that
                 the job stops) and the exit status; report() is the plan's
                 JSON;
  installed      `cmake --install --component python` to a prefix, and the
                 installed package (with its own copy of the runtime)
                 compiles and trains an MLP in a fresh interpreter;
  docs-example   the quick start of docs/python.md (its first python block)
                 runs from the repository root and its loss falls;
  trace-if       a forward that branches on a tensor value raises
                 CompileError naming this file and the line of the `if`;
  trace-loop     a loop run int(tensor) times: CompileError naming the line;
  trace-allow    the `if` with allow_trace_specialization=True compiles, with
                 a TraceSpecializationWarning at the line of the `if`;
  trace-shapes   an assert on x.size() (shapes only) compiles with a
                 TraceSpecializationWarning, not an error;
  trace-ordinary the GPT, the MLP and nn.TransformerEncoder (whose torch code
                 raises TracerWarnings of its own) compile with no
                 TraceSpecializationWarning;
  custom-function a custom torch.autograd.Function without `symbolic` raises
                 CompileError naming it and where it is applied; the same
                 Function with a `symbolic` compiles;
  train-errors   TrainError's message is the executable's last error line and
                 the exit status (a bad --lr; fake executables: several error
                 lines and the notice that the job stops, the runtime's fatal
                 line without "error:", SIGSEGV);
  compile-error-text  CompileError of a bad .mlir input holds each error with
                 its source line, caret and note, not only the error lines.
Ends with "N passed, M failed" (test/torch/check_runner.py).
"""
import inspect
import os
import re
import stat
import subprocess
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.dont_write_bytecode = True
import export_models as em  # noqa: E402
from check_runner import run_checks  # noqa: E402

STEPS = 20
TOLERANCE = 1e-4
VOCAB = 96  # divides by tp = 2: the vocabulary-parallel path at tp 2
B, T = 4, 16
LR = 3e-3


def param_rel_err(name, got, want):
    """Norm-wise relative error. The key third of a GPT attention's QKV bias
    has an exact gradient of zero (softmax ignores a constant per row), so
    AdamW turns rounding noise into lr-sized steps there: only the query and
    value parts are compared (as test/torch/program_check.py does)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if name.endswith("attn.c_attn.bias"):
        c = want.shape[0] // 3
        want = np.concatenate([want[:c], want[2 * c:]])
        got = np.concatenate([got[:c], got[2 * c:]])
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


def adamw(params, lr=LR):
    return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def token_batches(tokens, steps):
    """The sequential sampler: row r of step s starts at ((s*B + r)*T) mod (N - T - 1)."""
    n = len(tokens)
    for s in range(steps):
        starts = [((s * B + r) * T) % (n - T - 1) for r in range(B)]
        ids = np.stack([tokens[i:i + T] for i in starts]).astype(np.int64)
        labels = np.stack([tokens[i + 1:i + T + 1] for i in starts]).astype(np.int64)
        yield torch.from_numpy(ids), torch.from_numpy(labels)


def array_batches(inputs, labels, steps):
    """Sequential rows of .npy data: row r of step s is (s*B + r) mod N."""
    n = len(labels)
    for s in range(steps):
        rows = [(s * B + r) % n for r in range(B)]
        yield torch.from_numpy(inputs[rows]).double(), torch.from_numpy(labels[rows])


def torch_reference(model, batches, lr=LR):
    """Per-step losses of PyTorch in float64; `model` is trained in place."""
    model.double().train()
    opt = adamw(model.parameters(), lr)
    losses = []
    for x, labels in batches:
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.size(-1)), labels.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def compare(got, want, trained, reference):
    """(ok, message) for losses and parameters (trained: the module merak's
    checkpoint was loaded into; reference: the one PyTorch trained)."""
    errs = [abs(g - w) / abs(w) for g, w in zip(got, want)]
    ref = dict(reference.named_parameters())
    perr = max(param_rel_err(n, p.detach().numpy(), ref[n].detach().numpy())
               for n, p in trained.named_parameters())
    ok = (len(got) == len(want) == STEPS and max(errs) <= TOLERANCE and perr <= TOLERANCE
          and want[-1] < want[0])
    return ok, "losses %.4f -> %.4f (torch %.4f -> %.4f), max rel err %.2e; " \
        "parameters after load_into max rel err %.2e" % (
            got[0], got[-1], want[0], want[-1], max(errs), perr)


class Env:
    def __init__(self, bin_dir, work):
        import merak
        self.merak, self.work = merak, work
        self.build = os.path.dirname(bin_dir)
        corpus = os.path.join(HERE, "..", "..", "examples", "gpt", "corpus.txt")
        text = np.frombuffer(open(corpus, "rb").read(), dtype=np.uint8)
        self.tokens = (text.astype(np.int64) % VOCAB).astype(np.uint16)

    def workdir(self, name):
        d = os.path.join(self.work, name)
        os.makedirs(d, exist_ok=True)
        return d


def gpt(seed=0):
    torch.manual_seed(seed)
    return em.GPT2(vocab_size=VOCAB, n_embd=32, n_head=4, n_layer=2, block_size=T)


def check_gpt(env, dp, tp, pp, recompute=None, memory_per_device=None, schedule=None,
              sequence_parallel=None):
    model, reference = gpt(), gpt()
    ids = torch.zeros(B, T, dtype=torch.int64)
    prog = env.merak.compile(model, example_inputs=(ids,), dp=dp, tp=tp, pp=pp,
                             microbatches=2 if pp > 1 else 1, optimizer="adamw", lr=LR,
                             recompute=recompute, memory_per_device=memory_per_device,
                             schedule=schedule, sequence_parallel=sequence_parallel,
                             workdir=env.workdir("gpt-%d-%d-%d-%s-%s-%s" % (
                                 dp, tp, pp, recompute, schedule, sequence_parallel)))
    if prog.ranks != dp * tp * pp:
        return False, "Program.ranks %d" % prog.ranks
    got = prog.train(data=env.tokens, steps=STEPS, sampler="sequential", progress=False)
    want = torch_reference(reference, token_batches(env.tokens, STEPS))
    loaded = prog.load_into(model)
    if "lm_head.weight" not in loaded or "transformer.wte.weight" not in loaded:
        return False, "load_into did not set both names of the tied weight: %s" % loaded
    ok, msg = compare(got, want, model, reference)
    report = prog.report()
    ok = ok and report["mesh"]["dp"] == dp and report["mesh"]["pp"] == pp
    modes = [s["activations"].get("recompute") for s in report["stages"]]
    if recompute in ("none", "full", "selective"):
        ok = ok and modes == [recompute] * pp
    split = report["tensor_parallel"].get("sequence_parallel")
    if sequence_parallel is not None:
        ok = ok and bool(split) == sequence_parallel
    return ok, msg + "; %d ranks; recompute %s%s" % (
        prog.ranks, modes, "; sequence parallel %s" % split if split else "")


def check_recompute(env):
    """recompute= (selective at pp 2: trains as PyTorch does, the report
    says selective per stage) and a bad mode (CompileError)."""
    ok, msg = check_gpt(env, 1, 1, 2, recompute="selective")
    try:
        env.merak.compile(gpt(), (torch.zeros(B, T, dtype=torch.int64),), pp=2,
                          microbatches=2, recompute="sometimes",
                          workdir=env.workdir("recompute-bad"))
        return False, "recompute='sometimes' did not raise"
    except env.merak.CompileError as e:
        ok = ok and "unknown --recompute 'sometimes'" in str(e)
    return ok, msg


def check_schedules(env):
    """schedule= zb-h2 and shifted-critical-path (the split backward's
    fragments) at pp 2: trains as PyTorch does."""
    results = [check_gpt(env, 1, 1, 2, schedule=s) for s in ("zb-h2", "shifted-critical-path")]
    return all(ok for ok, _ in results), "; ".join(msg for _, msg in results)


def check_precision(env):
    """precision="bf16" (merak-mixed-precision: bf16 GEMMs) trains within
    bf16 noise of PyTorch's float64 run (2e-3) and measurably not as float32
    does (the fp32 program is within 1e-5; bf16 must be further than 2e-5:
    the GEMMs did round); fused_attention=False compiles the exported
    attention as it is: within 1e-5 too, and only the fused executable links
    the runtime's attention kernel (head dim 16 here, which fuses; the
    losses themselves can be bitwise equal: AdamW's steps absorb last-bit
    gradient differences at this size); a bad precision or grad_reduce is a
    CompileError naming it."""
    def model():
        torch.manual_seed(0)
        return em.GPT2(vocab_size=VOCAB, n_embd=32, n_head=2, n_layer=2, block_size=T)
    ids = torch.zeros(B, T, dtype=torch.int64)
    want = torch_reference(model(), token_batches(env.tokens, STEPS))
    errs, linked = {}, {}
    for prec, fused in (("fp32", True), ("bf16", True), ("fp32", False)):
        prog = env.merak.compile(model(), example_inputs=(ids,), optimizer="adamw", lr=LR,
                                 precision=prec, fused_attention=fused,
                                 workdir=env.workdir("precision-%s-%d" % (prec, fused)))
        got = prog.train(data=env.tokens, steps=STEPS, sampler="sequential", progress=False)
        errs[(prec, fused)] = max(abs(g - w) / abs(w) for g, w in zip(got, want))
        syms = subprocess.run(["nm", "-C", prog.executable], capture_output=True, text=True)
        linked[(prec, fused)] = "cpu::attention(" in syms.stdout
    ok = (errs[("fp32", True)] <= 1e-5 and errs[("fp32", False)] <= 1e-5
          and 2e-5 < errs[("bf16", True)] <= 2e-3
          and linked[("fp32", True)] and not linked[("fp32", False)])
    try:
        env.merak.compile(gpt(), (ids,), precision="fp16", workdir=env.workdir("precision-bad"))
        return False, "precision='fp16' did not raise"
    except env.merak.CompileError as e:
        ok = ok and "fp16" in str(e)
    try:
        env.merak.compile(gpt(), (ids,), grad_reduce="fp8", workdir=env.workdir("grad-bad"))
        return False, "grad_reduce='fp8' did not raise"
    except env.merak.CompileError as e:
        ok = ok and "--grad-reduce" in str(e) and "fp8" in str(e)
    return ok, ("max rel err vs float64 torch: fp32 %.2e, fp32 unfused %.2e, bf16 %.2e; "
                "attention kernel linked: fused %s, unfused %s" % (
                    errs[("fp32", True)], errs[("fp32", False)], errs[("bf16", True)],
                    linked[("fp32", True)], linked[("fp32", False)]))


def check_gpt_devices(env, devices):
    model, reference = gpt(), gpt()
    ids = torch.zeros(B, T, dtype=torch.int64)
    prog = env.merak.compile(model, example_inputs=(ids,), devices=devices, optimizer="adamw",
                             lr=LR, workdir=env.workdir("gpt-devices%d" % devices))
    chosen = (prog.plan or {}).get("chosen", {})
    if prog.ranks != devices or chosen.get("dp", 0) * chosen.get("tp", 0) * \
            chosen.get("pp", 0) != devices:
        return False, "Program.ranks %d, plan %s" % (prog.ranks, chosen)
    got = prog.train(data=env.tokens, steps=STEPS, sampler="sequential", progress=False)
    want = torch_reference(reference, token_batches(env.tokens, STEPS))
    prog.load_into(model)
    ok, msg = compare(got, want, model, reference)
    return ok, msg + "; planned %s" % prog


def check_mlp(env):
    torch.manual_seed(0)
    model = em.MLP()
    reference = em.MLP()
    reference.load_state_dict(model.state_dict())
    rng = np.random.default_rng(3)
    feats = rng.standard_normal((37, 20)).astype(np.float32)
    labels = feats[:, :10].argmax(axis=1).astype(np.int64)  # learnable
    prog = env.merak.compile(model, torch.zeros(B, 20), optimizer="adamw", lr=LR,
                             workdir=env.workdir("mlp"))
    got = prog.train(data={"x": feats, "labels": labels}, steps=STEPS, sampler="sequential",
                     progress=False, checkpoint_every=3, checkpoint_keep=2)
    want = torch_reference(reference, array_batches(feats, labels, STEPS))
    prog.load_into(model)
    ok, msg = compare(got, want, model, reference)
    kept = sorted(n for n in os.listdir(prog.checkpoint_dir) if n.startswith("step_"))
    last = "step_%d" % STEPS
    if len(kept) != 2 or last not in kept:
        return False, "checkpoint_keep=2 left %s" % kept
    return ok, msg + "; checkpoint_keep=2 left %s" % kept


def check_encoder(env):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, T, 32)).astype(np.float32)
    labels = x.argmax(axis=2).astype(np.int64)  # the largest feature per position
    prog = env.merak.compile(model, torch.zeros(B, T, 32), optimizer="adamw", lr=1e-2,
                             workdir=env.workdir("encoder"))
    losses = prog.train(data={"src": x, "labels": labels}, steps=STEPS, sampler="sequential",
                        progress=False)
    loaded = prog.load_into(model)
    changed = sum(not torch.equal(before[n], p) for n, p in model.named_parameters())
    ok = (len(losses) == STEPS and all(np.isfinite(losses)) and losses[-1] < losses[0]
          and changed == len(before))
    return ok, "losses %.4f -> %.4f; load_into set %d tensors, %d of %d parameters changed" % (
        losses[0], losses[-1], len(loaded), changed, len(before))


def check_transformers(env, tp=1):
    """A transformers model object (AutoModelForCausalLM.from_config, GPT-2
    with its tied head, dropout 0) compiled as it is: merak.compile exports
    it without the cache and reads its logits; 20 AdamW steps equal
    PyTorch training a copy in float64, and load_into puts the weights
    (both names of the tied one) back into the model. At lr 1e-3: at 3e-3
    this model's own float32 PyTorch run leaves its float64 run by 6e-5
    in the parameters (a loss spike at step 16), near the tolerance."""
    import transformers
    lr = 1e-3

    def build():
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=T, n_embd=32, n_layer=2,
                                      n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                                      attn_pdrop=0.0, bos_token_id=1, eos_token_id=2)
        return transformers.AutoModelForCausalLM.from_config(cfg)

    class Logits(nn.Module):  # the reference's forward, as a training loop calls it
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(ids, attention_mask=torch.ones_like(ids), use_cache=False).logits

    model, reference = build(), build()
    ids = torch.zeros(B, T, dtype=torch.int64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = env.merak.compile(model, ids, tp=tp, optimizer="adamw", lr=lr,
                                 workdir=env.workdir("transformers-tp%d" % tp))
    fallback = [str(w.message) for w in caught if "exporter failed" in str(w.message)]
    got = prog.train(data=env.tokens, steps=STEPS, sampler="sequential", progress=False)
    want = torch_reference(Logits(reference), token_batches(env.tokens, STEPS), lr)
    loaded = prog.load_into(model)
    if "lm_head.weight" not in loaded or "transformer.wte.weight" not in loaded:
        return False, "load_into did not set both names of the tied weight: %s" % loaded
    ok, msg = compare(got, want, model, reference)
    if fallback and hasattr(torch.onnx, "export") and \
            "dynamo" in inspect.signature(torch.onnx.export).parameters:
        return False, "the dynamo exporter failed: %s" % fallback[0]
    return ok, msg + "; %d ranks" % prog.ranks


class Bernoulli(nn.Module):
    """Samples torch.bernoulli of a probability the model computes (ONNX
    Bernoulli, or a RandomUniformLike compared with it), which merak does
    not draw: it draws Bernoulli masks of a constant probability only."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.bernoulli(torch.sigmoid(x)))


def check_unsupported(env):
    try:
        env.merak.compile(Bernoulli(), torch.zeros(B, 8), workdir=env.workdir("unsupported"))
    except env.merak.CompileError as e:
        # torch 1.13's exporter spells it RandomUniformLike < p, dynamo Bernoulli.
        ok = re.search(r"unsupported (Bernoulli of a probability computed at run time|use of "
                       r"the random draw of RandomUniformLike node .* read by node '[^']*' "
                       r"\('merak.lt'\))", str(e)) is not None
        return ok, "CompileError: %s" % str(e).splitlines()[0]
    return False, "no CompileError"


def check_errors(env):
    m = env.merak
    # 0 is rejected like -1 (None alone means the default, 1), naming the argument.
    for name in ("dp", "tp", "pp", "microbatches"):
        for bad in (0, -1):
            try:
                m.compile(em.MLP(), torch.zeros(B, 20), **{name: bad})
                return False, "%s=%d did not raise" % (name, bad)
            except ValueError as e:
                if "%s must be a positive int" % name not in str(e):
                    return False, "%s=%d: ValueError without the cause: %s" % (name, bad, e)
    try:
        m.compile(em.MLP(), torch.zeros(B, 20), devices=4, dp=2)
        return False, "devices=4 with dp=2 did not raise"
    except ValueError as e:
        if "devices" not in str(e):
            return False, "ValueError without the cause: %s" % e
    # moe_aux_loss reaches the compiler: a model without MoE layers is refused.
    try:
        m.compile(gpt(), (torch.zeros(B, T, dtype=torch.int64),), moe_aux_loss=0.02,
                  workdir=env.workdir("errors-moe"))
        return False, "moe_aux_loss on a model without MoE layers did not raise"
    except m.CompileError as e:
        if "no Mixture-of-Experts layer" not in str(e):
            return False, "moe_aux_loss: CompileError without the cause: %s" % e
    # ep reaches the compiler: expert parallelism needs expert GEMMs.
    try:
        m.compile(gpt(), (torch.zeros(B, T, dtype=torch.int64),), dp=2, ep=2,
                  workdir=env.workdir("errors-ep"))
        return False, "ep=2 on a model without MoE layers did not raise"
    except m.CompileError as e:
        if "needs a Mixture-of-Experts model" not in str(e):
            return False, "ep: CompileError without the cause: %s" % e
    prog = m.compile(gpt(), (torch.zeros(B, T, dtype=torch.int64),), dp=2,
                     workdir=env.workdir("errors"))
    report = prog.report()
    if report.get("mesh", {}).get("dp") != 2:
        return False, "report() mesh: %s" % report.get("mesh")
    try:
        prog.train(data=os.path.join(env.work, "no-such-tokens.bin"), steps=2, progress=False)
        return False, "a run without data did not raise"
    except m.TrainError as e:
        # The cause, not the notice that follows it ("rank 0: stopping
        # every rank of the job").
        ok = (e.rank is not None and "train: error: token file" in str(e)
              and "no-such-tokens.bin" in str(e) and "stopping" not in str(e)
              and e.returncode != 0 and "(exit status %d)" % e.returncode in str(e))
        return ok, "TrainError: %s" % str(e).splitlines()[0]


def line_of(marker):
    """The number of the line of this file that ends with the comment `marker`."""
    with open(__file__) as f:
        for number, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return number
    raise LookupError(marker)


class BranchOnValue(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        if x.sum() > 0:  # trace-if
            return self.fc(x)
        return self.fc(-x)


class LoopOnValue(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 4)

    def forward(self, x):
        for _ in range(int(x.abs().sum()) % 3 + 1):  # trace-loop
            x = torch.relu(self.fc(x))
        return self.out(x)


class AssertOnShape(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        _, features = x.size()
        assert features <= 8, "too many features"  # trace-shapes
        return self.fc(x)


class Cube(torch.autograd.Function):
    """x**3 with a hand-written backward, which the export would drop."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return 3 * x * x * grad


class CubeWithSymbolic(Cube):
    @staticmethod
    def symbolic(g, x):
        return g.op("Mul", g.op("Mul", x, x), x)


class UsesFunction(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.function.apply(x))  # custom-function


def compile_error(env, model, name, **kwargs):
    """The CompileError text of compiling `model` (None: it compiled)."""
    try:
        env.merak.compile(model, torch.ones(B, 8), workdir=env.workdir(name), **kwargs)
    except env.merak.CompileError as e:
        return str(e)
    return None


def check_trace_error(env, model, marker, what):
    """CompileError naming this file, the marked line and `what` the
    forward did there, and the way out."""
    text = compile_error(env, model, marker)
    if text is None:
        return False, "compiled without a CompileError"
    where = "%s:%d" % (__file__, line_of(marker))
    ok = (where in text and what in text and "allow_trace_specialization=True" in text
          and "depends on tensor values" in text)
    return ok, "CompileError (expected %s and %r): %s" % (where, what, text)


def specialization_warnings(env, records):
    return [r for r in records if issubclass(r.category, env.merak.TraceSpecializationWarning)]


def check_trace_allow(env):
    """allow_trace_specialization=True: the `if` compiles, reported at its line."""
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        prog = env.merak.compile(BranchOnValue(), torch.ones(B, 8),
                                 allow_trace_specialization=True,
                                 workdir=env.workdir("trace-allow"))
    found = [(r.filename, r.lineno, str(r.message))
             for r in specialization_warnings(env, records)]
    ok = (os.path.isfile(prog.executable) and prog.exporter == "torchscript"
          and [(f, l) for f, l, _ in found] == [(__file__, line_of("trace-if"))]
          and "Python boolean" in found[0][2] and "allow_trace_specialization" in found[0][2])
    return ok, "exporter %s; warnings %s" % (prog.exporter, found)


def check_trace_shapes(env):
    """A condition on sizes alone is a warning, not an error (TorchScript's
    trace specialises it; torch 2.x's dynamo exporter keeps shapes symbolic
    and guards them itself: no warning, no error)."""
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        text = compile_error(env, AssertOnShape(), "trace-shapes")
    found = [(r.filename, r.lineno, str(r.message))
             for r in specialization_warnings(env, records)]
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        ok = text is None and not found
    else:
        ok = (text is None and [(f, l) for f, l, _ in found] == [(__file__, line_of("trace-shapes"))]
              and "depends only on tensor shapes" in found[0][2])
    return ok, "CompileError: %s; warnings %s" % (text, found)


def check_trace_ordinary(env):
    """The repository's ordinary models: no error, no specialization warning
    (nn.TransformerEncoder's own TracerWarnings come from torch's files)."""
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                       batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    models = (("gpt", gpt(), (torch.zeros(B, T, dtype=torch.int64),)),
              ("mlp", em.MLP(), torch.zeros(B, 20)),
              ("encoder", encoder, torch.zeros(B, T, 32)))
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        for name, model, inputs in models:
            env.merak.compile(model, inputs, workdir=env.workdir("trace-ordinary-" + name))
    found = [(r.filename, r.lineno, str(r.message))
             for r in specialization_warnings(env, records)]
    tracer = sum(r.category is torch.jit.TracerWarning for r in records)
    return not found, "3 models compiled; TraceSpecializationWarnings %s; TracerWarnings " \
        "passed on: %d" % (found, tracer)


def check_custom_function(env):
    text = compile_error(env, UsesFunction(Cube), "custom-function")
    where = "%s:%d" % (__file__, line_of("custom-function"))
    ok = (text is not None and "torch.autograd.Function %s.Cube" % __name__ in text
          and where in text and "symbolic" in text)
    with_symbolic = compile_error(env, UsesFunction(CubeWithSymbolic), "custom-function-symbolic")
    ok = ok and with_symbolic is None
    return ok, "CompileError: %s; with a symbolic: %s" % (text, with_symbolic or "compiles")


def check_train_errors(env):
    """TrainError: the executable's last error line and the exit status."""
    m = env.merak
    results = []

    def failure(prog, **kwargs):
        data = {"x": np.zeros((8, 20), np.float32), "labels": np.zeros(8, np.int64)}
        try:
            prog.train(data=data, steps=2, progress=False, **kwargs)
        except m.TrainError as e:
            results.append(str(e))
            return e
        raise AssertionError("no TrainError")

    prog = m.compile(em.MLP(), torch.zeros(B, 20), workdir=env.workdir("train-errors"))
    e = failure(prog, lr="fast")
    ok = ("train: error: --lr: expected a non-negative number, got 'fast' (exit status 2)"
          in str(e) and e.returncode == 2 and e.rank == 0)

    def fake(name, script):
        """A Program whose executable is a shell script."""
        d = env.workdir("train-errors-" + name)
        path = os.path.join(d, "train")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + script + "\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        return m.Program(executable=path, dp=1, tp=1, pp=1, workdir=d, report_json="",
                         names={})

    e = failure(fake("several", "echo 'train: warning: slow' >&2; echo 'train: error: first' "
                                ">&2; echo 'train: error: the last one' >&2; echo 'train: "
                                "error: rank 0: stopping every rank of the job' >&2; exit 1"))
    ok = ok and str(e).endswith(": train: error: the last one (exit status 1)") \
        and "train: error: first" in e.stderr
    e = failure(fake("fatal", "echo 'merak runtime: bad request slot' >&2; exit 3"))
    ok = ok and "merak runtime: bad request slot (exit status 3)" in str(e) and e.returncode == 3
    e = failure(fake("segv", "kill -SEGV $$"))
    ok = ok and str(e).endswith("on rank 0 of 1: killed by SIGSEGV") and e.returncode == -11
    return ok, " | ".join(results)


def check_compile_error_text(env):
    """Each error of the compiler with the lines that belong to it."""
    path = os.path.join(env.workdir("compile-error-text"), "bad.mlir")
    with open(path, "w") as f:
        f.write("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                "  %0 = arith.addf %x, %x : tensor<4xf32>\n"
                "  return %0 : tensor<4xf32>\n}\n")
    try:
        env.merak.compile(path, workdir=env.workdir("compile-error-text"))
        return False, "no CompileError"
    except env.merak.CompileError as e:
        lines = str(e).splitlines()
    ok = (len(lines) >= 4 and lines[0].startswith(path + ":2:")
          and "error:" in lines[0] and lines[1].strip() == "%0 = arith.addf %x, %x : tensor<4xf32>"
          and lines[2].strip() == "^" and any("note:" in l for l in lines)
          and "cannot read" in lines[-1])
    return ok, "CompileError:\n" + "\n".join(lines)


INSTALLED_SCRIPT = """
import sys, torch, merak
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
prog = merak.compile(model, torch.zeros(4, 6), optimizer="sgd", lr=0.1)
losses = prog.train(data={"input": torch.randn(32, 6), "labels": torch.randint(0, 3, (32,))},
                    steps=3, progress=False)
prog.load_into(model)
print(merak.__file__, len(losses))
"""


def check_installed(env):
    prefix = os.path.join(env.work, "prefix")
    cmake = os.environ.get("MERAK_CMAKE", "cmake")
    subprocess.run([cmake, "--install", env.build, "--prefix", prefix, "--component", "python"],
                   check=True, stdout=subprocess.DEVNULL)
    site = os.path.join(prefix, "lib", "python3", "dist-packages")
    run_env = dict(os.environ, PYTHONPATH=site)
    p = subprocess.run([sys.executable, "-c", INSTALLED_SCRIPT], env=run_env, cwd=env.work,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    out = p.stdout.decode().strip()
    last = out.splitlines()[-1] if out else ""
    ok = (p.returncode == 0 and last.startswith(os.path.join(site, "merak"))
          and last.endswith(" 3")
          and os.path.isfile(os.path.join(site, "merak", "runtime", "lib",
                                          "libmerak_runtime_cpu.a")))
    return ok, "installed to %s: %s" % (site, last if ok else out[-2000:])


def check_docs_example(env):
    import re
    root = os.path.abspath(os.path.join(HERE, "..", ".."))
    with open(os.path.join(root, "docs", "python.md")) as f:
        code = re.findall(r"```python\n(.*?)```", f.read(), re.S)[0]
    p = subprocess.run([sys.executable, "-c", code], cwd=root, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    out = p.stdout.decode()
    m = re.search(r"^loss ([0-9.]+) -> ([0-9.]+)$", out, re.M)
    ok = p.returncode == 0 and m is not None and float(m.group(2)) < float(m.group(1))
    return ok, m.group(0) if ok else out[-2000:]


CHECKS = {
    "gpt-1-1-1": lambda e: check_gpt(e, 1, 1, 1),
    "gpt-1-2-2": lambda e: check_gpt(e, 1, 2, 2),
    "gpt-1-2-2-sp": lambda e: check_gpt(e, 1, 2, 2, sequence_parallel=True),
    "gpt-devices2": lambda e: check_gpt_devices(e, 2),
    "mlp": check_mlp,
    "encoder": check_encoder,
    "transformers": check_transformers,
    "transformers-tp2": lambda e: check_transformers(e, tp=2),
    "unsupported": check_unsupported,
    "errors": check_errors,
    "recompute": check_recompute,
    "schedules": check_schedules,
    "installed": check_installed,
    "docs-example": check_docs_example,
    "precision": check_precision,
    "trace-if": lambda e: check_trace_error(e, BranchOnValue(), "trace-if",
                                            "converts a tensor to a Python boolean"),
    "trace-loop": lambda e: check_trace_error(e, LoopOnValue(), "trace-loop",
                                              "converts a tensor to a Python integer"),
    "trace-allow": check_trace_allow,
    "trace-shapes": check_trace_shapes,
    "trace-ordinary": check_trace_ordinary,
    "custom-function": check_custom_function,
    "train-errors": check_train_errors,
    "compile-error-text": check_compile_error_text,
}


def main():
    return run_checks(Env, lambda env, name: CHECKS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
