"""AMD Quark MXFP4 checkpoints into MXFP4Linear (launchers.quark.load_quark), against the fixture
amd-quark itself made (tools/quark_fixture.py): each quantized linear against Quark's own
fake-quantized module, the tiny Llama's logits against Quark's, one-line refusals of other
quantizations, and, where amd-quark is installed, the fixture made anew and loaded."""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mxfp4_mm import launchers  # noqa: F401  (registers the op)
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.layouts import hopper as hopper_layout
from mxfp4_mm.launchers import linear, prepared, quark
from mxfp4_mm.launchers.linear import MXFP4Linear
from mxfp4_mm.launchers.quark import QuarkFormatError, load_quark
from mxfp4_mm.launchers.proof import compare

FIXTURE = Path(__file__).parent / "data" / "quark_tiny_llama"
ROOT = Path(__file__).resolve().parents[1]
safetensors = pytest.importorskip("safetensors.torch", reason="reading the fixture needs "
                                  "safetensors (the test extra installs it)")
NEEDS_TRANSFORMERS = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="building the model needs transformers (pip install -e '.[model]'), which the test "
           "extra leaves out: transformers 5 installs Hugging Face's `kernels` package, whose "
           "import name is this project's kernels/")
# the factor over the error of bf16 rounding alone that the model's logits may show (see
# test_the_tiny_models_logits_follow_quarks)
BF16_ERROR_FACTOR = 1.5


def _fixture():
    return (safetensors.load_file(FIXTURE / "model.safetensors"),
            safetensors.load_file(FIXTURE / "quark_outputs.safetensors"))


def _quantized_names(checkpoint):
    return sorted(key[:-len(".weight_scale")] for key in checkpoint
                  if key.endswith(".weight_scale"))


def _dequantized(checkpoint, name):
    return formats.dequantize_mxfp4(checkpoint[f"{name}.weight"], checkpoint[f"{name}.weight_scale"])


def _quark_linear(x, weight):
    """Quark's fake-quantized linear in fp32: x quantized dynamically (Quark's rule is aiter's,
    kernels.formats.quantize_mxfp4; docs/quark.md), times the dequantized weight."""
    codes, scales = formats.quantize_mxfp4(x.reshape(-1, x.shape[-1]))
    return (formats.dequantize_mxfp4(codes, scales).to(x.dtype) @ weight.t().to(x.dtype)
            ).view(*x.shape[:-1], -1)


def test_the_layers_module_names_the_loader_and_either_module_imports_first():
    assert (linear.load_quark, linear.quark_to_mxfp4) == (quark.load_quark, quark.quark_to_mxfp4)
    with pytest.raises(AttributeError, match="no attribute 'quark_layers'"):
        linear.quark_layers
    for first, second in (("quark", "linear"), ("linear", "quark")):
        code = (f"import mxfp4_mm.launchers.{first}, mxfp4_mm.launchers.{second}; "
                f"from mxfp4_mm.launchers.linear import load_quark, quark_to_mxfp4")
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr


def test_the_fixture_is_the_export_the_script_describes():
    checkpoint, outputs = _fixture()
    names = _quantized_names(checkpoint)
    config = json.loads((FIXTURE / "config.json").read_text())["quantization_config"]
    assert config["quant_method"] == "quark" and config["exclude"] == ["lm_head"]
    assert len(names) == 14 and "lm_head" not in names          # 2 layers of 7 linears
    for name in names:
        assert checkpoint[f"{name}.weight"].dtype == checkpoint[f"{name}.weight_scale"].dtype \
            == torch.uint8
        assert f"{name}.x" in outputs and f"{name}.y" in outputs
    assert checkpoint["lm_head.weight"].dtype == torch.float32


@pytest.mark.interpreter
def test_each_layer_is_quarks_fake_quantized_linear():
    """Per quantized linear, on the input the fixture gave Quark's module: kernels.formats'
    decoding of the codes and scales and its activation quantizer give Quark's output (fp32,
    same products: equal but for the order of the fp32 sums), and MXFP4Linear on those codes
    and scales gives it within the task's tolerance."""
    checkpoint, outputs = _fixture()
    for name in _quantized_names(checkpoint):
        x, quark_y = outputs[f"{name}.x"], outputs[f"{name}.y"]
        emulated = _quark_linear(x.float(), _dequantized(checkpoint, name))
        torch.testing.assert_close(emulated, quark_y, rtol=1e-6, atol=1e-6, msg=name)
        layer = MXFP4Linear.from_mxfp4(checkpoint[f"{name}.weight"],
                                       checkpoint[f"{name}.weight_scale"])
        ok, message = compare(layer(x), quark_y.to(torch.bfloat16))
        assert ok, f"{name}: {message}"


class _QuarkLinear(torch.nn.Module):
    """Quark's fake-quantized linear in the test's own emulation (no bias: the fixture has none)."""

    def __init__(self, weight):
        super().__init__()
        self.register_buffer("weight", weight)

    def forward(self, x):
        return _quark_linear(x, self.weight)


def _emulated_model(checkpoint, dtype):
    """The tiny Llama with each quantized linear _QuarkLinear, every activation in `dtype`."""
    import transformers
    config = transformers.AutoConfig.from_pretrained(FIXTURE)
    del config.quantization_config
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    names = _quantized_names(checkpoint)
    for name in names:
        parent, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent), attribute,
                _QuarkLinear(_dequantized(checkpoint, name)))
    model.load_state_dict({key: tensor for key, tensor in checkpoint.items()
                           if key.rpartition(".")[0] not in names}, strict=False)
    return model.to(dtype).eval()


def _relative_error(got, want):
    return ((got.float() - want).norm() / want.norm()).item()


@pytest.mark.interpreter
@NEEDS_TRANSFORMERS
def test_the_tiny_models_logits_follow_quarks():
    """load_quark's bf16 model against the logits of Quark's fp32 fake-quantized model.

    The emulation in fp32 gives Quark's logits (the fixture's semantics, up to fp32 sums). In
    bf16 every activation is rounded to 8 significant bits; the quantizer after each rounding
    moves an element by one e2m1 step whenever the rounding carries it across a rounding
    midpoint (a step of up to a third of the value and more), so the logits move by far more
    than bf16's 2^-9: the bound is the relative L2 error of the same emulation run in bf16 (bf16
    rounding and nothing else), times BF16_ERROR_FACTOR for the model's own bf16 roundings
    falling elsewhere (its GEMM rounds its fp32 sums once, the emulation's bf16 matmul too, in
    another order). A wrong code, scale, nibble order or layer is off by the whole signal."""
    checkpoint, outputs = _fixture()
    input_ids, quark_logits = outputs["input_ids"], outputs["logits"]
    model = load_quark(FIXTURE)
    swapped = [name for name, module in model.named_modules() if isinstance(module, MXFP4Linear)]
    assert sorted(swapped) == _quantized_names(checkpoint)
    assert isinstance(model.lm_head, torch.nn.Linear) and model.lm_head.weight.dtype == torch.bfloat16
    assert torch.equal(model.lm_head.weight.float(), checkpoint["lm_head.weight"])
    with torch.no_grad():
        emulated32 = _emulated_model(checkpoint, torch.float32)(input_ids).logits
        emulated16 = _emulated_model(checkpoint, torch.bfloat16)(input_ids).logits
        logits = model(input_ids).logits
    torch.testing.assert_close(emulated32, quark_logits, rtol=1e-5, atol=1e-5)
    bound = BF16_ERROR_FACTOR * _relative_error(emulated16, quark_logits)
    error = _relative_error(logits, quark_logits)
    print(f"relative L2 error of the logits: {error:.4f}; bf16 rounding alone "
          f"{bound / BF16_ERROR_FACTOR:.4f}; bound {bound:.4f}")
    assert logits.dtype == torch.bfloat16 and error <= bound


def _mutated(tmp_path, mutate, tensors=None):
    """A copy of the fixture whose config.json's quantization_config `mutate` changed in place
    (and whose model.safetensors is `tensors`, when given)."""
    target = tmp_path / "export"
    shutil.copytree(FIXTURE, target)
    config = json.loads((target / "config.json").read_text())
    mutate(config["quantization_config"])
    (target / "config.json").write_text(json.dumps(config))
    if tensors is not None:
        safetensors.save_file(tensors, target / "model.safetensors")
    return target


def _set(path, value):
    def mutate(quantization):
        *keys, last = path
        for key in keys:
            quantization = quantization[key]
        quantization[last] = value
    return mutate


FP8_SPEC = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}
FIRST = "model.layers.0.mlp.down_proj"      # the first quantized linear by name
Q_PROJ = "model.layers.0.self_attn.q_proj"


@pytest.mark.parametrize("mutate, message", [
    (_set(("quant_method",), "awq"), "quantization_config: quant_method is 'awq', expected 'quark'"),
    (_set(("global_quant_config", "weight", "group_size"), 16),
     f"{FIRST}: weight group_size is 16, expected 32"),
    (_set(("global_quant_config", "weight", "dtype"), "int4"),
     f"{FIRST}: weight dtype is 'int4', expected 'fp4'"),
    (_set(("global_quant_config", "weight", "scale_format"), "float"),
     f"{FIRST}: weight scale_format is 'float', expected 'e8m0'"),
    (_set(("global_quant_config", "input_tensors", "is_dynamic"), False),
     f"{FIRST}: input_tensors is_dynamic is False, expected True"),
    (_set(("global_quant_config", "input_tensors"), None),
     f"{FIRST}: input_tensors is None, expected an MXFP4 spec"),
    (_set(("global_quant_config", "output_tensors"), FP8_SPEC),
     f"{FIRST}: output_tensors is quantized"),
    (_set(("global_quant_config", "bias"), FP8_SPEC), f"{FIRST}: bias is quantized"),
    (_set(("layer_quant_config",), {"*.1.self_attn.v_proj": {"weight": FP8_SPEC}}),
     "model.layers.1.self_attn.v_proj: weight dtype is 'fp8_e4m3', expected 'fp4'"),
    (_set(("kv_cache_quant_config",), {"*k_proj": {"output_tensors": FP8_SPEC}}),
     "quantization_config: kv_cache_quant_config is"),
    (_set(("export", "pack_method"), "order"),
     "quantization_config: export pack_method is 'order', expected 'reorder'"),
    (_set(("exclude",), ["lm_head", "*.o_proj"]),
     "model.layers.0.self_attn.o_proj: quantization_config excludes it, but the checkpoint "
     "holds it quantized"),
])
def test_a_mutated_quantization_config_is_refused_in_one_line(tmp_path, mutate, message):
    with pytest.raises(QuarkFormatError) as error:
        load_quark(_mutated(tmp_path, mutate))
    text = str(error.value)
    assert text.startswith(message) and "\n" not in text


@pytest.mark.interpreter
@NEEDS_TRANSFORMERS
def test_a_tied_embedding_export_loads_as_the_untied_model_whose_head_is_the_embedding(tmp_path):
    """tie_word_embeddings true and no lm_head.weight in the checkpoint (how a tied model is
    exported): lm_head is the embedding, the logits those of the untied export that holds the
    embedding as its lm_head.weight."""
    checkpoint, outputs = _fixture()
    checkpoint["lm_head.weight"] = checkpoint["model.embed_tokens.weight"].clone()
    untied = _mutated(tmp_path / "untied", lambda quantization: None, checkpoint)
    del checkpoint["lm_head.weight"]
    tied = _mutated(tmp_path / "tied", lambda quantization: None, checkpoint)
    config = json.loads((tied / "config.json").read_text())
    config["tie_word_embeddings"] = True
    (tied / "config.json").write_text(json.dumps(config))
    model = load_quark(tied)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    with torch.no_grad():
        logits = model(outputs["input_ids"]).logits
        assert torch.equal(logits, load_quark(untied)(outputs["input_ids"]).logits)


def test_a_static_input_scale_is_refused_in_one_line(tmp_path):
    checkpoint, _ = _fixture()
    checkpoint[f"{Q_PROJ}.input_scale"] = torch.tensor(127, dtype=torch.uint8)
    with pytest.raises(QuarkFormatError, match=rf"^{Q_PROJ}: the checkpoint has "
                                               rf"{Q_PROJ}.input_scale; [^\n]*$"):
        load_quark(_mutated(tmp_path, lambda quantization: None, checkpoint))


@NEEDS_TRANSFORMERS
def test_where_the_device_takes_the_prepared_path_load_quark_makes_no_second_copy(monkeypatch):
    """Each MXFP4Linear holds the Hopper layout alone, and the loader never makes a layer's
    portable form (what state_dict saves: a second copy of the weight) to check the keys."""
    def second_copy(weight):
        raise AssertionError("load_quark made a layer's portable form")
    monkeypatch.setattr(prepared, "max_rows", lambda device: 7)     # as on sm_90
    monkeypatch.setattr(hopper_layout, "to_shuffled", second_copy)
    layers = [module for module in load_quark(FIXTURE).modules()
              if isinstance(module, MXFP4Linear)]
    assert layers and all(layer.holds_hopper_layout for layer in layers)


def test_load_quark_takes_bf16_only():
    with pytest.raises(TypeError, match="bfloat16"):
        load_quark(FIXTURE, dtype=torch.float16)


@NEEDS_TRANSFORMERS
def test_a_linear_the_config_quantizes_but_the_checkpoint_holds_unquantized_is_refused(tmp_path):
    checkpoint, _ = _fixture()
    k_proj = "model.layers.1.self_attn.k_proj"
    checkpoint[f"{k_proj}.weight"] = _dequantized(checkpoint, k_proj)
    del checkpoint[f"{k_proj}.weight_scale"]
    with pytest.raises(QuarkFormatError, match=rf"^{k_proj}: quantization_config quantizes it, "
                                               rf"but the checkpoint holds it unquantized$"):
        load_quark(_mutated(tmp_path, lambda quantization: None, checkpoint))


class _QParamsLinearStandIn(torch.nn.Linear):
    """The state of amd-quark's QParamsLinear, as transformers' Quark integration loads an MXFP4
    export: weight uint8 [N, K/2], weight_quantizer.scale uint8 [N, K/32], an input_quantizer
    without state."""

    def __init__(self, linear, codes, scales):
        super().__init__(linear.in_features, linear.out_features, bias=False, device="meta")
        self.weight = torch.nn.Parameter(codes, requires_grad=False)
        self.weight_quantizer = torch.nn.Module()
        self.weight_quantizer.register_buffer("scale", scales)
        self.input_quantizer = torch.nn.Module()


@pytest.mark.interpreter
@NEEDS_TRANSFORMERS
def test_quark_to_mxfp4_swaps_quarks_modules_in_place():
    """A model with the modules transformers' Quark integration builds (a stand-in holding
    QParamsLinear's state) becomes load_quark's model: the same logits, bit for bit."""
    import transformers
    checkpoint, outputs = _fixture()
    config = transformers.AutoConfig.from_pretrained(FIXTURE)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    names = _quantized_names(checkpoint)
    for name in names:
        parent, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent), attribute, _QParamsLinearStandIn(
            model.get_submodule(name), checkpoint[f"{name}.weight"],
            checkpoint[f"{name}.weight_scale"]))
    model.load_state_dict({key: tensor for key, tensor in checkpoint.items()
                           if key.rpartition(".")[0] not in names}, strict=False)
    from mxfp4_mm.launchers.quark import quark_to_mxfp4
    assert quark_to_mxfp4(model) is model
    assert sorted(name for name, module in model.named_modules()
                  if isinstance(module, MXFP4Linear)) == names
    with torch.no_grad():
        assert torch.equal(model(outputs["input_ids"]).logits,
                           load_quark(FIXTURE)(outputs["input_ids"]).logits)
    with pytest.raises(TypeError, match="load it with dtype=torch.bfloat16"):
        quark_to_mxfp4(model.float())


@pytest.mark.interpreter
@pytest.mark.skipif(importlib.util.find_spec("quark") is None,
                    reason="amd-quark is not installed (pip install -e '.[quark]')")
def test_quark_makes_the_committed_fixture_anew_and_it_loads(tmp_path):
    """tools/quark_fixture.py run again gives the committed files byte for byte, and they load."""
    subprocess.run([sys.executable, str(ROOT / "tools" / "quark_fixture.py"), "--out",
                    str(tmp_path)], check=True, cwd=tmp_path, capture_output=True)
    for name in ("config.json", "model.safetensors", "quark_outputs.safetensors"):
        assert (tmp_path / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    model = load_quark(tmp_path)
    assert sum(isinstance(module, MXFP4Linear) for module in model.modules()) == 14
    import transformers
    from mxfp4_mm.launchers.quark import quark_to_mxfp4
    # (use_kernels=False: transformers' Hub kernels need Hugging Face's `kernels` package)
    through_quark = quark_to_mxfp4(transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, dtype=torch.bfloat16, use_kernels=False))
    input_ids = safetensors.load_file(FIXTURE / "quark_outputs.safetensors")["input_ids"]
    with torch.no_grad():
        assert torch.equal(through_quark(input_ids).logits, model(input_ids).logits)


@NEEDS_TRANSFORMERS
@pytest.mark.parametrize("change, message", [
    (lambda checkpoint: checkpoint.pop("model.norm.weight"),
     "load_quark: the checkpoint has no model.norm.weight"),
    (lambda checkpoint: checkpoint.update({"model.layers.0.self_attn.k_scale": torch.ones(())}),
     "load_quark: the checkpoint has model.layers.0.self_attn.k_scale, which the model "
     "LlamaForCausalLM has no place for"),
])
def test_a_missing_or_stray_tensor_is_refused_in_one_line(tmp_path, change, message):
    checkpoint, _ = _fixture()
    change(checkpoint)
    with pytest.raises(QuarkFormatError, match=rf"^{message}$"):
        load_quark(_mutated(tmp_path, lambda quantization: None, checkpoint))
