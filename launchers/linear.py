"""MXFP4Linear: an nn.Linear whose weight is held in MXFP4, its forward the op
torch.ops.mxfp4_mm.gemm (launchers.mxfp4_gemm) plus the bias.

    layer = MXFP4Linear.from_linear(linear)            # a bf16 nn.Linear: quantized once
    layer = MXFP4Linear.from_mxfp4(codes, scales)      # MXFP4 weights from elsewhere
    layer = MXFP4Linear(b_shuffle, b_scale_sh)         # the op's own operands
    y = layer(x)    # x bf16 [..., K] -> bf16 [..., N] = quantize(x) @ dequant(W)^T (+ bias)

The weight lives in two buffers, b_shuffle uint8 [N, K/2] and b_scale_sh uint8
[pad(N,256), pad(K/32,8)] (kernels.formats.prepare_weight's layouts), so that .to(device) moves
them and state_dict saves them, loadable on any backend. On NVIDIA sm_90 and up the layer also
holds the weight in the Hopper layout (hopper_weight, made by its constructors, .to() and
load_state_dict; not saved) and its forward is torch.ops.mxfp4_mm.gemm_prepared
(launchers.prepared) up to the M that path serves on its chip (prepared.max_rows), the op
torch.ops.mxfp4_mm.gemm above. The bias (bf16) is added to the bf16 product, rounding once
more. The input is quantized to MXFP4 on every call, as the op does.

    layer.out_dtype = torch.float32     # the product's fp32 sums unrounded, the bias added in fp32

out_dtype (torch.bfloat16 by default) is the dtype the ops give the product in
(launchers.inputs.OUT_DTYPES): a row-parallel shard's (launchers.tensor_parallel) is float32,
so that the ranks' partial products are summed before the one rounding to bf16.

The AMD Quark loader, load_quark and quark_to_mxfp4, lives in launchers.quark; both names
are importable from here too.
"""

import torch

from ..kernels import formats
from . import prepared
from .inputs import gemm_problem

_GEMM = torch.ops.mxfp4_mm.gemm.default     # registered by the launchers package
_GEMM_PREPARED = torch.ops.mxfp4_mm.gemm_prepared.default     # registered by launchers.prepared


def _bf16_bias(bias, n: int):
    if bias is None:
        return None
    if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (n,):
        raise ValueError(f"MXFP4Linear: expected a bias of shape ({n},), got "
                         f"{tuple(bias.shape) if isinstance(bias, torch.Tensor) else bias!r}")
    return bias.detach().to(torch.bfloat16)


def _shuffled(where: str, codes: torch.Tensor, scales: torch.Tensor):
    """(b_shuffle, b_scale_sh) of codes [N, K/2] and scales [N, K/32], their shapes checked."""
    n, kb = codes.shape
    if tuple(scales.shape) != (n, formats.cdiv(2 * kb, formats.MX_BLOCK)):
        raise ValueError(f"{where}: expected scales of shape "
                         f"({n}, {formats.cdiv(2 * kb, formats.MX_BLOCK)}) for codes of shape "
                         f"{tuple(codes.shape)}, got {tuple(scales.shape)}")
    return (formats.shuffle_weight(codes.view(torch.uint8)),
            formats.e8m0_shuffle(scales.view(torch.uint8), formats.SCALE_PAD_BYTE))


class MXFP4Linear(torch.nn.Module):
    """y = quantize(x) @ dequant(W)^T + bias, W MXFP4 [out_features, in_features]; y of
    out_dtype (torch.bfloat16, or torch.float32: the GEMM's fp32 sums unrounded)."""

    out_dtype = torch.bfloat16

    def __init__(self, b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor, bias=None):
        super().__init__()
        self._hold(b_shuffle, b_scale_sh, bias)
        self.register_load_state_dict_post_hook(lambda module, keys: module._prepare())

    def _hold(self, b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor, bias) -> None:
        n, k = b_shuffle.shape[0], 2 * b_shuffle.shape[-1]
        # the op's own checks (shapes, dtypes, layout), on an input of no rows, no data read
        gemm_problem(torch.empty((0, k), dtype=torch.bfloat16, device="meta"),
                     b_shuffle.to("meta"), b_scale_sh.to("meta"))
        self.in_features, self.out_features = k, n
        self.register_buffer("b_shuffle", b_shuffle.view(torch.uint8))
        self.register_buffer("b_scale_sh", b_scale_sh.view(torch.uint8))
        self.register_buffer("bias", _bf16_bias(bias, n))
        self._prepare()

    def _prepare(self):
        """The weight in the Hopper layout where the device takes that path (launchers.prepared)."""
        self.hopper_weight = prepared.layer_weight(self.b_shuffle, self.b_scale_sh)
        self.prepared_max_m = prepared.max_rows(self.b_shuffle.device)

    def _apply(self, fn, recurse=True):
        module = super()._apply(fn, recurse)
        self._prepare()
        return module

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear) -> "MXFP4Linear":
        """The layer of a bf16 nn.Linear (in_features % 64 == 0, out_features % 16 == 0)."""
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"MXFP4Linear.from_linear: expected a torch.nn.Linear, got "
                            f"{type(linear).__module__}.{type(linear).__qualname__}")
        weight = linear.weight.detach()
        if weight.dtype != torch.bfloat16:
            raise TypeError(f"MXFP4Linear.from_linear: expected a bfloat16 weight, got "
                            f"{weight.dtype}; convert with linear.to(torch.bfloat16) first")
        return cls(*formats.prepare_weight(weight), linear.bias)

    @classmethod
    def from_mxfp4(cls, codes: torch.Tensor, scales: torch.Tensor, bias=None) -> "MXFP4Linear":
        """The layer of an MXFP4 weight: codes [N, K/2] (two E2M1 codes a byte, element 2i in
        the low nibble) and scales [N, K/32] (E8M0), as uint8 or torch's fp4x2 / e8m0 dtypes."""
        return cls(*_shuffled("MXFP4Linear.from_mxfp4", codes, scales), bias)

    def hold_mxfp4(self, codes: torch.Tensor, scales: torch.Tensor, bias=None) -> None:
        """Hold the MXFP4 weight codes, scales (from_mxfp4's, of any shape the op takes) and
        bias in place of the layer's own, the module object kept: how the tensor-parallel styles
        (launchers.tensor_parallel) make a layer its rank's shard, parallelize_module keeping
        the module it is given."""
        self._hold(*_shuffled("MXFP4Linear.hold_mxfp4", codes, scales), bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.bfloat16:
            raise TypeError(f"MXFP4Linear: expected a bfloat16 input, got {x.dtype}")
        if x.shape[-1] != self.in_features:
            raise ValueError(f"MXFP4Linear: expected an input of last dim {self.in_features}, "
                             f"got shape {tuple(x.shape)}")
        buffers = self._buffers     # read directly: nn.Module.__getattr__ costs 0.5 µs a name
        a = x if x.dim() == 2 else x.reshape(-1, self.in_features)
        hopper = self.hopper_weight
        limit = self.prepared_max_m     # None beside a Hopper weight: the interpreter's, any M
        # out_dtype passed only where it is not the ops' default (a dtype argument costs their
        # dispatch about 0.5 µs)
        dtype_argument = () if self.out_dtype is torch.bfloat16 else (self.out_dtype,)
        if hopper is not None and (limit is None or a.shape[0] <= limit):
            y = _GEMM_PREPARED(a, hopper.values, hopper.scales, hopper.k, hopper.wide_scales,
                               *dtype_argument)
        else:
            y = _GEMM(a, buffers["b_shuffle"], buffers["b_scale_sh"], *dtype_argument)
        if x.dim() != 2:
            y = y.view(*x.shape[:-1], self.out_features)
        bias = buffers["bias"]
        return y if bias is None else y + bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


_QUARK_NAMES = ("load_quark", "quark_to_mxfp4")


def __getattr__(name):
    # load_quark and quark_to_mxfp4 by this module's name, resolved on use: launchers.quark
    # imports MXFP4Linear from here
    if name in _QUARK_NAMES:
        from . import quark
        return getattr(quark, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
