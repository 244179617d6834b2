#!/usr/bin/env python3
"""Writes a GPT-2-style model in merak IR (.mlir) without its weights.

Models of billions of parameters cannot be exported to ONNX here (their
weights alone are tens of GB). This script writes the IR the ONNX importer
would produce for the same PyTorch GPT (examples/gpt/export_demo.py's
structure: tied embedding, pre-LN blocks, fused QKV, GELU MLP, causal mask
buffer `h.N.attn.bias`), op for op, with every parameter a splat
(`dense<0.0>`): MLIR stores a splat as one value, so the file is a few
hundred KB for any size, and the planner (`merak-compile model.mlir
--devices N`) reads only shapes. The program cannot be trained (its shapes
are fixed and its weights are zeros); it is for planning and simulation.

  gpt_mlir.py --layers 48 --hidden 1600 --heads 32 --seq 1024 --vocab 50304 \
      --batch 512 -o gpt-1.5b.mlir

With --experts E (and --top-k K, --ffn F) every MLP is a Mixtral-style
Mixture-of-Experts block instead: a router [hidden, E], each token's row
repeated K times and routed by the router's argmax (the shapes and costs
of top-K routing, not its values), grouped expert GEMMs (merak.expert_matmul,
as merak-fuse-experts forms them) with gate/up weights [E, 2F, hidden] and
down weights [E, hidden, F], SiLU gating, each row weighted by the router's
top probability (so --moe-capacity-factor applies), and the K rows summed
back.
"""
import argparse
import sys


def generate(layers, hidden, heads, seq, vocab, batch, dtype="f32", experts=0, top_k=2,
             ffn=0, attention="decomposed"):
    d, h, s, b, v = hidden, heads, seq, batch, vocab
    if d % h:
        sys.exit("gpt_mlir.py: hidden %d is not a multiple of heads %d" % (d, h))
    hd = d // h
    ff = 4 * d
    t = lambda *dims: "tensor<%sx%s>" % ("x".join(str(x) for x in dims), dtype)
    scalar = "tensor<%s>" % dtype
    params, body = [], []
    n = [0]

    def val():
        n[0] += 1
        return "%%%d" % n[0]

    def param(name, *dims):
        params.append('  merak.param @%s : %s = dense<0.000000e+00> : %s' % (name, t(*dims), t(*dims)))
        r = val()
        body.append("    %s = merak.get_param @%s : %s" % (r, name, t(*dims)))
        return r

    def emit(text):
        r = val()
        body.append("    %s = %s" % (r, text))
        return r

    neg_inf = emit("merak.constant dense<0xFF800000> : " + scalar) if dtype == "f32" else \
        emit("merak.constant dense<-3.0e+38> : " + scalar)
    scale = emit("merak.constant dense<%r> : %s" % (1.0 / hd ** 0.5, scalar))
    zero = emit("merak.constant dense<0.000000e+00> : " + scalar)
    positions = emit("merak.constant dense<0> : tensor<%dxi64>" % s)
    wte = param("transformer.wte.weight", v, d)
    wpe = param("transformer.wpe.weight", s, d)
    pos = emit("merak.gather %s[%s] axis = 0 : %s, tensor<%dxi64> -> %s" % (wpe, positions, t(s, d), s, t(s, d)))
    tok = emit("merak.gather %s[%%arg0] axis = 0 : %s, tensor<%dx%dxi64> -> %s" % (wte, t(v, d), b, s, t(b, s, d)))
    x = emit("merak.add %s, %s : %s, %s" % (tok, pos, t(b, s, d), t(s, d)))

    def layer_norm(x, prefix):
        w = param(prefix + ".weight", d)
        bias = param(prefix + ".bias", d)
        return emit("merak.layer_norm %s scale %s bias %s axis = 2 epsilon = 9.9999997473787516E-6 : "
                    "(%s, %s, %s) -> %s" % (x, w, bias, t(b, s, d), t(d), t(d), t(b, s, d)))

    def linear(x, prefix, n_in, n_out):
        w = param(prefix + ".weight", n_out, n_in)
        bias = param(prefix + ".bias", n_out)
        wt = emit("merak.transpose %s perm = [1, 0] : %s to %s" % (w, t(n_out, n_in), t(n_in, n_out)))
        y = emit("merak.matmul %s, %s : %s, %s -> %s" % (x, wt, t(b, s, n_in), t(n_in, n_out), t(b, s, n_out)))
        return emit("merak.add %s, %s : %s, %s" % (bias, y, t(n_out), t(b, s, n_out)))

    def moe(x, prefix):
        e, k, f, n = experts, top_k, ffn or 4 * d, b * s
        rows = emit("merak.reshape %s : %s to %s" % (x, t(b, s, d), t(n, d)))
        router = param(prefix + ".router.weight", d, e)
        scores = emit("merak.matmul %s, %s : %s, %s -> %s" % (rows, router, t(n, d), t(d, e), t(n, e)))
        ids = emit("merak.argmax %s axis = 1 : %s -> tensor<%dxi64>" % (scores, t(n, e), n))
        # Row t * k + j is token t's j-th choice (transformers' order).
        x3 = emit("merak.reshape %s : %s to %s" % (rows, t(n, d), t(n, 1, d)))
        xb = emit("merak.broadcast %s : %s to %s" % (x3, t(n, 1, d), t(n, k, d)))
        xk = emit("merak.reshape %s : %s to %s" % (xb, t(n, k, d), t(n * k, d)))
        i2 = emit("merak.reshape %s : tensor<%dxi64> to tensor<%dx1xi64>" % (ids, n, n))
        ib = emit("merak.broadcast %s : tensor<%dx1xi64> to tensor<%dx%dxi64>" % (i2, n, n, k))
        ek = emit("merak.reshape %s : tensor<%dx%dxi64> to tensor<%dxi64>" % (ib, n, k, n * k))
        w1 = param(prefix + ".experts.gate_up_proj", e, 2 * f, d)
        hu = emit("merak.expert_matmul %s, %s[%s] : %s, %s, tensor<%dxi64> -> %s" % (xk, w1, ek, t(n * k, d), t(e, 2 * f, d), n * k, t(n * k, 2 * f)))
        gu = val()
        body.append("    %s:2 = merak.split %s axis = 1 sizes = [%d, %d] : %s -> %s, %s"
                    % (gu, hu, f, f, t(n * k, 2 * f), t(n * k, f), t(n * k, f)))
        sig = emit("merak.sigmoid %s#0 : %s" % (gu, t(n * k, f)))
        act = emit("merak.mul %s#0, %s : %s, %s" % (gu, sig, t(n * k, f), t(n * k, f)))
        prod = emit("merak.mul %s, %s#1 : %s, %s" % (act, gu, t(n * k, f), t(n * k, f)))
        w2 = param(prefix + ".experts.down_proj", e, d, f)
        y = emit("merak.expert_matmul %s, %s[%s] : %s, %s, tensor<%dxi64> -> %s" % (prod, w2, ek, t(n * k, f), t(e, d, f), n * k, t(n * k, d)))
        # Each row weighted by the router's probability of its expert.
        probs = emit("merak.softmax %s axis = 1 : %s" % (scores, t(n, e)))
        top = emit("merak.reduce_max %s axes = [1] {keepdims} : %s -> %s" % (probs, t(n, e), t(n, 1)))
        topk = emit("merak.broadcast %s : %s to %s" % (top, t(n, 1), t(n, k)))
        wk = emit("merak.reshape %s : %s to %s" % (topk, t(n, k), t(n * k, 1)))
        y = emit("merak.mul %s, %s : %s, %s" % (y, wk, t(n * k, d), t(n * k, 1)))
        per = emit("merak.reshape %s : %s to %s" % (y, t(n * k, d), t(n, k, d)))
        total = emit("merak.reduce_sum %s axes = [1] : %s -> %s" % (per, t(n, k, d), t(n, d)))
        return emit("merak.reshape %s : %s to %s" % (total, t(n, d), t(b, s, d)))

    def heads_first(split, i, perm):
        x = emit("merak.reshape %s#%d : %s to %s" % (split, i, t(b, s, d), t(b, s, h, hd)))
        to = t(b, h, hd, s) if perm == [0, 2, 3, 1] else t(b, h, s, hd)
        return emit("merak.transpose %s perm = %s : %s to %s" % (x, perm, t(b, s, h, hd), to))

    def decomposed_attention(split, mask):
        """The exporter's spelling: scores, the causal buffer's mask, softmax."""
        q = heads_first(split, 0, [0, 2, 1, 3])
        k = heads_first(split, 1, [0, 2, 3, 1])
        scores = emit("merak.matmul %s, %s : %s, %s -> %s" % (q, k, t(b, h, s, hd), t(b, h, hd, s), t(b, h, s, s)))
        vv = heads_first(split, 2, [0, 2, 1, 3])
        scaled = emit("merak.mul %s, %s : %s, %s" % (scores, scale, t(b, h, s, s), scalar))
        masked_out = emit("merak.eq %s, %s : %s, %s" % (mask, zero, t(1, 1, s, s), scalar))
        masked = emit("merak.where %s, %s, %s : tensor<1x1x%dx%dxi1>, %s, %s"
                      % (masked_out, neg_inf, scaled, s, s, scalar, t(b, h, s, s)))
        probs = emit("merak.softmax %s axis = 3 : %s" % (masked, t(b, h, s, s)))
        return emit("merak.matmul %s, %s : %s, %s -> %s" % (probs, vv, t(b, h, s, s), t(b, h, s, hd), t(b, h, s, hd)))

    def fused_attention(split):
        """merak.attention (causal): what merak-fuse-attention makes of the
        decomposed form, and what Megatron-LM runs (flash attention)."""
        q, k, vv = (heads_first(split, i, [0, 2, 1, 3]) for i in range(3))
        o = val()
        body.append("    %s:2 = merak.attention %s, %s, %s scale = %r causal : %s, %s, %s -> %s, %s"
                    % (o, q, k, vv, 1.0 / hd ** 0.5, t(b, h, s, hd), t(b, h, s, hd),
                       t(b, h, s, hd), t(b, h, s, hd), "tensor<%dx%dx%dxf32>" % (b, h, s)))
        return o + "#0"

    for i in range(layers):
        p = "transformer.h.%d" % i
        ln1 = layer_norm(x, p + ".ln_1")
        mask = param(p + ".attn.bias", 1, 1, s, s) if attention == "decomposed" else None
        qkv = linear(ln1, p + ".attn.c_attn", d, 3 * d)
        split = val()
        body.append("    %s:3 = merak.split %s axis = 2 sizes = [%d, %d, %d] : %s -> %s, %s, %s"
                    % (split, qkv, d, d, d, t(b, s, 3 * d), t(b, s, d), t(b, s, d), t(b, s, d)))
        ctx = decomposed_attention(split, mask) if mask else fused_attention(split)
        ctx = emit("merak.transpose %s perm = [0, 2, 1, 3] : %s to %s" % (ctx, t(b, h, s, hd), t(b, s, h, hd)))
        ctx = emit("merak.reshape %s : %s to %s" % (ctx, t(b, s, h, hd), t(b, s, d)))
        attn = linear(ctx, p + ".attn.c_proj", d, d)
        x = emit("merak.add %s, %s : %s, %s" % (x, attn, t(b, s, d), t(b, s, d)))
        ln2 = layer_norm(x, p + ".ln_2")
        if experts:
            mlp = moe(ln2, p + ".moe")
        else:
            fc = linear(ln2, p + ".mlp.c_fc", d, ff)
            g = emit("merak.gelu %s : %s" % (fc, t(b, s, ff)))
            mlp = linear(g, p + ".mlp.c_proj", ff, d)
        x = emit("merak.add %s, %s : %s, %s" % (x, mlp, t(b, s, d), t(b, s, d)))
    xf = layer_norm(x, "transformer.ln_f")
    wt = emit("merak.transpose %s perm = [1, 0] : %s to %s" % (wte, t(v, d), t(d, v)))
    logits = emit("merak.matmul %s, %s : %s, %s -> %s" % (xf, wt, t(b, s, d), t(d, v), t(b, s, v)))
    body.append("    return %s : %s" % (logits, t(b, s, v)))
    head = ('  func.func @forward(%%arg0: tensor<%dx%dxi64> {merak.name = "input_ids"}) -> '
            '(%s {merak.name = "logits"}) {' % (b, s, t(b, s, v)))
    return "\n".join(["module {", head] + body + ["  }"] + params + ["}"]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--batch", type=int, default=512, help="global batch (sequences)")
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--experts", type=int, default=0, help="MoE blocks with this many experts")
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=0, help="an expert's hidden size (default 4 x hidden)")
    ap.add_argument("--attention", default="decomposed", choices=["decomposed", "fused"],
                    help="decomposed: the exporter's ops and causal buffer (merak-fuse-attention "
                    "fuses them for head dims 16/32/64/128); fused: merak.attention directly")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    text = generate(a.layers, a.hidden, a.heads, a.seq, a.vocab, a.batch, a.dtype, a.experts,
                    a.top_k, a.ffn, a.attention)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
