"""The walked figures of the public points' kernels, written into the model's data file.

    python -m tools.gfx950.calibration DIR [--data FILE] [--check]

DIR holds the gfx950 assembly of every kernel of the public points of
`mi355x_public_timings.json` (aiter's Triton `gemm_a16wfp4_preshuffle` and its split-K reduce
kernel at the runner's aiter commit, each under its point's config, cross-compiled by Triton
3.6.0 with tools.gfx950.cross_compile.compile_for the way tools.isa compiles ours) as
`<point id>__<kernel>.s`, and `index.json`: a list of {"point", "kernel" ("gemm" or
"reduce"), "file", "k_tiles" (the K tiles one program runs), "workgroups",
"waves_per_workgroup", "occupancy" (waves per SIMD), and optionally "taken": {"file", "first",
"last"}: the source lines of a uniform branch every program of the grid takes (aiter's GEMM:
the body of `if (pid_k * SPLITK_BLOCK_SIZE // 2) < K:`)}. aiter's code is not part of this
project: compile it from aiter's own repository.

Each kernel is walked by tools.gfx950.critical_path, a branch going to the side whose
instructions' inlining chains hold a "taken" line, and its figures written into the point's
kernel entry: instructions,
global_round_trips, lds_waits, barriers, busiest_simd_issue, issue_cycles, latency_cycles
and busiest_simd_cycles. A figure the file already holds that the walk does not reproduce is
an error (exit 1, nothing written): the assembly is not what the file describes. --check
writes nothing and exits 1 where the file lacks or differs from a walked figure.
"""

import argparse
import json
import sys
from pathlib import Path

from ..cli import ArgumentParser
from .assembly import parse
from .critical_path import busiest_simd_cycles, busiest_simd_rounds, walk
from .model import DATA

CHECKED = ("instructions", "global_round_trips", "lds_waits", "barriers", "busiest_simd_issue")
ENTRY_FIELDS = ("point", "kernel", "file", "k_tiles", "workgroups", "waves_per_workgroup",
                "occupancy")


def taken_side(taken: dict):
    """side(instruction) for critical_path.walk: "on" for an instruction of the taken lines."""
    lines = range(taken["first"], taken["last"] + 1)

    def side(instruction):
        on = any(name == taken["file"] and line in lines for name, line in instruction.frames)
        return "on" if on else None
    return side


def walked_figures(amdgcn: str, entry: dict) -> dict:
    """The figures of one kernel (see the module's text)."""
    side = taken_side(entry["taken"]) if "taken" in entry else (lambda instruction: None)
    path = walk(parse(amdgcn), side, entry["k_tiles"])
    rounds = busiest_simd_rounds(entry["workgroups"], entry["waves_per_workgroup"],
                                 entry["occupancy"])
    return dict(instructions=path.instructions, global_round_trips=path.global_round_trips,
                lds_waits=path.lds_waits, barriers=path.barriers,
                busiest_simd_issue=sum(rounds) * path.instructions,
                issue_cycles=path.issue_cycles, latency_cycles=list(path.latency_cycles),
                busiest_simd_cycles=list(busiest_simd_cycles(path, rounds)))


def calibrate(data: dict, folder: Path) -> list:
    """Write each indexed kernel's walked figures into `data`; [problems] where a figure
    already there differs (then `data` is left as it was)."""
    index = json.loads((folder / "index.json").read_text())
    kernels = {(p["id"], k["kernel"]): k for p in data["points"] for k in p["kernels"]}
    updates, problems = [], []
    for entry in index:
        missing = [field for field in ENTRY_FIELDS if field not in entry]
        if missing:
            problems.append(f"index entry {entry.get('file', entry)} lacks {', '.join(missing)}")
            continue
        key = (entry["point"], entry["kernel"])
        if key not in kernels:
            problems.append(f"{entry['file']}: no kernel {entry['kernel']} of point "
                            f"{entry['point']} in the data")
            continue
        figures = walked_figures((folder / entry["file"]).read_text(), entry)
        stored = kernels[key]
        problems += [f"{entry['file']}: {name} walked {figures[name]}, the data holds "
                     f"{stored[name]}" for name in CHECKED
                     if name in stored and stored[name] != figures[name]]
        updates.append((stored, figures))
    if not problems:
        for stored, figures in updates:
            stored.update(figures)
    return problems


def main(argv=None) -> int:
    parser = ArgumentParser("tools.gfx950.calibration", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, metavar="DIR")
    parser.add_argument("--data", type=Path, default=DATA, metavar="FILE")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 where the data lacks or differs from a walk")
    args = parser.parse_args(argv)
    if not (args.folder / "index.json").is_file():
        parser.error(f"{args.folder}/index.json does not exist")
    data = json.loads(args.data.read_text())
    before = json.dumps(data, sort_keys=True)
    problems = calibrate(data, args.folder)
    for problem in problems:
        print(f"tools.gfx950.calibration: {problem}", file=sys.stderr)
    if problems:
        return 1
    if args.check:
        changed = json.dumps(data, sort_keys=True) != before
        if changed:
            print("tools.gfx950.calibration: the data lacks walked figures", file=sys.stderr)
        return int(changed)
    args.data.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"tools.gfx950.calibration: wrote the walked figures of {len(json.loads((args.folder / 'index.json').read_text()))} "
          f"kernels into {args.data}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
