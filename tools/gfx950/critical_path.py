"""The critical path of one wave through a gfx950 kernel, read statically from its assembly.

`walk(program, side, k_tiles)` follows the code from its first instruction to `s_endpgm` the way
one wave goes on ordinary data and returns a Path:
- instructions: every instruction executed, `s_waitcnt`, `s_nop` and branches included;
- global_round_trips: every VMEM operation (buffer_*, global_*, flat_*, scratch_*: loads,
  stores, atomics, buffer_wbl2, buffer_inv) completes one unit of time after it is issued, in
  issue order; `s_waitcnt vmcnt(n)` moves the wave's clock to the completion of the operation
  it waits for (all but the n newest); other instructions take no time. The round trips are
  the clock at `s_endpgm` (the wave does not wait there for its last stores), so they count
  dependent trips to memory;
- lds_waits: `s_waitcnt lgkmcnt(n)` reached with more than n `ds_*` operations outstanding;
- barriers: `s_barrier` executed;
- issue_cycles and latency_cycles, a walk in cycles: every instruction issues in ISSUE_CYCLES
  (`s_nop N` in N + 1 if that is longer); each VMEM load or store completes VMEM_CYCLES after
  it issues, each atomic, `buffer_wbl2` and `buffer_inv` SYNC_CYCLES after (a multiple of a
  load's: latency_cycles has one figure per SYNC_MULTIPLIERS), in issue order; each `ds_*`
  LDS_CYCLES after it issues; `s_waitcnt` stalls the wave until what it waits for is done.
  issue_cycles is the issue alone; latency_cycles the clock at `s_endpgm`.

Which way a branch goes:
- `s_branch`: always;
- `s_cbranch_execz` / `s_cbranch_execnz`: as with lanes active (not taken / taken), so masked
  stores and one-lane atomics are on the path; except where the code that lanes would run
  leans "off" (see below): a data-dependent branch LLVM could not prove uniform, which no lane
  of ordinary data takes;
- the K loop (tools.gfx950.assembly.k_loop: from the label its backward branches go to
  through the last of them; a kernel with another loop is refused): a conditional branch in it
  with one successor inside it and one outside is its exit test, and stays in it until the loop
  has run its MFMAs `trips` times (one pass runs one K tile's MFMAs: those of the loop's code).
  trips = k_tiles minus the tiles peeled out of the loop (with software pipelining the first
  tile's loads come before it and the last tile's MFMAs after it): the MFMAs the path runs
  outside the loop over those of one pass, which must be a whole number; a first walk with
  one pass counts them, since the code outside the loop does not depend on the trip count.
  Any other branch in the loop, a backward one included, is decided as below;
- any other conditional branch is uniform: it goes to the side the data takes, told by
  `side(instruction)`: "on" for an instruction of a source branch the data takes, "off" for
  one of a branch it does not, None for others. Each successor leans to the side of most of
  the classified instructions of its first basic block that has any (following fall-through
  and `s_branch`, up to the next conditional branch); the branch takes the successor that leans
  "on", or the one that does not lean "off". One it cannot tell is an error naming its line.

`busiest_simd_waves` gives the waves the busiest SIMD runs for a launch (multiplied by the
path's instructions: its busiest-SIMD issue).
"""

import re
from collections import Counter
from typing import Callable, NamedTuple, Optional

from mxfp4_mm.launchers.targets import GFX950
from .assembly import Instruction, Program, k_loop, mfma_shape

CUS = GFX950.processors
SIMDS_PER_CU = 4
# Latencies of the cycle walk at gfx950's 2.4 GHz peak engine clock, from public measurements
# on gfx950 (Meta's Triton fork, its AMD latency model, s_memtime microbenchmarks): a dependent
# global load about 360 ns, an LDS pointer chase about 69 cycles. A wave64 VALU instruction
# occupies its SIMD's 16 lanes for 4 cycles (CDNA3/4 ISA). Atomics and cache maintenance have
# no public gfx950 figure: they cost a multiple of a load's latency, 1x and 2x.
CLOCK_GHZ = 2.4
ISSUE_CYCLES = 4
VMEM_CYCLES = round(360 * CLOCK_GHZ)
LDS_CYCLES = 69
SYNC_MULTIPLIERS = (1, 2)
_SYNC = re.compile(r"^(?:buffer|global|flat)_atomic_|^buffer_wbl2$|^buffer_inv$")
_NOP = re.compile(r"^s_nop$")
_VMEM = re.compile(r"^(?:buffer|global|flat|scratch)_")
_COUNTER = re.compile(r"\b(vmcnt|expcnt|lgkmcnt)\((\d+)\)")
_MAX_STEPS = 10_000_000


class Path(NamedTuple):
    instructions: int
    global_round_trips: int
    lds_waits: int
    barriers: int
    issue_cycles: int
    latency_cycles: tuple     # one per SYNC_MULTIPLIERS


class _CycleClock:
    """The cycle walk of one wave for one sync latency (see the module's text)."""

    def __init__(self, sync_cycles: int):
        self.sync_cycles, self.now = sync_cycles, 0
        self.vmem, self.lds = [], []     # completion times, in issue order

    def issue(self, instruction: Instruction):
        name = instruction.mnemonic
        cycles = ISSUE_CYCLES
        if _NOP.match(name) and instruction.operands:
            cycles = max(cycles, int(instruction.operands[0], 0) + 1)
        self.now += cycles
        if _VMEM.match(name):
            latency = self.sync_cycles if _SYNC.match(name) else VMEM_CYCLES
            self.vmem.append(max(self.now + latency, self.vmem[-1] if self.vmem else 0))
        elif name.startswith("ds_"):
            self.lds.append(max(self.now + LDS_CYCLES, self.lds[-1] if self.lds else 0))
        elif name == "s_waitcnt":
            limits = waitcnt_limits(instruction)
            for counter, done in (("vmcnt", self.vmem), ("lgkmcnt", self.lds)):
                if counter in limits and len(done) > limits[counter]:
                    self.now = max(self.now, done[-limits[counter] - 1])
                    if counter == "lgkmcnt":
                        del done[:len(done) - limits[counter]]
        return cycles


def waitcnt_limits(instruction: Instruction) -> dict:
    """{"vmcnt": n, "lgkmcnt": n, ...} of an s_waitcnt: the counters it waits on."""
    operands = " ".join(instruction.operands)
    if operands.strip().isdigit():      # a raw encoding: gfx9's vmcnt, expcnt, lgkmcnt fields
        value = int(operands)
        return dict(vmcnt=(value & 0xF) | ((value >> 14) & 0x3) << 4,
                    expcnt=(value >> 4) & 0x7, lgkmcnt=(value >> 8) & 0xF)
    return {name: int(n) for name, n in _COUNTER.findall(operands)}


class _Walker:
    def __init__(self, program: Program, side: Callable, loop, trips: int):
        self.program, self.side, self.loop, self.trips = program, side, loop, trips
        self.block_starts = {program.labels[i.target] for i in program.instructions
                             if i.is_branch and i.target in program.labels}
        self.tile_mfmas = 0 if loop is None else sum(
            1 for i in program.instructions[loop[0]:loop[1] + 1] if mfma_shape(i.mnemonic))

    def index(self, label: str) -> int:
        if label not in self.program.labels:
            raise ValueError(f"branch to an unknown label {label}")
        return self.program.labels[label]

    def leaning(self, start: int) -> Optional[str]:
        instructions, votes, at, seen = self.program.instructions, Counter(), start, set()
        while at < len(instructions) and at not in seen:
            seen.add(at)
            instruction = instructions[at]
            side = self.side(instruction)
            if side is not None:
                votes[side] += 1
            if instruction.mnemonic == "s_endpgm" or (instruction.is_branch
                                                      and instruction.mnemonic != "s_branch"):
                break
            at = self.index(instruction.target) if instruction.is_branch else at + 1
            if votes and (instruction.is_branch or at in self.block_starts):
                break
        ranked = votes.most_common()
        if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
            return None
        return ranked[0][0]

    def next_index(self, at: int, loop_mfmas: int) -> int:
        instruction = self.program.instructions[at]
        name = instruction.mnemonic
        if name == "s_branch":
            return self.index(instruction.target)
        target = self.index(instruction.target)
        if name in ("s_cbranch_execz", "s_cbranch_execnz"):
            entered, skipped = (at + 1, target) if name == "s_cbranch_execz" else (target, at + 1)
            return skipped if self.leaning(entered) == "off" else entered
        if self.loop is not None and self.loop[0] <= at <= self.loop[1]:
            head, last = self.loop
            if (head <= target <= last) != (head <= at + 1 <= last):
                stay = loop_mfmas < self.trips * self.tile_mfmas
                return target if (head <= target <= last) == stay else at + 1
        taken, fallen = self.leaning(target), self.leaning(at + 1)
        if taken != fallen:
            if "on" in (taken, fallen):
                return target if taken == "on" else at + 1
            if "off" in (taken, fallen):
                return at + 1 if taken == "off" else target
        raise ValueError(f"line {instruction.line}: cannot tell which way `{instruction.text}` "
                         f"goes (its sides lean {taken} and {fallen})")

    def run(self):
        """(Path, MFMAs run outside the loop)."""
        instructions = self.program.instructions
        count = clock = lds_waits = barriers = lds_outstanding = issue_cycles = 0
        loop_mfmas = outside_mfmas = 0
        completions = []
        clocks = [_CycleClock(m * VMEM_CYCLES) for m in SYNC_MULTIPLIERS]
        at = 0
        while True:
            if at >= len(instructions):
                raise ValueError("the path runs past the end of the code without s_endpgm")
            instruction = instructions[at]
            name = instruction.mnemonic
            count += 1
            if count > _MAX_STEPS:
                raise ValueError(f"no s_endpgm after {_MAX_STEPS} instructions")
            issue_cycles += [c.issue(instruction) for c in clocks][0]
            if mfma_shape(name):
                if self.loop is not None and self.loop[0] <= at <= self.loop[1]:
                    loop_mfmas += 1
                else:
                    outside_mfmas += 1
            if _VMEM.match(name):
                completions.append(clock + 1)
            elif name.startswith("ds_"):
                lds_outstanding += 1
            elif name == "s_barrier":
                barriers += 1
            elif name == "s_waitcnt":
                limits = waitcnt_limits(instruction)
                if "vmcnt" in limits and len(completions) > limits["vmcnt"]:
                    clock = max(clock, completions[-limits["vmcnt"] - 1])
                if "lgkmcnt" in limits and lds_outstanding > limits["lgkmcnt"]:
                    lds_waits += 1
                    lds_outstanding = limits["lgkmcnt"]
            elif name == "s_endpgm":
                return Path(count, clock, lds_waits, barriers, issue_cycles,
                            tuple(c.now for c in clocks)), outside_mfmas
            at = self.next_index(at, loop_mfmas) if instruction.is_branch else at + 1


def walk(program: Program, side: Callable = lambda instruction: None, k_tiles: int = 1) -> Path:
    """The path of one wave (see the module's text); k_tiles: the K tiles one program runs."""
    loop = k_loop(program)
    if loop is None:
        return _Walker(program, side, None, 0).run()[0]
    walker = _Walker(program, side, loop, 1)
    _, outside = walker.run()
    peeled, rest = divmod(outside, walker.tile_mfmas)
    if rest or k_tiles - peeled < 1:
        raise ValueError(f"{outside} MFMAs outside the loop of {walker.tile_mfmas} per tile do "
                         f"not leave a whole number of passes out of {k_tiles} K tiles")
    return _Walker(program, side, loop, k_tiles - peeled).run()[0]


def busiest_simd_rounds(workgroups: int, waves_per_workgroup: int, occupancy: int,
                        cus: int = CUS) -> list:
    """The waves the busiest SIMD runs together in each round: workgroups dealt evenly over the
    CUs; on the busiest CU, the workgroups that can be resident at once (occupancy: waves per
    SIMD) run together, in rounds, each round's waves spread over the CU's SIMDs."""
    on_busiest_cu = -(-workgroups // cus)
    resident = max(1, occupancy * SIMDS_PER_CU // waves_per_workgroup)
    rounds = []
    while on_busiest_cu > 0:
        in_round = min(resident, on_busiest_cu)
        rounds.append(-(-in_round * waves_per_workgroup // SIMDS_PER_CU))
        on_busiest_cu -= in_round
    return rounds


def busiest_simd_waves(workgroups: int, waves_per_workgroup: int, occupancy: int,
                       cus: int = CUS) -> int:
    """Waves the busiest SIMD runs (busiest_simd_rounds, all rounds)."""
    return sum(busiest_simd_rounds(workgroups, waves_per_workgroup, occupancy, cus))


def busiest_simd_cycles(path: Path, rounds: list) -> tuple:
    """Cycles the busiest SIMD spends on a launch, per SYNC_MULTIPLIERS: each round takes one
    wave's cycle walk, and the issue of the round's other waves (their latencies hide under
    it)."""
    return tuple(sum(cycles + (waves - 1) * path.issue_cycles for waves in rounds)
                 for cycles in path.latency_cycles)
