"""GPU reliability runs: random shapes, memory over many calls, a leaderboard-style soak.

    python -m tools.soak [--random-shapes 50] [--calls 10000] [--iterations 100] [--seed 0]

1. `--random-shapes` random shapes through whatever config the lookup serves, each checked
   against the reference and printed with the config and rung that served it: M from 1 to
   16384 (spread over its powers of two), (N, K) half the time a built-in model layer's
   (tools.model_shapes), else N a multiple of 16 and K of 64 up to 8192.
2. `--calls` calls with fresh inputs (a pool of 8 input sets regenerated every 8 calls), for
   a single-pass and a split-K benchmark shape; the bytes requested from torch's allocator
   at ten checkpoints must not change after the first (see memory_verdict). Also the host
   cost of the input validation (launchers.inputs.problem_of) per call.
3. `--iterations` calls per benchmark shape, with the seed bumped by 13 and inputs generated
   afresh before each call and every output checked, as the leaderboard does.
Prints figures and `N passed, N failed`; exits 1 on any failure. Needs a GPU.
"""

import random
import sys
import time

import torch

from .cli import (ArgumentParser, UsageError, check_fault_variable, non_negative_int,
                  usage_error)
from .model_shapes import MODEL_LAYERS


MAX_RANDOM_M = 16384


def random_shapes(count, rng):
    layers = sorted({shape for model in MODEL_LAYERS.values() for shape in model.values()})
    shapes = []
    for _ in range(count):
        m = rng.randint(1, 1 << rng.randint(0, MAX_RANDOM_M.bit_length() - 1))
        if rng.random() < 0.5:
            n, k = rng.choice(layers)
        else:
            n, k = 16 * rng.randint(1, 512), 64 * rng.randint(1, 128)
        shapes.append((m, n, k))
    return shapes


def memory_verdict(requested: list) -> str:
    """'flat' or 'GREW' for the requested bytes at successive checkpoints.

    The first checkpoint absorbs one-time allocations; after it, any change is a failure.
    Requested bytes (what the tensors asked for) and not allocated bytes: the caching allocator
    hands out a whole block when the rest of it would be too small to split off, so the
    allocated figure moves by up to a block's slack with no change in what is held.
    """
    return "flat" if len(set(requested[1:])) <= 1 else "GREW"


def memory_stays_flat(m, n, k, calls, custom_kernel, cached_launcher_count) -> bool:
    from mxfp4_mm import reference
    pool = [reference.generate_input(m, n, k, seed=s) for s in range(8)]
    for warm in pool:
        custom_kernel(warm)
    del warm
    torch.cuda.synchronize()
    launchers_before = cached_launcher_count()
    requested, allocated = [], []
    every = max(1, calls // 10)
    for call in range(calls):
        if call % len(pool) == 0:
            pool = [reference.generate_input(m, n, k, seed=call + s) for s in range(len(pool))]
        custom_kernel(pool[call % len(pool)])
        if (call + 1) % every == 0:
            torch.cuda.synchronize()
            requested.append(torch.cuda.memory_stats()["requested_bytes.all.current"])
            allocated.append(torch.cuda.memory_allocated())
    del pool
    verdict = memory_verdict(requested)
    print(f"memory over {calls} calls of {m}x{n}x{k} with fresh inputs (one pool of 8 "
          f"input sets alive), every {every} calls: bytes requested {requested}, "
          f"allocated {allocated}; launchers cached {launchers_before} -> "
          f"{cached_launcher_count()}: {verdict}", flush=True)
    return verdict == "flat"


def build_parser():
    parser = ArgumentParser("tools.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--random-shapes", type=non_negative_int, default=50, metavar="COUNT",
                        help="how many random shapes to check against the reference "
                             "(M up to 16384, (N, K) a model layer's or N a multiple of 16 "
                             "and K of 64 up to 8192; default 50)")
    parser.add_argument("--calls", type=non_negative_int, default=10000,
                        help="calls with fresh inputs per memory test, on the first two "
                             "benchmark shapes (default 10000)")
    parser.add_argument("--iterations", type=non_negative_int, default=100,
                        help="leaderboard-style calls per benchmark shape, fresh inputs and "
                             "a check each (default 100)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the random shapes and their inputs (default 0)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        check_fault_variable()
    except UsageError as error:
        return usage_error("tools.soak", error)
    if not torch.cuda.is_available():
        print("tools.soak: needs a GPU; run it on a machine with CUDA or ROCm", file=sys.stderr)
        return 2
    from mxfp4_mm import reference
    from mxfp4_mm.launchers import cached_launcher_count, launcher_for
    from mxfp4_mm.launchers.task_shapes import BENCHMARK_SHAPES
    from mxfp4_mm.launchers.inputs import problem_of
    from .timing import host_time_us
    from mxfp4_mm.submission import custom_kernel

    passed = failed = 0
    rng = random.Random(args.seed)
    start = time.time()
    for i, (m, n, k) in enumerate(random_shapes(args.random_shapes, rng)):
        data = reference.generate_input(m, n, k, seed=rng.randint(0, 2 ** 30))
        ok, message = reference.check_implementation(data, custom_kernel(data))
        passed, failed = passed + ok, failed + (not ok)
        served = launcher_for(data[0], n)
        print(f"random shape {i + 1:>3}/{args.random_shapes} {m}x{n}x{k}: "
              f"{'pass' if ok else 'FAIL ' + message} ({served.config.label}, "
              f"{served.rung})", flush=True)
        del data
    print(f"random shapes: {args.random_shapes} in {time.time() - start:.0f} s", flush=True)

    for m, n, k in BENCHMARK_SHAPES[:2]:
        flat = memory_stays_flat(m, n, k, args.calls, custom_kernel, cached_launcher_count)
        passed, failed = passed + flat, failed + (not flat)
    data = reference.generate_input(*BENCHMARK_SHAPES[0], seed=0)
    print(f"input validation (problem_of) host time per call, median: "
          f"{host_time_us(lambda: problem_of(data), 10000):.2f} µs", flush=True)

    for m, n, k in BENCHMARK_SHAPES:
        failures = 0
        seed = 4242
        for _ in range(args.iterations):
            seed += 13
            data = reference.generate_input(m, n, k, seed=seed)
            ok, message = reference.check_implementation(data, custom_kernel(data))
            failures += not ok
        passed, failed = passed + (failures == 0), failed + (failures > 0)
        print(f"soak {m}x{n}x{k}: {args.iterations} fresh inputs, {failures} failures", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
