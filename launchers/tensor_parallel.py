"""Tensor-parallel MXFP4Linear (launchers.linear) on torch.distributed: MXFP4ColwiseParallel and
MXFP4RowwiseParallel, ParallelStyles that plug into torch's parallelize_module as its own
ColwiseParallel and RowwiseParallel do for nn.Linear (those shard a weight Parameter as a
DTensor; an MXFP4 weight is two packed uint8 buffers in shuffled layouts, which they cannot cut),
and plan_styles, a transformers model's tp_plan as these styles.

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    from mxfp4_mm.launchers.tensor_parallel import MXFP4ColwiseParallel, MXFP4RowwiseParallel

    mesh = init_device_mesh("cuda", (world_size,))     # one process a GPU (torchrun)
    # mlp.up and mlp.down: MXFP4Linear layers, whole, on any device
    parallelize_module(mlp, mesh, {"up": MXFP4ColwiseParallel(), "down": MXFP4RowwiseParallel()})
    y = mlp(x)      # x whole on every rank; y the whole output on every rank

    parallelize_module(model, mesh, plan_styles(model, mesh))     # by the model's tp_plan

Each style cuts the rank's shard from the layer's plain MXFP4 weight (codes [N, K/2], E8M0
scales [N, K/32]; kernels.formats) and the layer holds it on the mesh's device
(MXFP4Linear.hold_mxfp4, in the one form that device takes), in place:
parallelize_module keeps the module object it is given. The activations pass between ranks as
torch's styles pass them (DTensor placements, redistributed by torch's collectives); the layer
computes on the local tensors.

- Column-parallel: rank r of w holds output rows [rN/w, (r+1)N/w) of the weight and the bias.
  Its input is whole (input_layouts: the placement it comes in, redistributed to Replicate); its
  output the rank's columns (output_layouts Shard(-1), the default, for a row-parallel layer
  next) or all of them (Replicate: an all-gather). Each output column is the unsharded layer's
  own computation: the same bits where the shard's config sums K in the same order (BLOCK_K and
  split-K; on a GPU a shard of fewer columns may take another split-K, the same up to the order
  of the fp32 sums).
- Row-parallel: rank r holds input columns [rK/w, (r+1)K/w), cut at MXFP4 block boundaries, so
  the quantized input and its products are the unsharded layer's; its input is the rank's slice
  of K (input_layouts Shard(-1), the default, or Replicate: cut locally). Each rank's partial
  product p_r comes out of the op in fp32 (the shard's out_dtype: the GEMM's fp32 sums, never
  rounded to bf16); the p_r are all-reduced in fp32 and the sum is rounded to bf16 once, then
  the bias is added once, in bf16, as the unsharded layer adds it. The output is whole on
  every rank, the same bits on each (the all-reduce gives every rank one sum; for two ranks
  p_0 + p_1). It is the unsharded layer's computation but for the order of the fp32 sums of
  the same exact products (the unsharded GEMM's K loop against each shard's and the
  all-reduce): both round one fp32 sum to bf16, so they differ by the two orders' fp32
  rounding errors (a few 2^-24 of the products' magnitudes) and, where those straddle a bf16
  rounding boundary, one bf16 step of |y| (at most 2^-7 |y|): within the task's per-element
  tolerance, 1e-2 + 1e-2 |y|, wherever the products' magnitudes stay far below 2^24 * 1e-2.
  Partials rounded to bf16 before the sum would each be off by up to half a bf16 step of
  |p_r|, which where they cancel can pass 1e-2 + 1e-2 |y|.

Splits: N % (16 w) == 0 column-parallel and K % (64 w) == 0 row-parallel (each shard aligned as
the op takes N and K; 64 a multiple of the MXFP4 block of 32), else a one-line ValueError.
"""

import fnmatch
from functools import partial

import torch
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.parallel import ParallelStyle

from ..kernels import formats
from .inputs import K_MULTIPLE
from .linear import MXFP4Linear


def mesh_device(device_mesh) -> torch.device:
    """This rank's device of the mesh: the current device of its type."""
    if device_mesh.device_type == "cpu":
        return torch.device("cpu")
    module = torch.get_device_module(device_mesh.device_type)
    return torch.device(device_mesh.device_type, module.current_device())


def _rank_and_size(where: str, device_mesh):
    if device_mesh.ndim != 1:
        raise ValueError(f"{where}: expected a 1-D device mesh, got {device_mesh.ndim}-D "
                         f"(take its tensor-parallel dimension, mesh['tp'])")
    return device_mesh.get_local_rank(), device_mesh.size()


def _split(where: str, what: str, total: int, multiple: int, size: int, rank: int) -> slice:
    """Rank `rank`'s part of `total`, split evenly over `size` ranks in parts of `multiple`."""
    if total % (multiple * size):
        raise ValueError(f"{where}: {what} {total} does not split over {size} ranks into "
                         f"multiples of {multiple}")
    part = total // size
    return slice(rank * part, (rank + 1) * part)


def _last_dim(placement, x):
    """Shard(-1) as the Shard of x's last dim (DTensor keeps shard dims as given)."""
    return Shard(x.dim() - 1) if placement == Shard(-1) else placement


def _local_input(placement, desired, module, inputs, *, device_mesh):
    """The forward pre-hook: the input in `desired` placement, as this rank's local tensor."""
    x = inputs[0]
    if not isinstance(x, DTensor):
        x = DTensor.from_local(x, device_mesh, (_last_dim(placement, x),), run_check=False)
    x = x.redistribute(placements=(_last_dim(desired, x),))
    return (x.to_local(),) + tuple(inputs[1:])


class _MXFP4Style(ParallelStyle):
    """What both styles share: the shard cut from an MXFP4Linear, held in place."""

    name = ""

    def __init__(self, input_layouts, output_layouts, use_local_output):
        super().__init__()
        self.input_layouts, self.output_layouts = input_layouts, output_layouts
        self.use_local_output = use_local_output

    def weight_slices(self, out_features: int, in_features: int, device_mesh):
        """(rows, code columns, scale columns): this rank's slices of codes [N, K/2] and scales
        [N, K/32]; a split the op cannot take is refused (ValueError, one line)."""
        raise NotImplementedError

    def _bias_parts(self, bias, out_features, device_mesh):
        """(the bias the shard's GEMM adds, the bias added after the reduction)."""
        raise NotImplementedError

    def _output_fn(self, module, inputs, output, *, device_mesh):
        raise NotImplementedError

    def shard_layer(self, codes, scales, bias, device_mesh, module=None) -> MXFP4Linear:
        """The rank's layer: codes and scales its shard (weight_slices of the whole ones), bias
        the whole layer's (or None); held in `module` (an MXFP4Linear) when given, else a new
        MXFP4Linear; on the mesh's device, its forward hooks registered."""
        device = mesh_device(device_mesh)
        gemm_bias, reduced_bias = self._bias_parts(None if bias is None else bias.to(device),
                                                   codes.shape[0], device_mesh)
        codes, scales = codes.to(device), scales.to(device)
        if module is None:
            module = MXFP4Linear.from_mxfp4(codes, scales, gemm_bias)
        else:
            module.hold_mxfp4(codes, scales, gemm_bias)
        if reduced_bias is not None:
            module.register_buffer("reduced_bias", reduced_bias.detach().to(torch.bfloat16))
        # hooks as torch's styles register them (distribute_module would make the buffers
        # replicated DTensors, which the op cannot read)
        module.register_forward_pre_hook(partial(_local_input, self.input_layouts,
                                                 self._desired_input, device_mesh=device_mesh))
        module.register_forward_hook(partial(self._output_fn, device_mesh=device_mesh))
        return module

    def _apply(self, module, device_mesh):
        if not isinstance(module, MXFP4Linear):
            raise TypeError(f"{self.name}: expected an MXFP4Linear, got "
                            f"{type(module).__module__}.{type(module).__qualname__} (quantize an "
                            f"nn.Linear with MXFP4Linear.from_linear and put it in the model "
                            f"first: parallelize_module keeps the module it is given)")
        n, k = module.out_features, module.in_features
        rows, code_columns, scale_columns = self.weight_slices(n, k, device_mesh)
        codes, scales = module.mxfp4_weight()
        return self.shard_layer(codes[rows, code_columns], scales[rows, scale_columns],
                                module.bias, device_mesh, module)

    def __repr__(self) -> str:
        return (f"{self.name}(input_layouts={self.input_layouts}, "
                f"output_layouts={self.output_layouts}, use_local_output={self.use_local_output})")


class MXFP4ColwiseParallel(_MXFP4Style):
    """Column-parallel MXFP4Linear: N split over the ranks (N % (16 w) == 0). input_layouts: the
    input's placement (default Replicate); output_layouts: Shard(-1) (default, the rank's
    columns) or Replicate (all gathered); use_local_output: a torch.Tensor, else a DTensor."""

    name = "MXFP4ColwiseParallel"
    _desired_input = Replicate()

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        output_layouts = output_layouts or Shard(-1)
        if output_layouts not in (Shard(-1), Replicate()):
            raise ValueError(f"{self.name}: output_layouts must be Shard(-1) or Replicate(), "
                             f"got {output_layouts}")
        super().__init__(input_layouts or Replicate(), output_layouts, use_local_output)

    def weight_slices(self, out_features, in_features, device_mesh):
        rank, size = _rank_and_size(self.name, device_mesh)
        rows = _split(self.name, "out_features", out_features, formats.WEIGHT_TILE_N, size, rank)
        return rows, slice(None), slice(None)

    def _bias_parts(self, bias, out_features, device_mesh):
        if bias is None:
            return None, None
        rank, size = _rank_and_size(self.name, device_mesh)
        if tuple(bias.shape) != (out_features * size,):
            raise ValueError(f"{self.name}: expected the whole layer's bias, of shape "
                             f"({out_features * size},), got {tuple(bias.shape)}")
        # a copy: the shard keeps no view of the whole bias alive
        return bias[rank * out_features:(rank + 1) * out_features].clone(), None

    def _output_fn(self, module, inputs, output, *, device_mesh):
        output = DTensor.from_local(output, device_mesh, (Shard(output.dim() - 1),),
                                    run_check=False)
        output = output.redistribute(placements=(_last_dim(self.output_layouts, output),))
        return output.to_local() if self.use_local_output else output


class MXFP4RowwiseParallel(_MXFP4Style):
    """Row-parallel MXFP4Linear: K split over the ranks (K % (64 w) == 0), the fp32 partial
    outputs all-reduced and rounded to bf16 once, the bias added after. input_layouts: the
    input's placement (default Shard(-1), the output of a column-parallel layer before); the
    output is whole on every rank (a torch.Tensor, or with use_local_output=False a replicated
    DTensor)."""

    name = "MXFP4RowwiseParallel"
    _desired_input = Shard(-1)

    def __init__(self, *, input_layouts=None, use_local_output=True):
        super().__init__(input_layouts or Shard(-1), Replicate(), use_local_output)

    def weight_slices(self, out_features, in_features, device_mesh):
        rank, size = _rank_and_size(self.name, device_mesh)
        columns = _split(self.name, "in_features", in_features, K_MULTIPLE, size, rank)
        return (slice(None), slice(columns.start // 2, columns.stop // 2),
                slice(columns.start // formats.MX_BLOCK, columns.stop // formats.MX_BLOCK))

    def _bias_parts(self, bias, out_features, device_mesh):
        if bias is not None and tuple(bias.shape) != (out_features,):
            raise ValueError(f"{self.name}: expected a bias of shape ({out_features},), got "
                             f"{tuple(bias.shape)}")
        return None, bias

    def shard_layer(self, codes, scales, bias, device_mesh, module=None) -> MXFP4Linear:
        module = super().shard_layer(codes, scales, bias, device_mesh, module)
        module.out_dtype = torch.float32     # the partial products unrounded, for _output_fn
        return module

    def _output_fn(self, module, inputs, output, *, device_mesh):
        """The fp32 partial products summed over the ranks, rounded to bf16 once, the bias
        added after."""
        partial_sums = DTensor.from_local(output, device_mesh, (Partial(),), run_check=False)
        output = partial_sums.redistribute(placements=(Replicate(),)).to_local()
        output = output.to(torch.bfloat16)
        bias = module._buffers.get("reduced_bias")
        if bias is not None:
            output = output + bias
        if self.use_local_output:
            return output
        return DTensor.from_local(output, device_mesh, (Replicate(),), run_check=False)


# transformers' tp_plan styles (transformers.distributed.tensor_parallel) as these styles
PLAN_STYLES = {
    "colwise": MXFP4ColwiseParallel,
    "colwise_rep": partial(MXFP4ColwiseParallel, output_layouts=Replicate()),
    "colwise_gather_output": partial(MXFP4ColwiseParallel, output_layouts=Replicate()),
    "rowwise": MXFP4RowwiseParallel,
    "rowwise_rep": partial(MXFP4RowwiseParallel, input_layouts=Replicate()),
    "rowwise_split_input": partial(MXFP4RowwiseParallel, input_layouts=Replicate()),
}
# tp_plan styles whose module takes and gives whole tensors: kept whole, it computes the same
WHOLE_IN_AND_OUT = ("colwise_rep", "colwise_gather_output", "rowwise_rep", "rowwise_split_input",
                    "embedding_rowwise", "replicate")


def _check_whole_heads(model, name: str, module, style, device_mesh) -> None:
    """A column-parallel linear of an attention module must leave whole heads on each rank."""
    config = getattr(model, "config", None)
    parent = model.get_submodule(name.rpartition(".")[0])
    if config is None or not isinstance(style, MXFP4ColwiseParallel) or \
            not type(parent).__name__.endswith("Attention"):
        return
    head_dim = getattr(config, "head_dim", None) or \
        config.hidden_size // config.num_attention_heads
    heads, size = module.out_features // head_dim, device_mesh.size()
    if heads % size:
        raise ValueError(f"{name}: the tp_plan splits its {heads} heads of {head_dim} over "
                         f"{size} ranks, the attention needs whole heads on each; pass a tp_plan "
                         f"without the attention's linears")


def plan_styles(model, device_mesh, tp_plan=None, layers=None) -> dict:
    """{module name: style} of a transformers tp_plan ({name pattern: "colwise", "rowwise",
    ...}; default the model's own, model.tp_plan) for parallelize_module: the MXFP4Linear
    layers it names split (`layers`: the names of the linears that are or will be MXFP4Linear,
    default those that are), the rest of the model whole on every rank. Refused (ValueError,
    one line naming the module): a split the op or the attention cannot take, a style the
    layers do not take, and splitting a module that is no MXFP4 layer (its neighbours would take
    its output sharded)."""
    plan = model.tp_plan if tp_plan is None else tp_plan
    if layers is None:
        layers = {name for name, module in model.named_modules()
                  if isinstance(module, MXFP4Linear)}
    styles = {}
    for name, module in model.named_modules():
        value = next((value for pattern, value in plan.items()
                      if fnmatch.fnmatchcase(name, pattern)), None)
        if value is None:
            continue
        if name not in layers:
            if value not in WHOLE_IN_AND_OUT:
                raise ValueError(f"{name}: the tp_plan splits it ({value!r}), but it is no MXFP4 "
                                 f"layer; only those are split: pass a tp_plan without it")
            continue
        if value not in PLAN_STYLES:
            raise ValueError(f"{name}: the tp_plan gives it {value!r}; an MXFP4 layer takes "
                             f"{', '.join(map(repr, PLAN_STYLES))}")
        style = PLAN_STYLES[value]()
        try:
            style.weight_slices(module.out_features, module.in_features, device_mesh)
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
        _check_whole_heads(model, name, module, style, device_mesh)
        styles[name] = style
    return styles
