"""Tensor-parallel MXFP4Linear (launchers.tensor_parallel) on two CPU ranks (gloo, spawned
processes running the kernels in the interpreter): column-parallel outputs the unsharded
layer's bit for bit, row-parallel ones the fp32 sum of their fp32 partials rounded once (within
the task's per-element tolerance of the unsharded layer), an MLP of both, the Quark fixture
loaded sharded, each shard held in the Hopper layout alone where the device takes the prepared
path (faked for the CPU), and splits the op or the attention cannot take refused in one line.

One spawn computes every case, on both ranks, and saves what each rank saw; the tests read it."""

import importlib.util
import os
import socket
from unittest import mock
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing
from safetensors.torch import load_file

from mxfp4_mm import launchers  # noqa: F401  (registers the op)
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.layouts import hopper as hopper_layout
from mxfp4_mm.launchers import prepared
from mxfp4_mm.launchers.linear import MXFP4Linear
from mxfp4_mm.launchers.proof import compare, reference_output
from mxfp4_mm.launchers.tensor_parallel import MXFP4ColwiseParallel, MXFP4RowwiseParallel

WORLD = 2
FIXTURE = Path(__file__).parent / "data" / "quark_tiny_llama"
MLP_PLAN = {"model.layers.*.mlp.gate_proj": "colwise", "model.layers.*.mlp.up_proj": "colwise",
            "model.layers.*.mlp.down_proj": "rowwise"}
NEEDS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
pytestmark = pytest.mark.interpreter


def _layer(n, k, seed):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(n, k, generator=generator).to(torch.bfloat16)
    bias = torch.randn(n, generator=generator).to(torch.bfloat16)
    return MXFP4Linear.from_mxfp4(*formats.quantize_mxfp4(weight), bias)


def _input(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def _partial_layer(codes, scales):
    """An MXFP4Linear of these codes and scales whose output is its fp32 sums, unrounded."""
    layer = MXFP4Linear.from_mxfp4(codes, scales)
    layer.out_dtype = torch.float32
    return layer


def _relative_error(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def _assert_refused_in_one_line(refusal, start):
    """refusal: what _refusal recorded; one line starting with `start`."""
    assert refusal is not None and refusal.startswith(start), refusal
    assert "\n" not in refusal


def _refusal(call):
    try:
        call()
    except (ValueError, TypeError) as error:
        return str(error)
    return None


def _cases(mesh):
    """What this rank computes and sees: {case: tensor or message}."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import parallelize_module
    seen = {}
    # column-parallel: N 64 over 2 ranks, output gathered and left sharded
    x = _input((2, 3, 256), 1)
    whole = _layer(64, 256, 2)
    seen["column whole"] = whole(x)
    gathered = parallelize_module(_layer(64, 256, 2), mesh,
                                  MXFP4ColwiseParallel(output_layouts=Replicate()))
    seen["column gathered"] = gathered(x)
    seen["column local"] = parallelize_module(_layer(64, 256, 2), mesh, MXFP4ColwiseParallel())(x)
    # row-parallel: K 256 over 2 ranks, the input whole (cut locally)
    x = _input((5, 256), 3)
    whole = _layer(32, 256, 4)
    seen["row whole"], seen["row bias"] = whole(x), whole.bias
    codes = formats.unshuffle_weight(whole.b_shuffle)
    scales = formats.e8m0_unshuffle(whole.b_scale_sh, 32, 8)
    seen["row reference"] = reference_output(x, codes, scales) + whole.bias
    seen["row partials"] = [_partial_layer(codes[:, 64 * r:64 * (r + 1)],
                                           scales[:, 4 * r:4 * (r + 1)])(
        x[:, 128 * r:128 * (r + 1)]) for r in range(WORLD)]
    seen["row"] = parallelize_module(_layer(32, 256, 4), mesh,
                                     MXFP4RowwiseParallel(input_layouts=Replicate()))(x)
    # an MLP: column- then row-parallel, the activation between them sharded
    mlp = torch.nn.Sequential(_layer(128, 64, 5), _layer(64, 128, 6))
    x = _input((4, 64), 7)
    seen["mlp whole"] = mlp(x)
    parallelize_module(mlp, mesh, {"0": MXFP4ColwiseParallel(), "1": MXFP4RowwiseParallel()})
    seen["mlp"] = mlp(x)
    # the Hopper layout alone, where the device takes the prepared path (faked for the CPU,
    # at any M): the whole layer read from that layout, each rank's shard held in it
    with mock.patch.object(prepared, "max_rows", lambda device: 1 << 30):
        for name, style, shape, x in (
                ("column", MXFP4ColwiseParallel(output_layouts=Replicate()), (64, 256, 2),
                 _input((2, 3, 256), 1)),
                ("row", MXFP4RowwiseParallel(input_layouts=Replicate()), (32, 256, 4),
                 _input((5, 256), 3))):
            layer = _layer(*shape)
            assert layer.holds_hopper_layout
            parallelize_module(layer, mesh, style)
            seen[f"{name} hopper"] = layer(x)
            seen[f"{name} hopper buffers"] = {
                key: buffer.untyped_storage().nbytes() for key, buffer in layer.named_buffers()}
    # refusals
    seen["refused column"] = _refusal(
        lambda: parallelize_module(_layer(48, 64, 8), mesh, MXFP4ColwiseParallel()))
    seen["refused row"] = _refusal(
        lambda: parallelize_module(_layer(16, 192, 8), mesh, MXFP4RowwiseParallel()))
    seen["refused linear"] = _refusal(
        lambda: parallelize_module(torch.nn.Linear(64, 32), mesh, MXFP4ColwiseParallel()))
    if NEEDS_TRANSFORMERS:
        from mxfp4_mm.launchers.quark import load_quark
        input_ids = load_file(FIXTURE / "quark_outputs.safetensors")["input_ids"]
        with torch.no_grad():
            seen["quark whole"] = load_quark(FIXTURE)(input_ids).logits
            model = load_quark(FIXTURE, device_mesh=mesh, tp_plan=MLP_PLAN)
            seen["quark"] = model(input_ids).logits
        seen["quark shards"] = {name: (module.out_features, module.in_features)
                                for name, module in model.named_modules()
                                if name.endswith("layers.0.mlp.up_proj")
                                or name.endswith("layers.0.mlp.down_proj")}
        seen["refused plan"] = _refusal(lambda: load_quark(FIXTURE, device_mesh=mesh))
        seen["refused whole linear"] = _refusal(lambda: load_quark(
            FIXTURE, device_mesh=mesh, tp_plan={"lm_head": "colwise"}))
    return seen


def _rank(rank, port, out):
    from torch.distributed.device_mesh import init_device_mesh
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        with torch.no_grad():
            seen = _cases(init_device_mesh("cpu", (WORLD,)))
        torch.save(seen, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """[what rank 0 saw, what rank 1 saw]"""
    out = tmp_path_factory.mktemp("ranks")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    torch.multiprocessing.spawn(_rank, args=(port, str(out)), nprocs=WORLD)
    return [torch.load(out / f"rank{rank}.pt") for rank in range(WORLD)]


def test_column_parallel_outputs_are_the_unsharded_layers_bit_for_bit(ranks):
    for rank, seen in enumerate(ranks):
        whole = seen["column whole"]
        assert torch.equal(seen["column gathered"], whole)
        assert torch.equal(seen["column local"], whole[..., rank * 32:(rank + 1) * 32])


def test_row_parallel_sums_the_fp32_partials_and_rounds_once(ranks):
    """Each rank's output is bf16(p0 + p1) + bias, p_r the fp32 product of rank r's columns
    (the op's fp32 output, never rounded to bf16): bit for bit, the same on both ranks; and on
    every element within the task's tolerance (1e-2 + 1e-2 |y|) of the unsharded layer and of
    the reference computation. Partials rounded to bf16 before their sum would miss that
    tolerance where they cancel, as they do on some elements here."""
    zero, one = ranks
    assert torch.equal(zero["row"], one["row"]) and torch.equal(zero["mlp"], one["mlp"])
    p0, p1 = zero["row partials"]
    assert p0.dtype == p1.dtype == torch.float32
    assert torch.equal(zero["row"], (p0 + p1).to(torch.bfloat16) + zero["row bias"])
    assert compare(zero["row"], zero["row whole"]) == (True, "")
    assert compare(zero["row"], zero["row reference"]) == (True, "")
    rounded_partials = (p0.to(torch.bfloat16).float() + p1.to(torch.bfloat16).float())
    assert not compare(rounded_partials.to(torch.bfloat16) + zero["row bias"],
                       zero["row whole"])[0]
    # an MLP, the row-parallel layer's input the column-parallel one's output left sharded
    assert compare(zero["mlp"], zero["mlp whole"]) == (True, "")


def test_where_the_device_takes_the_prepared_path_each_shard_holds_the_hopper_layout_alone(
        ranks):
    """The shards cut from a whole layer held in the Hopper layout, each held in it alone (its
    values and scales, the shard's N by K padded to the layout's K_ALIGN), compute the portable
    shards' outputs within the task's tolerance (the prepared kernel sums K in another order)."""
    for rank, seen in enumerate(ranks):
        for name, whole, (n, k) in (("column", "column gathered", (32, 256)),
                                    ("row", "row", (32, 128))):
            buffers = seen[f"{name} hopper buffers"]
            weight = {key: size for key, size in buffers.items() if "bias" not in key}
            kp = hopper_layout.padded_k(k)
            assert weight == {"hopper_values": n * kp // 2,
                              "hopper_scales": n * kp // formats.MX_BLOCK}, (rank, name)
            assert compare(seen[f"{name} hopper"], seen[whole]) == (True, ""), (rank, name)
        assert set(seen["row hopper buffers"]) == {"hopper_values", "hopper_scales",
                                                    "reduced_bias"}
        assert seen["column hopper buffers"]["bias"] == 2 * 32      # its rows' alone


def test_bad_splits_and_modules_are_refused_in_one_line(ranks):
    seen = ranks[1]
    for key, start in (
            ("refused column", "MXFP4ColwiseParallel: out_features 48 does not split over 2 "
                               "ranks into multiples of 16"),
            ("refused row", "MXFP4RowwiseParallel: in_features 192 does not split over 2 ranks "
                            "into multiples of 64"),
            ("refused linear", "MXFP4ColwiseParallel: expected an MXFP4Linear, got "
                               "torch.nn.modules.linear.Linear")):
        _assert_refused_in_one_line(seen[key], start)
    with pytest.raises(ValueError, match="^MXFP4ColwiseParallel: output_layouts must be "):
        MXFP4ColwiseParallel(output_layouts=object())


@pytest.mark.skipif(not NEEDS_TRANSFORMERS, reason="building the model needs transformers")
def test_the_quark_fixture_sharded_gives_the_unsharded_models_logits(ranks):
    """The tiny Llama's MLPs split over 2 ranks (its attention cannot be: 1 KV head), each rank
    holding half of each MXFP4 layer: the same logits on either rank, moved from the unsharded
    model's (relative L2 error) by less than bf16 moves the unsharded model from Quark's fp32
    logits (the row-parallel sums' other fp32 order, which can move a bf16 rounding and which
    the activation quantizers after them amplify; a wrong shard would be off by the whole
    signal)."""
    zero, one = ranks
    assert zero["quark shards"] == {"model.layers.0.mlp.up_proj": (64, 64),
                                    "model.layers.0.mlp.down_proj": (64, 64)}
    assert torch.equal(zero["quark"], one["quark"])
    quark_logits = load_file(FIXTURE / "quark_outputs.safetensors")["logits"]
    assert _relative_error(zero["quark"], zero["quark whole"]) <= \
        _relative_error(zero["quark whole"], quark_logits)
    for key, message in (
            ("refused plan", "model.layers.0.self_attn.k_proj: the tp_plan splits its 1 heads "
                             "of 32 over 2 ranks"),
            ("refused whole linear", "lm_head: the tp_plan splits it ('colwise'), but it is no "
                                     "MXFP4 layer")):
        _assert_refused_in_one_line(zero[key], message)

