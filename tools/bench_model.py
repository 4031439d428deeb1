"""tools.bench --model: one decode step of an MXFP4 model beside its bf16 twin (tools/bench.py
says how it is run and what it prints)."""

import argparse
import contextlib
import functools
import time

import torch

from .evaluate import _num
from .timing import RunnerLoop, time_variant

def dequantized_linear(layer) -> torch.nn.Linear:
    """The bf16 nn.Linear of an MXFP4Linear: its dequantized weight and its bias, on its device."""
    from mxfp4_mm.kernels import formats
    n, k = layer.out_features, layer.in_features
    codes, scales = layer.mxfp4_weight()
    linear = torch.nn.Linear(k, n, bias=layer.bias is not None, dtype=torch.bfloat16,
                             device=codes.device)
    with torch.no_grad():
        linear.weight.copy_(formats.dequantize_mxfp4(codes, scales))
        if layer.bias is not None:
            linear.bias.copy_(layer.bias)
    return linear


def bf16_twin(model):
    """A copy of `model` whose every MXFP4Linear is its dequantized_linear."""
    import copy
    from mxfp4_mm.launchers.linear import MXFP4Linear
    twin = copy.deepcopy(model)
    for name, module in list(twin.named_modules()):
        if isinstance(module, MXFP4Linear):
            parent, _, attribute = name.rpartition(".")
            setattr(twin.get_submodule(parent), attribute, dequantized_linear(module))
    return twin


def mxfp4_llama(config: dict, device):
    """A LlamaForCausalLM of these LlamaConfig fields on `device`, random bf16 weights, each
    linear of its decoder layers an MXFP4Linear (MXFP4Linear.from_linear), lm_head kept."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    from mxfp4_mm.launchers.linear import MXFP4Linear
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(LlamaConfig(**config),
                                                 dtype=torch.bfloat16).eval()
    for name, module in list(model.model.layers.named_modules()):
        if isinstance(module, torch.nn.Linear):
            parent, _, attribute = name.rpartition(".")
            setattr(model.model.layers.get_submodule(parent), attribute,
                    MXFP4Linear.from_linear(module))
    return model


def load_model(source, device):
    """--model's model: a Quark export's folder through load_quark, or a name of LLAMA_CONFIGS
    through mxfp4_llama."""
    from .model_shapes import LLAMA_CONFIGS
    if str(source) in LLAMA_CONFIGS:
        return mxfp4_llama(LLAMA_CONFIGS[str(source)], device)
    from mxfp4_mm.launchers.linear import load_quark
    return load_quark(source, device=device)


def decode_step(model, input_ids):
    """One decode step of len(input_ids) sequences: their logits, no KV cache kept."""
    with torch.no_grad():
        return model(input_ids=input_ids, use_cache=False).logits


class EmulatedMXFP4Linear(torch.nn.Module):
    """One MXFP4Linear by the reference's rule in torch (launchers.proof.reference_output):
    bf16(dequant(quantize(x)) @ W^T) in fp32, plus the bias, where W is the layer's dequantized
    weight, which its bf16 twin's nn.Linear holds exactly (E2M1 times a power of two)."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        from mxfp4_mm.kernels import formats
        rows = x.reshape(-1, x.shape[-1])
        values = formats.dequantize_mxfp4(*formats.quantize_mxfp4(rows))
        y = (values @ self.linear.weight.float().T).to(torch.bfloat16)
        if self.linear.bias is not None:
            y = y + self.linear.bias
        return y.view(*x.shape[:-1], y.shape[-1])


@contextlib.contextmanager
def emulating(twin, names):
    """Inside: `twin` (bf16_twin's) with each linear of `names` an EmulatedMXFP4Linear of it,
    so that twin is the MXFP4 model emulated exactly; outside, as it was."""
    swapped = {name: twin.get_submodule(name) for name in names}

    def put(modules):
        for name, module in modules.items():
            parent, _, attribute = name.rpartition(".")
            setattr(twin.get_submodule(parent), attribute, module)
    put({name: EmulatedMXFP4Linear(linear) for name, linear in swapped.items()})
    try:
        yield twin
    finally:
        put(swapped)


# the modes a step is timed in, and the torch.compile mode of those that compile the model
MODEL_MODES = ("eager", "captured", "reduce-overhead", "compiled")
DEFAULT_MODEL_MODES = ("eager", "captured", "compiled")
COMPILE_MODES = {"reduce-overhead": "reduce-overhead", "compiled": "max-autotune-no-cudagraphs"}
# the targets for the MXFP4 step over its bf16 twin's: {mode: {M: ratio}}, "*" any M
MODEL_TARGETS = {"eager": {"*": 1.05}, "captured": {1: 0.5, 8: 0.6},
                 "reduce-overhead": {1: 0.5, 8: 0.6}}


MODEL_LEGEND = ("mean µs of one decode step (input_ids [M, 1], no KV cache) in the runner's "
                "loop, per mode: eager; captured (a torch.cuda.graph of the step, replayed); "
                "reduce-overhead (torch.compile mode 'reduce-overhead', when asked for); "
                f"compiled (torch.compile mode {COMPILE_MODES['compiled']!r}); ratio: MXFP4 "
                "step / bf16 "
                "twin's, beside its target; relative L2 difference of the MXFP4 logits from the "
                "bf16 twin's, from the eager MXFP4 step's and from the model emulated exactly "
                "(dequantized weights, activations quantized by the reference's rule in torch), "
                "and the task's element check (rtol = atol = 1e-2) against the emulated logits")


def parse_modes(text: str) -> tuple:
    """--modes' value, e.g. "eager,captured" -> ("eager", "captured"), in MODEL_MODES' order."""
    words = [word for word in text.split(",") if word]
    unknown = [word for word in words if word not in MODEL_MODES]
    if unknown or not words:
        raise argparse.ArgumentTypeError(f"expected some of {','.join(MODEL_MODES)}, got "
                                         f"{text!r}")
    return tuple(mode for mode in MODEL_MODES if mode in words)


def model_target(mode: str, m: int):
    targets = MODEL_TARGETS.get(mode, {})
    return targets.get(m, targets.get("*"))


def captured_step(model, input_ids):
    """A call that replays a CUDA graph of decode_step(model, input_ids) and returns the logits
    it writes (input_ids read where they are); the step runs eagerly once first, so that every
    launcher is built and proven before the capture."""
    decode_step(model, input_ids)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = decode_step(model, input_ids)

    def replay():
        graph.replay()
        return logits
    return replay


def mode_steps(mode, models, input_ids):
    """{"mxfp4", "bf16": a call of one decode step of that model in `mode` (MODEL_MODES)};
    models holds each model as "mxfp4" and "bf16", and, compiled once by the caller for a mode
    of COMPILE_MODES, as "MODE mxfp4" and "MODE bf16"."""
    if mode == "captured":
        return {name: captured_step(models[name], input_ids) for name in ("mxfp4", "bf16")}
    prefix = f"{mode} " if mode in COMPILE_MODES else ""
    return {name: functools.partial(decode_step, models[prefix + name], input_ids)
            for name in ("mxfp4", "bf16")}


def relative_l2(got, want) -> float:
    got, want = got.float(), want.float()
    return ((got - want).norm() / want.norm()).item()


def profile_summary(step, rows: int = 12) -> str:
    """torch.profiler's table of a few calls of `step`: the ops that take the most device time
    and the most host time, each with its count."""
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(PROFILED_STEPS):
            step()
        torch.cuda.synchronize()
    events = profiler.key_averages()
    return "\n".join([f"{PROFILED_STEPS} steps, by device time:",
                      events.table(sort_by="self_device_time_total", row_limit=rows),
                      f"{PROFILED_STEPS} steps, by host time:",
                      events.table(sort_by="self_cpu_time_total", row_limit=rows)])


PROFILED_STEPS = 5


def model_row(mode, m, steps, time_us, eager_logits) -> dict:
    """One (mode, M): both steps' mean µs, their ratio beside the target, and how far the MXFP4
    logits lie from the twin's, from the eager MXFP4 step's and (eager_logits["emulated"]) from
    the emulated model's."""
    from mxfp4_mm.launchers.proof import compare
    logits = {name: step().float() for name, step in steps.items()}
    torch.cuda.synchronize()
    row = {"mode": mode, "m": m, "target": model_target(mode, m)}
    row.update({f"{name}_us": time_us(step) for name, step in steps.items()})
    row["ratio"] = row["mxfp4_us"] / row["bf16_us"]
    row["met"] = None if row["target"] is None else row["ratio"] <= row["target"]
    row["rel_bf16"] = relative_l2(logits["mxfp4"], logits["bf16"])
    row["rel_eager"] = relative_l2(logits["mxfp4"], eager_logits["mxfp4"])
    row["rel_emulated"] = relative_l2(logits["mxfp4"], eager_logits["emulated"])
    row["emulated_ok"], row["emulated_check"] = compare(logits["mxfp4"], eager_logits["emulated"])
    return row


def format_model_table(rows) -> str:
    lines = [f"{'mode':<9} {'M':>4} {'mxfp4 µs':>10} {'bf16 µs':>10} {'ratio':>6} {'target':>6} "
             f"{'rel bf16':>9} {'rel eager':>9} {'rel emul':>9} emulated check"]
    for row in rows:
        if "error" in row:
            lines.append(f"{row['mode']:<9} {row['m']:>4} failed: {row['error']}")
            continue
        met = "" if row["met"] is None else (" ok" if row["met"] else " MISS")
        lines.append(f"{row['mode']:<9} {row['m']:>4} {row['mxfp4_us']:>10.1f} "
                     f"{row['bf16_us']:>10.1f} {row['ratio']:>6.2f} "
                     f"{_num(row['target'], 6, 2)}{met:<5} {row['rel_bf16']:>9.4f} "
                     f"{row['rel_eager']:>9.4f} {row['rel_emulated']:>9.4f} "
                     f"{'within tolerance' if row['emulated_ok'] else row['emulated_check'][:80]}")
    return "\n".join(lines)


def run_model(args):
    """Load the model and its twin on the GPU; per mode of --modes and M of --m, time a decode
    step of both and compare their logits (and the emulated model's)."""
    from mxfp4_mm.launchers.linear import MXFP4Linear
    device = torch.cuda.get_device_name()
    start = time.perf_counter()
    model = load_model(args.model, "cuda")
    twin = bf16_twin(model)
    names = [name for name, module in model.named_modules() if isinstance(module, MXFP4Linear)]
    print(f"device: {device}; {args.model}: {type(model).__name__}, {len(names)} MXFP4Linear "
          f"layers, loaded with its bf16 twin in {time.perf_counter() - start:.1f} s; modes "
          f"{', '.join(args.modes)}; {args.calls} timed calls each", flush=True)
    loop = RunnerLoop(args.clear_bytes)
    models = {"mxfp4": model, "bf16": twin}
    for mode in set(args.modes) & set(COMPILE_MODES):
        models.update({f"{mode} {name}": torch.compile(models[name], mode=COMPILE_MODES[mode],
                                                       dynamic=False)
                       for name in ("mxfp4", "bf16")})
    generator = torch.Generator(device="cuda").manual_seed(0)
    rows, profiles = [], {}
    for m in args.m:
        input_ids = torch.randint(0, model.config.vocab_size, (m, 1), device="cuda",
                                  generator=generator)
        eager_logits = {"mxfp4": decode_step(model, input_ids)}
        with emulating(twin, names):
            eager_logits["emulated"] = decode_step(twin, input_ids)
        for mode in args.modes:
            begin = time.perf_counter()
            try:
                steps = mode_steps(mode, models, input_ids)
                rows.append(model_row(mode, m, steps, lambda step: time_variant(
                    loop, step, args.calls)["mean_us"], eager_logits))
            except Exception as error:      # reported in its row; the other modes still run
                rows.append({"mode": mode, "m": m,
                             "error": " ".join(f"{type(error).__name__}: {error}".split())[:300]})
            print(f"{mode} M={m} ({time.perf_counter() - begin:.0f} s): "
                  f"{format_model_table(rows[-1:]).splitlines()[1]}", flush=True)
            if args.profile and "error" not in rows[-1] and rows[-1]["met"] is not True:
                profiles[f"{mode} M={m}"] = {name: profile_summary(step)
                                             for name, step in steps.items()}
            steps = None
        torch.cuda.empty_cache()
    return rows, profiles, {"device": device, "model": str(args.model), "calls": args.calls,
                            "mxfp4_layers": len(names), "modes": list(args.modes)}
