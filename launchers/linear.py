"""MXFP4Linear: an nn.Linear whose weight is held in MXFP4, its forward the op
torch.ops.mxfp4_mm.gemm (launchers.mxfp4_gemm) plus the bias.

    layer = MXFP4Linear.from_linear(linear)            # a bf16 nn.Linear: quantized once
    layer = MXFP4Linear.from_mxfp4(codes, scales)      # MXFP4 weights from elsewhere
    layer = MXFP4Linear(b_shuffle, b_scale_sh)         # the op's own operands
    y = layer(x)    # x bf16 [..., K] -> bf16 [..., N] = quantize(x) @ dequant(W)^T (+ bias)

The layer holds one copy of the weight, in the form its device computes with. The portable
form is two buffers, b_shuffle uint8 [N, K/2] and b_scale_sh uint8 [pad(N,256), pad(K/32,8)]
(kernels.formats.prepare_weight's layouts, the scale padding formats.SCALE_PAD_BYTE), read by
torch.ops.mxfp4_mm.gemm. On a device that takes the prepared path (launchers.prepared.serves:
NVIDIA sm_90 and up) it is the Hopper layout instead, two buffers hopper_values and
hopper_scales (kernels.layouts.hopper) and the flag wide_scales, read by
torch.ops.mxfp4_mm.gemm_prepared up to the M that path serves on its chip (prepared_max_m,
prepared.max_rows); above that M, torch.ops.mxfp4_mm.gemm on the portable form made anew for
the call from the Hopper layout (slow: an unswizzle and a shuffle of the whole weight each
call). Whatever it holds, state_dict saves the portable form (b_shuffle, b_scale_sh, bias),
the same bytes on every device, and load_state_dict takes it on every device; .to() converts
between the forms where the device calls for the other one. The bias (bf16) is added to the
bf16 product, rounding once more. The input is quantized to MXFP4 on every call, as the op
does.

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
# the weight's buffers: the portable form's, then the Hopper layout's (one form held at a time)
_WEIGHT_BUFFERS = ("b_shuffle", "b_scale_sh", "hopper_values", "hopper_scales")


def _bf16_bias(bias, n: int):
    if bias is None:
        return None
    if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (n,):
        raise ValueError(f"MXFP4Linear: expected a bias of shape ({n},), got "
                         f"{tuple(bias.shape) if isinstance(bias, torch.Tensor) else bias!r}")
    return bias.detach().to(torch.bfloat16)


class MXFP4Linear(torch.nn.Module):
    """y = quantize(x) @ dequant(W)^T + bias, W MXFP4 [out_features, in_features]."""

    def __init__(self, b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor, bias=None):
        super().__init__()
        n, k = b_shuffle.shape[0], 2 * b_shuffle.shape[-1]
        # the op's own checks (shapes, dtypes, layout), on an input of no rows, no data read
        gemm_problem(torch.empty((0, k), dtype=torch.bfloat16, device="meta"),
                     b_shuffle.to("meta"), b_scale_sh.to("meta"))
        self.in_features, self.out_features = k, n
        self.register_buffer("bias", _bf16_bias(bias, n))
        self._hold(b_shuffle.view(torch.uint8), b_scale_sh.view(torch.uint8),
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

    def use_hopper_layout(self, use: bool) -> None:
        """Hold the weight in the Hopper layout (use) or in the portable form, converting it
        where it is held the other way. .to() chooses by the device (launchers.prepared.serves);
        the outputs are the reference's either way."""
        if use != self.holds_hopper_layout:
            self._hold(*self.portable_weight(), use)

    def _weight_form(self, b_shuffle, b_scale_sh, hopper_layout: bool) -> tuple:
        """({buffer name: tensor}, wide_scales) of the weight in the form the layer holds: the
        Hopper layout, or the portable form with its scale padding formats.SCALE_PAD_BYTE (so
        that state_dict gives the same bytes whichever form is held)."""
        if hopper_layout:
            hopper = prepared.hopper_weight(b_shuffle, b_scale_sh)
            return {"hopper_values": hopper.values, "hopper_scales": hopper.scales}, \
                hopper.wide_scales
        groups = formats.cdiv(self.in_features, formats.MX_BLOCK)
        scales = formats.e8m0_unshuffle(b_scale_sh, self.out_features, groups)
        return {"b_shuffle": b_shuffle,
                "b_scale_sh": formats.e8m0_shuffle(scales, formats.SCALE_PAD_BYTE)}, None

    def _hold(self, b_shuffle, b_scale_sh, hopper_layout: bool) -> None:
        """Make the weight's buffers those of one form, dropping the other's."""
        buffers, self.wide_scales = self._weight_form(b_shuffle, b_scale_sh, hopper_layout)
        for name in _WEIGHT_BUFFERS:
            if name in self._buffers:
                delattr(self, name)
        for name, tensor in buffers.items():     # the portable form's are what state_dict saves
            self.register_buffer(name, tensor, persistent=not hopper_layout)
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
        """The portable form and the bias, whichever form the layer holds."""
        b_shuffle, b_scale_sh = self.portable_weight()
        for name, tensor in (("b_shuffle", b_shuffle), ("b_scale_sh", b_scale_sh),
                             ("bias", self.bias)):
            if tensor is not None:
                destination[prefix + name] = tensor if keep_vars else tensor.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """The portable form and the bias, as state_dict saves them, converted into the form
        the layer holds and copied into its buffers (or, with assign, held as given: the
        form their device calls for). Missing, unexpected and misshapen keys are reported as
        nn.Module's are."""
        n, k = self.out_features, self.in_features
        # {name: (shape, whether its elements are bytes)}
        expected = {"b_shuffle": ((n, k // 2), True),
                    "b_scale_sh": (formats.scales_padded_shape(n, k), True)}
        if self.bias is not None:
            expected["bias"] = ((n,), False)
        found = {}
        for name, (shape, of_bytes) in expected.items():
            tensor = state_dict.get(prefix + name)
            if tensor is None:
                missing_keys.append(prefix + name)
            elif tuple(tensor.shape) != shape or (of_bytes and tensor.element_size() != 1):
                error_msgs.append(f"{prefix + name}: expected {'uint8 ' if of_bytes else ''}"
                                  f"{shape}, got {tensor.dtype} {tuple(tensor.shape)}")
            else:
                found[name] = tensor.detach()
        if strict:
            unexpected_keys.extend(key for key in state_dict if key.startswith(prefix)
                                   and key[len(prefix):] not in expected)
        assign = local_metadata.get("assign_to_params_buffers", False)
        with torch.no_grad():
            if "bias" in found:
                if assign:
                    self.bias = found["bias"]
                else:
                    self.bias.copy_(found["bias"])
            if "b_shuffle" not in found or "b_scale_sh" not in found:
                return
            b_shuffle, b_scale_sh = (found[name].view(torch.uint8)
                                     for name in ("b_shuffle", "b_scale_sh"))
            if assign:
                self._hold(b_shuffle, b_scale_sh, prepared.serves(b_shuffle.device))
                return
            device = self._weight_device
            buffers, self.wide_scales = self._weight_form(
                b_shuffle.to(device), b_scale_sh.to(device), self.holds_hopper_layout)
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
        n, kb = codes.shape
        if tuple(scales.shape) != (n, formats.cdiv(2 * kb, formats.MX_BLOCK)):
            raise ValueError(f"MXFP4Linear.from_mxfp4: expected scales of shape "
                             f"({n}, {formats.cdiv(2 * kb, formats.MX_BLOCK)}) for codes of shape "
                             f"{tuple(codes.shape)}, got {tuple(scales.shape)}")
        return cls(formats.shuffle_weight(codes.view(torch.uint8)),
                   formats.e8m0_shuffle(scales.view(torch.uint8), formats.SCALE_PAD_BYTE), bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.bfloat16:
            raise TypeError(f"MXFP4Linear: expected a bfloat16 input, got {x.dtype}")
        if x.shape[-1] != self.in_features:
            raise ValueError(f"MXFP4Linear: expected an input of last dim {self.in_features}, "
                             f"got shape {tuple(x.shape)}")
        buffers = self._buffers     # read directly: nn.Module.__getattr__ costs 0.5 µs a name
        a = x if x.dim() == 2 else x.reshape(-1, self.in_features)
        values = buffers.get("hopper_values")
        limit = self.prepared_max_m     # None beside the Hopper layout: any M
        if values is None:
            y = _GEMM(a, buffers["b_shuffle"], buffers["b_scale_sh"])
        elif limit is None or a.shape[0] <= limit:
            y = _GEMM_PREPARED(a, values, buffers["hopper_scales"], self.in_features,
                               self.wide_scales)
        else:   # above the prepared path's reach: the portable form made for this call (slow)
            y = _GEMM(a, *self.portable_weight())
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
