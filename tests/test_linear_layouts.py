"""MXFP4Linear holds one copy of its weight, in the form its device computes with: the portable
form (b_shuffle, b_scale_sh) or, on a device that takes the prepared path
(launchers.prepared.serves), the Hopper layout alone. state_dict saves the portable form's
bytes whichever form is held, load_state_dict takes them into either form (in place), .to()
converts between the forms, and above the prepared path's M the Hopper layout's forward is the
op gemm on the portable form made for the call (at any M where the path has no limit). Either
form: out_dtype, torch.compile's tracing, mxfp4_weight (the plain weight), hold_mxfp4 (one
copy of the new weight), and the layer's other buffers saved and loaded as nn.Module does.

On the CPU a layer takes the prepared path where `prepared_path` says so (launchers.prepared's
max_rows patched to a limit like sm_90's), the interpreter running the prepared kernel; on an
NVIDIA GPU of sm_90 and up the round trip between a CPU layer and a GPU layer, compiled
(skipped elsewhere)."""

import copy
import math
from types import SimpleNamespace

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.kernels.layouts import hopper as layout
from mxfp4_mm.launchers import linear as linear_module
from mxfp4_mm.launchers import prepared
from mxfp4_mm.launchers.linear import MXFP4Linear
from mxfp4_mm.launchers.proof import reference_output

N, K = 64, 512          # K a multiple of the layout's K_ALIGN: neither form pads K
LIMIT = 7               # the prepared path's M limit while `prepared_path` is on (sm_90's today)


@pytest.fixture
def prepared_path(monkeypatch):
    """A switch (.on) for whether the CPU takes the prepared path: prepared.max_rows answers
    LIMIT for the CPU while on, None (no prepared path) otherwise."""
    switch = SimpleNamespace(on=False)
    monkeypatch.setattr(prepared, "max_rows", lambda device: LIMIT if switch.on and
                        torch.device(device).type == "cpu" else None)
    return switch


def _linear(n=N, k=K, seed=0, device="cpu"):
    torch.manual_seed(seed)
    return torch.nn.Linear(k, n, bias=True, dtype=torch.bfloat16, device=device)


def held_bytes(layer) -> int:
    """The bytes of every tensor the layer holds (its buffers, its parameters, tensors among
    its attributes and in tuples there), each storage counted once and whole."""
    tensors = [*layer.buffers(), *layer.parameters()]
    for value in vars(layer).values():
        tensors += [item for item in (value if isinstance(value, tuple) else (value,))
                    if isinstance(item, torch.Tensor)]
    storages = {tensor.untyped_storage().data_ptr(): tensor.untyped_storage().nbytes()
                for tensor in tensors}
    return sum(storages.values())


def portable_bytes(n, k) -> int:
    return n * k // 2 + math.prod(formats.scales_padded_shape(n, k)) + 2 * n     # bf16 bias


def hopper_bytes(n, k) -> int:
    kp = layout.padded_k(k)
    return n * kp // 2 + n * kp // formats.MX_BLOCK + 2 * n


def assert_same_state(state, expected):
    assert list(state) == list(expected)
    for key, tensor in expected.items():
        assert torch.equal(state[key].cpu(), tensor.cpu()), key


def test_on_a_device_that_takes_the_prepared_path_the_layer_holds_the_hopper_layout_alone(
        prepared_path):
    linear = _linear()
    portable = MXFP4Linear.from_linear(linear)
    assert held_bytes(portable) == portable_bytes(N, K)
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(linear)
    assert held_bytes(layer) == hopper_bytes(N, K)
    assert set(dict(layer.named_buffers())) == {"hopper_values", "hopper_scales", "bias"}
    moved = portable.to("cpu")       # the same layer, on a device that now takes the path
    assert moved.holds_hopper_layout and held_bytes(moved) == hopper_bytes(N, K)
    prepared_path.on = False
    assert not moved.to("cpu").holds_hopper_layout
    assert held_bytes(moved) == portable_bytes(N, K)


def test_a_layer_leaving_the_prepared_path_converts_before_it_moves(prepared_path, monkeypatch):
    """Where its weight is, so that no host code reads a copy still in flight (as
    .to("cpu", non_blocking=True) from a GPU leaves it); here the CPU, bound for meta."""
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(_linear())
    converted_on = []
    to_shuffled = layout.to_shuffled

    def recorded(weight):
        converted_on.append(weight.values.device.type)
        return to_shuffled(weight)
    monkeypatch.setattr(layout, "to_shuffled", recorded)
    layer.to("meta")
    assert converted_on == ["cpu"]
    assert not layer.holds_hopper_layout and layer.b_shuffle.is_meta


def test_state_dict_saves_the_portable_bytes_in_either_form_and_loads_into_either(prepared_path):
    linear = _linear()
    state = MXFP4Linear.from_linear(linear).state_dict()
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(linear)
    assert_same_state(layer.state_dict(), state)
    other = MXFP4Linear.from_linear(_linear(seed=1))
    values = other.hopper_values
    other.load_state_dict(state)
    assert other.hopper_values is values      # copied in place, as nn.Module loads
    assert torch.equal(other.hopper_values, layer.hopper_values)
    assert torch.equal(other.hopper_scales, layer.hopper_scales)
    assert other.wide_scales == layer.wide_scales
    prepared_path.on = False
    back = MXFP4Linear.from_linear(_linear(seed=1))
    back.load_state_dict(layer.state_dict())
    assert_same_state(back.state_dict(), state)
    assert_same_state(layer.to("cpu").state_dict(), state)


def test_the_scale_padding_is_the_same_bytes_in_either_form(prepared_path):
    """The runner leaves B_scale_sh's padding uninitialized: either form saves
    formats.SCALE_PAD_BYTE there, prepare_weight's bytes."""
    b_shuffle, b_scale_sh = formats.prepare_weight(_linear().weight.detach())
    padding = formats.e8m0_shuffle(torch.zeros(N, K // formats.MX_BLOCK, dtype=torch.uint8),
                                   pad_value=1) == 1
    garbage = torch.where(padding, 7, b_scale_sh)
    assert not torch.equal(garbage, b_scale_sh)
    expected = {"b_shuffle": b_shuffle, "b_scale_sh": b_scale_sh}
    assert_same_state(MXFP4Linear(b_shuffle, garbage).state_dict(), expected)
    prepared_path.on = True
    assert_same_state(MXFP4Linear(b_shuffle, garbage).state_dict(), expected)


def test_load_state_dict_names_missing_unexpected_and_misshapen_keys(prepared_path):
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(_linear())
    state = layer.state_dict()
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "b_scale_sh"'):
        layer.load_state_dict({"b_shuffle": state["b_shuffle"], "bias": state["bias"]})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "weight"'):
        layer.load_state_dict(dict(state, weight=torch.zeros(1)))
    with pytest.raises(RuntimeError, match=r"b_shuffle: expected uint8 \(64, 256\), got "
                                           r"torch.uint8 \(64, 128\)"):
        layer.load_state_dict(dict(state, b_shuffle=state["b_shuffle"][:, :128]))
    missing, unexpected = layer.load_state_dict({"bias": state["bias"]}, strict=False)
    assert missing == ["b_shuffle", "b_scale_sh"] and unexpected == []


def test_the_hopper_layout_takes_the_prepared_op_to_its_limit_then_the_op_gemm(prepared_path,
                                                                               monkeypatch):
    """Above the limit the op gemm gets the portable bytes; without a limit (a chip whose
    prepared path serves every M) the prepared op takes every M. out_dtype reaches either op
    where it is not their default."""
    calls = []

    def stand_in(name):
        def op(a, *operands):
            calls.append((name, a.shape[0], operands))
            return torch.zeros(a.shape[0], N, dtype=torch.bfloat16)
        return op
    monkeypatch.setattr(linear_module, "_GEMM", stand_in("gemm"))
    monkeypatch.setattr(linear_module, "_GEMM_PREPARED", stand_in("gemm_prepared"))
    linear = _linear()
    state = MXFP4Linear.from_linear(linear).state_dict()
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(linear)
    for m in (1, LIMIT, LIMIT + 1):
        layer(torch.zeros(m, K, dtype=torch.bfloat16))
    assert [(name, m) for name, m, _ in calls] == [
        ("gemm_prepared", 1), ("gemm_prepared", LIMIT), ("gemm", LIMIT + 1)]
    assert all(map(torch.equal, calls[-1][2], (state["b_shuffle"], state["b_scale_sh"])))
    assert len(calls[0][2]) == 4        # values, scales, K, wide_scales: no out_dtype
    layer.out_dtype = torch.float32
    for m in (1, LIMIT + 1):
        layer(torch.zeros(m, K, dtype=torch.bfloat16))
    assert [(name, operands[-1]) for name, _, operands in calls[-2:]] == [
        ("gemm_prepared", torch.float32), ("gemm", torch.float32)]
    layer.prepared_max_m = None
    layer(torch.zeros(1000, K, dtype=torch.bfloat16))
    assert calls[-1][:2] == ("gemm_prepared", 1000)


@pytest.mark.interpreter
def test_torch_compile_traces_the_hopper_layout_on_either_side_of_its_limit(prepared_path):
    """The compiled layer gives the eager bytes at an M the prepared op serves and above it
    (the portable form made in the graph), in bf16 and fp32."""
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(_linear())
    for out_dtype in (torch.bfloat16, torch.float32):
        layer.out_dtype = out_dtype
        compiled = torch.compile(lambda x: layer(x), backend="aot_eager", fullgraph=True,
                                 dynamic=True)
        for m in (3, LIMIT + 2):
            x = torch.randn(m, K, dtype=torch.bfloat16)
            y = compiled(x)
            assert y.dtype == out_dtype and torch.equal(y, layer(x)), (out_dtype, m)


@pytest.mark.interpreter
def test_an_fp32_layer_gives_the_same_sums_in_either_form(prepared_path):
    """out_dtype float32 (a row-parallel shard's): the prepared op's fp32 sums where the layer
    holds the Hopper layout, the op gemm's where it holds the portable form, the bias added in
    fp32; within the task's tolerance of each other (their K sums run in other orders)."""
    linear = _linear()
    portable = MXFP4Linear.from_linear(linear)
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(linear)
    for held in (portable, layer):
        held.out_dtype = torch.float32
    x = torch.randn(3, K, dtype=torch.bfloat16)
    y = layer(x)
    expected = prepared.gemm_prepared(x, layer.hopper_weight, torch.float32)
    assert y.dtype == torch.float32
    assert torch.equal(y, expected + linear.bias.detach().float())
    ok, message = reference.compare(y, portable(x))
    assert ok, message


def test_mxfp4_weight_is_the_plain_weight_in_either_form(prepared_path):
    codes, scales = formats.quantize_mxfp4(_linear().weight.detach())
    portable = MXFP4Linear.from_mxfp4(codes, scales)
    prepared_path.on = True
    layer = MXFP4Linear.from_mxfp4(codes, scales)
    assert layer.holds_hopper_layout and not portable.holds_hopper_layout
    for held in (portable, layer):
        assert all(map(torch.equal, held.mxfp4_weight(), (codes, scales)))


def test_hold_mxfp4_replaces_the_weight_by_one_copy_in_the_form_of_its_device(prepared_path):
    """As the tensor-parallel styles make a layer its shard: the module kept, the old weight
    dropped, the new one (of another shape) held in the Hopper layout alone."""
    linear = _linear()
    codes, scales = formats.quantize_mxfp4(linear.weight.detach())
    rows = slice(N // 2, N)
    shard = MXFP4Linear.from_mxfp4(codes[rows], scales[rows], linear.bias[rows])
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(linear)
    layer.hold_mxfp4(codes[rows], scales[rows], linear.bias[rows].clone())
    assert (layer.out_features, layer.in_features) == (N // 2, K)
    assert layer.holds_hopper_layout and held_bytes(layer) == hopper_bytes(N // 2, K)
    assert all(map(torch.equal, layer.mxfp4_weight(), (codes[rows], scales[rows])))
    assert_same_state(layer.state_dict(), shard.state_dict())


def test_state_dict_saves_and_loads_the_layers_other_buffers_in_either_form(prepared_path):
    """A buffer registered beside the weight (a row-parallel shard's reduced_bias) is saved
    and loaded as nn.Module saves and loads it."""
    linear = _linear()
    portable = MXFP4Linear.from_linear(linear)
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(linear)
    for held in (portable, layer):
        held.register_buffer("reduced_bias", torch.zeros(N, dtype=torch.bfloat16))
    state = dict(portable.state_dict(), reduced_bias=torch.ones(N, dtype=torch.bfloat16))
    assert list(state) == ["b_shuffle", "b_scale_sh", "bias", "reduced_bias"]
    assert_same_state(layer.state_dict(), portable.state_dict())
    layer.load_state_dict(state)
    assert torch.equal(layer.reduced_bias, state["reduced_bias"])


@pytest.mark.interpreter
def test_a_portable_layer_and_a_prepared_path_layer_round_trip_with_the_same_outputs(
        prepared_path):
    """A ragged K (320: the Hopper layout pads it to 256's multiple) and a bias; outputs the
    reference's in either form, the same bytes where both call the op gemm (above the limit)
    and where both hold the same form."""
    n, k = 48, 320
    linear = _linear(n, k)
    portable = MXFP4Linear.from_linear(linear)
    x = torch.randn(3, 2, k, dtype=torch.bfloat16)
    rows = torch.randn(LIMIT + 1, k, dtype=torch.bfloat16)
    y_portable, rows_portable = portable(x), portable(rows)
    state = portable.state_dict()
    prepared_path.on = True
    layer = MXFP4Linear.from_linear(_linear(n, k, seed=1))
    layer.load_state_dict(state)
    assert held_bytes(layer) == hopper_bytes(n, k)
    y = layer(x)
    codes, scales = formats.quantize_mxfp4(linear.weight.detach())
    expected = reference_output(x.reshape(6, k), codes, scales).float() + linear.bias.detach()
    ok, message = reference.compare(y.reshape(6, n), expected.to(torch.bfloat16))
    assert ok, message
    ok, message = reference.compare(y, y_portable)
    assert ok, message
    assert torch.equal(layer(rows), rows_portable)
    moved = portable.to("cpu")
    assert moved.holds_hopper_layout and torch.equal(moved(x), y)
    prepared_path.on = False
    back = moved.to("cpu")
    assert not back.holds_hopper_layout and torch.equal(back(x), y_portable)
    assert_same_state(back.state_dict(), state)


def test_on_an_sm90_gpu_the_layer_holds_one_copy_and_round_trips_with_a_cpu_layer(device):
    if not prepared.serves(device):
        pytest.skip(f"needs an NVIDIA GPU of sm_90 and up (the prepared path), not {device}")
    cpu_layer = MXFP4Linear.from_linear(_linear())
    state = cpu_layer.state_dict()
    layer = copy.deepcopy(cpu_layer).to(device)
    assert layer.holds_hopper_layout and held_bytes(layer) == hopper_bytes(N, K)
    assert_same_state(layer.state_dict(), state)
    other = MXFP4Linear.from_linear(_linear(seed=1, device=device))
    other.load_state_dict(state)
    assert torch.equal(other.hopper_values, layer.hopper_values)
    codes, scales = formats.quantize_mxfp4(_linear().weight.detach().to(device))
    b_shuffle, b_scale_sh = (state[key].to(device) for key in ("b_shuffle", "b_scale_sh"))
    limit = layer.prepared_max_m
    for m in (1, 3, 8, 64):
        x = torch.randn(m, K, dtype=torch.bfloat16, device=device)
        y = layer(x)
        assert torch.equal(other(x), y)
        bias = state["bias"].to(device)
        if limit is not None and m > limit:     # the op gemm on the portable form
            assert torch.equal(y, torch.ops.mxfp4_mm.gemm(x, b_shuffle, b_scale_sh) + bias)
        expected = reference_output(x, codes, scales).float() + bias
        ok, message = reference.compare(y, expected.to(torch.bfloat16))
        assert ok, (m, message)
    back = layer.to("cpu")
    assert not back.holds_hopper_layout and held_bytes(back) == portable_bytes(N, K)
    assert_same_state(back.state_dict(), state)
