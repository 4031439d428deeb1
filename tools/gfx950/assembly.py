"""The amdgcn text Triton writes for gfx950, parsed: instructions in program order, labels,
branches, and where each instruction comes from in the source.

`parse(amdgcn)` reads the kernel's code (the text before `.Lfunc_end` and the metadata) into a
Program: its Instructions in program order and its labels, each naming the index of the
instruction that follows it. An instruction is an indented line starting with a lowercase
mnemonic (inline asm between `;;#ASMSTART` and `;;#ASMEND` included); labels, directives and
comments are not. Each instruction keeps the inlining chain of the last `.loc` before it: the
comment LLVM writes after the directive ("f.py:L:C @[ caller.py:L:C @[ ... ] ]"), as
(file name, line) frames, innermost first; `source_files` maps those names to the paths the
`.file` directives give them.
"""

import re
from typing import NamedTuple

_INSTRUCTION = re.compile(r"^\s+([a-z][a-z0-9_]*)(.*)$")
_LABEL = re.compile(r"^(\.?[\w.$]+):")
_FILE = re.compile(r'^\s*\.file\s+\d+\s+"([^"]*)"\s+"([^"]*)"', re.MULTILINE)
_FRAME = re.compile(r"([^\s:@\[\]]*):(\d+):\d+")
_VGPRS = re.compile(r"\bv(?:(\d+)\b|\[(\d+):(\d+)\])")
_OPERAND_COMMA = re.compile(r",(?![^\[]*\])")
_CODE_ENDS = (".Lfunc_end", "amdhsa.kernels", ".end_amdgpu_metadata")
_MFMA = re.compile(r"^v_mfma_(?:scale_)?[a-z0-9]+_(\d+)x(\d+)x(\d+)")


class Instruction(NamedTuple):
    line: int         # 1-based line number in the text
    mnemonic: str
    operands: tuple   # operand texts, e.g. ("v[0:3]", "v4", "s[8:11]", "0", "offen")
    text: str         # the line, stripped
    frames: tuple     # ((file name, line), ...) of the last .loc before it, innermost first

    @property
    def is_branch(self) -> bool:
        return self.mnemonic == "s_branch" or self.mnemonic.startswith("s_cbranch")

    @property
    def target(self) -> str:
        """The label a branch goes to."""
        return self.operands[0]


class Program(NamedTuple):
    instructions: list
    labels: dict      # label -> index in instructions of the instruction after it


def code(amdgcn: str) -> str:
    """The kernel's code: the text before its end label and the metadata."""
    for end in _CODE_ENDS:
        amdgcn = amdgcn.split(end)[0]
    return amdgcn


def _operands(rest: str) -> tuple:
    """Comma-separated operand texts; commas inside brackets (v[0:3], op_sel:[0,0,1,0]) stay."""
    return tuple(part.strip() for part in _OPERAND_COMMA.split(rest.split(";", 1)[0])
                 if part.strip())


def parse(amdgcn: str) -> Program:
    instructions, labels, frames = [], {}, ()
    for number, line in enumerate(code(amdgcn).splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(".loc"):
            frames = tuple((name, int(at)) for name, at in
                           _FRAME.findall(line.split(";", 1)[1]) if name) if ";" in line else ()
            continue
        label = _LABEL.match(line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        match = _INSTRUCTION.match(line)
        if match and not stripped.startswith((".", ";")):
            instructions.append(Instruction(number, match.group(1), _operands(match.group(2)),
                                            stripped, frames))
    return Program(instructions, labels)


def source_files(amdgcn: str) -> dict:
    """{file name: {"folder/name" paths the .file directives give it}}."""
    found = {}
    for folder, name in _FILE.findall(amdgcn):
        found.setdefault(name, set()).add(f"{folder}/{name}")
    return found


def registers(text: str) -> set:
    """The VGPR numbers an operand text names: v7 -> {7}, v[4:6] -> {4, 5, 6}."""
    found = set()
    for single, first, last in _VGPRS.findall(text):
        found.update([int(single)] if single else range(int(first), int(last) + 1))
    return found


def mfma_shape(mnemonic: str):
    """(M, N, K) of an MFMA instruction (scaled or not), None for any other."""
    found = _MFMA.match(mnemonic)
    return tuple(int(d) for d in found.groups()) if found else None


def successors(program: Program, at: int) -> tuple:
    """The instruction indices control can go to from the instruction at `at`: none after
    s_endpgm, the target of s_branch, the target and the next instruction of a conditional
    branch (a target that is no label of the program is left out), else the next one."""
    instruction = program.instructions[at]
    if instruction.mnemonic == "s_endpgm":
        return ()
    if not instruction.is_branch:
        return (at + 1,)
    target = program.labels.get(instruction.target)
    targets = () if target is None else (target,)
    return targets if instruction.mnemonic == "s_branch" else targets + (at + 1,)


def reaches(program: Program, start: int, goal: int) -> bool:
    """Whether some path of the control-flow graph goes from the instruction at `start` to the
    one at `goal`."""
    seen, stack = {start}, [start]
    while stack:
        at = stack.pop()
        if at == goal:
            return True
        for following in successors(program, at):
            if following < len(program.instructions) and following not in seen:
                seen.add(following)
                stack.append(following)
    return False


def k_loop(program: Program):
    """(head, last): the instruction index range of the K loop, from the label its backward
    branches go to through the last of them; None where the kernel has no backward branch
    that closes a loop. A backward branch closes a loop when the code it goes to can come back
    to it (a cycle of the control-flow graph); one that cannot is no loop but LLVM's jump back
    from a block it laid out after the code around it (e.g. the masked bodies of a cross-warp
    reduction, placed after s_endpgm, each returning to the join after its branch), and
    leaves the path as any forward branch would. ValueError where the backward branches close
    more than one loop, or one without an MFMA: not a K loop alone."""
    heads = {}
    for at, instruction in enumerate(program.instructions):
        if instruction.is_branch:
            head = program.labels.get(instruction.target)
            if head is not None and head <= at and reaches(program, head, at):
                heads[head] = at
    if not heads:
        return None
    if len(heads) > 1:
        lines = sorted(program.instructions[head].line for head in heads)
        raise ValueError(f"more than one loop (heads at lines {lines}): not a K loop alone")
    head, last = next(iter(heads.items()))
    if not any(mfma_shape(i.mnemonic) for i in program.instructions[head:last + 1]):
        raise ValueError(f"the loop at line {program.instructions[head].line} has no MFMA")
    return head, last
