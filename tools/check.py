"""Check the submission against the reference on the task's shapes, on whatever is here.

    python -m tools.check [--shapes tests|benchmarks|all|M,N,K[,seed] ...] [--seeds N]

With a GPU, custom_kernel runs compiled (the bypass launchers when available); without one,
through the Triton interpreter (slow: minutes for the four test shapes). Each shape's inputs
come from the runner's seed for it (task.yml's; see tools.cli), or the seed written as
M,N,K,seed; with --seeds N, also from that seed + 13, + 26, ... (as the runner's leaderboard
mode bumps it). Prints a line when each shape and seed starts and one when it ends, with its
time (the first call of a shape builds and proves its launcher: most of the time through the
interpreter), then per shape the launch (direct or standard), the split count, the ladder's
rung that serves it (launchers/ladder.py) and the config. Exit codes: 0 all passed, 1 a check
failed, 2 a usage error (one line on stderr).
"""

import os
import sys
import time

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from .cli import (LEADERBOARD_SEED_STEP, SHAPES_HELP, ArgumentParser,  # noqa: E402
                  UsageError, check_fault_variable, parse_shapes, positive_int,
                  usage_error)


def build_parser():
    parser = ArgumentParser("tools.check", description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["tests"], metavar="SHAPES",
                        help=f"{SHAPES_HELP}, or M,N,K,seed; default tests")
    parser.add_argument("--seeds", type=positive_int, default=1, help="seeds per shape (default 1)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        specs = parse_shapes(args.shapes)
        check_fault_variable()
    except UsageError as error:
        return usage_error("tools.check", error)

    if os.environ.get("TRITON_INTERPRET") == "1":
        print("no GPU: running through the Triton interpreter, which is slow", flush=True)
    from mxfp4_mm import reference
    from mxfp4_mm.launchers import launcher_for
    from mxfp4_mm.submission import custom_kernel

    began = time.perf_counter()
    failures = 0
    used = {}
    for spec in specs:
        m, n, k = spec["m"], spec["n"], spec["k"]
        for seed in range(spec["seed"], spec["seed"] + LEADERBOARD_SEED_STEP * args.seeds,
                          LEADERBOARD_SEED_STEP):
            case = f"{m:>5} {n:>5} {k:>5} seed {seed:>5}"
            print(f"{case}: started", flush=True)
            start = time.perf_counter()
            data = reference.generate_input(m, n, k, seed=seed)
            output = custom_kernel(data)
            if output.is_cuda:
                torch.cuda.synchronize()
            ok, message = reference.check_implementation(data, output)
            seconds = time.perf_counter() - start
            failures += not ok
            print(f"{case}: {'pass' if ok else 'FAIL ' + message} ({seconds:.2f} s)", flush=True)
        launcher = launcher_for(data[0], n)
        used[(m, n, k)] = launcher
    print(f"\n{'shape':<18} {'launch':<9} {'splits':>6}  {'served by':<20} config")
    for (m, n, k), launcher in used.items():
        kind = "direct" if launcher.is_direct else "standard"
        print(f"{m:>5} {n:>5} {k:>5}  {kind:<9} {launcher.splits:>6}  {launcher.rung:<20} "
              f"{launcher.config.label}")
    total = len(specs) * args.seeds
    print(f"\n{total - failures} passed, {failures} failed in {time.perf_counter() - began:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
