"""MXFP4Linear: an nn.Linear whose weight is held in MXFP4, its forward the op
torch.ops.mxfp4_mm.gemm (launchers.mxfp4_gemm) plus the bias.

    layer = MXFP4Linear.from_linear(linear)            # a bf16 nn.Linear: quantized once
    layer = MXFP4Linear.from_mxfp4(codes, scales)      # MXFP4 weights from elsewhere
    layer = MXFP4Linear(b_shuffle, b_scale_sh)         # the op's own operands
    y = layer(x)    # x bf16 [..., K] -> bf16 [..., N] = quantize(x) @ dequant(W)^T (+ bias)

The layer holds one copy of its weight, in the form its device computes with:
- the portable form, two buffers b_shuffle uint8 [N, K/2] and b_scale_sh uint8
  [pad(N,256), pad(K/32,8)] (formats.weight_operands: the scale padding
  formats.SCALE_PAD_BYTE), read by torch.ops.mxfp4_mm.gemm;
- on a device that takes the prepared path (launchers.prepared.serves: NVIDIA sm_90 and up)
  the Hopper layout alone, two buffers hopper_values and hopper_scales (kernels.layouts.hopper)
  and the flag wide_scales, read by torch.ops.mxfp4_mm.gemm_prepared up to the M that path
  serves on the device's chip (prepared_max_m: prepared.max_rows; None, any M); above it
  torch.ops.mxfp4_mm.gemm on the portable form made for the call (an unswizzle and a shuffle of
  the whole weight each call).
Whichever it holds, state_dict saves the portable form (b_shuffle, b_scale_sh) and the bias,
the same bytes on every device; load_state_dict takes them into the form held, in place;
.to() converts where the device calls for the other form (use_hopper_layout chooses by hand);
mxfp4_weight() gives the plain codes and scales. The bias (bf16) is added to the bf16 product,
rounding once more. The input is quantized to MXFP4 on every call, as the op does.

    layer.out_dtype = torch.float32     # the product's fp32 sums unrounded, the bias added in fp32

out_dtype (torch.bfloat16 by default) is the dtype the ops give the product in
(launchers.inputs.OUT_DTYPES), in either form: a row-parallel shard's
(launchers.tensor_parallel) is float32, so that the ranks' partial products are summed before
the one rounding to bf16.

The AMD Quark loader, load_quark and quark_to_mxfp4, lives in launchers.quark; both names
are importable from here too.
"""

import torch

from ..kernels import formats
from ..kernels.layouts import hopper as layout
from . import prepared
from .inputs import gemm_problem

_GEMM = torch.ops.mxfp4_mm.gemm.default     # registered by the launchers package
_GEMM_PREPARED = torch.ops.mxfp4_mm.gemm_prepared.default     # registered by launchers.prepared
PORTABLE_BUFFERS = ("b_shuffle", "b_scale_sh")          # what state_dict saves, in either form
HOPPER_BUFFERS = ("hopper_values", "hopper_scales")


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
    return formats.weight_operands(codes.view(torch.uint8), scales.view(torch.uint8))


class MXFP4Linear(torch.nn.Module):
    """y = quantize(x) @ dequant(W)^T + bias, W MXFP4 [out_features, in_features]; y of
    out_dtype (torch.bfloat16, or torch.float32: the GEMM's fp32 sums unrounded)."""

    out_dtype = torch.bfloat16

    def __init__(self, b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor, bias=None):
        super().__init__()
        self._hold(b_shuffle, b_scale_sh, bias)

    def _hold(self, b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor, bias) -> None:
        """Hold the weight (the op's operands, checked) in the form its device takes, and bias."""
        n, k = b_shuffle.shape[0], 2 * b_shuffle.shape[-1]
        # the op's own checks (shapes, dtypes, layout), on an input of no rows, no data read
        gemm_problem(torch.empty((0, k), dtype=torch.bfloat16, device="meta"),
                     b_shuffle.to("meta"), b_scale_sh.to("meta"))
        self.in_features, self.out_features = k, n
        self.register_buffer("bias", _bf16_bias(bias, n))
        self._hold_form(b_shuffle.view(torch.uint8), b_scale_sh.view(torch.uint8),
                        prepared.serves(b_shuffle.device))

    @property
    def holds_hopper_layout(self) -> bool:
        return "hopper_values" in self._buffers

    @property
    def hopper_weight(self):
        """The weight as a kernels.layouts.hopper.HopperWeight where the layer holds that
        layout, else None."""
        if not self.holds_hopper_layout:
            return None
        return layout.HopperWeight(self.hopper_values, self.hopper_scales, self.out_features,
                                   self.in_features, self.wide_scales)

    def portable_weight(self) -> tuple:
        """(b_shuffle, b_scale_sh), torch.ops.mxfp4_mm.gemm's weight operands and what
        state_dict saves: the layer's buffers, or made anew from the Hopper layout where it
        holds that (kernels.layouts.hopper.to_shuffled)."""
        hopper = self.hopper_weight
        if hopper is None:
            return self._buffers["b_shuffle"], self._buffers["b_scale_sh"]
        return layout.to_shuffled(hopper)

    def mxfp4_weight(self) -> tuple:
        """The plain MXFP4 weight (codes uint8 [N, K/2], scales uint8 [N, K/32]; from_mxfp4's
        operands), made anew from the form the layer holds."""
        hopper = self.hopper_weight
        if hopper is not None:
            return layout.unswizzle(hopper)
        groups = formats.cdiv(self.in_features, formats.MX_BLOCK)
        return (formats.unshuffle_weight(self._buffers["b_shuffle"]),
                formats.e8m0_unshuffle(self._buffers["b_scale_sh"], self.out_features, groups))

    def use_hopper_layout(self, use: bool) -> None:
        """Hold the weight in the Hopper layout (use) or in the portable form, converting it
        where it is held the other way. .to() chooses by the device (launchers.prepared.serves);
        the outputs are the reference's either way."""
        if use != self.holds_hopper_layout:
            self._hold_form(*self.portable_weight(), use)

    def _weight_form(self, b_shuffle, b_scale_sh, hopper_layout: bool) -> tuple:
        """({buffer name: tensor}, wide_scales) of the weight in one form: the Hopper layout,
        or the portable form with its scale padding formats.SCALE_PAD_BYTE (so that state_dict
        gives the same bytes whichever form is held)."""
        if hopper_layout:
            hopper = prepared.hopper_weight(b_shuffle, b_scale_sh)
            return dict(zip(HOPPER_BUFFERS, (hopper.values, hopper.scales))), hopper.wide_scales
        groups = formats.cdiv(self.in_features, formats.MX_BLOCK)
        scales = formats.e8m0_unshuffle(b_scale_sh, self.out_features, groups)
        return {"b_shuffle": b_shuffle,
                "b_scale_sh": formats.e8m0_shuffle(scales, formats.SCALE_PAD_BYTE)}, None

    def _hold_form(self, b_shuffle, b_scale_sh, hopper_layout: bool) -> None:
        """Make the weight's buffers those of one form, dropping the other's. None of them is
        saved as it is: _save_to_state_dict saves the portable form."""
        buffers, self.wide_scales = self._weight_form(b_shuffle, b_scale_sh, hopper_layout)
        for name in PORTABLE_BUFFERS + HOPPER_BUFFERS:
            self._buffers.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
        for name, tensor in buffers.items():
            self.register_buffer(name, tensor, persistent=False)
        self.prepared_max_m = prepared.max_rows(b_shuffle.device)

    @property
    def _weight_device(self) -> torch.device:
        return self._buffers["hopper_values" if self.holds_hopper_layout else "b_shuffle"].device

    def _apply(self, fn, recurse=True):
        # A layer bound for a device without the prepared path converts before it moves, where
        # its weight is (a copy still in flight, as .to("cpu", non_blocking=True) makes, is
        # never read); one bound for a device with it converts there, after the move. fn's
        # destination is where it puts an empty tensor.
        destination = fn(torch.empty(0, dtype=torch.uint8, device=self._weight_device)).device
        if not prepared.serves(destination):
            self.use_hopper_layout(False)
        module = super()._apply(fn, recurse)
        self.use_hopper_layout(prepared.serves(self._weight_device))
        self.prepared_max_m = prepared.max_rows(self._weight_device)
        return module

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """The portable form, whichever form the layer holds, then the persistent buffers (the
        bias; a row-parallel shard's reduced_bias) as nn.Module saves them."""
        for name, tensor in zip(PORTABLE_BUFFERS, self.portable_weight()):
            destination[prefix + name] = tensor if keep_vars else tensor.detach()
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """The portable form, as state_dict saves it, converted into the form the layer holds
        and copied into its buffers (with assign, held in the form its device calls for); the
        rest (the bias) as nn.Module loads it. Missing and misshapen keys are reported as
        nn.Module's are."""
        n, k = self.out_features, self.in_features
        shapes = dict(zip(PORTABLE_BUFFERS, ((n, k // 2), formats.scales_padded_shape(n, k))))
        found = {}
        for name, shape in shapes.items():
            tensor = state_dict.get(prefix + name)
            if tensor is None:
                missing_keys.append(prefix + name)
            elif tuple(tensor.shape) != shape or tensor.element_size() != 1:
                error_msgs.append(f"{prefix + name}: expected uint8 {shape}, got {tensor.dtype} "
                                  f"{tuple(tensor.shape)}")
            else:
                found[name] = tensor.detach().view(torch.uint8)
        weight_keys = {prefix + name for name in PORTABLE_BUFFERS}
        super()._load_from_state_dict(
            {key: value for key, value in state_dict.items() if key not in weight_keys}, prefix,
            local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        if len(found) < len(PORTABLE_BUFFERS):
            return
        b_shuffle, b_scale_sh = (found[name] for name in PORTABLE_BUFFERS)
        if local_metadata.get("assign_to_params_buffers", False):
            self._hold_form(b_shuffle, b_scale_sh, prepared.serves(b_shuffle.device))
            return
        device = self._weight_device
        buffers, self.wide_scales = self._weight_form(
            b_shuffle.to(device), b_scale_sh.to(device), self.holds_hopper_layout)
        with torch.no_grad():
            for name, tensor in buffers.items():
                self._buffers[name].copy_(tensor)

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
        bias in place of the layer's own, in the form their device takes (the old weight
        dropped), the module object kept: how the tensor-parallel styles
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
        # out_dtype passed only where it is not the ops' default (a dtype argument costs their
        # dispatch about 0.5 µs)
        dtype_argument = () if self.out_dtype is torch.bfloat16 else (self.out_dtype,)
        values = buffers.get("hopper_values")
        limit = self.prepared_max_m     # None beside the Hopper layout: any M
        if values is None:
            y = _GEMM(a, buffers["b_shuffle"], buffers["b_scale_sh"], *dtype_argument)
        elif limit is None or a.shape[0] <= limit:
            y = _GEMM_PREPARED(a, values, buffers["hopper_scales"], self.in_features,
                               self.wide_scales, *dtype_argument)
        else:   # above the prepared path's reach: the portable form made for this call
            y = _GEMM(a, *self.portable_weight(), *dtype_argument)
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
