"""Export small PyTorch models to ONNX together with reference test data.

Usage:
    /usr/bin/python3 test/torch/export_models.py OUTDIR [--only NAME_SUBSTRING]

For every model M, opset in OPSETS and mode in MODES this creates
OUTDIR/{M}_op{opset}_{mode}/ containing:
    model.onnx
    test_data_set_0/input_N.pb   (graph-input order, initializers excluded)
    test_data_set_0/output_N.pb  (graph-output order)

This is the layout of the ONNX backend test cases, so the directory can be
given to `merak-run model.onnx --test-data DIR`.

Reference outputs are computed with torch (in float64, stored as float32) in
the mode that is exported (eval or train).  Every dropout probability is 0.0,
so train-mode outputs are deterministic; train-mode BatchNorm uses batch
statistics.  Exports are cached: a case is regenerated only when this file is
newer than its output_0.pb (or with --force).

Needs torch 1.13 / torchvision 0.14 / onnx (Debian's /usr/bin/python3).
"""

import argparse
import copy
import math
import os
import re
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

MODEL_NAMES = ("gpt2", "bert", "transformer_encoder", "mlp", "resnet18")
OPSETS = (13, 17)
MODES = ("eval", "train")
# Precision of the torch computation that produces output_N.pb (stored as
# float32 either way); see export_case().  Editing this file invalidates the
# cached exports.
REFERENCE_DTYPE = torch.float64


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.n_embd = n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hd = self.n_embd // self.n_head  # Python int: scale stays a constant
        q = q.view(b, t, self.n_head, hd).transpose(1, 2)  # [B, H, T, hd]
        k = k.view(b, t, self.n_head, hd).transpose(1, 2)
        v = v.view(b, t, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # [B, H, T, hd]
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class GPTMLP(nn.Module):
    def __init__(self, n_embd, dropout=0.0):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()  # exact (erf) GELU
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class GPTBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = GPTMLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2(nn.Module):
    """Tiny GPT-2 style decoder (pre-LayerNorm, tied lm_head)."""

    def __init__(self, vocab_size=97, n_embd=64, n_head=4, n_layer=2,
                 block_size=32):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(0.0),
            h=nn.ModuleList([GPTBlock(n_embd, n_head, block_size)
                             for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # weight tying
        self.apply(self._init_weights)

    def _init_weights(self, module):
        # GPT-2 style normal init: embeddings (and so the tied lm_head) get
        # std 0.02 as in GPT-2, Linear layers std 0.1 so that attention is
        # visibly non-uniform, and biases are non-zero so that a dropped bias
        # is detected.  This keeps the logits O(0.5): with torch's default
        # N(0,1) embedding init they reach ~60, and float32 rounding alone
        # then exceeds rtol=1e-5/atol=1e-6.
        if isinstance(module, nn.Embedding):  # also lm_head (tied)
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.Linear) and module is not self.lm_head:
            nn.init.normal_(module.weight, mean=0.0, std=0.1)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.normal_(module.bias, mean=0.0, std=0.02)

    def forward(self, input_ids):
        _, t = input_ids.size()
        pos = torch.arange(0, t, dtype=torch.long, device=input_ids.device)
        tok_emb = self.transformer.wte(input_ids)  # [B, T, C]
        pos_emb = self.transformer.wpe(pos)  # [T, C]
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 64)
        self.act1 = nn.GELU()
        self.norm = nn.LayerNorm(64)
        self.fc2 = nn.Linear(64, 64)
        self.act2 = nn.ReLU()
        self.drop = nn.Dropout(0.0)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.norm(self.act1(self.fc1(x)))
        x = self.drop(self.act2(self.fc2(x)))
        return self.fc3(x)


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def split(self, x):
        b, t, _ = x.size()
        return x.view(b, t, self.heads, self.dim).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), \
            self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dim) + ext_mask
        ctx = torch.softmax(scores, dim=-1) @ v
        b, _, t, _ = ctx.size()
        return ctx.permute(0, 2, 1, 3).contiguous().view(b, t, -1)


class BertLayer(nn.Module):
    """Post-LayerNorm encoder layer as in BERT (names follow HF's BERT)."""

    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.attention = nn.ModuleDict(dict(
            self=BertSelfAttention(hidden, heads),
            output=nn.ModuleDict(dict(dense=nn.Linear(hidden, hidden),
                                      LayerNorm=nn.LayerNorm(hidden, eps=1e-12)))))
        self.intermediate = nn.ModuleDict(dict(dense=nn.Linear(hidden, inter)))
        self.output = nn.ModuleDict(dict(dense=nn.Linear(inter, hidden),
                                         LayerNorm=nn.LayerNorm(hidden, eps=1e-12)))

    def forward(self, x, ext_mask):
        a = self.attention["self"](x, ext_mask)
        ao = self.attention["output"]
        x = ao["LayerNorm"](ao["dense"](a) + x)
        h = F.gelu(self.intermediate["dense"](x))
        return self.output["LayerNorm"](self.output["dense"](h) + x)


class Bert(nn.Module):
    """Tiny BERT-style encoder: word/position/token-type embeddings, padding
    mask turned into an additive -10000 bias, post-LN layers, tanh pooler."""

    def __init__(self, vocab=101, hidden=32, heads=4, inter=64, layers=2,
                 max_pos=24, type_vocab=2):
        super().__init__()
        self.embeddings = nn.ModuleDict(dict(
            word_embeddings=nn.Embedding(vocab, hidden),
            position_embeddings=nn.Embedding(max_pos, hidden),
            token_type_embeddings=nn.Embedding(type_vocab, hidden),
            LayerNorm=nn.LayerNorm(hidden, eps=1e-12)))
        self.encoder = nn.ModuleDict(dict(layer=nn.ModuleList(
            [BertLayer(hidden, heads, inter) for _ in range(layers)])))
        self.pooler = nn.ModuleDict(dict(dense=nn.Linear(hidden, hidden)))
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, mean=0.0, std=0.1)
            if isinstance(mod, nn.Linear):
                nn.init.normal_(mod.bias, mean=0.0, std=0.02)

    def forward(self, input_ids, token_type_ids, attention_mask):
        t = input_ids.size(1)
        pos = torch.arange(t, dtype=torch.long).unsqueeze(0)
        e = self.embeddings
        x = (e["word_embeddings"](input_ids) + e["position_embeddings"](pos)
             + e["token_type_embeddings"](token_type_ids))
        x = e["LayerNorm"](x)
        ext = attention_mask[:, None, None, :].to(x.dtype)
        ext = (1.0 - ext) * -10000.0
        for layer in self.encoder["layer"]:
            x = layer(x, ext)
        pooled = torch.tanh(self.pooler["dense"](x[:, 0]))
        return x, pooled


def build_bert(mode):
    model = Bert()
    ids = torch.randint(0, 101, (2, 12), dtype=torch.int64)
    types = torch.cat([torch.zeros(2, 6, dtype=torch.int64),
                       torch.ones(2, 6, dtype=torch.int64)], dim=1)
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 9:] = 0  # padding in the second sequence
    return (model, (ids, types, mask),
            ["input_ids", "token_type_ids", "attention_mask"],
            ["last_hidden_state", "pooler_output"])


def build_gpt2(mode):
    model = GPT2()
    ids = torch.randint(0, 97, (2, 16), dtype=torch.int64)
    return model, (ids,), ["input_ids"], ["logits"]


def build_transformer_encoder(mode):
    # dropout=0.0 makes train mode deterministic.  enable_nested_tensor=False
    # keeps TransformerEncoder from converting inputs to nested tensors.  The
    # per-layer "fast path" (torch._transformer_encoder_layer_fwd, which has
    # no ONNX symbolic) is only taken in eval mode when grad is disabled or no
    # parameter requires grad; export_case() runs both the reference
    # computation and torch.onnx.export under torch.enable_grad() with
    # requires_grad parameters, so the regular (exportable) path is traced.
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                       dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2,
                                  enable_nested_tensor=False)
    x = torch.randn(2, 10, 32)
    return model, (x,), ["input"], ["output"]


def build_mlp(mode):
    model = MLP()
    x = torch.randn(8, 20)
    return model, (x,), ["input"], ["output"]


# Train-mode input size for resnet18.  With the 32x32 input used in eval mode,
# layer4 runs at 1x1 spatial size, so train-mode BatchNorm normalises over
# only N*1*1 = 2 values per channel; that is so ill-conditioned that torch's
# own float32 output is ~1700x outside rtol=1e-5/atol=1e-6 of the float64
# result.  At 128x128 layer4 is 4x4 (32 values per channel) and float32
# rounding error stays around 0.3x the tolerance.
RESNET18_TRAIN_HW = 128


def build_resnet18(mode):
    import torchvision
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    hw = RESNET18_TRAIN_HW if mode == "train" else 32
    x = torch.randn(2, 3, hw, hw)
    return model, (x,), ["input"], ["output"]


def randomize_norm_layers(model):
    """Give LayerNorm/BatchNorm non-trivial affine parameters and running
    statistics (defaults are weight=1, bias=0, mean=0, var=1), so that mixing
    up their inputs is detected by the test."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.LayerNorm, nn.BatchNorm2d)):
                if mod.weight is not None:
                    mod.weight.uniform_(0.5, 1.5)
                if mod.bias is not None:
                    mod.bias.uniform_(-0.2, 0.2)
            if isinstance(mod, nn.BatchNorm2d) and mod.running_mean is not None:
                mod.running_mean.normal_(0.0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)


BUILDERS = {
    "gpt2": build_gpt2,
    "bert": build_bert,
    "transformer_encoder": build_transformer_encoder,
    "mlp": build_mlp,
    "resnet18": build_resnet18,
}


# --------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------

def case_name(model_name, opset, mode):
    return "%s_op%d_%s" % (model_name, opset, mode)


def all_cases(only=None):
    """List of (case_name, model_name, opset, mode), optionally filtered."""
    cases = []
    for m in MODEL_NAMES:
        for opset in OPSETS:
            for mode in MODES:
                name = case_name(m, opset, mode)
                if only and only not in name:
                    continue
                cases.append((name, m, opset, mode))
    return cases


def _is_cached(case_dir):
    model_path = os.path.join(case_dir, "model.onnx")
    out_path = os.path.join(case_dir, "test_data_set_0", "output_0.pb")
    if not (os.path.isfile(model_path) and os.path.isfile(out_path)):
        return False
    script_mtime = os.path.getmtime(os.path.abspath(__file__))
    return (script_mtime < os.path.getmtime(out_path)
            and script_mtime < os.path.getmtime(model_path))


def _flatten_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    flat = []
    for o in out:
        flat.extend(_flatten_outputs(o))
    return flat


def _write_tensor(path, array, name):
    tensor = numpy_helper.from_array(np.ascontiguousarray(array), name=name)
    with open(path, "wb") as f:
        f.write(tensor.SerializeToString())


def export_case(out_dir, model_name, opset, mode, force=False, log=print):
    """Export one case; returns the case directory.  Cached unless force."""
    name = case_name(model_name, opset, mode)
    case_dir = os.path.join(out_dir, name)
    if not force and _is_cached(case_dir):
        log("cached   %s" % name)
        return case_dir

    torch.manual_seed(0)
    model, inputs, input_names, output_names = BUILDERS[model_name](mode)
    randomize_norm_layers(model)
    model = model.float()
    train = mode == "train"
    model.train(train)

    # Reference output, computed on a deep copy so that the train-mode forward
    # (which updates BatchNorm running statistics) cannot influence the export.
    # The model and its inputs are float32, but the reference is computed in
    # float64 and rounded to float32: it is then the correctly rounded result
    # of the float32 model, and an evaluator is judged only by its own
    # rounding error (torch's float32 result would add a second error of the
    # same size, which the tight default tolerances cannot absorb).
    ref_model = copy.deepcopy(model).to(REFERENCE_DTYPE)
    ref_model.train(train)
    ref_inputs = [t.to(REFERENCE_DTYPE) if t.is_floating_point() else t
                  for t in inputs]
    with torch.enable_grad():
        ref_out = [t.detach().cpu().numpy().astype(np.float32)
                   for t in _flatten_outputs(ref_model(*ref_inputs))]
    if len(ref_out) != len(output_names):
        raise RuntimeError("%s: %d outputs, expected %d"
                           % (name, len(ref_out), len(output_names)))

    os.makedirs(os.path.join(case_dir, "test_data_set_0"), exist_ok=True)
    model_path = os.path.join(case_dir, "model.onnx")
    if train:
        kwargs = dict(training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    else:
        kwargs = dict(training=torch.onnx.TrainingMode.EVAL,
                      do_constant_folding=True)
    export_model = copy.deepcopy(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.enable_grad():  # see build_transformer_encoder()
            torch.onnx.export(export_model, inputs, model_path,
                              opset_version=opset,
                              input_names=input_names,
                              output_names=output_names,
                              **kwargs)
    # Report each distinct warning once (resnet18 train mode repeats the same
    # TracerWarning / num_batches_tracked warning for every BatchNorm).
    counts = {}
    for w in caught:
        msg = str(w.message).strip().splitlines()[0]
        msg = re.sub(r"'[^']*num_batches_tracked'", "'*.num_batches_tracked'",
                     msg)
        msg = msg.split(". ")[0]  # first sentence is enough
        key = "%s: %s" % (w.category.__name__, msg[:120])
        counts[key] = counts.get(key, 0) + 1
    for key, n in counts.items():
        log("  warning (%s)%s: %s" % (name, " x%d" % n if n > 1 else "", key))

    proto = onnx.load(model_path)
    onnx.checker.check_model(proto)
    init_names = {i.name for i in proto.graph.initializer}
    graph_inputs = [i.name for i in proto.graph.input
                    if i.name not in init_names]
    graph_outputs = [o.name for o in proto.graph.output]
    if len(graph_inputs) != len(inputs):
        raise RuntimeError("%s: graph has inputs %s, expected %d"
                           % (name, graph_inputs, len(inputs)))
    if len(graph_outputs) != len(ref_out):
        raise RuntimeError("%s: graph has outputs %s, expected %d"
                           % (name, graph_outputs, len(ref_out)))

    data_dir = os.path.join(case_dir, "test_data_set_0")
    for i, (gname, t) in enumerate(zip(graph_inputs, inputs)):
        _write_tensor(os.path.join(data_dir, "input_%d.pb" % i),
                      t.detach().cpu().numpy(), gname)
    # output_0.pb is written last: its presence marks a complete case.
    for i in reversed(range(len(ref_out))):
        _write_tensor(os.path.join(data_dir, "output_%d.pb" % i),
                      ref_out[i], graph_outputs[i])

    ops = sorted({n.op_type for n in proto.graph.node})
    log("exported %s (%d nodes; ops: %s)"
        % (name, len(proto.graph.node), " ".join(ops)))
    return case_dir


def export_all(out_dir, only=None, force=False, log=print):
    """Export every (filtered) case; returns the list of case names.

    Raises if any export fails (after trying all of them)."""
    os.makedirs(out_dir, exist_ok=True)
    names, errors = [], []
    for name, m, opset, mode in all_cases(only):
        try:
            export_case(out_dir, m, opset, mode, force=force, log=log)
            names.append(name)
        except Exception as e:  # keep going, report at the end
            errors.append((name, e))
            log("ERROR    %s: %s: %s" % (name, type(e).__name__, e))
    if errors:
        raise RuntimeError("export failed for: %s"
                           % ", ".join(n for n, _ in errors))
    return names


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", default=None,
                    help="only cases whose name contains this substring")
    ap.add_argument("--force", action="store_true",
                    help="regenerate even if cached")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    try:
        names = export_all(args.outdir, args.only, args.force)
    except RuntimeError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    if not names:
        print("error: no cases matched", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
