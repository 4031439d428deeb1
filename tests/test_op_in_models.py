"""The op inside a model's forward pass: a shape's first call builds its launcher in a thread of
its own (so it may come inside a CUDA graph's warm-up or capture), torch.compile's
"reduce-overhead" mode, plain graph capture, two queues at once, and a two-layer MLP of
MXFP4Linear. The GPU tests are skipped without CUDA."""

import subprocess
import sys
import threading
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters

from mxfp4_mm import launchers
from mxfp4_mm import reference
from mxfp4_mm.launchers.task_shapes import TASK_SHAPES
from mxfp4_mm.launchers.linear import MXFP4Linear

ROOT = Path(__file__).resolve().parents[1]
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
# Every task shape, and M = 1, 7, 100 on the N, K of a split-K and a single-pass task shape.
GRAPH_SHAPES = TASK_SHAPES + tuple((m, n, k) for m in (1, 7, 100)
                                   for n, k in ((2112, 7168), (2880, 512)))
FRESH_INPUTS = 20
QUEUE_ROUNDS = 50
SLEEP_CYCLES = 2_000_000        # torch.cuda._sleep: about a millisecond at H200 clocks


@pytest.fixture
def no_launchers(monkeypatch):
    """An empty launcher cache: the next call of every shape is its first."""
    monkeypatch.setattr(launchers, "_launchers", OrderedDict())


def _weights(shape, device, seed=21):
    _, _, _, b_shuffle, b_scale_sh = reference.generate_input(*shape, seed=seed, device=device)
    return b_shuffle, b_scale_sh


def _fresh_a(shape, generator, device="cuda"):
    m, _, k = shape
    return torch.randn(m, k, generator=generator, dtype=torch.bfloat16, device=device)


# ---------------------------------------------------------------------------------------
# the build in a thread of its own (CPU)
# ---------------------------------------------------------------------------------------

def _problem(device):
    """Inputs on the test device (CPU tensors are refused where the kernels run on a GPU)."""
    return (torch.zeros(4, 256, dtype=torch.bfloat16, device=device),
            torch.zeros(64, 128, dtype=torch.uint8, device=device),
            torch.zeros(256, 8, dtype=torch.uint8, device=device))


def test_the_first_call_builds_in_a_thread_of_its_own(no_launchers, monkeypatch, device):
    built_in = []

    def build(arch, backend, m, n, k, a_strides, device, out_dtype):
        built_in.append(threading.current_thread())
        return lambda a, b_shuffle, b_scale_sh: torch.full((m, n), 2.0, dtype=torch.bfloat16,
                                                           device=a.device)

    monkeypatch.setattr(launchers, "proven_launcher", build)
    out = launchers.mxfp4_gemm(*_problem(device))
    assert torch.equal(out.cpu(), torch.full((4, 64), 2.0, dtype=torch.bfloat16))
    launchers.mxfp4_gemm(*_problem(device))                 # cached: no second build
    assert len(built_in) == 1 and built_in[0] is not threading.current_thread()


def test_a_build_error_reaches_the_caller(no_launchers, monkeypatch, device):
    def build(*args, **options):
        raise ValueError("no such config")

    monkeypatch.setattr(launchers, "proven_launcher", build)
    with pytest.raises(ValueError, match="no such config"):
        launchers.mxfp4_gemm(*_problem(device))
    assert launchers.cached_launcher_count() == 0


def test_a_capture_that_forbids_the_build_is_named_in_one_line(no_launchers, monkeypatch,
                                                               device):
    def build(*args, **options):
        raise RuntimeError("mxfp4-mm: no launcher for 4x64x256 passed its proof: software "
                           "quantizer: RuntimeError: CUDA error: operation not permitted when "
                           "stream is capturing")

    monkeypatch.setattr(launchers, "proven_launcher", build)
    with pytest.raises(RuntimeError) as error:
        launchers.mxfp4_gemm(*_problem(device))
    message = str(error.value)
    assert "first call of shape 4x64x256 is inside a CUDA graph capture" in message
    assert 'capture_error_mode="thread_local"' in message and "\n" not in message


def test_a_launcher_holds_only_its_counter_rows():
    """Partials and outputs are made per call; what a launcher holds (the in-kernel reduce's
    counter rows) is made when it is built, in the build thread, outside
    any graph's memory pool."""
    from mxfp4_mm.launchers.gemm_config import GemmConfig
    from mxfp4_mm.launchers.gemm import GemmLauncher
    config = GemmConfig(16, 64, 256, split_k=2, split_k_reduce="last_program")
    launcher = GemmLauncher(config, "interpreter", 16, 64, 512, (512, 1), "cpu")
    assert launcher.reduces_in_kernel
    held = [name for name, value in vars(launcher).items() if isinstance(value, torch.Tensor)]
    assert held == []
    assert len(launcher.counter_rows) > 1
    plain = GemmLauncher(GemmConfig(16, 64, 256), "interpreter", 16, 64, 512, (512, 1), "cpu")
    assert plain.counter_rows is None


# ---------------------------------------------------------------------------------------
# GPU: graphs, queues, the layer
# ---------------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("shape", GRAPH_SHAPES)
def test_reduce_overhead_with_the_first_call_inside_gives_the_eager_bytes(shape, no_launchers):
    torch._dynamo.reset()
    counters.clear()
    b_shuffle, b_scale_sh = _weights(shape, "cuda")
    compiled = torch.compile(lambda a: torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh),
                             mode="reduce-overhead", fullgraph=True)
    generator = torch.Generator(device="cuda").manual_seed(22)
    for index in range(FRESH_INPUTS):
        a = _fresh_a(shape, generator)
        out = compiled(a).clone()        # the first one builds the launcher, inside
        eager = torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh)
        assert torch.equal(out, eager), (shape, index)
    assert launchers.cached_launcher_count() == 1
    assert counters["inductor"]["cudagraph_skips"] == 0     # graphs were recorded and replayed


@gpu
@pytest.mark.parametrize("mode", ["thread_local", "relaxed"])
@pytest.mark.parametrize("shape", [(16, 2112, 7168), (4, 2880, 512), (7, 3072, 1536)])
def test_a_capture_with_the_first_call_inside_replays_the_eager_bytes(shape, mode,
                                                                      no_launchers):
    b_shuffle, b_scale_sh = _weights(shape, "cuda")
    generator = torch.Generator(device="cuda").manual_seed(23)
    static_a = _fresh_a(shape, generator)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode=mode):
        static_out = torch.ops.mxfp4_mm.gemm(static_a, b_shuffle, b_scale_sh)
    for index in range(5):
        a = _fresh_a(shape, generator)
        static_a.copy_(a)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out, torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh)), index


GLOBAL_CAPTURE = """
import torch; from mxfp4_mm import launchers; import reference
_, _, _, b_shuffle, b_scale_sh = reference.generate_input(4, 2880, 512, seed=1, device="cuda")
static_a = torch.randn(4, 512, dtype=torch.bfloat16, device="cuda")
torch.cuda.synchronize()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_out = torch.ops.mxfp4_mm.gemm(static_a, b_shuffle, b_scale_sh)
a = torch.randn(4, 512, dtype=torch.bfloat16, device="cuda")
static_a.copy_(a)
graph.replay()
same = torch.equal(static_out, torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh))
print("replay equals eager" if same else "replay differs from eager")
"""


@gpu
def test_a_capture_in_global_mode_with_the_first_call_inside_works_or_names_the_shape():
    """torch.cuda.graph's default error mode may make CUDA refuse the build thread's calls
    (it does on the H200): then the op's error is one line naming the shape; else
    the replay is right."""
    result = subprocess.run([sys.executable, "-c", GLOBAL_CAPTURE], cwd=ROOT, text=True,
                            capture_output=True, timeout=90)
    refusal = ("RuntimeError: mxfp4_mm.gemm: the first call of shape 4x2880x512 is inside a "
               "CUDA graph capture")
    if result.returncode == 0:
        assert "replay equals eager" in result.stdout
    else:
        assert refusal in result.stderr, result.stderr[-3000:]


@gpu
@pytest.mark.parametrize("shape", TASK_SHAPES)
def test_two_queues_released_together_give_the_serial_results(shape):
    """Both queues wait on one event behind a sleep kernel, so their calls start together."""
    b_shuffle, b_scale_sh = _weights(shape, "cuda")
    generator = torch.Generator(device="cuda").manual_seed(24)
    torch.ops.mxfp4_mm.gemm(_fresh_a(shape, generator), b_shuffle, b_scale_sh)   # built
    queues = [torch.cuda.Stream() for _ in range(2)]
    wrong = []
    for round_index in range(QUEUE_ROUNDS):
        inputs = [_fresh_a(shape, generator) for _ in queues]
        release = torch.cuda.Event()
        torch.cuda._sleep(SLEEP_CYCLES)
        release.record()
        outputs = []
        for queue, a in zip(queues, inputs):
            with torch.cuda.stream(queue):
                queue.wait_event(release)
                outputs.append(torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh))
        torch.cuda.synchronize()
        serial = [torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh) for a in inputs]
        wrong += [round_index for out, want in zip(outputs, serial) if not torch.equal(out, want)]
    assert wrong == [], f"{shape}: wrong outputs in rounds {wrong}"


@gpu
def test_a_two_layer_mlp_under_reduce_overhead_gives_the_eager_bytes(no_launchers):
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(25)
    mlp = torch.nn.Sequential(
        MXFP4Linear.from_linear(torch.nn.Linear(512, 1024, dtype=torch.bfloat16, device="cuda")),
        torch.nn.ReLU(),
        MXFP4Linear.from_linear(torch.nn.Linear(1024, 512, dtype=torch.bfloat16, device="cuda")))
    compiled = torch.compile(mlp, mode="reduce-overhead", fullgraph=True)
    for leading in ((1,), (7,), (2, 50)):
        for index in range(4):
            x = torch.randn(*leading, 512, dtype=torch.bfloat16, device="cuda")
            out = compiled(x).clone()
            assert torch.equal(out, mlp(x)), (leading, index)
    assert counters["inductor"]["cudagraph_skips"] == 0
