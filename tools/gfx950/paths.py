"""Fused against quantize-once on gfx950, per (N, K, M): a small sweep by modelled time.

`sweep(shapes, quantizer)` cross-compiles, per shape, a few configs of each path (CANDIDATES:
data) with Triton's HIP backend and keeps per call the figures a model of time reads: per
launch its kernel, workgroups, busiest-SIMD issue (tools.gfx950.critical_path) and the MFMA
clocks on its busiest SIMD (tools.gfx950.mfma), and whether the call is eligible
(tools.gfx950.search.eligible: no spill, scratch or hazard, an ordered release, a short
quantizer fast path). Compiled figures are kept in CACHE, keyed by the Triton release, the
kernels' sources and the call, so a second sweep compiles only what changed (a launch that did
not compile or walk carries its "error" and is not kept).

`modelled_range(call)` is the one place a call's modelled time comes from here, and
`modelled_us(call)` its high end: the model family's members at either end
(tools.gfx950.model.calibrated(), Family.range), with the busiest SIMD's
MFMA clocks, which no member sees, as a floor above the harness and HBM time. The quantizer's
work over all N tiles is in the family's terms: the walked path of every program of the fused
GEMM holds its quantizer. `best(calls)` picks each shape's
fastest eligible call of each path and of both; `format_paths` prints them beside the MFMA
bound (tools.gfx950.mfma.mfma_bound_us).
"""

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import triton

from mxfp4_mm.launchers.gemm_config import GemmConfig, non_default_fields
from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.targets import GFX950
from . import mfma, model
from .cross_compile import ROOT

CACHE = ROOT / ".sweep-cache" / "gfx950-paths.json"
# Per path, the configs tried: GemmConfig fields, BLOCK_M at most max(FLOOR, M). The fused
# path also tries the heuristic's fused config for M (its split-K for small grids).
CANDIDATES = {
    "fused": ({"block_m": 32, "block_n": 128, "block_k": 256, "num_stages": 2},
              {"block_m": 64, "block_n": 128, "block_k": 256, "num_stages": 2}),
    "quantize-once": (
        {"block_m": 128, "block_n": 128, "block_k": 256, "num_stages": 2},
        {"block_m": 128, "block_n": 256, "block_k": 512, "num_warps": 8, "num_stages": 2},
        {"block_m": 256, "block_n": 128, "block_k": 256, "num_warps": 8, "num_stages": 2},
        {"block_m": 256, "block_n": 256, "block_k": 256, "num_warps": 8, "num_stages": 2}),
}
BLOCK_M_FLOOR = {"fused": 16, "quantize-once": 128}
QUANTIZE_ONCE_FROM_M = 128    # below it the extra launch costs more than it saves


def path_of(config: GemmConfig) -> str:
    return "quantize-once" if config.quantize_a_once else "fused"


def candidate_configs(shape) -> list:
    m, n, k = shape
    found = [heuristic_config("gfx950", min(m, GFX950.quantize_once_from_m - 1), n, k)]
    for path, tiles in CANDIDATES.items():
        if path == "quantize-once" and m < QUANTIZE_ONCE_FROM_M:
            continue
        for fields in tiles:
            if fields["block_m"] > max(BLOCK_M_FLOOR[path], m):
                continue
            config = GemmConfig(**fields, quantize_a_once=path == "quantize-once")
            if config.splits_for(k)[1] // config.block_k == 1:
                config = GemmConfig(**dict(fields, num_stages=1),
                                    quantize_a_once=config.quantize_a_once)
            if config not in found:
                found.append(config)
    return found


def _sources_digest() -> str:
    """The Triton release and the sources of the kernels and of the tools that read them."""
    digest = hashlib.sha256(triton.__version__.encode())
    sources = sorted((ROOT / "kernels").glob("*.py")) + [
        ROOT / "tools" / "gfx950" / name
        for name in ("critical_path.py", "assembly.py", "report.py", "search.py", "mfma.py")]
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def call_figures(shape, config: GemmConfig, quantizer: str) -> dict:
    """{"shape", "config", "path", "eligible", "launches": [{"kernel", "workgroups",
    "busiest_simd_issue", "global_round_trips", "busiest_simd_cycles",
    "busiest_simd_mfma_clocks"}]} of one call, compiled now."""
    from .report import call_rows, k_tiles_per_program
    from .search import eligible
    with tempfile.TemporaryDirectory() as folder:
        rows = call_rows(shape, config, quantizer, asm_dir=folder)
        launches = []
        for row in rows:
            if "error" in row or "critical_path" not in row:
                launches.append({"kernel": row["kernel"],
                                 "error": row.get("error") or row.get("critical_path_error")})
                continue
            clocks = 0    # only the GEMM runs MFMAs
            if row["kernel"] == "gemm":
                clocks = mfma.busiest_simd_mfma_clocks(
                    Path(row["asm"]).read_text(), k_tiles_per_program(config, shape[2]),
                    row["workgroups"], config.num_warps, row["occupancy"])
            path = row["critical_path"]
            launches.append({"kernel": row["kernel"], "workgroups": row["workgroups"],
                             "busiest_simd_issue": path["busiest_simd_issue"],
                             "global_round_trips": path["global_round_trips"],
                             "busiest_simd_cycles": path["busiest_simd_cycles"],
                             "busiest_simd_mfma_clocks": clocks})
    return {"shape": list(shape), "config": non_default_fields(config), "path": path_of(config),
            "eligible": eligible(rows), "launches": launches}


def modelled_range(call: dict) -> tuple:
    """(low, high): the call's modelled µs through the runner's harness under the model
    family's most and least favourable members, each raised to the harness and HBM time plus
    the MFMA clocks of the busiest SIMD of each launch where that is more; None where a launch
    was not walked."""
    launches = call["launches"]
    if any("busiest_simd_issue" not in launch for launch in launches):
        return None
    shape = tuple(call["shape"])
    gemm = next(launch for launch in launches if launch["kernel"] == "gemm")
    data, family = model.calibrated()
    figures = family.range(model.launches_call(shape, launches, gemm["workgroups"]), data)
    mfma_floor = model.floor_us(shape, data) + mfma.clocks_us(
        sum(l["busiest_simd_mfma_clocks"] for l in launches))
    return round(max(figures.low, mfma_floor), 2), round(max(figures.high, mfma_floor), 2)


def modelled_us(call: dict) -> float:
    """The call's modelled µs: the high end of modelled_range (None where it has none)."""
    found = modelled_range(call)
    return None if found is None else found[1]


def sweep(shapes, quantizer: str, cache: Path = CACHE) -> list:
    """Every candidate call of every shape, its figures (from the cache where they are)."""
    cached = json.loads(cache.read_text()) if cache.exists() else {}
    digest = _sources_digest()
    calls = []
    for index, shape in enumerate(shapes):
        for config in candidate_configs(shape):
            key = f"{digest} {quantizer} {list(shape)} {sorted(vars(config).items())}"
            figures = cached.get(key) or call_figures(shape, config, quantizer)
            if key not in cached and not any("error" in launch for launch in figures["launches"]):
                cached[key] = figures    # a failed compile is tried again next time
                cache.parent.mkdir(exist_ok=True)
                cache.write_text(json.dumps(cached))
            calls.append(figures)
        print(f"tools.isa: swept {'x'.join(map(str, shape))} ({index + 1}/{len(shapes)})",
              file=sys.stderr, flush=True)
    return calls


def best(calls) -> dict:
    """{shape: {"fused": call or None, "quantize-once": call or None, "chosen": call}}: the
    fastest eligible call of each path by modelled_us."""
    found = {}
    for call in calls:
        us = modelled_us(call)
        if not call["eligible"] or us is None:
            continue
        entry = found.setdefault(tuple(call["shape"]), {"fused": None, "quantize-once": None})
        held = entry[call["path"]]
        if held is None or us < modelled_us(held):
            entry[call["path"]] = call
    for entry in found.values():
        entry["chosen"] = min((c for c in (entry["fused"], entry["quantize-once"]) if c),
                              key=modelled_us)
    return found


def _us(call) -> str:
    return "-" if call is None else f"{modelled_us(call):.2f}"


def times_quantized(shape, config: GemmConfig) -> float:
    """How many times over the call quantizes A (tools.gfx950.mfma.quantized_elements / M*K)."""
    m, n, k = shape
    return mfma.quantized_elements(m, n, k, config.block_m, config.block_n,
                                   config.quantize_a_once) / (m * k)


def path_rows(calls) -> list:
    """Per shape: (shape, chosen path, its config label, times A is quantized, modelled µs (the
    family's worst), its low end, the best fused call's µs, the best quantize-once call's µs,
    MFMA bound µs, modelled / bound)."""
    rows = []
    for shape, entry in best(calls).items():
        chosen, bound = entry["chosen"], mfma.mfma_bound_us(*shape)
        config = GemmConfig(**chosen["config"])
        rows.append((shape, chosen["path"], config.label, times_quantized(shape, config),
                     modelled_us(chosen), modelled_range(chosen)[0], _us(entry["fused"]),
                     _us(entry["quantize-once"]), bound, modelled_us(chosen) / bound))
    return rows


def format_paths(calls) -> str:
    lines = [f"{'shape':<18} {'path':<13} {'config':<36} {'A x':>6} {'model µs':>15} "
             f"{'fused':>9} {'q-once':>9} {'bound µs':>9} {'x bound':>7}"]
    for shape, path, label, times, us, low, fused, once, bound, ratio in path_rows(calls):
        lines.append(f"{'x'.join(map(str, shape)):<18} {path:<13} {label:<36} {times:>6.1f} "
                     f"{f'{low:.2f}–{us:.2f}':>15} {fused:>9} {once:>9} {bound:>9.2f} "
                     f"{ratio:>7.2f}")
    return "\n".join(lines)


def config_entries(calls, note: str) -> list:
    """The chosen config of each shape as a tuned-shapes file entry of its M bucket."""
    from mxfp4_mm.launchers.configs import m_bucket
    from mxfp4_mm.launchers.tuned_shapes import file_entry
    return [file_entry("gfx950", n, k, GemmConfig(**entry["chosen"]["config"]),
                       f"{note}; {modelled_us(entry['chosen']):.2f} µs modelled at M={m}",
                       m_bucket=m_bucket(m))
            for (m, n, k), entry in best(calls).items()]



def decoder_step_rows(calls) -> list:
    """Per model of MODEL_DECODER_LAYERS and M up to DECODE_MAX_M that `calls` cover for every
    layer: (model, M, {layer: (low, worst) modelled µs of its chosen call}, one decoder
    layer's linears in series (the sums of the lows and of the worsts), the same times the
    model's decoder layers)."""
    from ..model_shapes import DECODE_MAX_M, MODEL_DECODER_LAYERS, MODEL_LAYERS
    chosen = {shape: entry["chosen"] for shape, entry in best(calls).items()}
    rows = []
    for name, count in MODEL_DECODER_LAYERS.items():
        for m in sorted({shape[0] for shape in chosen if shape[0] <= DECODE_MAX_M}):
            shapes = {layer: (m, n, k) for layer, (n, k) in MODEL_LAYERS[name].items()}
            if not all(shape in chosen for shape in shapes.values()):
                continue
            ranges = {layer: modelled_range(chosen[shape]) for layer, shape in shapes.items()}
            layer_sum = tuple(round(sum(pair[i] for pair in ranges.values()), 2)
                              for i in (0, 1))
            rows.append((name, m, ranges, layer_sum,
                         tuple(round(count * value, 1) for value in layer_sum)))
    return rows


def decoder_step_markdown(calls) -> str:
    """decoder_step_rows as markdown tables, one per model."""
    from ..model_shapes import MODEL_DECODER_LAYERS
    lines = []
    for name, count in MODEL_DECODER_LAYERS.items():
        rows = [row for row in decoder_step_rows(calls) if row[0] == name]
        if not rows:
            continue
        layers = list(rows[0][2])
        lines += ([f"{name} ({count} decoder layers), modelled µs, low–**worst**:", "",
                   "| M | " + " | ".join(layers) + " | one layer | one step |",
                   "|---" * (len(layers) + 3) + "|"]
                  + [f"| {m} | " + " | ".join(f"{low:.2f}–**{high:.2f}**"
                                              for low, high in ranges.values())
                     + f" | {layer[0]:.2f}–**{layer[1]:.2f}** | {step[0]:.0f}–**{step[1]:.0f}** |"
                     for _, m, ranges, layer, step in rows] + [""])
    return "\n".join(lines).rstrip()


def format_decoder_steps(calls) -> str:
    """decoder_step_rows as text: per model and M, one layer's and one step's modelled µs."""
    return "\n".join(f"{name} M={m}: one decoder layer's linears {layer[0]:.2f}–{layer[1]:.2f} "
                     f"µs, one step {step[0]:.0f}–{step[1]:.0f} µs (the family's low–worst)"
                     for name, m, _, layer, step in decoder_step_rows(calls))


TARGET_FROM_M = 2048
TARGET_RATIO = 1.5     # modelled time over the MFMA bound, from TARGET_FROM_M on


def paths_markdown(calls) -> str:
    """The per-shape table as markdown, then how many shapes from TARGET_FROM_M on are
    modelled within TARGET_RATIO of the MFMA bound, and which are not."""
    from ..model_shapes import MODEL_LAYERS
    layers = {}
    for name, model_layers in MODEL_LAYERS.items():
        for layer, pair in model_layers.items():
            layers.setdefault(pair, []).append(f"{name} {layer}")
    lines = ["| M×N×K | layer | path | config | A quantized × | modelled µs (low–**worst**) | fused µs "
             "| quantize-once µs | MFMA bound µs | × bound |", "|---" * 10 + "|"]
    data, family = model.calibrated()
    missed, large = [], 0
    for shape, path, label, times, us, low, fused, once, bound, ratio in path_rows(calls):
        m, n, k = shape
        lines.append(f"| {m}×{n}×{k} | {', '.join(layers.get((n, k), []))} | {path} | {label} "
                     f"| {times:g} | {low:.2f}–**{us:.2f}** | {fused} | {once} | {bound:.2f} "
                     f"| {ratio:.2f} |")
        if m >= TARGET_FROM_M:
            large += 1
            if ratio > TARGET_RATIO:
                missed.append(f"{m}×{n}×{k} ({ratio:.2f}×; harness and HBM alone "
                              f"{model.floor_us(shape, data) / bound:.2f}×)")
    lines += ["", f"From M = {TARGET_FROM_M} on, {large - len(missed)} of {large} shapes are "
                  f"modelled within {TARGET_RATIO}× of the MFMA bound"
                  + (f"; not: {', '.join(missed)}." if missed else "."),
              "", f"Modelled µs: `tools.gfx950.paths.modelled_range`, the most and least "
                  f"favourable members of the `tools.gfx950.model` family "
                  f"({', '.join(family.fits)}), each raised to the harness and HBM time plus "
                  f"the busiest SIMD's MFMA clocks where that is more; the path, the config and "
                  f"the ratio to the bound go by the worst."]
    return "\n".join(lines)
