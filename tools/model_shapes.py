"""The linear layers of a few public models, as data: {model: {layer: (N, K)}}, the weight of
each layer being [N, K] (N outputs, K inputs; fused projections as one GEMM), and the M values
the tools take by default with them (a decode batch of 1 to a prefill of 8192 tokens), and the
decoder layers of the dense models (each layer's linears once per layer, in series).

The dimensions are those of each model's published config.json:
- llama-3-8b (meta-llama/Meta-Llama-3-8B): hidden 4096, 32 query and 8 key/value heads of 128,
  intermediate 14336, 32 layers;
- llama-3-70b (meta-llama/Meta-Llama-3-70B): hidden 8192, 64 query and 8 key/value heads of
  128, intermediate 28672, 80 layers;
- deepseek-v3-dense (deepseek-ai/DeepSeek-V3, its dense projections: attention, the dense MLP
  of the first layers and the shared expert, not the routed experts): hidden 7168, 128 heads,
  q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim
  128, intermediate 18432, moe_intermediate 2048 (one shared expert).
"""

MODEL_LAYERS = {
    "llama-3-8b": {
        "qkv_proj": (6144, 4096),          # (32 + 2 * 8) * 128
        "o_proj": (4096, 4096),
        "gate_up_proj": (28672, 4096),     # 2 * 14336
        "down_proj": (4096, 14336),
    },
    "llama-3-70b": {
        "qkv_proj": (10240, 8192),         # (64 + 2 * 8) * 128
        "o_proj": (8192, 8192),
        "gate_up_proj": (57344, 8192),     # 2 * 28672
        "down_proj": (8192, 28672),
    },
    "deepseek-v3-dense": {
        "q_a_kv_a_proj": (2112, 7168),     # 1536 + 512 + 64
        "q_b_proj": (24576, 1536),         # 128 * (128 + 64)
        "kv_b_proj": (32768, 512),         # 128 * (128 + 128)
        "o_proj": (7168, 16384),           # 128 * 128
        "dense_gate_up_proj": (36864, 7168),    # 2 * 18432
        "dense_down_proj": (7168, 18432),
        "shared_expert_gate_up_proj": (4096, 7168),   # 2 * 2048
        "shared_expert_down_proj": (7168, 2048),
    },
}
MODEL_M = (1, 8, 32, 128, 512, 2048, 8192)
# the transformers LlamaConfig fields of the two Llama models (the same published config.json)
LLAMA_CONFIGS = {
    "llama-3-8b": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                       num_key_value_heads=8, num_hidden_layers=32, vocab_size=128256),
    "llama-3-70b": dict(hidden_size=8192, intermediate_size=28672, num_attention_heads=64,
                        num_key_value_heads=8, num_hidden_layers=80, vocab_size=128256),
}
MODEL_DECODER_LAYERS = {name: config["num_hidden_layers"] for name, config in LLAMA_CONFIGS.items()}
DECODE_MAX_M = 256      # the largest decode batch the decode-step sums take


def model_pairs(names=None) -> list:
    """The distinct (N, K) of the named models (default: all), in order of first appearance."""
    found = []
    for name in MODEL_LAYERS if names is None else names:
        for pair in MODEL_LAYERS[name].values():
            if pair not in found:
                found.append(pair)
    return found
