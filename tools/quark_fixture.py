"""Make the AMD Quark MXFP4 fixture that tests/test_quark.py reads: a tiny Llama with random
weights, quantized (W4A4 MXFP4, Quark's built-in "mxfp4" scheme for the "llama" template) and
exported by amd-quark itself on a CPU, beside what Quark's fake-quantized model computes.

    python tools/quark_fixture.py --out DIR

Needs the `quark` extra (pip install -e ".[quark]"); made with amd-quark 0.13, transformers
5.25.0, safetensors 0.8.0, torch 2.13.0 (CPU). Run it as a script, not with `python -m`: it
imports nothing of the project, whose kernels/ would shadow the `kernels` package amd-quark's
dependencies install (Hugging Face's, which transformers imports).

DIR gets Quark's export (config.json, generation_config.json, model.safetensors) and
quark_outputs.safetensors:
- input_ids int64 [BATCH, SEQ] and logits float32 [BATCH, SEQ, VOCAB]: the fixed batch of
  token ids and the logits of Quark's fake-quantized model (fp32 activations; Quark's bf16
  fake quantization of activations runs on CUDA only);
- for each quantized linear NAME: NAME.x bfloat16 [LAYER_ROWS, K] (random) and NAME.y float32
  [LAYER_ROWS, N], the output of Quark's quantized module on that input in fp32 (the input
  quantized dynamically, the weight fake-quantized).
The random weights are rounded to bfloat16 values before quantizing, so that the fp32 model and a
bf16 copy of it start from the same parameters. The same seed gives the same files.
"""

import argparse
import json
import sys
from pathlib import Path

# run as a script, this folder comes first on the path, and its profile.py would shadow the
# standard library's, which torch imports
sys.path = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402

SEED = 0
# every quantized linear has K % 64 == 0 and N % 16 == 0 (MXFP4Linear's shapes)
LLAMA = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
             tie_word_embeddings=False)
BATCH, SEQ = 2, 8
LAYER_ROWS = 4


def tiny_llama():
    """The fp32 LlamaForCausalLM of LLAMA, weights random (seed SEED) and bf16-representable."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(LlamaConfig(**LLAMA)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).float())
    return model


def quantize(model):
    """Quark's MXFP4 W4A4 scheme applied to the model, weights frozen (fake-quantized)."""
    from quark.torch import LLMTemplate, ModelQuantizer
    config = LLMTemplate.get("llama").get_config(scheme="mxfp4")
    quantizer = ModelQuantizer(config)
    model = quantizer.quantize_model(model, None)
    return quantizer.freeze(model)


def quark_outputs(model):
    """{tensor name: tensor}: the logits of a fixed batch and each quantized linear on its input."""
    generator = torch.Generator().manual_seed(SEED)
    input_ids = torch.randint(0, LLAMA["vocab_size"], (BATCH, SEQ), generator=generator)
    outputs = {"input_ids": input_ids}
    with torch.no_grad():
        outputs["logits"] = model(input_ids).logits.float().contiguous()
        for name, module in model.named_modules():
            if getattr(module, "weight_quantizer", None) is None:
                continue
            x = torch.randn(LAYER_ROWS, module.in_features, generator=generator).to(torch.bfloat16)
            outputs[f"{name}.x"] = x
            outputs[f"{name}.y"] = module(x.float()).contiguous()
    return outputs


def main(argv=None):
    parser = argparse.ArgumentParser("tools/quark_fixture.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="the folder to write")
    args = parser.parse_args(argv)
    from quark.torch import export_safetensors
    from safetensors.torch import save_file

    model = quantize(tiny_llama())
    outputs = quark_outputs(model)
    args.out.mkdir(parents=True, exist_ok=True)
    export_safetensors(model, str(args.out), custom_mode="quark", weight_format="real_quantized",
                       pack_method="reorder")
    save_file(outputs, str(args.out / "quark_outputs.safetensors"))
    config = json.loads((args.out / "config.json").read_text())
    print(f"wrote {args.out}: {sorted(path.name for path in args.out.iterdir())}; "
          f"{len(outputs) // 2 - 1} quantized linears; quantization_config "
          f"{json.dumps(config['quantization_config']['global_quant_config'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
