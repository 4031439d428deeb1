"""Cross-compile the configured kernels for gfx950 (or sm_90) and report their resources.

    python -m tools.isa --arch gfx950 [--quantizer hardware|software] [--json FILE]
                        [--sweep M,N,K ...]
    python -m tools.isa --arch sm_90 [--json FILE]

Per entry of the arch's config table (the 10 task shapes) and per kernel (the GEMM, and the
split-K reduce where the config splits K): VGPRs, AGPRs, SGPRs, LDS bytes, scratch bytes,
spills, an occupancy estimate (waves per SIMD), workgroups against the 256 CUs, and
instruction counts. With --sweep, the same for the GEMM of every stage-1 candidate that
tools.tune would try on gfx950 for each given shape (the material the table is chosen from).
Runs offline on a CPU: no AMD GPU is involved.

With --arch sm_90, per entry of the sm_90 table: the PTX instructions of the GEMM as
configured and with A pre-quantized (the share of the in-register quantizer), the MMA
instructions, and an estimate of the warp instructions the launch executes (PTX count x
warps x programs x K tiles per program; the loop body dominates the count) with the time
that takes at one instruction per cycle on each of the H200's 528 schedulers at 1.98 GHz.

Occupancy estimate (CDNA3/4, wave64): 512 unified VGPRs per SIMD lane, allocated in granules
of 8 (AGPRs after the arch VGPRs rounded to 4); 160 KiB of LDS and 4 SIMDs per CU; at most 8
waves per SIMD.
"""

import argparse
import json
import os
import re
import sys
from collections import Counter

os.environ.pop("TRITON_INTERPRET", None)   # compiling needs the real JIT functions

from kernels import formats                  # noqa: E402
from launchers.configs import GEMM_CONFIGS   # noqa: E402
from launchers.gemm import launch_specs      # noqa: E402
from tools.cross_compile import GFX950, SM90, compile_for  # noqa: E402

CUS = 256
LDS_PER_CU = 160 * 1024
SIMDS_PER_CU = 4
VGPRS_PER_SIMD_LANE = 512
MAX_WAVES_PER_SIMD = 8
KEY_INSTRUCTIONS = ("v_cvt_scalef32_pk_fp4_f32", "v_mfma_scale_f32_16x16x128_f8f6f4",
                    "v_mfma_scale_f32_32x32x64_f8f6f4", "global_load_dwordx4",
                    "buffer_load_dwordx4", "ds_read_b128", "s_waitcnt")
_MNEMONIC = re.compile(r"^\s+([a-z][a-z0-9_]*)\b", re.MULTILINE)
_PTX_INSTRUCTION = re.compile(r"^\s+(?:@!?%p\d+\s+)?([a-z][\w.]*)", re.MULTILINE)
H200_SCHEDULERS = 132 * 4
H200_CLOCK_GHZ = 1.98


def _metadata_int(amdgcn: str, key: str) -> int:
    found = re.search(rf"\.{key}:\s+(\d+)", amdgcn)
    return int(found.group(1)) if found else 0


def instruction_counts(amdgcn: str) -> dict:
    code = amdgcn.split(".end_amdgpu_metadata")[0].split("amdhsa.kernels")[0]
    code = code.split(".Lfunc_end")[0]
    return dict(sorted(Counter(_MNEMONIC.findall(code)).items()))


def waves_per_simd(vgprs: int, agprs: int, lds_bytes: int, num_warps: int) -> int:
    registers = -(-vgprs // 4) * 4 + agprs
    registers = max(8, -(-registers // 8) * 8)
    by_registers = VGPRS_PER_SIMD_LANE // registers
    if lds_bytes:
        by_lds = (LDS_PER_CU // lds_bytes) * num_warps // SIMDS_PER_CU
        by_registers = min(by_registers, max(by_lds, 0))
    return min(MAX_WAVES_PER_SIMD, by_registers)


def resource_row(shape, config, spec, hw_cvt: bool) -> dict:
    m, n, k = shape
    compiled = compile_for(spec.kernel, spec.sample_args, spec.options, GFX950)
    amdgcn = compiled.asm["amdgcn"]
    vgprs, agprs = _metadata_int(amdgcn, "vgpr_count"), _metadata_int(amdgcn, "agpr_count")
    lds = compiled.metadata.shared + _metadata_int(amdgcn, "group_segment_fixed_size")
    num_warps = spec.options["num_warps"]
    workgroups = spec.grid[0] * spec.grid[1] * spec.grid[2]
    return dict(
        shape=[m, n, k], kernel=spec.name, quantizer="hardware" if hw_cvt else "software",
        config=dict(vars(config)),
        vgprs=vgprs, agprs=agprs, sgprs=_metadata_int(amdgcn, "sgpr_count"),
        vgpr_spills=_metadata_int(amdgcn, "vgpr_spill_count"),
        sgpr_spills=_metadata_int(amdgcn, "sgpr_spill_count"),
        lds_bytes=lds, scratch_bytes=_metadata_int(amdgcn, "private_segment_fixed_size"),
        waves_per_simd=waves_per_simd(vgprs, agprs, lds, num_warps),
        workgroups=workgroups, cu_coverage=round(workgroups / CUS, 3),
        counts=instruction_counts(amdgcn))


def report(arch: str, hw_cvt: bool) -> list:
    rows = []
    for (m, n, k), config in GEMM_CONFIGS[arch].items():
        for spec in launch_specs(config, "hip", m, n, k, (k, 1), "meta", hw_cvt):
            rows.append(resource_row((m, n, k), config, spec, hw_cvt))
            print(f"compiled {m}x{n}x{k} {spec.name}", file=sys.stderr, flush=True)
    return rows


def sweep(shapes, hw_cvt: bool) -> list:
    from tools.tune import tile_candidates
    rows = []
    for m, n, k in shapes:
        candidates = tile_candidates("gfx950", m, n, k, CUS)
        for index, config in enumerate(candidates):
            spec = launch_specs(config, "hip", m, n, k, (k, 1), "meta", hw_cvt)[0]
            rows.append(resource_row((m, n, k), config, spec, hw_cvt))
            print(f"compiled {m}x{n}x{k} candidate {index + 1}/{len(candidates)}",
                  file=sys.stderr, flush=True)
    return rows


def ptx_instructions(ptx: str) -> Counter:
    body = ptx.split("{", 1)[-1]
    return Counter(_PTX_INSTRUCTION.findall(body))


def sm90_row(shape, config) -> dict:
    m, n, k = shape
    counts, grids = {}, {}
    for prequantized in (False, True):
        spec = launch_specs(config, "cuda", m, n, k, (k, 1), "meta",
                            a_prequantized=prequantized)[0]
        compiled = compile_for(spec.kernel, spec.sample_args, spec.options, SM90)
        counts[prequantized], grids[prequantized] = ptx_instructions(compiled.asm["ptx"]), spec.grid
    fused, prequantized = sum(counts[False].values()), sum(counts[True].values())
    programs = grids[False][0]
    k_tiles_per_program = formats.cdiv(config.splits_for(k)[1], config.block_k)
    warp_instructions = fused * config.num_warps * programs * k_tiles_per_program
    return dict(shape=[m, n, k], config=dict(vars(config)), ptx_fused=fused,
                ptx_a_prequantized=prequantized,
                quantizer_share=round(1 - prequantized / fused, 3),
                mma=sum(v for name, v in counts[False].items() if "mma" in name),
                programs=programs, est_warp_instructions=warp_instructions,
                est_issue_us=round(warp_instructions / (H200_SCHEDULERS * H200_CLOCK_GHZ * 1e3), 2))


def format_sm90_table(rows) -> str:
    lines = [f"{'shape':<16} {'cfg BMxBNxBK/S/w':<19} {'ptx':>6} {'ptx preq':>8} {'A quant':>7} "
             f"{'mma':>4} {'progs':>5} {'est warp instr':>14} {'µs at issue':>11}"]
    for row in rows:
        c = row["config"]
        cfg = f"{c['block_m']}x{c['block_n']}x{c['block_k']}/{c['split_k']}/{c['num_warps']}"
        lines.append(f"{'x'.join(map(str, row['shape'])):<16} {cfg:<19} {row['ptx_fused']:>6} "
                     f"{row['ptx_a_prequantized']:>8} {row['quantizer_share']:>7.0%} "
                     f"{row['mma']:>4} {row['programs']:>5} {row['est_warp_instructions']:>14,} "
                     f"{row['est_issue_us']:>11}")
    return "\n".join(lines)


def format_table(rows) -> str:
    header = (f"{'shape':<16} {'kernel':<7} {'cfg BMxBNxBK/S/w':<19} {'vgpr':>4} {'agpr':>4} "
              f"{'sgpr':>4} {'lds':>6} {'scr':>3} {'w/simd':>6} {'WGs':>5} {'WG/CU':>5} "
              f"{'cvt_fp4':>7} {'mfma_scale':>10}")
    lines = [header]
    for row in rows:
        c = row["config"]
        cfg = f"{c['block_m']}x{c['block_n']}x{c['block_k']}/{c['split_k']}/{c['num_warps']}"
        mfma = (row["counts"].get("v_mfma_scale_f32_16x16x128_f8f6f4", 0)
                + row["counts"].get("v_mfma_scale_f32_32x32x64_f8f6f4", 0))
        lines.append(
            f"{'x'.join(map(str, row['shape'])):<16} {row['kernel']:<7} {cfg:<19} "
            f"{row['vgprs']:>4} {row['agprs']:>4} {row['sgprs']:>4} {row['lds_bytes']:>6} "
            f"{row['scratch_bytes']:>3} {row['waves_per_simd']:>6} {row['workgroups']:>5} "
            f"{row['cu_coverage']:>5} {row['counts'].get('v_cvt_scalef32_pk_fp4_f32', 0):>7} "
            f"{mfma:>10}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=["gfx950", "sm_90"], default="gfx950")
    parser.add_argument("--quantizer", choices=["hardware", "software"], default="hardware")
    parser.add_argument("--json", help="write the rows as a JSON list to this file")
    parser.add_argument("--sweep", nargs="+", metavar="M,N,K",
                        help="report tools.tune's stage-1 candidates for these shapes instead")
    args = parser.parse_args(argv)
    hw_cvt = args.quantizer == "hardware"
    if args.arch == "sm_90":
        rows = [sm90_row(shape, config) for shape, config in GEMM_CONFIGS["sm_90"].items()]
        print(format_sm90_table(rows))
    else:
        rows = (sweep([tuple(int(x) for x in word.split(",")) for word in args.sweep], hw_cvt)
                if args.sweep else report(args.arch, hw_cvt))
        print(format_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
