"""Tests of kernels/layouts/cdna4.py, aiter's preshuffled weight layout: the host shuffles
against the index formulas docs/formats.md writes out (by hand here, never computed by the
module under test), their inverses bit for bit, and the in-kernel tile functions (rows,
columns, scale columns, pointers, loads, the K-tile step and the unshuffles) against the
host inverses."""

import pytest
import torch
import triton
import triton.language as tl

from mxfp4_mm.kernels.layouts.cdna4 import (
    e8m0_shuffle,
    e8m0_unshuffle,
    load_scale_tile,
    load_weight_tile,
    next_k_tile,
    scale_columns,
    scales_view,
    shuffle_weight,
    shuffled_scales_shape,
    unshuffle_scale_tile,
    unshuffle_weight,
    unshuffle_weight_tile,
    weight_tile_columns,
    weight_tile_pointers,
    weight_tile_rows,
    weight_view,
)


# ----------------------------------------------------------------------------- shuffle_weight

def _weight_flat_index(n, kb, kbytes):
    n0, n1 = divmod(n, 16)
    k0, rem = divmod(kb, 32)
    k1, k2 = divmod(rem, 16)
    return n0 * 16 * kbytes + k0 * 512 + k1 * 256 + n1 * 16 + k2


def test_shuffle_weight_index_formula():
    N, KB = 32, 64
    rows = torch.arange(N, dtype=torch.uint8).view(N, 1).expand(N, KB).contiguous()
    cols = torch.arange(KB, dtype=torch.uint8).view(1, KB).expand(N, KB).contiguous()
    out_r = shuffle_weight(rows).flatten().tolist()
    out_c = shuffle_weight(cols).flatten().tolist()
    seen = set()
    for n in range(N):
        for kb in range(KB):
            p = _weight_flat_index(n, kb, KB)
            assert (out_r[p], out_c[p]) == (n, kb)
            seen.add(p)
    assert len(seen) == N * KB


def test_shuffle_weight_index_formula_random_bytes():
    N, KB = 48, 96
    w = torch.randint(0, 256, (N, KB), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    out = shuffle_weight(w).flatten().tolist()
    wl = w.tolist()
    for n in range(N):
        for kb in range(KB):
            assert out[_weight_flat_index(n, kb, KB)] == wl[n][kb]


def test_shuffle_weight_hip_group_formula():
    # spec §3: row x, MX group y (16 bytes) lands at (x>>4)*16*Kb + (x&15)*16 + (y>>1)*512 + (y&1)*256.
    N, KB = 32, 64
    w = torch.randint(0, 256, (N, KB), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))
    out = shuffle_weight(w).flatten()
    for x in range(N):
        for y in range(KB // 16):
            start = (x >> 4) * 16 * KB + (x & 15) * 16 + (y >> 1) * 512 + (y & 1) * 256
            assert torch.equal(out[start:start + 16], w[x, 16 * y:16 * y + 16])


def test_shuffle_weight_first_tile_by_hand():
    # Kb = 32: the first 256 bytes are rows 0..15, bytes 0..15; the next 256 are bytes 16..31.
    w = torch.arange(16 * 32, dtype=torch.int32).remainder(256).to(torch.uint8).view(16, 32)
    out = shuffle_weight(w).flatten().tolist()
    assert out[0:16] == list(range(0, 16))           # row 0, bytes 0..15
    assert out[16:32] == list(range(32, 48))         # row 1, bytes 0..15
    assert out[256:272] == list(range(16, 32))       # row 0, bytes 16..31


@pytest.mark.parametrize("shape", [(16, 32), (32, 64), (64, 96), (128, 256)])
def test_shuffle_unshuffle_weight_inverse(shape):
    gen = torch.Generator().manual_seed(shape[0] * 1000 + shape[1])
    w = torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen)
    s = shuffle_weight(w)
    assert s.shape == w.shape and s.dtype == torch.uint8
    assert not torch.equal(s, w)
    assert torch.equal(unshuffle_weight(s), w)
    assert torch.equal(shuffle_weight(unshuffle_weight(w)), w)


def test_shuffle_weight_fp4x2_dtype():
    w = torch.randint(0, 256, (32, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(5))
    w4 = w.view(torch.float4_e2m1fn_x2)
    s4 = shuffle_weight(w4)
    assert s4.dtype == torch.float4_e2m1fn_x2 and s4.shape == (32, 64)
    assert torch.equal(s4.view(torch.uint8), shuffle_weight(w))
    u4 = unshuffle_weight(s4)
    assert u4.dtype == torch.float4_e2m1fn_x2
    assert torch.equal(u4.view(torch.uint8), w)


@pytest.mark.parametrize("shape", [(8, 32), (24, 64), (17, 32), (16, 48), (16, 16)])
@pytest.mark.parametrize("fn", [shuffle_weight, unshuffle_weight])
def test_shuffle_weight_rejects_bad_shapes(fn, shape):
    with pytest.raises(ValueError):
        fn(torch.zeros(shape, dtype=torch.uint8))


def test_a_bad_shape_is_refused_naming_n_and_k_half():
    with pytest.raises(ValueError, match=r"^shuffle_weight needs N % 16 == 0 and K/2 % 32 == 0 "
                                         r"\(K % 64 == 0\), got N=24, K/2=64$"):
        shuffle_weight(torch.zeros((24, 64), dtype=torch.uint8))


def test_the_shuffles_stay_on_their_tensors_device():
    """The meta device standing in for a GPU: the output where the input is, its padding
    included."""
    scales = torch.empty((40, 12), dtype=torch.uint8, device="meta")
    out = e8m0_shuffle(scales, pad_value=127)
    assert out.device.type == "meta" and out.shape == (256, 16)
    assert e8m0_unshuffle(out, 40, 12).device.type == "meta"
    codes = torch.empty((32, 64), dtype=torch.uint8, device="meta")
    assert shuffle_weight(codes).device.type == "meta"
    assert unshuffle_weight(codes).device.type == "meta"


# ----------------------------------------------------------------------------- e8m0_shuffle

def _scale_flat_index(r, c, sn):
    r0, rem = divmod(r, 32)
    r1, r2 = divmod(rem, 16)
    c0, crem = divmod(c, 8)
    c1, c2 = divmod(crem, 4)
    return r0 * 32 * sn + c0 * 256 + c2 * 64 + r2 * 4 + c1 * 2 + r1


@pytest.mark.parametrize("rows,cols,expected", [(40, 12, (256, 16)), (1, 1, (256, 8)),
                                                (256, 8, (256, 8)), (300, 9, (512, 16))])
def test_e8m0_shuffle_shape(rows, cols, expected):
    out = e8m0_shuffle(torch.zeros(rows, cols, dtype=torch.uint8))
    assert out.shape == expected and out.dtype == torch.uint8


def test_e8m0_shuffle_index_formula():
    R, C = 40, 12
    sm, sn = 256, 16
    rr = torch.arange(R, dtype=torch.uint8).view(R, 1).expand(R, C).contiguous()
    cc = torch.arange(C, dtype=torch.uint8).view(1, C).expand(R, C).contiguous()
    out_r = e8m0_shuffle(rr, pad_value=0xFF).flatten().tolist()
    out_c = e8m0_shuffle(cc, pad_value=0xFF).flatten().tolist()
    hit = set()
    for r in range(R):
        for c in range(C):
            p = _scale_flat_index(r, c, sn)
            assert (out_r[p], out_c[p]) == (r, c)
            hit.add(p)
    assert len(hit) == R * C
    for p in range(sm * sn):
        if p not in hit:
            assert out_r[p] == 0xFF and out_c[p] == 0xFF


def test_e8m0_shuffle_index_formula_over_padded_range():
    # The formula holds for pad positions too: feed a full [256, 16] tensor.
    sm, sn = 256, 16
    s = torch.randint(0, 256, (sm, sn), dtype=torch.uint8, generator=torch.Generator().manual_seed(6))
    out = e8m0_shuffle(s).flatten().tolist()
    sl = s.tolist()
    for r in range(sm):
        for c in range(sn):
            assert out[_scale_flat_index(r, c, sn)] == sl[r][c]


def test_e8m0_shuffle_first_chunk_by_hand():
    # Bytes 0..7 of the first 256-byte chunk: (r2=0, c2=0): c1,r1 in {0,1} -> S[0,0], S[16,0],
    # S[0,4], S[16,4]; then r2=1: S[1,0], S[17,0], S[1,4], S[17,4]. Byte 64 is S[0,1].
    s = torch.arange(32 * 8, dtype=torch.int32).to(torch.uint8).view(32, 8)   # S[r,c] = 8r + c
    out = e8m0_shuffle(s).flatten().tolist()
    assert out[:8] == [0, 128, 4, 132, 8, 136, 12, 140]
    assert out[64] == 1


@pytest.mark.parametrize("pad_value", [0, 0xFF])
def test_e8m0_shuffle_padding_value(pad_value):
    R, C = 40, 12
    s = torch.randint(1, 255, (R, C), dtype=torch.uint8, generator=torch.Generator().manual_seed(8))
    out = e8m0_shuffle(s, pad_value=pad_value).flatten()
    mask = torch.ones(256 * 16, dtype=torch.bool)
    for r in range(R):
        for c in range(C):
            mask[_scale_flat_index(r, c, 16)] = False
    assert mask.sum().item() == 256 * 16 - R * C
    assert (out[mask] == pad_value).all()
    assert ((out[~mask] != 0) & (out[~mask] != 255)).all()


def test_e8m0_shuffle_default_pad_is_zero():
    out = e8m0_shuffle(torch.full((1, 1), 127, dtype=torch.uint8))
    assert out.flatten()[0].item() == 127
    assert out.sum().item() == 127


@pytest.mark.parametrize("rows,cols", [(1, 1), (40, 12), (256, 8), (300, 9), (512, 24)])
def test_e8m0_shuffle_round_trip(rows, cols):
    gen = torch.Generator().manual_seed(rows * 100 + cols)
    s = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, generator=gen)
    sh = e8m0_shuffle(s, pad_value=0xFF)
    back = e8m0_unshuffle(sh, rows, cols)
    assert back.shape == (rows, cols)
    assert torch.equal(back, s)


def test_e8m0_unshuffle_then_shuffle_full():
    gen = torch.Generator().manual_seed(9)
    p = torch.randint(0, 256, (512, 16), dtype=torch.uint8, generator=gen)
    assert torch.equal(e8m0_shuffle(e8m0_unshuffle(p, 512, 16)), p)


def test_e8m0_shuffle_keeps_e8m0_dtype():
    s = torch.randint(0, 255, (40, 12), dtype=torch.uint8, generator=torch.Generator().manual_seed(10))
    se = s.view(torch.float8_e8m0fnu)
    sh = e8m0_shuffle(se, pad_value=0xFF)
    assert sh.dtype == torch.float8_e8m0fnu and sh.shape == (256, 16)
    assert torch.equal(sh.view(torch.uint8), e8m0_shuffle(s, pad_value=0xFF))
    back = e8m0_unshuffle(sh, 40, 12)
    assert back.dtype == torch.float8_e8m0fnu
    assert torch.equal(back.view(torch.uint8), s)


def test_e8m0_shuffle_gemm_view_rows():
    # spec §2.1: the GEMM reads [sm/32, sn*32]; row r0 holds exactly the rows 32*r0..32*r0+31.
    s = torch.randint(0, 256, (64, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(11))
    sh = e8m0_shuffle(s).view(256 // 32, 8 * 32)
    for r0 in range(2):
        assert sorted(sh[r0].tolist()) == sorted(s[32 * r0:32 * r0 + 32].flatten().tolist())
    assert (sh[2:] == 0).all()


# ----------------------------------------------------------------------------- host views

@pytest.mark.parametrize("rows,cols,expected", [(1, 1, (256, 8)), (256, 8, (256, 8)),
                                                (257, 9, (512, 16)), (40, 16, (256, 16))])
def test_shuffled_scales_shape(rows, cols, expected):
    assert shuffled_scales_shape(rows, cols) == expected


def test_the_kernels_views_keep_the_bytes_and_group_16_and_32_rows():
    codes = torch.randint(0, 256, (48, 160), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(12))
    b_shuffle = shuffle_weight(codes)
    view = weight_view(b_shuffle.view(torch.float4_e2m1fn_x2))
    assert view.dtype == torch.uint8 and view.shape == (3, 160 * 16)
    assert torch.equal(view.flatten(), b_shuffle.flatten())
    b_scale_sh = e8m0_shuffle(torch.zeros(48, 10, dtype=torch.uint8))
    sview = scales_view(b_scale_sh.view(torch.float8_e8m0fnu))
    assert sview.dtype == torch.uint8 and sview.shape == (256 // 32, 16 * 32)
    assert torch.equal(sview.flatten(), b_scale_sh.flatten())


# ----------------------------------------------------------------------------- kernel tiles

@triton.jit
def _unshuffled_tiles_kernel(b_ptr, bs_ptr, codes_ptr, scales_ptr, N, K, stride_bn, stride_bsn,
                             stride_codes, stride_scales, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    """Program pid_n walks the K tiles of weight rows pid_n * BLOCK_N on and stores each tile's
    unshuffled codes and scales at their logical place (K padded to whole tiles)."""
    pid_n = tl.program_id(0)
    rows_b, rows_bs = weight_tile_rows(pid_n, N, BLOCK_N)
    cols_b, cols_bs = weight_tile_columns(BLOCK_K)
    groups = scale_columns(cols_bs, 0)
    b_ptrs, bs_ptrs = weight_tile_pointers(b_ptr, bs_ptr, rows_b, rows_bs, cols_b, cols_bs, 0,
                                           stride_bn, stride_bsn)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    for k_iter in range(tl.cdiv(K, BLOCK_K)):
        k0 = k_iter * BLOCK_K
        codes = unshuffle_weight_tile(load_weight_tile(b_ptrs, k0, K, EVEN_K, "", BLOCK_K),
                                      BLOCK_N, BLOCK_K)
        scales = unshuffle_scale_tile(load_scale_tile(bs_ptrs, groups, k0, K, EVEN_K, ""),
                                      BLOCK_N, BLOCK_K)
        cols_c = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        cols_s = k0 // 32 + tl.arange(0, BLOCK_K // 32)
        tl.store(codes_ptr + rows[:, None] * stride_codes + cols_c[None, :], codes)
        tl.store(scales_ptr + rows[:, None] * stride_scales + cols_s[None, :], scales)
        b_ptrs, bs_ptrs = next_k_tile(b_ptrs, bs_ptrs, BLOCK_K)


@pytest.mark.parametrize("n,k,block_n,block_k", [
    (64, 512, 32, 256),      # two tiles of rows, two K tiles
    (96, 1024, 64, 512),     # the last row tile wraps past N
    (48, 320, 32, 256),      # N not a multiple of 32, a ragged last K tile of 64 elements
    (256, 768, 256, 256),    # one row tile of the whole scale padding
])
def test_the_kernel_tiles_unshuffle_to_the_host_inverses(n, k, block_n, block_k, device):
    gen = torch.Generator().manual_seed(n + k)
    codes = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    scales = torch.randint(0, 255, (n, k // 32), dtype=torch.uint8, generator=gen)
    b_shuffle = shuffle_weight(codes)
    b_scale_sh = e8m0_shuffle(scales, pad_value=0xFF)
    b, bs = weight_view(b_shuffle).to(device), scales_view(b_scale_sh).to(device)
    row_tiles, k_tiles = triton.cdiv(n, block_n), triton.cdiv(k, block_k)
    out_codes = torch.full((row_tiles * block_n, k_tiles * block_k // 2), 0xAA, dtype=torch.uint8,
                           device=device)
    out_scales = torch.full((row_tiles * block_n, k_tiles * block_k // 32), 0xAA,
                            dtype=torch.uint8, device=device)
    even_k = k % block_k == 0
    _unshuffled_tiles_kernel[(row_tiles,)](b, bs, out_codes, out_scales, n, k, b.stride(0),
                                           bs.stride(0), out_codes.stride(0),
                                           out_scales.stride(0), block_n, block_k, even_k)
    out_codes, out_scales = out_codes.cpu(), out_scales.cpu()
    assert torch.equal(out_codes[:n, :k // 2], unshuffle_weight(b_shuffle))
    assert torch.equal(out_scales[:n, :k // 32], e8m0_unshuffle(b_scale_sh, n, k // 32))
    # Past K, a ragged tile reads code 0 and scale 127 (1.0), never the padding's 0xFF.
    assert (out_codes[:n, k // 2:] == 0).all()
    assert (out_scales[:n, k // 32:] == 127).all()
    # Rows past N wrap onto the weight's first rows (their codes; their results are masked).
    if row_tiles * block_n > n:
        assert torch.equal(out_codes[n:, :k // 2], codes[:row_tiles * block_n - n])
