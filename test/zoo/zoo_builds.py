"""The zoo's models (test/zoo/zoo.py): builders from Hugging Face configs,
scaled down (2 layers, width 64, 4 heads, vocabulary 128, sequence 16,
batch 2, every dropout 0, torch.manual_seed(0); random weights, nothing
downloaded), each wrapped so that forward(input) returns the logits, plus
torchvision's ResNet-50 and the zoo's own modules (zoo_models.py)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo_models import (BartLM, CausalEncoderLM, CausalLM, Clip3DNet,  # noqa: E402
                        DenseMoELM, GridSampleNet, ImageClassifier, LegacyMixtralMoE,
                        MaskedLM, RecurrentLM, Seq2SeqLM, SequenceClassifier)

B, T, VOCAB, WIDTH, HEADS, LAYERS = 2, 16, 128, 64, 4, 2
IMAGE, PATCH, CHANNELS, CLASSES, SAMPLES = 16, 4, 3, 10, 64
# The image side per image model: ResNet-50 downsamples by 32, so 64 leaves
# its last stage 2x2 (BatchNorm's training statistics over more than one
# value per channel and row).
IMAGE_SIZES = {"vit": IMAGE, "resnet50": 64, "cnn3d": IMAGE, "grid-sample": IMAGE,
               "convnext": IMAGE, "swin": IMAGE}

def no_dropout(**kw):
    """Every dropout probability a config may have, set to 0."""
    for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop", "attention_dropout", "hidden_dropout",
              "hidden_dropout_prob", "attention_probs_dropout_prob", "dropout_rate",
              "classifier_dropout", "summary_first_dropout", "residual_dropout"):
        kw.setdefault(k, 0.0)
    return kw


def decoder_kwargs(**kw):
    base = dict(vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=2 * WIDTH,
                num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=2,
                max_position_embeddings=T, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                tie_word_embeddings=False)
    base.update(kw)
    return no_dropout(**base)


def build(name):
    """(module, example input) of one zoo model, seeded."""
    import transformers as tf
    torch.manual_seed(0)
    ids = torch.zeros(B, T, dtype=torch.int64)
    if name == "gpt2":
        cfg = tf.GPT2Config(**no_dropout(vocab_size=VOCAB, n_positions=T, n_embd=WIDTH,
                                         n_layer=LAYERS, n_head=HEADS, bos_token_id=1,
                                         eos_token_id=2))
        return CausalLM(tf.GPT2LMHeadModel(cfg)), ids
    if name == "llama":
        # Grouped-query attention (2 key/value heads for 4) and linear RoPE scaling.
        cfg = tf.LlamaConfig(**decoder_kwargs(
            rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}))
        return CausalLM(tf.LlamaForCausalLM(cfg)), ids
    if name == "qwen2":
        cfg = tf.Qwen2Config(**decoder_kwargs())
        return CausalLM(tf.Qwen2ForCausalLM(cfg)), ids
    if name == "mistral":
        cfg = tf.MistralConfig(**decoder_kwargs(sliding_window=8))
        return CausalLM(tf.MistralForCausalLM(cfg)), ids
    if name == "gemma2":
        cfg = tf.Gemma2Config(**decoder_kwargs(head_dim=WIDTH // HEADS, sliding_window=8,
                                               query_pre_attn_scalar=WIDTH // HEADS))
        return CausalLM(tf.Gemma2ForCausalLM(cfg)), ids
    if name in ("mixtral", "mixtral-sparse"):
        # 4 experts, top-2, no router jitter. transformers 5 picks how the
        # experts run: "batched_mm" gathers each (token, choice) pair's
        # expert weights and multiplies them batched (static shapes), "eager"
        # loops over the experts hit, each with the tokens routed to it
        # (nonzero / index_add_: shapes that depend on the routing).
        cfg = tf.MixtralConfig(**decoder_kwargs(num_local_experts=4, num_experts_per_tok=2,
                                                router_jitter_noise=0.0))
        cfg._experts_implementation = "batched_mm" if name == "mixtral" else "eager"
        return CausalLM(tf.MixtralForCausalLM(cfg)), ids
    if name in ("lstm", "gru-bi", "rnn"):
        kind = name.split("-")[0]
        return RecurrentLM(kind, VOCAB, WIDTH, bidirectional=name.endswith("-bi")), ids
    if name == "mixtral-modules":
        # transformers 4.x's MoE block (a module per expert, a loop over
        # range(E)) with the weights of the mixtral model above.
        module, ids = build("mixtral")
        for layer in module.model.model.layers:
            layer.mlp = LegacyMixtralMoE(layer.mlp)
        return module, ids
    if name in ("qwen2-moe", "qwen2-moe-sparse"):
        # 4 routed experts (top-2, renormalised) and a sigmoid-gated shared expert.
        cfg = tf.Qwen2MoeConfig(**decoder_kwargs(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=WIDTH,
            shared_expert_intermediate_size=2 * WIDTH, norm_topk_prob=True))
        cfg._experts_implementation = "eager" if name.endswith("-sparse") else "batched_mm"
        return CausalLM(tf.Qwen2MoeForCausalLM(cfg)), ids
    if name == "olmoe":
        # 4 experts, top-2 without renormalisation; q/k norms.
        cfg = tf.OlmoeConfig(**decoder_kwargs(num_experts=4, num_experts_per_tok=2))
        cfg._experts_implementation = "batched_mm"
        return CausalLM(tf.OlmoeForCausalLM(cfg)), ids
    if name == "qwen3-moe":
        # 8 experts top-2 renormalised, q/k norms, no shared expert.
        cfg = tf.Qwen3MoeConfig(**decoder_kwargs(
            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=WIDTH // 2,
            head_dim=WIDTH // HEADS, norm_topk_prob=True))
        cfg._experts_implementation = "batched_mm"
        return CausalLM(tf.Qwen3MoeForCausalLM(cfg)), ids
    if name == "deepseek-v3":
        # Multi-head latent attention (low-rank q and kv, a rotary part and
        # a plain part per head, value heads narrower than query/key heads),
        # a dense first layer, then 8 routed experts (sigmoid scores,
        # group-limited top-2 with the bias correction) and a shared one.
        cfg = tf.DeepseekV3Config(**decoder_kwargs(
            num_key_value_heads=HEADS, q_lora_rank=32, kv_lora_rank=32, qk_rope_head_dim=8,
            qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=8, n_group=4, topk_group=2,
            num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
            moe_intermediate_size=WIDTH // 2, routed_scaling_factor=2.5))
        cfg._experts_implementation = "batched_mm"
        return CausalLM(tf.DeepseekV3ForCausalLM(cfg)), ids
    if name in ("gpt-oss", "gpt-oss-sparse"):
        # 4 experts with biases (top-2), clamped SwiGLU, attention sinks,
        # alternating sliding-window and full attention layers.
        cfg = tf.GptOssConfig(**decoder_kwargs(
            num_local_experts=4, num_experts_per_tok=2, head_dim=WIDTH // HEADS,
            sliding_window=8, layer_types=["sliding_attention", "full_attention"][:LAYERS]))
        cfg._experts_implementation = "eager" if name.endswith("-sparse") else "batched_mm"
        return CausalLM(tf.GptOssForCausalLM(cfg)), ids
    if name == "phi3":
        cfg = tf.Phi3Config(**decoder_kwargs(original_max_position_embeddings=T))
        return CausalLM(tf.Phi3ForCausalLM(cfg)), ids
    if name == "gpt-neox":
        cfg = tf.GPTNeoXConfig(**no_dropout(
            vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=2 * WIDTH,
            num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=T,
            rotary_pct=0.25, tie_word_embeddings=False))
        return CausalLM(tf.GPTNeoXForCausalLM(cfg)), ids
    if name == "bert":
        cfg = tf.BertConfig(**no_dropout(
            vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=2 * WIDTH,
            num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=T))
        return MaskedLM(tf.BertForMaskedLM(cfg)), ids
    if name == "bert-cls":
        # Sequence classification: token ids -> CLASSES labels (the pooled
        # first token); under tp its word embedding splits alone.
        cfg = tf.BertConfig(**no_dropout(
            vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=2 * WIDTH,
            num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=T,
            num_labels=CLASSES))
        return SequenceClassifier(tf.BertForSequenceClassification(cfg)), ids
    if name == "fnet":
        # Token mixing by the real part of a 2-d DFT (torch.fft.fftn).
        cfg = tf.FNetConfig(**no_dropout(
            vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=2 * WIDTH,
            num_hidden_layers=LAYERS, max_position_embeddings=T))
        return MaskedLM(tf.FNetForMaskedLM(cfg)), ids
    if name == "t5":
        cfg = tf.T5Config(**no_dropout(
            vocab_size=VOCAB, d_model=WIDTH, d_kv=WIDTH // HEADS, d_ff=2 * WIDTH,
            num_layers=LAYERS, num_decoder_layers=LAYERS, num_heads=HEADS,
            decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))
        return Seq2SeqLM(tf.T5ForConditionalGeneration(cfg)), ids
    if name == "vit":
        cfg = tf.ViTConfig(**no_dropout(
            image_size=IMAGE, patch_size=PATCH, num_channels=CHANNELS, hidden_size=WIDTH,
            num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=2 * WIDTH,
            num_labels=CLASSES))
        return ImageClassifier(tf.ViTForImageClassification(cfg)), \
            torch.zeros(B, CHANNELS, IMAGE, IMAGE)
    if name == "resnet50":
        import torchvision
        size = IMAGE_SIZES[name]
        # zero_init_residual: every block starts as the identity (its last
        # BatchNorm's scale 0), as in large-batch ResNet training; without
        # it the gradient norm at batch 2 is ~3e3 and float32 leaves float64
        # by 1e-3 after one step, in PyTorch too.
        return torchvision.models.resnet50(weights=None, num_classes=CLASSES,
                                           zero_init_residual=True), \
            torch.zeros(B, CHANNELS, size, size)
    if name == "grid-sample":
        return GridSampleNet(CHANNELS, CLASSES, IMAGE), torch.zeros(B, CHANNELS, IMAGE, IMAGE)
    if name == "cnn3d":
        return Clip3DNet(CHANNELS, CLASSES, IMAGE), torch.zeros(B, CHANNELS, IMAGE, IMAGE)
    if name == "dense-moe":
        return DenseMoELM(vocab=VOCAB, seq=T, width=WIDTH, layers=LAYERS), ids
    if name == "nn-transformer":
        return CausalEncoderLM(vocab=VOCAB, seq=T, width=WIDTH, heads=HEADS, layers=LAYERS), ids
    module = more_decoders(name, tf) or expert_hybrids_and_newest(name, tf) or \
        recurrent_and_hybrid_2025(name, tf) or more_encoders(name, tf)
    if module is None:
        raise KeyError(name)
    return module, (torch.zeros(B, CHANNELS, IMAGE, IMAGE) if name in IMAGE_SIZES else ids)


def more_decoders(name, tf):
    """The decoder-only families beyond the issue's list (None: not one)."""
    gpt = dict(vocab_size=VOCAB, n_positions=T, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS)
    if name == "opt":
        # Learned positions offset by 2 (from the attention mask's cumsum), ReLU.
        return CausalLM(tf.OPTForCausalLM(tf.OPTConfig(**no_dropout(
            vocab_size=VOCAB, hidden_size=WIDTH, ffn_dim=2 * WIDTH, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, max_position_embeddings=T, word_embed_proj_dim=WIDTH,
            layerdrop=0.0, dropout=0.0))))
    if name == "bloom":
        # ALiBi (a bias per key and head), products over [B * H, T, D].
        return CausalLM(tf.BloomForCausalLM(tf.BloomConfig(**no_dropout(
            vocab_size=VOCAB, hidden_size=WIDTH, n_layer=LAYERS, n_head=HEADS))))
    if name == "falcon":
        # Multi-query attention (one key/value head), attention and MLP in parallel.
        return CausalLM(tf.FalconForCausalLM(tf.FalconConfig(**no_dropout(
            vocab_size=VOCAB, hidden_size=WIDTH, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, multi_query=True, parallel_attn=True,
            new_decoder_architecture=False, max_position_embeddings=T))))
    if name == "gpt-j":
        # Interleaved rotary on the first 8 of 16 head dims, parallel block.
        return CausalLM(tf.GPTJForCausalLM(tf.GPTJConfig(**no_dropout(**gpt, rotary_dim=8))))
    if name == "codegen":
        return CausalLM(tf.CodeGenForCausalLM(tf.CodeGenConfig(**no_dropout(
            **gpt, n_ctx=T, rotary_dim=8))))
    if name == "gpt-bigcode":
        return CausalLM(tf.GPTBigCodeForCausalLM(tf.GPTBigCodeConfig(**no_dropout(
            **gpt, multi_query=True))))
    if name == "gpt-neo":
        # Unscaled scores; a local layer (window 8) and a global one.
        return CausalLM(tf.GPTNeoForCausalLM(tf.GPTNeoConfig(**no_dropout(
            vocab_size=VOCAB, max_position_embeddings=T, hidden_size=WIDTH, num_layers=LAYERS,
            num_heads=HEADS, attention_types=[[["global", "local"], 1]], window_size=8))))
    if name == "phi":
        # Phi-2's head dim (80: 2 heads of a width of 160) and rotary fraction.
        return CausalLM(tf.PhiForCausalLM(tf.PhiConfig(**no_dropout(
            vocab_size=VOCAB, hidden_size=160, intermediate_size=320, num_hidden_layers=LAYERS,
            num_attention_heads=2, max_position_embeddings=T, partial_rotary_factor=0.4))))
    if name == "mamba":
        return CausalLM(tf.MambaForCausalLM(tf.MambaConfig(
            vocab_size=VOCAB, hidden_size=WIDTH, state_size=8, num_hidden_layers=LAYERS,
            expand=2, conv_kernel=4, use_cache=False)))
    if name == "falcon-mamba":
        # Mamba with RMS norms on dt, B and C before the scan.
        return CausalLM(tf.FalconMambaForCausalLM(tf.FalconMambaConfig(
            vocab_size=VOCAB, hidden_size=WIDTH, state_size=8, num_hidden_layers=LAYERS,
            expand=2, conv_kernel=4, use_cache=False)))
    if name == "mamba2":
        return CausalLM(tf.Mamba2ForCausalLM(tf.Mamba2Config(
            vocab_size=VOCAB, hidden_size=WIDTH, state_size=8, num_hidden_layers=LAYERS,
            expand=2, conv_kernel=4, num_heads=8, head_dim=16, n_groups=2, chunk_size=8,
            use_cache=False)))
    if name == "jamba":
        # Attention every second layer (the others Mamba), MoE every second
        # layer (4 experts, top-2), transformers' PyTorch Mamba path.
        cfg = tf.JambaConfig(**decoder_kwargs(
            num_experts=4, num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1,
            attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_expand=2,
            mamba_dt_rank=8, use_mamba_kernels=False))
        cfg._experts_implementation = "batched_mm"
        return CausalLM(tf.JambaForCausalLM(cfg))
    if name == "falcon-h1":
        # Attention and Mamba-2 side by side in every layer (the chunked SSD form).
        return CausalLM(tf.FalconH1ForCausalLM(tf.FalconH1Config(**decoder_kwargs(
            head_dim=WIDTH // HEADS, mamba_d_ssm=128, mamba_n_heads=8, mamba_d_head=16,
            mamba_d_state=8, mamba_chunk_size=8))))
    if name == "olmo-hybrid":
        # Gated DeltaNet layers (the chunked form) and attention.
        return CausalLM(tf.OlmoHybridForCausalLM(tf.OlmoHybridConfig(**decoder_kwargs(
            linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=16,
            linear_value_head_dim=32))))
    if name == "minimax":
        # Lightning (linear) attention with per-head decay buffers in the
        # first layer, softmax attention in the second; 4 experts, top-2.
        cfg = tf.MiniMaxConfig(**decoder_kwargs(
            num_local_experts=4, num_experts_per_tok=2, head_dim=WIDTH // HEADS, block_size=8,
            layer_types=["linear_attention", "full_attention"]))
        cfg._experts_implementation = "batched_mm"
        return CausalLM(tf.MiniMaxForCausalLM(cfg))
    SWA = ["sliding_attention", "full_attention"]  # one layer of each kind
    configs = {  # the Llama-like ones: decoder_kwargs plus these
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, dict(head_dim=WIDTH // HEADS)),
        "stablelm": (tf.StableLmConfig, tf.StableLmForCausalLM,
                     dict(partial_rotary_factor=0.25)),
        "starcoder2": (tf.Starcoder2Config, tf.Starcoder2ForCausalLM, dict(sliding_window=8)),
        # its own head dim, not width / heads (Gemma's: 256)
        "gemma": (tf.GemmaConfig, tf.GemmaForCausalLM, dict(head_dim=48)),
        "gemma3": (tf.Gemma3TextConfig, tf.Gemma3ForCausalLM,
                   dict(head_dim=WIDTH // HEADS, sliding_window=8,
                        query_pre_attn_scalar=WIDTH // HEADS)),
        "cohere": (tf.CohereConfig, tf.CohereForCausalLM, {}),
        "olmo2": (tf.Olmo2Config, tf.Olmo2ForCausalLM, {}),
        # xIELU activations: two trained scalars each (one-element parameters)
        "apertus": (tf.ApertusConfig, tf.ApertusForCausalLM, {}),
        "granite": (tf.GraniteConfig, tf.GraniteForCausalLM,
                    dict(embedding_multiplier=4.0, residual_multiplier=0.5, logits_scaling=2.0,
                         attention_multiplier=0.2)),
        # the second layer without rotary (NoPE; every 4th in the released model)
        "smollm3": (tf.SmolLM3Config, tf.SmolLM3ForCausalLM, dict(no_rope_layers=[1, 0])),
        "glm4": (tf.Glm4Config, tf.Glm4ForCausalLM, dict(head_dim=WIDTH // HEADS)),
        "olmo3": (tf.Olmo3Config, tf.Olmo3ForCausalLM, dict(sliding_window=8, layer_types=SWA)),
        "ernie4.5": (tf.Ernie4_5Config, tf.Ernie4_5ForCausalLM, dict(head_dim=WIDTH // HEADS)),
        "exaone4": (tf.Exaone4Config, tf.Exaone4ForCausalLM,
                    dict(sliding_window=8, layer_types=SWA)),
        "seed-oss": (tf.SeedOssConfig, tf.SeedOssForCausalLM, dict(head_dim=WIDTH // HEADS)),
        "helium": (tf.HeliumConfig, tf.HeliumForCausalLM, dict(head_dim=WIDTH // HEADS)),
        "arcee": (tf.ArceeConfig, tf.ArceeForCausalLM, {}),
        "cohere2": (tf.Cohere2Config, tf.Cohere2ForCausalLM,
                    dict(sliding_window=8, layer_types=SWA)),
        "nemotron": (tf.NemotronConfig, tf.NemotronForCausalLM, {}),
        "vaultgemma": (tf.VaultGemmaConfig, tf.VaultGemmaForCausalLM,
                       dict(head_dim=WIDTH // HEADS, sliding_window=8, layer_types=SWA)),
        "nanochat": (tf.NanoChatConfig, tf.NanoChatForCausalLM, {}),
        "lfm2": (tf.Lfm2Config, tf.Lfm2ForCausalLM,
                 dict(layer_types=["conv", "full_attention"])),
        "rwkv": (tf.RwkvConfig, tf.RwkvForCausalLM, {}),
        "ministral": (tf.MinistralConfig, tf.MinistralForCausalLM,
                      dict(head_dim=WIDTH // HEADS, sliding_window=8)),
    }
    if name not in configs:
        return None
    config, model, kw = configs[name]
    return CausalLM(model(config(**decoder_kwargs(**kw))))


def causal_lm(builds, name):
    """CausalLM of builds[name] = (config class, model class, config kwargs
    over decoder_kwargs), with `batched_mm` experts where it has any; None
    when name is not there."""
    if name not in builds:
        return None
    config, model, kw = builds[name]
    cfg = config(**decoder_kwargs(**kw))
    cfg._experts_implementation = "batched_mm"
    return CausalLM(model(cfg))


def expert_hybrids_and_newest(name, tf):
    """The 2025-26 hybrids with routed experts and the flagship families of
    2026 (None: not one), with `batched_mm` experts where they have any."""
    linear = dict(layer_types=["linear_attention", "full_attention"], linear_num_key_heads=2,
                  linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16)
    moe = dict(num_experts_per_tok=2, moe_intermediate_size=WIDTH)
    builds = {
        # Mamba-2, MoE (4 experts top-2 and a shared one), attention and MLP layers
        "nemotron-h": (tf.NemotronHConfig, tf.NemotronHForCausalLM,
                       dict(moe, head_dim=WIDTH // HEADS, num_hidden_layers=4,
                            layers_block_type=["linear_attention", "moe", "full_attention",
                                               "mlp"],
                            mamba_num_heads=8, mamba_head_dim=16, ssm_state_size=8, n_groups=2,
                            chunk_size=8, n_routed_experts=4,
                            moe_shared_expert_intermediate_size=WIDTH)),
        # the gated delta rule (the chunked form) then gated attention, each
        # followed by 4 experts top-2 and a gated shared expert
        "qwen3-next": (tf.Qwen3NextConfig, tf.Qwen3NextForCausalLM,
                       dict(linear, **moe, head_dim=WIDTH // HEADS, num_experts=4,
                            shared_expert_intermediate_size=WIDTH)),
        # Gated DeltaNet then gated attention (Qwen3-Next's layout), dense or MoE
        "qwen3.5": (tf.Qwen3_5TextConfig, tf.Qwen3_5ForCausalLM,
                    dict(linear, head_dim=WIDTH // HEADS)),
        "qwen3.5-moe": (tf.Qwen3_5MoeTextConfig, tf.Qwen3_5MoeForCausalLM,
                        dict(linear, **moe, head_dim=WIDTH // HEADS, num_experts=4,
                             shared_expert_intermediate_size=WIDTH)),
        # per-layer token embeddings added into every layer; sliding/full layers,
        # the full ones with heads twice as wide (global_head_dim, as Gemma 4's
        # 512 against 256; left at 512, with q and k RMS-normalised and unscaled
        # scores, its softmax over logits of std sqrt(512) made training chaotic:
        # PyTorch's own float32 run left float64 by 1e-3 within 5 steps)
        "gemma4": (tf.Gemma4TextConfig, tf.Gemma4ForCausalLM,
                   dict(head_dim=WIDTH // HEADS // 2, global_head_dim=WIDTH // HEADS,
                        sliding_window=8,
                        layer_types=["sliding_attention", "full_attention"],
                        vocab_size_per_layer_input=VOCAB, hidden_size_per_layer_input=16)),
        # chunked attention (chunks of 8) without rotary every 4th layer; MoE top-1
        "llama4": (tf.Llama4TextConfig, tf.Llama4ForCausalLM,
                   dict(head_dim=WIDTH // HEADS, num_local_experts=4, num_experts_per_tok=1,
                        intermediate_size_mlp=2 * WIDTH, attention_chunk_size=8)),
        "lfm3": (tf.Lfm3Config, tf.Lfm3ForCausalLM,
                 dict(layer_types=["conv", "sliding_attention"], sliding_window=8)),
        # latent attention (low-rank q and kv) and 4 routed experts + a shared one
        "mistral4": (tf.Mistral4Config, tf.Mistral4ForCausalLM,
                     dict(moe, n_routed_experts=4, kv_lora_rank=16, q_lora_rank=32,
                          qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=8, qk_head_dim=16,
                          head_dim=16, num_key_value_heads=HEADS)),
        # compressed sparse attention (an indexer's top-k of compressed blocks)
        # and heavily compressed attention; hyper-connections; 4 experts
        "deepseek-v4": (tf.DeepseekV4Config, tf.DeepseekV4ForCausalLM,
                        dict(moe, n_routed_experts=4, head_dim=16, q_lora_rank=32,
                             o_lora_rank=32, o_groups=2, index_n_heads=2, index_head_dim=16,
                             index_topk=2, sliding_window=8, qk_rope_head_dim=8,
                             num_nextn_predict_layers=0, num_key_value_heads=1,
                             layer_types=["compressed_sparse_attention",
                                          "heavily_compressed_attention"],
                             compress_rates={"compressed_sparse_attention": 4,
                                             "heavily_compressed_attention": 8}))}
    return causal_lm(builds, name)


def recurrent_and_hybrid_2025(name, tf):
    """Recurrences and hybrids beyond the above (None: not one), with
    `batched_mm` experts where they have any."""
    mamba2 = dict(mamba_d_state=16, mamba_n_groups=1, mamba_chunk_size=8)
    builds = {
        # GLM-4.5's MoE: a dense first layer, then 4 routed experts top-2
        # (sigmoid routing with a score correction bias) and a shared one
        "glm4-moe": (tf.Glm4MoeConfig, tf.Glm4MoeForCausalLM,
                     dict(head_dim=WIDTH // HEADS, n_routed_experts=4, num_experts_per_tok=2,
                          moe_intermediate_size=WIDTH // 2, first_k_dense_replace=1,
                          n_group=1, topk_group=1)),
        # Granite 4.0: Mamba-2 (one group, as IBM's) and attention layers,
        # each followed by 4 experts top-2 and a shared MLP
        "granite4": (tf.GraniteMoeHybridConfig, tf.GraniteMoeHybridForCausalLM,
                     dict(mamba2, mamba_d_head=16, mamba_n_heads=8,
                          layer_types=["mamba", "attention"], num_local_experts=4,
                          num_experts_per_tok=2, shared_intermediate_size=WIDTH)),
        # Zamba2: Mamba-2 layers, and a shared attention block (LoRA adapters
        # per use) in the hybrid layer
        "zamba2": (tf.Zamba2Config, tf.Zamba2ForCausalLM,
                   dict(mamba_d_state=16, mamba_headdim=16, n_mamba_heads=8, mamba_ngroups=1,
                        layers_block_type=["mamba", "hybrid"], num_mem_blocks=1,
                        use_mem_rope=True, adapter_rank=8, attention_head_dim=32)),
        # RecurrentGemma (Griffin): two RG-LRU recurrent blocks and a local
        # attention block (window 8, one key head)
        "recurrent-gemma": (tf.RecurrentGemmaConfig, tf.RecurrentGemmaForCausalLM,
                            dict(num_hidden_layers=3, num_key_value_heads=1, lru_width=WIDTH,
                                 attention_window_size=8, conv1d_width=4, head_dim=16,
                                 block_types=["recurrent", "recurrent", "attention"])),
        # xLSTM: mLSTM blocks (matrix memory, exponential gating; the chunked
        # form of its PyTorch path)
        "xlstm": (tf.xLSTMConfig, tf.xLSTMForCausalLM,
                  dict(embedding_dim=WIDTH, num_blocks=LAYERS, num_heads=HEADS, chunk_size=8,
                       mode="train")),
        # JetMoE: 4 experts top-2 in the MLP and in the attention (mixture
        # of attention heads), each run on the rows sorted by expert and
        # split by the experts' counts (`expert_size.tolist()`)
        "jetmoe": (tf.JetMoeConfig, tf.JetMoeForCausalLM,
                   dict(num_key_value_heads=2, kv_channels=WIDTH // HEADS, num_local_experts=4,
                        num_experts_per_tok=2)),
    }
    return causal_lm(builds, name)


def more_encoders(name, tf):
    """Encoders, BART and two vision families beyond the issue's list."""
    enc = dict(vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=2 * WIDTH,
               num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=T)
    if name == "roberta":  # positions offset past the padding id
        return MaskedLM(tf.RobertaForMaskedLM(tf.RobertaConfig(**no_dropout(
            **dict(enc, max_position_embeddings=T + 2)))))
    if name == "distilbert":
        return MaskedLM(tf.DistilBertForMaskedLM(tf.DistilBertConfig(**no_dropout(
            vocab_size=VOCAB, dim=WIDTH, hidden_dim=2 * WIDTH, n_layers=LAYERS, n_heads=HEADS,
            max_position_embeddings=T, dropout=0.0, attention_dropout=0.0, qa_dropout=0.0,
            seq_classif_dropout=0.0))))
    if name == "albert":  # one layer's weights shared by both layers; factorised embedding
        return MaskedLM(tf.AlbertForMaskedLM(tf.AlbertConfig(**no_dropout(
            **enc, embedding_size=32))))
    if name == "electra":
        return MaskedLM(tf.ElectraForMaskedLM(tf.ElectraConfig(**no_dropout(
            **enc, embedding_size=32))))
    if name == "deberta-v2":  # disentangled (content/position) attention, DeBERTa-v3's settings
        return MaskedLM(tf.DebertaV2ForMaskedLM(tf.DebertaV2Config(**no_dropout(
            **enc, relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8,
            max_relative_positions=-1, norm_rel_ebd="layer_norm", share_att_key=True,
            position_biased_input=False))))
    if name == "xlnet":  # two-stream relative attention over [d, n, h] head weights, no memory
        return MaskedLM(tf.XLNetLMHeadModel(tf.XLNetConfig(
            vocab_size=VOCAB, d_model=WIDTH, n_layer=LAYERS, n_head=HEADS, d_inner=2 * WIDTH,
            dropout=0.0, use_mems_train=False, use_mems_eval=False)))
    if name == "modernbert":  # local (window 8) and global layers, rotary, GeGLU
        return MaskedLM(tf.ModernBertForMaskedLM(tf.ModernBertConfig(**no_dropout(
            **enc, local_attention=8, global_attn_every_n_layers=2, embedding_dropout=0.0,
            mlp_dropout=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
            sep_token_id=2))))
    if name == "bart":
        return BartLM(tf.BartForConditionalGeneration(tf.BartConfig(**no_dropout(
            vocab_size=VOCAB, d_model=WIDTH, encoder_layers=LAYERS, decoder_layers=LAYERS,
            encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
            encoder_ffn_dim=2 * WIDTH, decoder_ffn_dim=2 * WIDTH, max_position_embeddings=T,
            dropout=0.0, activation_dropout=0.0, decoder_start_token_id=2, pad_token_id=1))))
    if name == "convnext":
        return ImageClassifier(tf.ConvNextForImageClassification(tf.ConvNextConfig(
            num_channels=CHANNELS, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2,
            num_labels=CLASSES, image_size=IMAGE, patch_size=2)))
    if name == "swin":  # shifted windows of 4x4 patches, relative position bias
        return ImageClassifier(tf.SwinForImageClassification(tf.SwinConfig(
            image_size=IMAGE, patch_size=2, num_channels=CHANNELS, embed_dim=16, depths=[2, 2],
            num_heads=[2, 4], window_size=4, num_labels=CLASSES, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, drop_path_rate=0.0)))
    return None


MODELS = ["gpt2", "llama", "qwen2", "mistral", "gemma2", "phi3", "gpt-neox", "bert", "bert-cls",
          "fnet", "t5",
          "vit", "resnet50", "cnn3d", "grid-sample",
          "nn-transformer", "lstm", "gru-bi", "rnn", "mixtral", "mixtral-sparse",
          "mixtral-modules", "qwen2-moe", "qwen2-moe-sparse", "olmoe", "gpt-oss",
          "gpt-oss-sparse", "dense-moe",
          # beyond the list
          "opt", "bloom", "falcon", "gpt-j", "codegen", "gpt-bigcode", "gpt-neo", "phi", "qwen3",
          "stablelm", "starcoder2", "gemma", "gemma3", "cohere", "olmo2", "granite", "roberta",
          "distilbert", "albert", "electra", "deberta-v2", "xlnet", "modernbert", "bart", "convnext",
          "swin", "qwen3-moe", "deepseek-v3", "mamba", "falcon-mamba", "mamba2", "jamba", "minimax",
          "apertus",
          # families of 2025-26
          "smollm3", "glm4", "olmo3", "ernie4.5", "exaone4", "seed-oss", "ministral", "helium",
          "arcee", "cohere2", "nemotron", "vaultgemma", "nanochat", "lfm2", "rwkv", "olmo-hybrid",
          "falcon-h1", "nemotron-h", "qwen3-next",
          # the flagship families of 2026
          "qwen3.5", "qwen3.5-moe", "gemma4", "llama4", "lfm3", "mistral4", "deepseek-v4",
          # recurrences and hybrids of 2024-25
          "glm4-moe", "granite4", "zamba2", "recurrent-gemma", "xlstm", "jetmoe"]
TITLES = {"gpt2": "GPT-2 (tied head)", "llama": "Llama (GQA 4/2, linear RoPE scaling)",
          "qwen2": "Qwen2 (GQA 4/2, qkv bias)", "mistral": "Mistral (GQA, sliding window 8)",
          "gemma2": "Gemma 2 (sliding/global layers, soft-capping)",
          "phi3": "Phi-3 (fused qkv, GQA)",
          "mixtral": "Mixtral MoE (4 experts, top-2; batched_mm experts)",
          "mixtral-sparse": "Mixtral MoE (4 experts, top-2; eager experts: nonzero, index_add_)",
          "qwen2-moe": "Qwen2-MoE (4 experts top-2 + gated shared expert)",
          "olmoe": "OLMoE (4 experts top-2, q/k norm)",
          "lstm": "LSTM language model (2 layers; the ONNX LSTM op)",
          "gru-bi": "bidirectional GRU tagger (2 layers; the ONNX GRU op)",
          "rnn": "Elman RNN language model (2 layers, tanh; the ONNX RNN op)",
          "mixtral-modules": "Mixtral MoE (transformers 4.x block: a module per expert)",
          "qwen2-moe-sparse": "Qwen2-MoE (as above; eager experts)",
          "gpt-oss": "GPT-OSS (4 experts with biases, sinks, sliding/full layers)",
          "gpt-oss-sparse": "GPT-OSS (as above; eager experts)",
          "dense-moe": "dense MoE (every token through every expert, top-2 gate; MLP blocks)", "gpt-neox": "GPT-NeoX (partial rotary 0.25)",
          "bert": "BERT (masked LM head)",
          "bert-cls": "BERT for sequence classification (10 labels; word embedding split alone under tp)",
          "fnet": "FNet (Fourier token mixing; masked LM)",
          "t5": "T5 (encoder-decoder)",
          "vit": "ViT (image classification)",
          "resnet50": "torchvision ResNet-50 (train-mode BatchNorm)",
          "grid-sample": "CNN resampling its input through a learned grid (GridSample)",
          "cnn3d": "3-d CNN (Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d; an image as 4 frames)",
          "nn-transformer": "nn.TransformerEncoder (causal LM)",
          "opt": "OPT (learned positions offset 2, ReLU)",
          "bloom": "BLOOM (ALiBi)", "falcon": "Falcon (multi-query, parallel attention/MLP)",
          "gpt-j": "GPT-J (interleaved partial rotary, parallel block)",
          "codegen": "CodeGen (interleaved partial rotary)",
          "gpt-bigcode": "GPT-BigCode / StarCoder (multi-query)",
          "gpt-neo": "GPT-Neo (unscaled scores, local/global layers)",
          "phi": "Phi-2 (head dim 80, partial rotary 0.4, parallel block)",
          "qwen3": "Qwen3 (q/k norm, GQA)", "stablelm": "StableLM (partial rotary 0.25)",
          "starcoder2": "Starcoder2 (sliding window 8)", "gemma": "Gemma (head dim 48)",
          "gemma3": "Gemma 3 (q/k norm, sliding/global layers)",
          "cohere": "Cohere Command-R (interleaved rotary, parallel block)",
          "olmo2": "OLMo 2 (q/k norm, post-norm)", "granite": "Granite (scaled residuals, logits)",
          "roberta": "RoBERTa (masked LM)", "distilbert": "DistilBERT (masked LM)",
          "albert": "ALBERT (shared layers, factorised embedding)",
          "electra": "ELECTRA generator (factorised embedding)",
          "deberta-v2": "DeBERTa-v2 (disentangled attention)",
          "xlnet": "XLNet (relative attention, per-head [d, n, h] weights)",
          "modernbert": "ModernBERT (local/global layers, rotary)",
          "bart": "BART (encoder-decoder, learned positions)",
          "convnext": "ConvNeXt (depthwise 7x7 convolutions, LayerNorm)",
          "swin": "Swin (shifted windows, relative position bias)",
          "qwen3-moe": "Qwen3-MoE (8 experts top-2, q/k norm)",
          "mamba": "Mamba (selective state space)",
          "falcon-mamba": "Falcon-Mamba (Mamba, RMS-normed dt, B and C)", "mamba2": "Mamba-2 (state space duality, chunked)",
          "jamba": "Jamba (Mamba and attention layers, MoE every second layer)",
          "minimax": "MiniMax (lightning attention with decay buffers, MoE)",
          "apertus": "Apertus (xIELU activation: trained scalars, q/k norm)",
          "deepseek-v3": "DeepSeek-V3 (latent attention, sigmoid group-limited routing, "
                         "shared expert)",
          "smollm3": "SmolLM3 (GQA, a layer without rotary)",
          "glm4": "GLM-4 (post-attention and post-MLP norms, partial rotary, fused gate/up)",
          "olmo3": "OLMo 3 (q/k norm, post-norms, sliding/full layers)",
          "ernie4.5": "ERNIE 4.5 (GQA, dense)",
          "exaone4": "EXAONE 4 (q/k norm, post-norms, sliding/full layers)",
          "seed-oss": "Seed-OSS (GQA, qkv bias)", "ministral": "Ministral (GQA, sliding window 8)",
          "helium": "Helium (GQA)", "arcee": "Arcee AFM (squared-ReLU MLP, no gate)",
          "cohere2": "Command R7B (sliding layers with rotary, a full layer without)",
          "nemotron": "Nemotron (squared ReLU, LayerNorm1P, partial rotary)",
          "vaultgemma": "VaultGemma (sliding/full layers, tanh GELU)",
          "nanochat": "nanochat (squared ReLU, q/k norm, logit soft-capping)",
          "lfm2": "LFM2 (gated short convolutions and attention layers)",
          "rwkv": "RWKV-4 (time mixing: the WKV recurrence)",
          "olmo-hybrid": "OLMo Hybrid (Gated DeltaNet, chunked; attention)",
          "falcon-h1": "Falcon-H1 (attention and Mamba-2 side by side in each layer)",
          "nemotron-h": "Nemotron-H (Mamba-2, MoE 4 top-2 + shared, attention, MLP layers)",
          "qwen3-next": "Qwen3-Next (Gated DeltaNet, gated attention; 4 experts top-2 + shared)",
          "qwen3.5": "Qwen3.5 (Gated DeltaNet, gated attention, interleaved M-RoPE)",
          "qwen3.5-moe": "Qwen3.5-MoE (as Qwen3.5; 4 experts top-2 + shared)",
          "gemma4": "Gemma 4 (per-layer token embeddings, sliding/full layers)",
          "llama4": "Llama 4 (chunked attention, NoPE layers, MoE top-1)",
          "lfm3": "LFM3 (gated short convolutions, sliding attention)",
          "mistral4": "Mistral 4 (latent attention, 4 experts top-2 + shared)",
          "deepseek-v4": "DeepSeek-V4 (compressed sparse attention with a top-k indexer, "
                         "hyper-connections, 4 experts)",
          "glm4-moe": "GLM-4.5 MoE (dense first layer, sigmoid routing, shared expert)",
          "granite4": "Granite 4.0 (Mamba-2 with one group, attention; MoE + shared MLP)",
          "zamba2": "Zamba2 (Mamba-2, a shared attention block with LoRA adapters)",
          "recurrent-gemma": "RecurrentGemma (Griffin: RG-LRU recurrences, local attention)",
          "xlstm": "xLSTM (mLSTM: matrix memory, exponential gating, chunked)",
          "jetmoe": "JetMoE (experts on sorted segments, mixture of attention heads)"}
