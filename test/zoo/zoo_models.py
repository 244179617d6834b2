"""The zoo's own modules (test/zoo/zoo.py): PyTorch's nn.TransformerEncoder
as a causal LM, a dense-form Mixture-of-Experts LM, a small 3-d CNN, and the wrappers that
make a Hugging Face model return its logits from one input."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from decoder_check import EncoderLM  # noqa: E402  (the causal nn.TransformerEncoder LM)


class CausalEncoderLM(EncoderLM):
    """EncoderLM called as PyTorch's docs advise for a causal mask: with
    `is_causal=True` as well. Without the hint, nn.TransformerEncoder checks
    whether the mask is causal by comparing values (_detect_is_causal_mask),
    which torch.export cannot trace (GuardOnDataDependentSymNode)."""

    def forward(self, ids):
        return self.head(self.encoder(self.tok(ids) + self.pos, mask=self.mask, is_causal=True))


class DenseMoE(nn.Module):
    """A Mixture-of-Experts layer in the dense form (as optimum exports
    GPT-OSS): every token goes through every expert (batched matmuls over
    the expert axis), the outputs weighted by a dense gate that is the
    renormalised top-k router probabilities scattered into [tokens, E]
    (zero for the experts a token did not choose)."""

    def __init__(self, width, hidden, experts, k):
        super().__init__()
        self.k = k
        self.router = nn.Linear(width, experts, bias=False)
        self.w_in = nn.Parameter(torch.randn(experts, width, hidden) * 0.05)
        self.w_out = nn.Parameter(torch.randn(experts, hidden, width) * 0.05)

    def forward(self, x):
        flat = x.reshape(-1, x.size(-1))
        probs = torch.softmax(self.router(flat), dim=-1)
        top, idx = probs.topk(self.k, dim=-1)
        gate = torch.zeros_like(probs).scatter(-1, idx, top / top.sum(-1, keepdim=True))
        h = F.silu(flat.unsqueeze(0).expand(self.w_in.size(0), -1, -1) @ self.w_in)
        y = h @ self.w_out  # [E, tokens, width]
        return (y * gate.t().unsqueeze(-1)).sum(0).reshape(x.shape)


class LegacyMixtralMoE(nn.Module):
    """transformers 4.x's MixtralSparseMoeBlock, as files exported before
    transformers 5 have it: one module per expert (w1, w3, w2 Linear
    layers), a loop over range(num_experts), torch.where and index_add_.
    Built from a transformers 5 block, with its weights."""

    def __init__(self, block):
        super().__init__()
        e, i, h = block.experts.gate_up_proj.shape
        i //= 2
        self.top_k, self.num_experts = block.top_k, e
        self.gate = nn.Linear(h, e, bias=False)
        self.experts = nn.ModuleList()
        with torch.no_grad():
            self.gate.weight.copy_(block.gate.weight)
            for x in range(e):
                expert = nn.Module()
                expert.w1, expert.w3 = nn.Linear(h, i, bias=False), nn.Linear(h, i, bias=False)
                expert.w2 = nn.Linear(i, h, bias=False)
                expert.w1.weight.copy_(block.experts.gate_up_proj[x, :i])
                expert.w3.weight.copy_(block.experts.gate_up_proj[x, i:])
                expert.w2.weight.copy_(block.experts.down_proj[x])
                self.experts.append(expert)

    def forward(self, hidden_states):
        b, t, h = hidden_states.shape
        hidden_states = hidden_states.view(-1, h)
        routing_weights = F.softmax(self.gate(hidden_states), dim=1, dtype=torch.float)
        routing_weights, selected = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights = routing_weights / routing_weights.sum(dim=-1, keepdim=True)
        final = torch.zeros((b * t, h), dtype=hidden_states.dtype)
        mask = F.one_hot(selected, num_classes=self.num_experts).permute(2, 1, 0)
        for x in range(self.num_experts):
            expert = self.experts[x]
            idx, top_x = torch.where(mask[x])
            current = hidden_states[None, top_x].reshape(-1, h)
            y = expert.w2(F.silu(expert.w1(current)) * expert.w3(current))
            final.index_add_(0, top_x, y * routing_weights[top_x, idx, None])
        return final.reshape(b, t, h)


class RecurrentLM(nn.Module):
    """Embedding -> a 2-layer recurrent net (nn.LSTM, nn.GRU or nn.RNN,
    batch-first) -> vocabulary logits: the ONNX LSTM/GRU/RNN ops (GRU's
    linear_before_reset = 1, as torch exports it). `bidirectional` reads
    the whole row both ways (a tagger, not a causal LM)."""

    def __init__(self, kind, vocab, width, bidirectional=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
        self.rnn = cls(width, width, num_layers=2, batch_first=True,
                       bidirectional=bidirectional)
        self.head = nn.Linear(width * (2 if bidirectional else 1), vocab)

    def forward(self, input_ids):
        y, _ = self.rnn(self.embed(input_ids))
        return self.head(y)


class DenseMoELM(nn.Module):
    """Token and position embeddings, blocks of (layer norm, MLP) and
    (layer norm, dense MoE) with residuals, a final norm and the LM head."""

    def __init__(self, vocab, seq, width, layers, experts=4, k=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(1, seq, width) * 0.02)
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(2 * layers))
        self.mlps = nn.ModuleList(nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                                nn.Linear(2 * width, width))
                                  for _ in range(layers))
        self.moes = nn.ModuleList(DenseMoE(width, 2 * width, experts, k) for _ in range(layers))
        self.final = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos
        for i, (mlp, moe) in enumerate(zip(self.mlps, self.moes)):
            x = x + mlp(self.norms[2 * i](x))
            x = x + moe(self.norms[2 * i + 1](x))
        return self.head(self.final(x))


class CausalLM(nn.Module):
    """A decoder-only Hugging Face model: input_ids -> logits, no cache.
    The attention mask is all ones, as a tokenizer gives for unpadded rows:
    without one, transformers 5 looks for packed sequences in the position
    ids (torch.diff, then a gather: aten::diff, which TorchScript cannot
    export, and GatherND under dynamo)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                          use_cache=False, return_dict=True).logits


class MaskedLM(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, return_dict=True).logits


class Seq2SeqLM(nn.Module):
    """T5: the decoder reads the input shifted right (decoder_start_token_id
    first), as in teacher-forced training."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids,
                          decoder_input_ids=self.model._shift_right(input_ids),
                          use_cache=False, return_dict=True).logits


class BartLM(nn.Module):
    """BART: the decoder reads the input shifted right by transformers'
    shift_tokens_right (slice assignments: dynamo writes them as ScatterND),
    as in teacher-forced training."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        from transformers.models.bart.modeling_bart import shift_tokens_right
        cfg = self.model.config
        shifted = shift_tokens_right(input_ids, cfg.pad_token_id, cfg.decoder_start_token_id)
        return self.model(input_ids=input_ids, decoder_input_ids=shifted, use_cache=False,
                          return_dict=True).logits


class SequenceClassifier(nn.Module):
    """A transformers *ForSequenceClassification model called with token ids
    only, returning its logits [B, classes]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, return_dict=True).logits


class ImageClassifier(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values, return_dict=True).logits


class Clip3DNet(nn.Module):
    """A small 3-d CNN (video-style) over an image [B, C, 16, 16] read as a
    clip of 4 frames of 4x16: Conv3d (strided), MaxPool3d (padded in
    depth), ConvTranspose3d (strided, padded, output padding), a grouped
    Conv3d dilated in width, AvgPool3d (padded, ceil mode, padding not
    counted) and an MLP head (which --tp shards)."""

    def __init__(self, channels, classes, side=16):
        super().__init__()
        self.side = side
        self.conv1 = nn.Conv3d(channels, 8, kernel_size=3, padding=1, stride=(1, 1, 2))
        self.pool1 = nn.MaxPool3d(kernel_size=2, stride=(1, 2, 2), padding=(1, 0, 0))
        self.up = nn.ConvTranspose3d(8, 8, kernel_size=(2, 3, 3), stride=(2, 1, 2),
                                     padding=(0, 1, 1), output_padding=(1, 0, 1))
        self.conv2 = nn.Conv3d(8, 8, kernel_size=(2, 3, 3), padding=(0, 1, 1), dilation=(1, 1, 2),
                               groups=2)
        self.pool2 = nn.AvgPool3d(kernel_size=2, stride=(1, 1, 2), padding=1, ceil_mode=True,
                                  count_include_pad=False)
        with torch.no_grad():
            n = self.features(torch.zeros(1, channels, 4, 4, side)).numel()
        self.head = nn.Sequential(nn.Linear(n, 32), nn.ReLU(), nn.Linear(32, classes))

    def features(self, x):
        x = self.pool1(torch.relu(self.conv1(x)))
        return self.pool2(torch.relu(self.conv2(self.up(x))))

    def forward(self, x):
        x = x.reshape(x.shape[0], x.shape[1], 4, 4, self.side)
        return self.head(self.features(x).flatten(1))


class GridSampleNet(nn.Module):
    """An image classifier that first resamples its input through a learned
    grid (F.grid_sample, bilinear, zeros padding): the identity grid plus
    offsets a small convolution predicts, so that the gradient reaches both
    the image and the grid; then a strided convolution and an MLP head."""

    def __init__(self, channels, classes, side=16):
        super().__init__()
        self.offset = nn.Conv2d(channels, 2, 3, padding=1)
        axis = torch.linspace(-1, 1, side)
        ys, xs = torch.meshgrid(axis, axis, indexing="ij")
        self.register_buffer("base", torch.stack([xs, ys], dim=-1).unsqueeze(0))
        self.conv = nn.Conv2d(channels, 8, 3, stride=2, padding=1)
        self.head = nn.Sequential(nn.Linear(8 * (side // 2) ** 2, 32), nn.ReLU(),
                                  nn.Linear(32, classes))

    def forward(self, x):
        grid = self.base + 0.2 * torch.tanh(self.offset(x)).permute(0, 2, 3, 1)
        y = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        return self.head(torch.relu(self.conv(y)).flatten(1))
