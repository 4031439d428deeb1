"""The gfx950 hardware quantizer, proven equal to the software one on a model of the instruction.

No AMD GPU runs here: the instruction is modelled in torch from its ISA definition
(formats.cvt_scalef32_pk_fp4_f32_model), the kernel's conditioning runs in the interpreter,
and launchers.selfcheck confirms the equivalence on the real chip at import.
"""

import math

import pytest
import torch

from kernels import formats
from kernels.quantize import condition_test_kernel
from launchers import selfcheck

ONE = torch.tensor([1.0])


def model(values, scale=ONE):
    """Per-value code through the instruction model (value in the low nibble, 0 high)."""
    values = values.float().flatten()
    return formats.cvt_scalef32_pk_fp4_f32_model(values, torch.zeros_like(values),
                                                 scale.expand_as(values)) & 0xF


def all_bf16_values():
    return torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()


# ------------------------------------------------------------------ the model itself

@pytest.mark.parametrize("value, code", [
    (0.0, 0), (0.25, 0), (0.26, 1), (0.75, 2), (1.25, 2), (1.3, 3), (1.75, 4), (2.5, 4),
    (2.6, 5), (3.5, 6), (5.0, 6), (5.1, 7), (6.0, 7), (100.0, 7), (-0.75, 10), (-5.0, 14),
    (-0.1, 8), (-100.0, 15)])
def test_model_rounds_to_nearest_even_and_saturates(value, code):
    assert int(model(torch.tensor([value]))) == code


def test_model_divides_by_the_scale_exponent_only():
    scale = torch.tensor([4.0 * 1.9])       # exponent 2**2; the mantissa must be ignored
    assert model(torch.tensor([6.0, 10.0, 13.0]), scale).tolist() == [3, 4, 5]


def test_model_packs_src0_low_src1_high():
    byte = formats.cvt_scalef32_pk_fp4_f32_model(torch.tensor([1.0]), torch.tensor([-3.0]), ONE)
    assert int(byte) == 2 | (13 << 4)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -0.0, 1e-40, -1e-42])
def test_model_refuses_undocumented_inputs(value):
    with pytest.raises(ValueError, match="undocumented|NaN"):
        model(torch.tensor([value]))


# ------------------------------------------------------------------ conditioning

def special_values():
    values = all_bf16_values()
    extra = torch.tensor([0.25, -0.25, math.nextafter(0.25, 1), 6.0, -6.0, 7.0, 1e-45])
    nans = torch.tensor([0x7FC00000, 0x7FA00000, 0x7FE00000, -0x200000, 0x7F800001],
                        dtype=torch.int32).view(torch.float32)
    return torch.cat([values, values * 3.7, extra, nans])


def test_kernel_conditioning_equals_the_torch_twin(device):
    q = special_values()
    q = torch.cat([q, torch.zeros(-q.numel() % 4096)])
    out = torch.empty_like(q, device=device)
    condition_test_kernel[(q.numel() // 4096,)](q.to(device), out, BLOCK=4096)
    want = formats.condition_for_cvt(q)
    assert torch.equal(out.cpu().view(torch.int32), want.view(torch.int32))


def test_conditioning_leaves_only_documented_inputs():
    conditioned = formats.condition_for_cvt(special_values())
    model(conditioned)   # raises on any NaN, inf, -0 or denormal


# u = 126 cannot occur: an amax that rounds past exponent 127 gives u = 127.
REACHABLE_BLOCK_EXPONENTS = [u for u in range(-127, 128) if u != 126]


def block_amax(u):
    """An amax whose block exponent is u: 2**(u+2), or +inf for the top exponent."""
    return torch.tensor([math.inf if u == 127 else 2.0 ** (u + 2)], dtype=torch.float32)


def test_every_bf16_value_at_every_block_exponent_its_block_can_have():
    """For each bf16 x and each u that a block holding x can get (amax >= |x|), the modelled
    hardware path gives the software code; the only difference allowed is -0 (8) against +0,
    which changes no sum. The block's scale byte is u + 127 in both paths (one function)."""
    x = all_bf16_values()
    compared = 0
    for u in REACHABLE_BLOCK_EXPONENTS:
        amax = block_amax(u)
        byte, multiplier = formats.scale_byte_and_multiplier(amax)
        assert int(byte) == u + 127
        in_block = (x.abs() <= amax) | torch.isnan(x)
        q = formats.scaled_block(x[in_block], multiplier)
        software = formats.e2m1_codes(q)
        hardware = model(formats.condition_for_cvt(q))
        same = (software == hardware) | ((software == 8) & (hardware == 0))
        assert bool(same.all()), f"u={u}: x={x[in_block][~same][:4].tolist()}"
        compared += int(in_block.sum())
    assert compared > 65536 * 128


def test_whole_blocks_quantize_the_same_through_the_model():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(64, 256, generator=gen).bfloat16().float()
    x[0, :32] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 4.0] * 4)
    x[1, 3], x[2, 7], x[3, 0] = math.nan, math.inf, -0.0
    codes, scales = formats.quantize_mxfp4(x)
    blocks = x.view(64, 8, 32)
    _, multiplier = formats.scale_byte_and_multiplier(formats.nan_ignoring_amax(blocks))
    q = formats.condition_for_cvt(formats.scaled_block(blocks, multiplier)).view(64, 256)
    hardware = formats.cvt_scalef32_pk_fp4_f32_model(q[:, 0::2], q[:, 1::2], ONE.expand(64, 128))
    software = formats.unpack_nibbles(codes)
    hardware = formats.unpack_nibbles(hardware)
    assert torch.equal(torch.where(software == 8, 0, software), hardware)


# ------------------------------------------------------------------ import-time self-check

def test_self_check_accepts_equal_results():
    cases = [torch.tensor([1.0, math.nan, 0.0]), torch.tensor([-0.0])]
    assert selfcheck.choose_hardware_quantizer(lambda case, hw: case.clone(), cases)


def test_self_check_falls_back_when_results_differ(capsys):
    cases = [torch.ones(4), torch.ones(4)]
    run = lambda case, hw: case + (1e-3 if hw else 0.0)
    assert not selfcheck.choose_hardware_quantizer(run, cases)
    assert "using the software quantizer" in capsys.readouterr().err


def test_self_check_is_off_where_there_is_no_instruction():
    assert not selfcheck.hardware_quantizer_ok("sm_90", "cuda", "cpu")
    assert not selfcheck.hardware_quantizer_ok("interpreter", "interpreter", "cpu")


def test_self_check_inputs_hold_ties_and_special_values():
    (_, b, s), (special, _, _) = selfcheck.self_check_inputs("cpu")
    assert torch.isnan(special.float()).any() and torch.isinf(special.float()).any()
    assert special.shape == (selfcheck.SELF_CHECK_SHAPE[0], selfcheck.SELF_CHECK_SHAPE[2])
    assert b.shape[0] == selfcheck.SELF_CHECK_SHAPE[1]
