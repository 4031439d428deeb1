"""The proof of a launcher: its output on the project's own inputs against the torch reference.

`proof_cases(m, n, k, a_strides, device)` makes the inputs, of the launcher's own shape and A
strides, in two groups, each of as few cases as hold each of its kinds of row at least once,
the rows cycling through them. First the ordinary kinds (random; rounding ties at block
exponents 0 and 100), whose every block the quantizer's fast path takes (kernels/quantize.py):
one case from M = 3 on, the first, which the tuner also times. Then the special kinds
(rounding ties in bf16's denormals; +-0; NaN among finite values; one +-inf in a row of finite
values), which put every tile holding them on the slow path: one case from M = 4 on. B is
the project's own too: nonzero E2M1 codes everywhere (so an inf in A gives +-inf, not inf * 0,
under every order of scaling and summing) and block scales of 1 or 2 where the inf sits, so
that its product overflows fp32 on every backend alike. Nothing of a caller's is read or kept.

`prove(run, cases, has_direct, repeats)` raises ProofFailure unless, for every case, the
standard launch is within the runner's tolerance of `reference_output` and the direct launch
(where there is one) gives the same bytes as the standard launch; and the first case, run
`repeats` times more (SPLIT_K_REPEATS for a GEMM that reduces split-K in the kernel), gives the
same bytes each time. `compare` is the runner's element check.
"""

import torch

from ..kernels import formats

RTOL = ATOL = 1e-2   # the runner's check_implementation
_WORST_SHOWN = 5
_TIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
# Row exponents of the tie rows: plain, large (outputs stay finite up to K = 8192 or so) and
# deep enough that 0.25 * 2**e is a bf16 denormal.
_TIE_EXPONENTS = (0, 100, -130)
ORDINARY_KINDS = ("random", "ties", "ties_large")
SPECIAL_KINDS = ("ties_denormal", "signed_zeros", "nan", "inf")
ROW_KINDS = ORDINARY_KINDS + SPECIAL_KINDS
_INF_COLUMN = 5                      # inside K block 0, whose B scales are 2**0 or 2**1
_NONZERO_CODES = (1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15)
# Repeated calls of the first case for a GEMM that reduces split-K in the kernel (split_k_reduce
# "last_program"): which program sums a tile changes from call to call, the order of its sum
# does not, so every call must give the same bytes; a missing release or a stale read of a
# partial shows only in some calls.
SPLIT_K_REPEATS = 32


class ProofFailure(Exception):
    """A launcher's output is wrong, or its two launches disagree; the message says how."""


def compare(output, expected, rtol=RTOL, atol=ATOL) -> tuple:
    """(ok, message): every element within atol + rtol*|expected|, NaN and Inf where expected."""
    if output.shape != expected.shape:
        return False, f"shape mismatch: expected {tuple(expected.shape)}, got {tuple(output.shape)}"
    got, want = output.float(), expected.float()
    error = (got - want).abs()
    bad = ~(error <= atol + rtol * want.abs())
    bad = torch.where(torch.isinf(want), got != want, bad)
    bad &= ~(torch.isnan(got) & torch.isnan(want))
    count = int(bad.sum())
    if count == 0:
        return True, ""
    error = torch.where(bad, torch.nan_to_num(error, nan=float("inf")), -1.0)
    worst = torch.topk(error.flatten(), min(_WORST_SHOWN, count)).indices
    rows = [f"[{i // got.shape[-1]}, {i % got.shape[-1]}]: got {got.flatten()[i].item():.6g}, "
            f"expected {want.flatten()[i].item():.6g}" for i in worst.tolist()]
    return False, f"{count} of {bad.numel()} elements mismatch; worst: " + "; ".join(rows)


def reference_output(a, b_codes, b_scales):
    """bf16 [M, N] = bf16(dequant(quantize(A)) @ dequant(B)^T) in fp32, from kernels.formats."""
    a_values = formats.dequantize_mxfp4(*formats.quantize_mxfp4(a))
    return (a_values @ formats.dequantize_mxfp4(b_codes, b_scales).T).to(torch.bfloat16)


def _row(kind: str, k: int, generator) -> torch.Tensor:
    ties = torch.tensor(_TIES, dtype=torch.float32)
    ties = torch.cat([ties, -ties]).repeat(formats.cdiv(k, 2 * len(_TIES)))[:k]
    if kind.startswith("ties"):
        exponent = _TIE_EXPONENTS[("ties", "ties_large", "ties_denormal").index(kind)]
        return ties * 2.0 ** exponent
    if kind == "signed_zeros":
        return torch.tensor([0.0, -0.0]).repeat(k // 2)
    row = torch.randn(k, generator=generator)
    if kind == "random":
        return row
    if kind == "nan":
        row[3::7] = float("nan")
        row[5::11] = -float("nan")
        return row
    row[_INF_COLUMN] = float("inf") if int(torch.randint(2, (1,), generator=generator)) else -float("inf")
    return row


def _a_case(rows: torch.Tensor, a_strides: tuple, device):
    a = torch.empty_strided(tuple(rows.shape), a_strides, dtype=torch.bfloat16, device=device)
    a.copy_(rows.to(torch.bfloat16))
    return a


def proof_cases(m: int, n: int, k: int, a_strides: tuple, device, seed: int = 0) -> list:
    """[(A, B_shuffle, B_scale_sh, B_codes, B_scales)], A of shape (m, k) with strides a_strides."""
    generator = torch.Generator().manual_seed(seed)
    codes = torch.tensor(_NONZERO_CODES, dtype=torch.uint8)
    b_codes = formats.pack_nibbles(codes[torch.randint(len(codes), (n, k), generator=generator)])
    b_scales = torch.randint(122, 126, (n, formats.cdiv(k, formats.MX_BLOCK)), generator=generator,
                             dtype=torch.uint8)
    b_scales[:, 0] = torch.randint(127, 129, (n,), generator=generator, dtype=torch.uint8)
    b_shuffle = formats.shuffle_weight(b_codes).to(device)
    b_scale_sh = formats.e8m0_shuffle(b_scales, pad_value=0xFF).to(device)
    b_codes, b_scales = b_codes.to(device), b_scales.to(device)

    cases = []
    for group in (ORDINARY_KINDS, SPECIAL_KINDS):
        kinds = [group[i % len(group)] for i in range(formats.pad_to(len(group), m))]
        for start in range(0, len(kinds), m):
            rows = torch.stack([_row(kind, k, generator) for kind in kinds[start:start + m]])
            cases.append((_a_case(rows, a_strides, device), b_shuffle, b_scale_sh, b_codes,
                          b_scales))
    return cases


def _differing_elements(x, y) -> int:
    return int((x.view(torch.int16) != y.view(torch.int16)).sum())


def prove(run, cases, has_direct: bool, repeats: int = 0) -> None:
    """run(a, b_shuffle, b_scale_sh, direct=...) -> output; raises ProofFailure on the first
    bad case. The first case's launch that serves (direct where there is one) runs `repeats`
    times more, each output compared byte for byte with the first (standard) one."""
    for index, (a, b_shuffle, b_scale_sh, b_codes, b_scales) in enumerate(cases):
        kind = f"proof case {index + 1} of {len(cases)}"
        standard = run(a, b_shuffle, b_scale_sh, direct=False)
        ok, message = compare(standard, reference_output(a, b_codes, b_scales))
        if not ok:
            raise ProofFailure(f"wrong output on {kind}: {message}")
        if has_direct:
            differing = _differing_elements(run(a, b_shuffle, b_scale_sh, direct=True), standard)
            if differing:
                raise ProofFailure(f"the direct launch differs from the standard launch in "
                                   f"{differing} of {standard.numel()} elements on {kind}")
        for call in range(1, repeats + 1 if index == 0 else 1):
            differing = _differing_elements(run(a, b_shuffle, b_scale_sh, direct=has_direct),
                                            standard)
            if differing:
                raise ProofFailure(f"repeated call {call} of {repeats} differs from the first "
                                   f"output in {differing} of {standard.numel()} elements on "
                                   f"{kind} (the sum order is fixed)")
