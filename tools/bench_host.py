"""tools.bench --host-only: the host path alone, µs per call of F.linear, the ops, MXFP4Linear,
custom_kernel and the GEMM's direct launch side by side (tools/bench.py says how it is run and
what it prints)."""

import collections
import contextlib
import statistics

import torch

from .evaluate import _num
from .timing import host_time_us

HOST_ONLY_SHAPES = ["llama-3-8b", "benchmarks"]
HOST_ONLY_M = (1, 8, 32, 64)
STUBBED_HOST_CALLS = 5000
# (key, column label): F.linear on the bf16 weight, the op, MXFP4Linear on it, the prepared
# path's op and MXFP4Linear on it (launchers.prepared), custom_kernel, the GEMM's direct launch
# alone
HOST_ONLY_COLUMNS = (("F.linear", "F.linear"), ("op", "op"), ("MXFP4Linear", "layer"),
                     ("prepared", "prep op"), ("MXFP4Linear prepared", "prep lay"),
                     ("custom_kernel", "ck"), ("direct", "direct"))
PREPARED_ENTRIES = ("prepared", "MXFP4Linear prepared")
NOT_SERVED = "—"     # the host table's cell of an entry whose path does not serve the row's M
NOT_SERVED_LEGEND = (f"{NOT_SERVED}: not served at that M on this device (the prepared path: "
                     f"launchers.prepared.serves_rows); -: not timed")
# the targets: each op and MXFP4Linear within 5 µs of F.linear, custom_kernel within 2 µs of
# the op
HOST_TARGET_US = {("op", "F.linear"): 5.0, ("MXFP4Linear", "F.linear"): 5.0,
                  ("prepared", "F.linear"): 5.0, ("MXFP4Linear prepared", "F.linear"): 5.0,
                  ("custom_kernel", "op"): 2.0}
HOST_ONLY_LEGEND = ("host µs per call, the median over back-to-back calls without "
                    "synchronization: F.linear on the bf16 weight, torch.ops.mxfp4_mm.gemm, "
                    "MXFP4Linear on it, torch.ops.mxfp4_mm.gemm_prepared and MXFP4Linear on it "
                    "(where that path serves the M on the device), submission.custom_kernel, and the "
                    "GEMM's direct launch alone")
STUBBED_LEGEND = ("the Python part alone, on the CPU: launchers built without proof, every "
                  "kernel launch a no-op taken as direct (F.linear and the direct launch, which "
                  "would compute or launch, are not timed); host µs per call, the median over "
                  "back-to-back calls")


def _no_launch(*arguments):
    """A kernel launch that launches nothing (--stub-launches)."""


@contextlib.contextmanager
def stubbed_launches():
    """Inside: launchers built without proof (the looked-up config, launchers.paths) in an
    empty launcher cache of their own, each of their kernel launches a direct one that
    launches nothing; outside, the cache and KernelLaunch are as they were."""
    from unittest import mock

    from mxfp4_mm import launchers
    from mxfp4_mm.launchers import prepared
    from mxfp4_mm.launchers.bypass import KernelLaunch
    from mxfp4_mm.launchers.configs import config_for
    from mxfp4_mm.launchers.paths import build_launcher

    def unproven(arch, backend, m, n, k, a_strides, device, out_dtype):
        return build_launcher(config_for(arch, m, n, k), backend, m, n, k, a_strides, device,
                              out_dtype=out_dtype)

    def unproven_prepared(arch, backend, m, n, k, a_strides, device, wide_scales, out_dtype):
        return prepared.PreparedLauncher(prepared.prepared_config(m, n, k), backend, m, n, k,
                                         a_strides, device, wide_scales, out_dtype=out_dtype)
    built = KernelLaunch.__init__

    def stubbed(launch, *arguments, **options):
        built(launch, *arguments, **options)
        launch.direct = _no_launch
    with mock.patch.object(launchers, "proven_launcher", unproven), \
            mock.patch.object(prepared, "proven_prepared_launcher", unproven_prepared), \
            mock.patch.object(launchers, "_launchers", collections.OrderedDict()), \
            mock.patch.object(launchers, "_checked_signatures", {}), \
            mock.patch.object(KernelLaunch, "__init__", stubbed):
        yield


def host_inputs(m, n, k, device):
    """(A bf16 [M, K], the bf16 weight [N, K], B_shuffle uint8 [N, K/2], B_scale_sh uint8)
    of random values (every scale 2^0): host time reads none of them."""
    from mxfp4_mm.kernels import formats
    generator = torch.Generator(device=device).manual_seed(m * n + k)
    a = torch.randn(m, k, dtype=torch.bfloat16, device=device, generator=generator)
    weight = torch.randn(n, k, dtype=torch.bfloat16, device=device, generator=generator)
    b_shuffle = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=device,
                              generator=generator)
    b_scale_sh = torch.full(formats.scales_padded_shape(n, k), 127, dtype=torch.uint8,
                            device=device)
    return a, weight, b_shuffle, b_scale_sh


def host_row(shape, calls, device, stubbed=False) -> dict:
    """One shape's host µs per call of each HOST_ONLY_COLUMNS entry (None where not timed),
    each entry called once first (the launcher built and cached). The prepared path's entries
    are timed where that path serves M rows on the device (prepared.serves_rows: any M in the
    interpreter, so stubbed), else named in "not_served"."""
    from mxfp4_mm.launchers import current_target, launcher_for, prepared
    from mxfp4_mm.launchers.gemm import GemmLauncher
    from mxfp4_mm.launchers.linear import MXFP4Linear
    from mxfp4_mm.submission import custom_kernel

    m, n, k = shape
    a, weight, b_shuffle, b_scale_sh = host_inputs(m, n, k, device)
    layer = MXFP4Linear(b_shuffle, b_scale_sh)
    layer.use_hopper_layout(False)      # on the op torch.ops.mxfp4_mm.gemm wherever it runs
    data = (a, None, None, b_shuffle, b_scale_sh)
    entries = {"op": lambda: torch.ops.mxfp4_mm.gemm(a, b_shuffle, b_scale_sh),
               "MXFP4Linear": lambda: layer(a), "custom_kernel": lambda: custom_kernel(data)}
    served = prepared.serves_rows(current_target(device)[1], m)
    if served:
        hopper = prepared.hopper_weight(b_shuffle, b_scale_sh)
        prepared_layer = MXFP4Linear(b_shuffle, b_scale_sh)
        prepared_layer.use_hopper_layout(True)
        entries["prepared"] = lambda: torch.ops.mxfp4_mm.gemm_prepared(
            a, hopper.values, hopper.scales, hopper.k, hopper.wide_scales)
        entries["MXFP4Linear prepared"] = lambda: prepared_layer(a)
    synchronize = (lambda: None) if stubbed else torch.cuda.synchronize
    if not stubbed:
        entries["F.linear"] = lambda: torch.nn.functional.linear(a, weight)
        launcher = launcher_for(a, n)
        if isinstance(launcher, GemmLauncher) and launcher.gemm.is_direct:
            args, _, _ = launcher.gemm_arguments(a, b_shuffle, b_scale_sh)
            entries["direct"] = lambda: launcher.gemm.direct(*args)
    us = {key: (host_time_us(entries[key], calls, synchronize) if key in entries else None)
          for key, _ in HOST_ONLY_COLUMNS}
    return {"m": m, "n": n, "k": k, "host_us": us,
            "not_served": [] if served else list(PREPARED_ENTRIES)}


def host_margins(row) -> dict:
    """{"LEFT-RIGHT": µs} of each HOST_TARGET_US pair, None where either side was not
    timed."""
    us = row["host_us"]
    return {f"{left}-{right}": (us[left] - us[right] if us[left] is not None
                                and us[right] is not None else None)
            for left, right in HOST_TARGET_US}


def _served(row, *keys) -> bool:
    return not set(keys) & set(row["not_served"])


def _host_cell(value, served: bool, width: int) -> str:
    return _num(value, width, 2) if served else f"{NOT_SERVED:>{width}}"


def format_host_table(rows) -> str:
    """A line per row, then the median of each entry over the rows that serve it; the legend
    of NOT_SERVED where a row has it."""
    labels = {"op-F.linear": "op-lin", "MXFP4Linear-F.linear": "layer-lin",
              "prepared-F.linear": "prep-lin", "MXFP4Linear prepared-F.linear": "plyr-lin",
              "custom_kernel-op": "ck-op"}
    columns = [f"{label:>9}" for _, label in HOST_ONLY_COLUMNS]
    lines = [" ".join([f"{'M':>5} {'N':>5} {'K':>5}"] + columns
                      + [f"{labels[f'{left}-{right}']:>9}" for left, right in HOST_TARGET_US])]
    for row in rows:
        found = host_margins(row)
        lines.append(" ".join(
            [f"{row['m']:>5} {row['n']:>5} {row['k']:>5}"]
            + [_host_cell(row["host_us"][key], _served(row, key), 9)
               for key, _ in HOST_ONLY_COLUMNS]
            + [_host_cell(found[f"{left}-{right}"], _served(row, left, right), 9)
               for left, right in HOST_TARGET_US]))
    medians = []
    for key, _ in HOST_ONLY_COLUMNS:
        timed = [row["host_us"][key] for row in rows if _served(row, key)]
        medians.append(_host_cell(statistics.median(timed) if timed and None not in timed
                                  else None, bool(timed), 9))
    lines.append(" ".join([f"{'median':<17}"] + medians))
    if any(row["not_served"] for row in rows):
        lines.append(NOT_SERVED_LEGEND)
    return "\n".join(lines)


def host_targets_text(rows) -> str:
    """Per target, on how many of the shapes that serve both its entries it holds (only the
    targets timed on every such shape)."""
    parts = []
    for (left, right), bound in HOST_TARGET_US.items():
        found = [host_margins(row)[f"{left}-{right}"] for row in rows
                 if _served(row, left, right)]
        if found and None not in found:
            held = sum(margin <= bound for margin in found)
            served = "" if len(found) == len(rows) else f" served (of {len(rows)})"
            parts.append(f"{left} <= {right} + {bound:g} µs on {held} of {len(found)} "
                         f"shapes{served}")
    return "targets: " + ("; ".join(parts) if parts else "none timed here")


def run_host_only(shapes, args) -> list:
    """Each shape's host_row, on the GPU, or with --stub-launches on the CPU."""
    if args.stub_launches:
        device, calls = "cpu", args.host_calls
        print(f"--stub-launches on the CPU: {len(shapes)} shape(s), {calls} calls each",
              flush=True)
        with stubbed_launches():
            return [_host_progress(host_row(shape, calls, device, stubbed=True))
                    for shape in shapes]
    from mxfp4_mm import submission  # noqa: F401  (pre-warms every task shape's kernels)
    calls = args.host_calls
    print(f"device: {torch.cuda.get_device_name()}; {len(shapes)} shape(s), {calls} calls each",
          flush=True)
    return [_host_progress(host_row(shape, calls, "cuda")) for shape in shapes]


def _host_progress(row) -> dict:
    us = ", ".join(f"{label} {_host_cell(row['host_us'][key], _served(row, key), 0)}"
                   for key, label in HOST_ONLY_COLUMNS)
    print(f"{row['m']}x{row['n']}x{row['k']}: {us} µs", flush=True)
    return row
