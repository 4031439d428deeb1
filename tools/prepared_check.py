"""The prepared path (launchers.prepared) past its chip's reach, one part of one shape a fresh
process: what the op, its launcher and MXFP4Linear give there, and where an output is wrong.

    python -m tools.prepared_check [--parts op,wide,direct,layer] [--beyond-reach]
                                   M,N,K[,strided] ...

Each (part, shape) runs in a process of its own, so that no earlier part's launchers, counter
rows or compiled kernels carry over:
  op      torch.ops.mxfp4_mm.gemm_prepared on reference.generate_input's weight (seed M+N+K),
          its launcher built and proven as a first call's is, then three calls more, each
          compared bit for bit with the first;
  wide    the same on a weight whose scales take the wide conversion (bytes 120, 0 and 131);
  direct  a PreparedLauncher of the rule's config built directly (no proof, no cache), its
          direct and its standard launch;
  layer   MXFP4Linear on the weight.
Each output is checked against the reference (launchers.proof.reference_output); a wrong one
is described by its wrong rows, its wrong 128-column tiles, and per K split how far the error
is from that split's partial product missing (-1) or counted twice (+1). --beyond-reach lets
the path serve any M on the device's chip (its Target's prepared_max_m lifted in each child
process), to find why a chip's reach stops where it does. Needs a device that takes the
prepared path (NVIDIA sm_90 and up), or the interpreter (TRITON_INTERPRET=1, on the CPU).
Exits 1 if any part fails.
"""

import argparse
import dataclasses
import subprocess
import sys

import torch

from .cli import ArgumentParser, usage_error

PARTS = ("op", "wide", "direct", "layer")
REPEATS = 3


def parse_shape(text: str) -> tuple:
    fields = text.split(",")
    if len(fields) not in (3, 4) or (len(fields) == 4 and fields[3] != "strided"):
        raise ValueError(f"expected M,N,K or M,N,K,strided, got {text!r}")
    m, n, k = (int(field) for field in fields[:3])
    return m, n, k, len(fields) == 4


def lifted_targets() -> dict:
    """{arch: its Target with the prepared path serving any M}, for every recorded chip that
    has the path (launchers.targets.TARGETS)."""
    from mxfp4_mm.launchers import targets
    return {arch: dataclasses.replace(target, prepared_max_m=targets.ANY_M)
            for arch, target in targets.TARGETS.items() if target.prepared_max_m is not None}


def strided_copy(a: torch.Tensor) -> torch.Tensor:
    """A's values in every second column of a wider tensor (row stride 2K, column stride 2)."""
    wide = torch.zeros(a.shape[0], 2 * a.shape[1], dtype=a.dtype, device=a.device)
    wide[:, 1::2] = a
    return wide[:, 1::2]


def lift_reach() -> None:
    """Let the prepared path serve any M on every chip that has it (this process only)."""
    from mxfp4_mm.launchers import targets
    targets.TARGETS.update(lifted_targets())


def wrong_output_lines(out, a, codes, scales, splits: int, split_size: int) -> list:
    """The reference check of `out`, and where it is wrong (module docstring)."""
    from mxfp4_mm import reference
    from mxfp4_mm.launchers.proof import reference_output
    expected = reference_output(a, codes, scales)
    ok, message = reference.compare(out, expected)
    if ok:
        return ["ok"]
    bad = ~torch.isclose(out.float(), expected.float(), rtol=2e-2, atol=2e-2)
    rows = torch.nonzero(bad.any(1)).flatten().tolist()
    tiles = sorted(set((torch.nonzero(bad.any(0)).flatten() // 128).tolist()))
    lines = [f"WRONG: {message[:300]}",
             f"  {int(bad.sum())} of {bad.numel()} wrong; rows {rows[:32]}; 128-column tiles "
             f"{tiles[:32]}; NaN {int(torch.isnan(out).sum())}"]
    error = (out.float() - expected.float())[bad]
    k = a.shape[1]
    for split in range(splits):
        lo, hi = split * split_size, min((split + 1) * split_size, k)
        if lo >= k:
            break
        partial = reference_output(a[:, lo:hi], codes[:, lo // 2:hi // 2],
                                   scales[:, lo // 32:hi // 32]).float()[bad]
        lines.append(f"  split {split} K[{lo},{hi}): mean |error + partial| "
                     f"{(error + partial).abs().mean():.4g}, |error - partial| "
                     f"{(error - partial).abs().mean():.4g}, |error| {error.abs().mean():.4g}")
    return lines


def run_part(part: str, m: int, n: int, k: int, strided: bool, device) -> list:
    """One part on one shape (module docstring): its report lines."""
    from mxfp4_mm import reference
    from mxfp4_mm.kernels import formats
    from mxfp4_mm.launchers import current_target, prepared
    from mxfp4_mm.launchers.linear import MXFP4Linear

    data = reference.generate_input(m, n, k, seed=m + n + k, device=device)
    a = strided_copy(data[0]) if strided else data[0]
    codes = formats.unshuffle_weight(data[3].view(torch.uint8))
    scales = formats.e8m0_unshuffle(data[4].view(torch.uint8), n, k // formats.MX_BLOCK)
    if part == "wide":
        generator = torch.Generator().manual_seed(m)
        codes = torch.randint(0, 256, (n, k // 2), generator=generator,
                              dtype=torch.uint8).to(device)
        scales = torch.full((n, k // formats.MX_BLOCK), 120, dtype=torch.uint8, device=device)
        scales[0, 0], scales[1, 0] = 0, 131
    weight = prepared.hopper_weight_from_mxfp4(codes, scales)
    config = prepared.prepared_config(m, n, k)
    splits, split_size = config.splits_for(k)
    lines = [f"{part} {m}x{n}x{k}{' strided' if strided else ''}: {config.label}, "
             f"{splits} splits of {split_size}, wide scales {weight.wide_scales}"]

    def check(name, out):
        if out.is_cuda:
            torch.cuda.synchronize()
        lines.extend(f"  {name}: {line}" for line in
                     wrong_output_lines(out, a, codes, scales, splits, split_size))
        return out

    if part in ("op", "wide"):
        first = check("first call", torch.ops.mxfp4_mm.gemm_prepared(
            a, weight.values, weight.scales, weight.k, weight.wide_scales))
        for call in range(1, REPEATS + 1):
            again = torch.ops.mxfp4_mm.gemm_prepared(a, weight.values, weight.scales, weight.k,
                                                     weight.wide_scales)
            if not torch.equal(again, first):
                check(f"call {call + 1}, not the first's bits", again)
    elif part == "direct":
        launcher = prepared.PreparedLauncher(config, current_target(device)[0], m, n, k,
                                             a.stride(), device, weight.wide_scales)
        for direct in (True, False):
            check("direct launch" if direct else "standard launch",
                  launcher(a, weight.values, weight.scales, direct=direct))
    else:
        layer = MXFP4Linear(formats.shuffle_weight(codes),
                            formats.e8m0_shuffle(scales, formats.SCALE_PAD_BYTE))
        check("MXFP4Linear", layer(a))
    return lines


def build_parser() -> ArgumentParser:
    parser = ArgumentParser("tools.prepared_check", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shapes", nargs="+", metavar="M,N,K[,strided]",
                        help="the shapes, each with ,strided for an A of row stride 2K and "
                             "column stride 2")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--beyond-reach", action="store_true",
                        help="let the path serve any M (the chip's prepared_max_m lifted)")
    return parser


def run_child(argv) -> int:
    """One part of one shape, in this process: argv = [part, M,N,K[,strided], [--beyond-reach]]."""
    part, shape = argv[:2]
    if "--beyond-reach" in argv:
        lift_reach()
    from mxfp4_mm.reference import default_device
    lines = run_part(part, *parse_shape(shape), default_device())
    print("\n".join(lines), flush=True)
    return 1 if any("WRONG" in line for line in lines) else 0


_CHILD = ("import sys; from mxfp4_mm.tools.prepared_check import run_child; "
          "sys.exit(run_child(sys.argv[1:]))")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    parts = args.parts.split(",")
    try:
        shapes = [parse_shape(text) for text in args.shapes]
    except ValueError as error:
        return usage_error("tools.prepared_check", error)
    unknown = [part for part in parts if part not in PARTS]
    if unknown:
        return usage_error("tools.prepared_check",
                           f"unknown part {unknown[0]!r}; the parts are {', '.join(PARTS)}")
    failed = 0
    for m, n, k, strided in shapes:
        for part in parts:
            shape = f"{m},{n},{k}" + (",strided" if strided else "")
            done = subprocess.run([sys.executable, "-c", _CHILD, part, shape]
                                  + (["--beyond-reach"] if args.beyond_reach else []),
                                  capture_output=True, text=True)
            output = (done.stdout + (done.stderr[-2000:] if done.returncode else "")).strip()
            print(output or f"{part} {shape}: exit {done.returncode}", flush=True)
            failed += done.returncode != 0
    print(f"{failed} of {len(shapes) * len(parts)} parts failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
