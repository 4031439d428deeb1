"""The hopper path (kernels.hopper_gemm): both operands dequantized to bf16 for tl.dot.

On `device` (the interpreter on a CPU, compiled on an NVIDIA GPU of sm_90 and up, skipped on
any other GPU): odd shapes (M not a multiple of any tile, K a multiple of 64 only, a ragged last
K tile), strided A, the tile transposed or not, split-K summed in the kernel or by a second
launch; A quantized exactly as kernels.quantize does (the fused and the prequantized A give the
same bits); weight scales 0, 1 and NaN; outputs bit-identical call to call. The tile
dequantization bit for bit against formats over every code byte and the edge scale bytes, in
each of its forms: the interpreter's fp32 form (interpreter only), the GPU's PTX
(BF16_PAIRS_ASM) compiled on an sm_90 GPU (skipped elsewhere), and the same PTX in a CPU
emulator of exactly the instructions it uses (interpreter only). The config rule for sm_90 and
the backends the path is refused on. Cross-compiled for sm_90 with the runner's Triton: the
rule's kernels neither spill nor use a stack, and take B's dequantized values from registers
into wgmma.
"""

import dataclasses
import math
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats, hopper_gemm
from mxfp4_mm.kernels.quantize import quantize_rows
from mxfp4_mm.launchers import current_target, interpreting, prepared
from mxfp4_mm.launchers.configs import GEMM_CONFIGS, config_lookup
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.launchers.heuristics.sm90 import hopper_config
from mxfp4_mm.launchers.gemm import GemmLauncher, launch_specs
from mxfp4_mm.launchers.paths import build_launcher
from mxfp4_mm.launchers.targets import SM90

ROOT = Path(__file__).resolve().parents[1]


def hopper(block_m, block_n, **fields):
    return GemmConfig(block_m, block_n, 256, path="hopper", **fields)


CASES = [
    # (m, n, k), config
    ((3, 96, 320), hopper(16, 32, swap_ab=True)),        # K = 5 * 64: a ragged K tile
    ((3, 96, 320), hopper(16, 32)),
    ((1, 64, 192), hopper(16, 64, swap_ab=True)),        # one row of A, K < BLOCK_K
    ((5, 80, 1024), hopper(16, 64, split_k=2, split_k_reduce="last_program", swap_ab=True)),
    ((20, 64, 576), hopper(16, 32, split_k=2)),          # two M tiles, the 2nd ragged; reduce launch
    ((33, 48, 448), hopper(32, 32, swap_ab=True, num_stages=2)),
    ((6, 64, 512), hopper(16, 64, swap_ab=True, quantize_a_once=True)),   # A by its own launch
]


@pytest.fixture
def hopper_device(device):
    """`device` where the Hopper kernels (this path's and the prepared path's) run: the
    interpreter, or an NVIDIA GPU of sm_90 and up (their PTX: mul.rn.bf16x2, wgmma)."""
    backend, arch = current_target(device)
    if backend != "interpreter" and not prepared.serves(device):
        pytest.skip(f"the Hopper kernels run on NVIDIA sm_90 and up, not on {backend} {arch}")
    return device


def run(config, data, a=None):
    """(launcher, its output) for data (reference.generate_input's, all on one device)."""
    a = data[0] if a is None else a
    m, k = a.shape
    launcher = build_launcher(config, current_target(a.device)[0], m, data[3].shape[0], k,
                              a.stride(), a.device)
    return launcher, launcher(a, data[3], data[4])


@pytest.mark.parametrize("shape, config", CASES, ids=[f"{s}-{c.label}" for s, c in CASES])
def test_matches_the_reference_and_repeats_its_bits(hopper_device, shape, config):
    data = reference.generate_input(*shape, seed=sum(shape), device=hopper_device)
    launcher, out = run(config, data)
    ok, message = reference.check_implementation(data, out)
    assert ok, message
    assert torch.equal(out, launcher(data[0], data[3], data[4]))


def test_strided_a(hopper_device):
    m, n, k = 5, 64, 384
    data = reference.generate_input(m, n, k, seed=3, device=hopper_device)
    wide = torch.zeros(m, k + 64, dtype=torch.bfloat16, device=hopper_device)
    wide[:, 32:32 + k] = data[0]
    strided = wide[:, 32:32 + k]
    assert not strided.is_contiguous()
    config = hopper(16, 32, swap_ab=True)
    _, out = run(config, data, strided)
    ok, message = reference.check_implementation(data, out)
    assert ok, message
    assert torch.equal(out, run(config, data)[1])


@pytest.mark.parametrize("config", [hopper(16, 32, swap_ab=True), hopper(16, 32, split_k=2)])
def test_a_is_quantized_as_kernels_quantize_does(hopper_device, config):
    """The in-register quantization of A gives the bits that quantize_rows (bit-exact with
    formats.quantize_mxfp4, tests/test_quantize_kernel.py) gives, fed to the same kernel."""
    m, n, k = 4, 64, 512
    data = reference.generate_input(m, n, k, seed=9, device=hopper_device)
    _, fused = run(config, data)
    prequantized = GemmLauncher(config, current_target(hopper_device)[0], m, n, k,
                                data[0].stride(), torch.device(hopper_device),
                                a_prequantized=True)
    codes, scales = quantize_rows(data[0])
    assert torch.equal(fused, prequantized(codes, data[3], data[4], scales))


def on(device, data) -> list:
    """data's tensors, moved to device."""
    return [tensor.to(device) for tensor in data]


def test_a_weight_scale_of_zero_and_of_nan_reach_the_output_as_the_reference_reads_them(
        hopper_device):
    """E8M0 0 is 2**-127 and 255 NaN (formats.e8m0_to_f32), both in the dequantized B."""
    m, n, k = 2, 32, 256
    data = list(reference.generate_input(m, n, k, seed=5, device="cpu"))
    codes = formats.unshuffle_weight(data[3].view(torch.uint8))
    scales = formats.e8m0_unshuffle(data[4].view(torch.uint8), n, k // 32).clone()
    scales[0, 0], scales[1, 1] = 0, 255
    data[4] = formats.e8m0_shuffle(scales, formats.SCALE_PAD_BYTE)
    out = run(hopper(16, 32, swap_ab=True), on(hopper_device, data))[1].cpu()
    expected = (formats.dequantize_mxfp4(*formats.quantize_mxfp4(data[0]))
                @ formats.dequantize_mxfp4(codes, scales).T)
    assert torch.isnan(out[:, 1]).all() and torch.isnan(expected[:, 1]).all()
    assert torch.allclose(out[:, 0].float(), expected[:, 0], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("scale_byte", [0, 1])
def test_a_weight_block_under_a_denormal_scale_reaches_the_output(hopper_device, scale_byte):
    """Column 0 is one block of B (the rest of its row zero) under 2**-127 or 2**-126, and A
    positive: its values (about 1e-37) are the reference's to bf16's precision."""
    m, n, k = 2, 32, 256
    data = list(reference.generate_input(m, n, k, seed=5, device="cpu"))
    data[0] = data[0].abs()
    codes = formats.unshuffle_weight(data[3].view(torch.uint8)).clone()
    scales = formats.e8m0_unshuffle(data[4].view(torch.uint8), n, k // 32).clone()
    codes[0, :formats.MX_BLOCK // 2] &= 0x77                     # positive codes
    codes[0, formats.MX_BLOCK // 2:] = 0
    scales[0, 0] = scale_byte
    data[3] = formats.shuffle_weight(codes)
    data[4] = formats.e8m0_shuffle(scales, formats.SCALE_PAD_BYTE)
    out = run(hopper(16, 32, swap_ab=True), on(hopper_device, data))[1].cpu()
    expected = (formats.dequantize_mxfp4(*formats.quantize_mxfp4(data[0]))
                @ formats.dequantize_mxfp4(codes, scales).T)[:, 0]
    assert (expected > 2.0 ** -126).all()
    torch.testing.assert_close(out[:, 0].float(), expected, rtol=1e-2, atol=0)

# Each tile dequantization of the path, over every code byte (each row all 256) under each of
# the edge scale bytes: 2**-127 and 2**-126 (their values fp32 and bf16 denormals), 2**-125,
# 2**-1, 1, 2, 2**127 (4 and above overflow to inf) and NaN.
EDGE_SCALE_BYTES = (0, 1, 2, 126, 127, 128, 254, 255)


def edge_scales(rows: int, blocks: int, scale_bytes=EDGE_SCALE_BYTES) -> torch.Tensor:
    """uint8 [rows, blocks]: block b of row r under scale_bytes[(r + b) % len], so that rows
    and blocks next to each other differ and, over len consecutive rows, each block takes
    every byte."""
    index = torch.arange(rows)[:, None] + torch.arange(blocks)[None, :]
    return torch.tensor(scale_bytes, dtype=torch.uint8)[index % len(scale_bytes)]


@triton.jit
def as_fp32(values):
    """A dequantized tile as fp32: bf16 widened by its bits (the interpreter's cast flushes
    denormals)."""
    if values.dtype == tl.bfloat16:
        bits = values.to(tl.uint16, bitcast=True).to(tl.uint32)
        values = (bits << 16).to(tl.float32, bitcast=True)
    return values


@triton.jit
def _dequantize_tile_kernel(codes_ptr, scales_ptr, out_ptr, ROWS: tl.constexpr,
                            BLOCK_K: tl.constexpr):
    rows = tl.arange(0, ROWS)[:, None]
    codes = tl.load(codes_ptr + rows * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)[None, :])
    scales = tl.load(scales_ptr + rows * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)[None, :])
    values = as_fp32(hopper_gemm.dequantize_tile(codes, scales, ROWS, BLOCK_K))
    tl.store(out_ptr + rows * BLOCK_K + tl.arange(0, BLOCK_K)[None, :], values)


def assert_same_bits(out, expected):
    """fp32 out is expected bit for bit, NaN where it is NaN (any NaN)."""
    nan = expected.isnan()
    assert torch.equal(out.isnan(), nan)
    wrong = out[~nan].view(torch.int32) != expected[~nan].view(torch.int32)
    assert not wrong.any(), f"{int(wrong.sum())} of {wrong.numel()} values differ"


def dequantize_edge_tile(device):
    """Runs dequantize_tile on `device` over every code byte (each row all 256) under every
    one of EDGE_SCALE_BYTES (edge_scales); asserts each value is formats.dequantize_mxfp4's
    bit for bit (NaN where it is NaN) and returns the launch's handle (the compiled kernel, on
    a GPU)."""
    rows = len(EDGE_SCALE_BYTES)
    codes = torch.arange(256, dtype=torch.uint8).repeat(rows, 1)
    scales = edge_scales(rows, 16)
    out = torch.empty(rows, 512, device=device)
    launched = _dequantize_tile_kernel[(1,)](codes.to(device), scales.to(device), out, rows, 512)
    assert_same_bits(out.cpu(), formats.dequantize_mxfp4(codes, scales))
    return launched


@pytest.mark.interpreter
@pytest.mark.parametrize("form", ["interpreter", "emulated ptx"])
def test_a_tile_dequantizes_to_the_formats_values_bit_for_bit(form, monkeypatch):
    """The interpreter's fp32 form as it runs; the GPU's with its PTX emulated (run_ptx), the
    interpreter taking the GPU branch. On a GPU: test_the_compiled_ptx_..., its compiled twin."""
    if form == "emulated ptx":
        from triton.runtime import interpreter
        monkeypatch.setattr(hopper_gemm, "INTERPRETED", tl.constexpr(False))
        monkeypatch.setattr(interpreter.InterpreterBuilder, "create_inline_asm",
                            _emulated_inline_asm)
    dequantize_edge_tile("cpu")


def test_the_compiled_ptx_dequantizes_a_tile_to_the_formats_values_bit_for_bit(hopper_device):
    """BF16_PAIRS_ASM as the GPU runs it (the compiled kernel's PTX holds its mul.rn.bf16x2:
    the GPU branch, not the fp32 form)."""
    if interpreting():
        pytest.skip("compiled only: the interpreter takes dequantize_tile's fp32 form (the "
                    "PTX's CPU twin is test_a_tile_dequantizes_..._bit_for_bit[emulated ptx])")
    compiled = dequantize_edge_tile(hopper_device)
    assert "mul.rn.bf16x2" in compiled.asm["ptx"]


# The PTX of an inline-asm block run on the CPU, each instruction as the PTX ISA defines it, for
# exactly the instructions of the project's asm: any other raises.

_U32 = 0xFFFFFFFF


def _bf16_value(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def _bf16_bits(value: float) -> int:
    """The bf16 nearest to value, ties to even, denormals kept, beyond the largest finite inf;
    NaN as 0x7FFF (NaN lanes are compared as NaN only)."""
    if math.isnan(value):
        return 0x7FFF
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    magnitude = abs(value)
    if magnitude == 0 or math.isinf(magnitude):
        return sign | (0x7F80 if magnitude else 0)
    exponent = max(math.frexp(magnitude)[1] - 1, -126)        # magnitude = 1.f * 2**exponent
    quantum = 2.0 ** (exponent - 7)
    rounded = round(magnitude / quantum) * quantum              # round(): ties to even
    if rounded >= 2.0 ** 128:
        return sign | 0x7F80
    return sign | struct.unpack("<I", struct.pack("<f", rounded))[0] >> 16


def _mul_bf16x2(a: int, b: int) -> int:
    """Each 16-bit half times its own, rounded once (the float64 product of two bf16 is exact)."""
    low, high = (_bf16_bits(_bf16_value(a >> shift & 0xFFFF) * _bf16_value(b >> shift & 0xFFFF))
                 for shift in (0, 16))
    return low | high << 16


_PTX = {
    "mov.b32": lambda a: a,
    "bfe.u32": lambda a, position, length: a >> (position & 0xFF) & (1 << (length & 0xFF)) - 1,
    "mul.lo.u32": lambda a, b: a * b & _U32,
    "shl.b32": lambda a, b: a << min(b, 32) & _U32,        # shifts past 32 clamp to 32
    "shr.b32": lambda a, b: a >> min(b, 32),
    "shf.l.wrap.b32": lambda a, b, c: ((b << 32 | a) << (c & 31)) >> 32 & _U32,
    "and.b32": lambda a, b: a & b,
    "or.b32": lambda a, b: a | b,
    "mul.rn.bf16x2": _mul_bf16x2,
}


def _vector(operand: str) -> list:
    """The registers of a vector operand "{a, b}", the first the lowest bits."""
    return [name.strip() for name in operand.strip("{}").split(",")]


def run_ptx(asm: str, operands: list) -> list:
    """Runs an inline-asm block's PTX on 32-bit operands ($i is operands[i]) and returns them
    as it leaves them. Its own registers are those its `.reg .b32` and `.reg .b16` lines
    declare; a vector operand {a, b} of a 32-bit mov packs (source) or unpacks (destination)
    its 16-bit registers."""
    registers = {f"${i}": value for i, value in enumerate(operands)}

    def read(name):
        if name.startswith("{"):
            parts = [registers[part] for part in _vector(name)]
            return None if None in parts else sum(v << 16 * j for j, v in enumerate(parts))
        return registers[name] if name in registers else int(name, 0)

    code = re.sub(r"//[^\n]*", "", asm)
    code = re.sub(r"^\s*[{}]\s*$", "", code, flags=re.M)      # the block's own braces
    for statement in filter(None, (part.strip() for part in code.split(";"))):
        opcode, _, rest = statement.partition(" ")
        names = [name.strip() for name in re.findall(r"\s*(\{[^}]*\}|[^,]+)", rest)]
        if opcode == ".reg":
            width, first = names[0].split()
            assert width in (".b32", ".b16"), statement
            registers.update(dict.fromkeys([first, *names[1:]]))
        elif opcode in _PTX:
            destination, *sources = names
            targets = _vector(destination) if destination.startswith("{") else [destination]
            assert all(target in registers for target in targets), statement
            values = [read(name) for name in sources]
            assert None not in values, f"{statement}: a register read before it is written"
            result = _PTX[opcode](*values)
            if len(targets) == 1:
                registers[destination] = result
            else:
                registers.update({target: result >> 16 * j & 0xFFFF
                                  for j, target in enumerate(targets)})
        else:
            raise NotImplementedError(f"{opcode}: not emulated; add it as the PTX ISA defines it")
    return [registers[f"${i}"] for i in range(len(operands))]


def _in_registers(elements) -> list:
    """Unsigned elements -> the 32-bit registers that hold them, 4 / size a register, the
    first the lowest."""
    per_register = max(1, 4 // elements.itemsize)
    return [sum(int(x) << 8 * elements.itemsize * j
                for j, x in enumerate(elements[i:i + per_register]))
            for i in range(0, len(elements), per_register)]


def _from_registers(registers: list, itemsize: int) -> list:
    """_in_registers undone: the elements of itemsize bytes that the registers hold."""
    bits = 8 * min(itemsize, 4)
    return [register >> bits * j & (1 << bits) - 1
            for register in registers for j in range(32 // bits)]


def _emulated_inline_asm(self, asm, constraints, values, result_types, is_pure, pack):
    """The interpreter's builder method for tl.inline_asm_elementwise, by run_ptx, operands as
    the compiled op passes them: each `pack` consecutive elements one run, the outputs' first
    ($0 ..., output after output), then each input's, each value narrower than 32 bits packed
    into registers of 4 / size elements, the first the lowest."""
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype
    shape = values[0].data.shape
    inputs = [np.broadcast_to(v.data, shape).reshape(-1) for v in values]
    inputs = [data.view(f"u{data.itemsize}") for data in inputs]
    dtypes = [_get_np_dtype(t.scalar) for t in result_types]
    outputs = [np.zeros(inputs[0].size, f"u{dtype.itemsize}") for dtype in dtypes]
    output_registers = [len(_in_registers(out[:pack])) for out in outputs]
    for start in range(0, inputs[0].size, pack):
        operands = [0] * sum(output_registers)
        for data in inputs:
            operands += _in_registers(data[start:start + pack])
        assert len(operands) == len(constraints.split(",")), constraints
        results = run_ptx(asm, operands)
        for out, count in zip(outputs, output_registers):
            out[start:start + pack] = _from_registers(results[:count], out.itemsize)[:pack]
            results = results[count:]
    handles = [TensorHandle(out.view(dtype).reshape(shape), t.scalar)
               for out, dtype, t in zip(outputs, dtypes, result_types)]

    class Call:
        def get_result(self, index):
            return handles[index]
    return Call()


def test_the_sm90_rule_serves_the_hopper_path_up_to_its_m_and_nothing_else_changes():
    for m in (1, 8, SM90.hopper_max_m):
        for n, k in ((6144, 4096), (4096, 14336), (2880, 1024)):
            config, source = config_lookup("sm_90", m, n, k)
            assert (config, source) == (hopper_config(m, n, k), "heuristic")
            assert config.path == "hopper" and config.swap_ab
            assert config.block_m >= m and config.block_k == 256
            programs = formats.cdiv(m, config.block_m) * formats.cdiv(n, config.block_n)
            assert config.split_k == 1 or programs * config.split_k <= 400
    assert config_lookup("sm_90", SM90.hopper_max_m + 1, 4096, 4096)[0].path == "preshuffle"
    for arch in ("gfx950", "interpreter"):
        assert config_lookup(arch, 1, 6144, 4096)[0].path == "preshuffle"
    assert all(c.path == "preshuffle" for table in GEMM_CONFIGS.values() for c in table.values())


def test_the_rule_splits_k_only_while_the_grid_is_small():
    assert hopper_config(1, 28672, 4096).split_k == 1       # 448 tiles
    assert hopper_config(1, 4096, 4096).split_k == 4        # 64 tiles
    assert hopper_config(1, 4096, 256).split_k == 1         # one K tile
    assert hopper_config(1, 4096, 512).split_k == 2         # as many splits as K tiles
    assert hopper_config(1, 4096, 1024).split_k == 4


def test_the_hopper_path_is_refused_on_hip_and_with_a_hardware_quantizer():
    config = hopper(16, 64, swap_ab=True)
    with pytest.raises(ValueError, match="hopper GEMM path runs on CUDA"):
        launch_specs(config, "hip", 16, 64, 256, (256, 1), "meta")
    with pytest.raises(ValueError, match="hopper GEMM path runs on CUDA"):
        launch_specs(config, "cuda", 16, 64, 256, (256, 1), "meta", quantizer="hardware")


def test_swap_ab_belongs_to_the_hopper_path():
    with pytest.raises(ValueError, match="swap_ab needs path='hopper'"):
        GemmConfig(16, 64, 256, swap_ab=True)
    assert hopper(16, 64, swap_ab=True).label.endswith("hopper swap")


_CROSS_COMPILE = """
import os, re
os.environ.pop("TRITON_INTERPRET", None)
import triton
from mxfp4_mm.tools.fit import cubin_resources
from mxfp4_mm.tools.gfx950.cross_compile import SM90, compile_for
from mxfp4_mm.launchers.heuristics.sm90 import hopper_config
from mxfp4_mm.launchers.gemm import launch_specs
for m, n, k in ((1, 4096, 4096), (8, 28672, 4096), (32, 4096, 14336), (64, 6144, 4096)):
    spec = [s for s in launch_specs(hopper_config(m, n, k), "cuda", m, n, k, (k, 1), "meta")
            if s.name == "gemm"][0]
    compiled = compile_for(spec.kernel, spec.sample_args, spec.options, SM90)
    usage = cubin_resources(compiled.asm["cubin"])
    registers, stack = usage["registers"], usage["stack_bytes"]
    ptx = compiled.asm["ptx"]
    print(triton.__version__, m, n, k, registers, stack, "mul.rn.bf16x2" in ptx,
          len(re.findall(r"wgmma.mma_async.sync.aligned.m64n\\d+k16.f32.bf16.bf16 +\\{", ptx)),
          len(re.findall(r"wgmma.mma_async[^;]*\\{[^}]*\\}, *\\{", ptx)))
"""


def test_the_rules_kernels_compile_for_sm90_without_a_stack_and_feed_wgmma_from_registers(
        runners_triton):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*runners_triton, str(ROOT)])
    done = subprocess.run([sys.executable, "-c", _CROSS_COMPILE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines()]
    assert len(rows) == 4
    for version, m, n, k, registers, stack, pairs_asm, wgmma, register_a in rows:
        assert version == "3.6.0"
        assert int(registers) <= 255 and int(stack) == 0, (m, n, k, registers, stack)
        assert pairs_asm == "True"
        assert int(wgmma) > 0 and int(register_a) == int(wgmma), (m, n, k)
