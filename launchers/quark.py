"""AMD Quark MXFP4 W4A4 checkpoints into MXFP4Linear (launchers.linear):

    model = load_quark(directory)     # an AMD Quark MXFP4 export, its linears MXFP4Linear
    quark_to_mxfp4(model)             # the same for a model transformers loaded through Quark

load_quark and quark_to_mxfp4 take the MXFP4 W4A4 checkpoints of AMD Quark (docs/quark.md):
fp4 e2m1 weights with an e8m0 scale per 32 along K, activations quantized dynamically by the
same rule as the op's. They need transformers and safetensors, not amd-quark, and refuse in one
line, naming the layer, any other quantization. launchers.linear re-exports both.
"""

import contextlib
import enum
import fnmatch
import json
from pathlib import Path

import torch

from ..kernels import formats
from .linear import MXFP4Linear

# What a Quark spec (quantization_config's "weight" and "input_tensors") must say for the op to
# compute what Quark computes: fp4 e2m1 per group of 32 along K (ch_axis -1), e8m0 scales from
# the block maximum rounded up at 0.75 of the way ("even"), elements rounded half to even;
# weights static, activations dynamic.
QUARK_MXFP4_SPEC = {"dtype": "fp4", "qscheme": "per_group", "group_size": formats.MX_BLOCK,
                    "ch_axis": -1, "scale_format": "e8m0", "scale_calculation_mode": "even",
                    "round_method": "half_even", "mx_element_dtype": None, "is_scale_quant": False}
QUARK_DYNAMIC = {"weight": False, "input_tensors": True}
# quantization_config entries that must be empty: the op quantizes nothing else
QUARK_UNQUANTIZED = ("output_tensors", "bias")
QUARK_NOTHING_ELSE = ("kv_cache_quant_config", "softmax_quant_spec", "algo_config")
QUARK_EXPORT = {"weight_format": "real_quantized", "pack_method": "reorder"}
# the quantization_config entries of Quark's own config object (transformers' QuarkConfig holds
# one, as quant_config, once it has loaded a model through amd-quark)
QUARK_CONFIG_FIELDS = ("global_quant_config", "layer_quant_config", "layer_type_quant_config",
                       "exclude", "kv_cache_quant_config", "softmax_quant_spec", "algo_config")


class QuarkFormatError(ValueError):
    """A Quark checkpoint this layer does not compute exactly; the message is one line."""


def _field(entry, key, default=None):
    """entry[key] of config.json's dict, or the attribute of Quark's config object (its enums
    as config.json spells them: Dtype.fp4 as "fp4", RoundType.half_even as "half_even")."""
    value = entry.get(key, default) if isinstance(entry, dict) else getattr(entry, key, default)
    return value.name if isinstance(value, enum.Enum) else value


def _is_empty(value) -> bool:
    return value is None or value == {} or value == []


def _check_quark_spec(where: str, role: str, spec) -> None:
    if spec is None:
        raise QuarkFormatError(f"{where}: {role} is None, expected an MXFP4 spec")
    expected = dict(QUARK_MXFP4_SPEC, is_dynamic=QUARK_DYNAMIC[role])
    for key, value in expected.items():
        if _field(spec, key, value) != value:
            raise QuarkFormatError(f"{where}: {role} {key} is {_field(spec, key)!r}, expected "
                                   f"{value!r}")


def _check_quark_layer_config(where: str, config) -> None:
    for role in QUARK_DYNAMIC:
        _check_quark_spec(where, role, _field(config, role))
    for role in QUARK_UNQUANTIZED:
        if not _is_empty(_field(config, role)):
            raise QuarkFormatError(f"{where}: {role} is quantized ({_field(config, role)!r}), "
                                   f"expected none")


def quark_layer_config(quantization: dict, name: str):
    """The quantization_config entry that applies to linear `name` (Quark's order: a
    layer_quant_config pattern, then layer_type_quant_config, then the global one), or None
    when `name` is excluded."""
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in quantization.get("exclude") or ()):
        return None
    for pattern, config in (quantization.get("layer_quant_config") or {}).items():
        if fnmatch.fnmatchcase(name, pattern):
            return config
    for config in (quantization.get("layer_type_quant_config") or {}).values():
        return config       # keyed by module type; check_quark_config checks every entry
    return quantization.get("global_quant_config")


def check_quark_config(quantization) -> None:
    """Refuse (QuarkFormatError, one line) a quantization_config whose model-wide settings
    are not Quark's MXFP4 W4A4 export."""
    where = "quantization_config"
    if not isinstance(quantization, dict) or quantization.get("quant_method") != "quark":
        method = quantization.get("quant_method") if isinstance(quantization, dict) else None
        raise QuarkFormatError(f"{where}: quant_method is {method!r}, expected 'quark'")
    export = quantization.get("export") or {}
    for key, value in QUARK_EXPORT.items():
        if _field(export, key) != value:
            raise QuarkFormatError(f"{where}: export {key} is {_field(export, key)!r}, expected "
                                   f"{value!r}")
    for key, value in [(key, quantization.get(key)) for key in QUARK_NOTHING_ELSE] + \
            [("export kv_cache_group", _field(export, "kv_cache_group"))]:
        if not _is_empty(value):
            raise QuarkFormatError(f"{where}: {key} is {value!r}, expected none")
    for key, value in (quantization.get("layer_type_quant_config") or {}).items():
        _check_quark_layer_config(f"{where} layer_type_quant_config {key}", value)


def quark_layers(quantization: dict, tensors: dict) -> dict:
    """{name: {"weight", "weight_scale", "bias"?: tensor}} of each linear the checkpoint tensors
    (checkpoint names, {"NAME.weight_scale": ...}) hold quantized, its quantization_config entry
    checked: refuses (QuarkFormatError, one line naming the layer) anything else."""
    layers = {}
    for name in sorted(key[:-len(".weight_scale")] for key in tensors
                       if key.endswith(".weight_scale")):
        config = quark_layer_config(quantization, name)
        if config is None:
            raise QuarkFormatError(f"{name}: quantization_config excludes it, but the checkpoint "
                                   f"holds it quantized")
        _check_quark_layer_config(name, config)
        own = {key[len(name) + 1:]: tensor for key, tensor in tensors.items()
               if key.startswith(name + ".") and "." not in key[len(name) + 1:]}
        extra = sorted(set(own) - {"weight", "weight_scale", "bias"})
        if extra:
            raise QuarkFormatError(f"{name}: the checkpoint has {name}.{extra[0]}; a layer takes "
                                   f"only weight, weight_scale and bias (no static input scale, "
                                   f"no zero point)")
        layers[name] = own
    return layers


def _shape(tensor) -> tuple:
    """The shape of a tensor or of a safetensors slice (read on use)."""
    return tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else tuple(tensor.get_shape())


def _quark_mxfp4_linear(name: str, linear: torch.nn.Module, tensors: dict, style=None,
                        device_mesh=None) -> MXFP4Linear:
    """The MXFP4Linear of quantized linear `name` (its quark_layers entry: tensors, or
    safetensors slices read here) on linear's device, or with a tensor-parallel style
    (launchers.tensor_parallel) the rank's shard, only its slices read, on the mesh's device."""
    n, k = linear.out_features, linear.in_features
    expected = {"weight": ((n, k // 2), (torch.uint8, torch.float4_e2m1fn_x2)),
                "weight_scale": ((n, formats.cdiv(k, formats.MX_BLOCK)),
                                 (torch.uint8, torch.float8_e8m0fnu))}
    for label, (shape, _) in expected.items():
        if _shape(tensors[label]) != shape:
            raise QuarkFormatError(f"{name}: {label} has shape {_shape(tensors[label])}, "
                                   f"expected {shape} for a linear of {k} inputs and {n} outputs")
    if k % 64 or n % 16:
        raise QuarkFormatError(f"{name}: MXFP4Linear needs in_features % 64 == 0 and "
                               f"out_features % 16 == 0, got {k} and {n}")
    rows, code_columns, scale_columns = ((slice(None),) * 3 if style is None else
                                         style.weight_slices(n, k, device_mesh))
    codes = tensors["weight"][rows, code_columns]
    scales = tensors["weight_scale"][rows, scale_columns]
    for label, tensor in (("weight", codes), ("weight_scale", scales)):
        if tensor.dtype not in expected[label][1]:
            raise QuarkFormatError(f"{name}: {label} is {tensor.dtype}, expected uint8")
    codes, scales = codes.view(torch.uint8), scales.view(torch.uint8)
    bias = tensors.get("bias")
    bias = None if bias is None else bias[...]
    if style is not None:
        return style.shard_layer(codes, scales, bias, device_mesh)
    device = linear.weight.device
    return MXFP4Linear.from_mxfp4(codes.to(device), scales.to(device),
                                  None if bias is None else bias.to(device))


def _swap_quark_linears(model: torch.nn.Module, quantization: dict, layers: dict, styles=None,
                        device_mesh=None) -> None:
    """Replace each linear of `model` named in `layers` (quark_layers) by its MXFP4Linear (the
    rank's shard where `styles`, {name: style} of launchers.tensor_parallel.plan_styles, names
    it), checking that these are exactly the linears quantization_config quantizes."""
    styles = styles or {}
    for name, module in list(model.named_modules()):
        if not isinstance(module, torch.nn.Linear):
            continue
        if name not in layers:
            if quark_layer_config(quantization, name) is not None:
                raise QuarkFormatError(f"{name}: quantization_config quantizes it, but the "
                                       f"checkpoint holds it unquantized")
            continue
        parent, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent), attribute,
                _quark_mxfp4_linear(name, module, layers[name], styles.get(name), device_mesh))
    left = sorted(set(layers) - {name for name, module in model.named_modules()
                                 if isinstance(module, MXFP4Linear)})
    if left:
        raise QuarkFormatError(f"{left[0]}: the checkpoint quantizes it, but the model has no "
                               f"linear of that name")


def _open_safetensors(directory: Path, files: contextlib.ExitStack) -> dict:
    """{name: safetensors slice} of every tensor of model.safetensors, or of the shards
    model.safetensors.index.json names, each read on use (slice[rows, columns], slice[...])."""
    from safetensors import safe_open
    index = directory / "model.safetensors.index.json"
    paths = ([directory / file for file in
              sorted(set(json.loads(index.read_text())["weight_map"].values()))]
             if index.exists() else [directory / "model.safetensors"])
    tensors = {}
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"load_quark: no {path.name} in {directory}")
        opened = files.enter_context(safe_open(path, framework="pt"))
        tensors.update({key: opened.get_slice(key) for key in opened.keys()})
    return tensors


def load_quark(directory, device=None, dtype=torch.bfloat16, *, device_mesh=None, tp_plan=None):
    """The transformers model of an AMD Quark MXFP4 W4A4 export (config.json with
    quantization_config quant_method "quark", safetensors weights), built on `device` (default
    CPU) in bfloat16, each linear Quark quantized an MXFP4Linear (bias kept), the rest loaded
    as transformers would. Needs transformers and safetensors, not amd-quark. Any other
    quantization is refused with a QuarkFormatError, one line naming the layer and what differs.

    With `device_mesh` (a 1-D torch DeviceMesh, one call a rank): tensor-parallel, the MXFP4
    layers split by `tp_plan` (default the model's own, model.tp_plan) with the styles of
    launchers.tensor_parallel (plan_styles says what it takes and refuses), each rank reading
    only its slices of their weights; the rest whole on every rank, on `device` (default the
    mesh's device).
    """
    if dtype != torch.bfloat16:
        raise TypeError(f"load_quark: MXFP4Linear computes in bfloat16, got dtype={dtype}")
    if tp_plan is not None and device_mesh is None:
        raise TypeError("load_quark: a tp_plan needs a device_mesh")
    directory = Path(directory)
    quantization = json.loads((directory / "config.json").read_text()).get("quantization_config")
    check_quark_config(quantization)
    with contextlib.ExitStack() as files:
        tensors = _open_safetensors(directory, files)
        layers = quark_layers(quantization, tensors)
        import transformers
        from transformers.initialization import no_init_weights

        from .tensor_parallel import mesh_device, plan_styles

        config = transformers.AutoConfig.from_pretrained(directory)
        del config.quantization_config
        if device is None:
            device = "cpu" if device_mesh is None else mesh_device(device_mesh)
        with torch.device(device), no_init_weights():
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
        model.tie_weights()     # tie_word_embeddings: no_init_weights skips the tying
        styles = None if device_mesh is None else plan_styles(model, device_mesh, tp_plan,
                                                                  set(layers))
        _swap_quark_linears(model, quantization, layers, styles, device_mesh)
        rest = {key: tensor[...] for key, tensor in tensors.items()
                if key.rpartition(".")[0] not in layers}
    missing, unexpected = model.load_state_dict(rest, strict=False)
    if unexpected:
        raise QuarkFormatError(f"load_quark: the checkpoint has {unexpected[0]}, which the "
                               f"model {type(model).__name__} has no place for")
    # absent from the checkpoint: the MXFP4Linear buffers, and tied weights loaded under the
    # name of the tensor they share (looked up as tensors: model.state_dict() would make every
    # MXFP4Linear's portable form, a second copy of its weight where it holds the Hopper layout)
    held = dict(model.named_parameters(remove_duplicate=False))
    held.update(model.named_buffers(remove_duplicate=False))
    loaded = {held[key].data_ptr() for key in rest}
    absent = [key for key in missing if key.rpartition(".")[0] not in layers
              and held[key].data_ptr() not in loaded]
    if absent:
        raise QuarkFormatError(f"load_quark: the checkpoint has no {absent[0]}")
    return model.eval()


def quark_to_mxfp4(model: torch.nn.Module) -> torch.nn.Module:
    """Swap in place, for MXFP4Linear, each quantized linear of a model transformers loaded in
    bfloat16 from a Quark MXFP4 W4A4 export through its own Quark integration (which needs
    amd-quark: from_pretrained(directory, dtype=torch.bfloat16)); refuses other quantizations
    as load_quark does. The model itself is returned."""
    floats = {parameter.dtype for parameter in model.parameters() if parameter.is_floating_point()}
    if floats - {torch.bfloat16}:
        raise TypeError(f"quark_to_mxfp4: MXFP4Linear computes in bfloat16, the model holds "
                        f"{sorted(map(str, floats))}; load it with dtype=torch.bfloat16")
    quantization = model.config.quantization_config
    if hasattr(quantization, "quant_config"):      # transformers' QuarkConfig
        quantization = dict({key: getattr(quantization.quant_config, key, None)
                             for key in QUARK_CONFIG_FIELDS},
                            quant_method=_field(quantization, "quant_method").lower(),
                            export=quantization.json_export_config)
    check_quark_config(quantization)
    # Quark's modules hold a checkpoint's X_scale as X_quantizer.scale (and so on)
    tensors = {f"{name}.{key.replace('_quantizer.', '_')}": tensor
               for name, module in model.named_modules() if hasattr(module, "weight_quantizer")
               for key, tensor in module.state_dict().items()}
    _swap_quark_linears(model, quantization, quark_layers(quantization, tensors))
    return model
