"""The Hopper weight layout: an MXFP4 weight (codes [N, K/2], E8M0 scales [N, K/32]) permuted
once so that kernels.hopper_prepared_gemm reads each thread's part of a tile as it feeds the
tensor cores, and its code bits sit where bf16x2 pairs want them.

The unit is 16 rows (N) by 64 elements (K): one warp's share of one wgmma register operand
(m64n*k16, bf16) over four k16 steps. In wgmma's register fragment, lane l = 4g + t of the
warp holds rows g and g+8 and, per k16 step j, elements 2t, 2t+1, 2t+8, 2t+9 of the step:
eight values, four bf16 pairs p = 2*kh + rh (kh: the +8 column half, rh: the +8 row half).
  values  uint8 [N/16, Kp/64, 8 (g), 4 (t), 4 (j), 4 bytes]   Kp = K padded to K_ALIGN
          each (g, t) holds 16 contiguous bytes, one 16-byte load; word j holds step j's
          eight values, bit-twiddled (encode_words) so that a rotation and a mask give each
          pair as the bf16x2 bits of value * 2**-126 (sign at 15, exponent-and-mantissa bits
          8..6; the high element at 31, 24..22): pair p = rotl(word, r) & PAIR_MASK with r
          = 0, 4, 10 for pairs 0, 1, 2 (PAIR_ROTATIONS), and pair 3 from two rotations,
          (rotl(word, 14) & 0x81808180) | (rotl(word, 6) & 0x00400040) (LAST_PAIR_PIECES:
          its signs and exponent bits, then its mantissa bits). The five pieces tile the
          word's 32 bits; no four rotations of PAIR_MASK do.
  scales  uint8 [N/16, Kp/64, 8 (g), 2 (rh), 2 (group)]   the E8M0 byte of row 16w + 8rh + g
          and K group 2 * kc + group: one 4-byte load per lane, one 32-byte line per warp.
K is padded with zero codes and 1.0 scales (byte 127), so padding adds nothing to a sum.
`swizzle` and `unswizzle` are exact inverses (bit for bit, on every byte value); so are
`from_shuffled` and `to_shuffled` on the runner's aiter layouts, their scale padding
formats.SCALE_PAD_BYTE.
"""

from typing import NamedTuple

import torch

from .. import formats

UNIT_ROWS = 16
UNIT_K = 64
K_ALIGN = 256            # the prepared kernel's largest BLOCK_K: every K tile is whole
PAD_SCALE = 127          # 2**0
# The folded scale 2**(byte - 1) of the one-multiply conversion is a bf16 up to this byte; a
# weight with a larger scale byte (NaN included) takes two (kernels.hopper_prepared_gemm).
FOLDED_SCALE_MAX_BYTE = 128
NAN_SCALE = 255
PAIR_MASK = 0x81C081C0   # where a bf16 pair's signs and exponent-and-mantissa bits go
PAIR_ROTATIONS = (0, 4, 10)
LAST_PAIR_PIECES = ((14, 0x81808180), (6, 0x00400040))   # (rotation, mask)


class HopperWeight(NamedTuple):
    """A weight in the Hopper layout: values and scales (module docstring), its logical N and
    K, and whether a scale byte exceeds FOLDED_SCALE_MAX_BYTE (wide_scales)."""
    values: torch.Tensor
    scales: torch.Tensor
    n: int
    k: int
    wide_scales: bool


def _pair_bits(low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (int64) -> the bf16x2 bits of their values times 2**-126."""
    def half(code):
        return ((code & 7) << 6) | ((code & 8) << 12)
    return half(low) | (half(high) << 16)


def _rotl(words: torch.Tensor, r: int) -> torch.Tensor:
    """32-bit words (int64) rotated left by r."""
    return ((words << r) | (words >> (32 - r))) & 0xFFFFFFFF


def encode_words(codes: torch.Tensor) -> torch.Tensor:
    """[..., 4 (pair), 2 (element)] E2M1 codes -> int64 [...] words (module docstring)."""
    codes = codes.to(torch.int64)
    pairs = [_pair_bits(codes[..., p, 0], codes[..., p, 1]) for p in range(4)]
    words = torch.zeros_like(pairs[0])
    for pair, r in zip(pairs, PAIR_ROTATIONS):
        words |= _rotl(pair, 32 - r)
    for r, mask in LAST_PAIR_PIECES:
        words |= _rotl(pairs[3] & mask, 32 - r)
    return words


def decode_words(words: torch.Tensor) -> torch.Tensor:
    """Inverse of encode_words: int64 words [...] -> uint8 codes [..., 4, 2], each pair's bits
    taken as the kernel takes them."""
    words = words.to(torch.int64)
    pairs = [_rotl(words, r) & PAIR_MASK for r in PAIR_ROTATIONS]
    (r0, mask0), (r1, mask1) = LAST_PAIR_PIECES
    pairs.append((_rotl(words, r0) & mask0) | (_rotl(words, r1) & mask1))

    def code(bits):
        return ((bits >> 6) & 7) | ((bits >> 12) & 8)
    codes = [torch.stack((code(p), code(p >> 16)), dim=-1) for p in pairs]
    return torch.stack(codes, dim=-2).to(torch.uint8)


def padded_k(k: int) -> int:
    return formats.pad_to(k, K_ALIGN)


def _check_shape(n: int, k: int) -> None:
    if n % UNIT_ROWS or k % UNIT_K:
        raise ValueError(f"the Hopper layout needs N % {UNIT_ROWS} == 0 and K % {UNIT_K} == 0, "
                         f"got N={n}, K={k}")


def swizzle(codes: torch.Tensor, scales: torch.Tensor) -> HopperWeight:
    """(codes uint8 [N, K/2], scales uint8 [N, >= K/32]) -> HopperWeight on their device."""
    n, k = codes.shape[0], 2 * codes.shape[1]
    _check_shape(n, k)
    kp = padded_k(k)
    nibbles = torch.zeros((n, kp), dtype=torch.uint8, device=codes.device)
    nibbles[:, :k] = formats.unpack_nibbles(codes.view(torch.uint8))
    # n = 16w + 8rh + g, k = 64kc + 16j + 8kh + 2t + e
    nibbles = nibbles.view(n // 16, 2, 8, kp // 64, 4, 2, 4, 2)
    nibbles = nibbles.permute(0, 3, 2, 6, 4, 5, 1, 7)       # w kc g t j kh rh e
    words = encode_words(nibbles.reshape(n // 16, kp // 64, 8, 4, 4, 4, 2))
    values = words.to(torch.int32).contiguous().view(torch.uint8)   # little-endian words
    groups = formats.cdiv(k, formats.MX_BLOCK)
    padded_scales = torch.full((n, kp // 32), PAD_SCALE, dtype=torch.uint8, device=codes.device)
    padded_scales[:, :groups] = scales.view(torch.uint8)[:, :groups]
    # row 16w + 8rh + g, group 2kc + grp -> w kc g rh grp
    swizzled_scales = padded_scales.view(n // 16, 2, 8, kp // 64, 2).permute(0, 3, 2, 1, 4)
    wide = bool((padded_scales > FOLDED_SCALE_MAX_BYTE).any())
    return HopperWeight(values.view(n // 16, kp // 64, 8, 4, 4, 4),
                        swizzled_scales.contiguous(), n, k, wide)


def unswizzle(weight: HopperWeight):
    """HopperWeight -> (codes uint8 [N, K/2], scales uint8 [N, K/32]), swizzle's inputs."""
    n, k = weight.n, weight.k
    kp = padded_k(k)
    words = weight.values.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    nibbles = decode_words(words.view(n // 16, kp // 64, 8, 4, 4))
    nibbles = nibbles.view(n // 16, kp // 64, 8, 4, 4, 2, 2, 2)   # w kc g t j kh rh e
    nibbles = nibbles.permute(0, 6, 2, 1, 4, 5, 3, 7).reshape(n, kp)[:, :k]
    codes = formats.pack_nibbles(nibbles)
    scales = weight.scales.permute(0, 3, 2, 1, 4).reshape(n, kp // 32)
    return codes.contiguous(), scales[:, :k // 32].contiguous()


def from_shuffled(b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor, n: int,
                  k: int) -> HopperWeight:
    """The runner's aiter layouts (B_shuffle [N, K/2], B_scale_sh [pad(N,256), pad(K/32,8)])
    -> HopperWeight."""
    codes = formats.unshuffle_weight(b_shuffle.view(torch.uint8))
    scales = formats.e8m0_unshuffle(b_scale_sh.view(torch.uint8), n, k // 32)
    return swizzle(codes, scales)


def to_shuffled(weight: HopperWeight) -> tuple:
    """HopperWeight -> (B_shuffle [N, K/2], B_scale_sh [pad(N,256), pad(K/32,8)]), from_shuffled's
    inputs, the scale padding formats.SCALE_PAD_BYTE (formats.weight_operands)."""
    return formats.weight_operands(*unswizzle(weight))
