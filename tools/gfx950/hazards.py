"""gfx950 hazards at the edges of inline asm, found in assembly text.

LLVM's GCNHazardRecognizer puts the wait states a hazard needs between the instructions it
emits itself, but when it looks back for a hazard's producer it skips inline asm (an asm
statement counts no wait states and none of its instructions is a producer; only its
dst-forwarding check takes an asm for a producer, and pads a VALU or asm that reads or writes
the asm's outputs next), and it checks an asm statement as a consumer for two classes only.
So a hazard whose producer or consumer lies
inside an asm region (between LLVM's `;;#ASMSTART` and `;;#ASMEND`) is the asm author's to
cover: `asm_hazards(amdgcn)` lists each one the code leaves uncovered, as
{"hazard": class, "line", "instruction" (the producer), "next_line", "next_instruction" (the
consumer), "wait_states" (between them), "required"}.

Wait states as LLVM counts them: an instruction between producer and consumer counts one,
`s_nop N` counts N + 1; labels, directives and comments none. Control flow is followed back
from the consumer to every predecessor (fall-through, and every branch to a label before it),
and the fewest wait states over those paths count: a hazard is reported where they are fewer
than required.

The classes: every GCNHazardRecognizer check that is true on gfx950 (GCNSubtarget:
hasGFX940Insts, hasGFX950Insts, GFX9 generation) and whose producer or consumer can be an
instruction of an asm string. "VALU" is any v_* instruction (MFMAs included unless said).

| class | producer | consumer | wait states |
|---|---|---|---|
| conversion forwarding | v_cvt_scalef32_* writes a VGPR (hasCvtScaleForwardingHazard) | any instruction reading or writing it | 1 |
| dst-sel forwarding | VALU writing part of a VGPR: SDWA dst_sel not DWORD, VOP3 op_sel on the destination | any instruction reading or writing it | 1 |
| transcendental forwarding | v_exp/log/rcp/rsq/sqrt/sin/cos writes a VGPR | a non-transcendental VALU reads it | 1 |
| VALU SGPR write, VALU read | VALU writes an SGPR (vcc, exec included) | VALU reads it | 2 |
| VALU SGPR write, VMEM read | VALU writes an SGPR | VMEM (buffer/global/flat/scratch) reads it | 5 |
| VALU SGPR write, lane select | VALU writes an SGPR | v_readlane/v_writelane's lane select | 4 |
| VALU VGPR write, readlane | VALU writes a VGPR | v_readlane/v_readfirstlane reads it | 1 |
| VALU EXEC write, lane access | VALU writes EXEC | v_readlane/v_readfirstlane/v_writelane | 4 |
| VALU EXEC write, DPP | VALU writes EXEC | a DPP instruction | 5 |
| VGPR write, DPP read | any instruction writes a VGPR | a DPP instruction reads it | 2 |
| VALU EXEC write, MFMA | non-MFMA VALU writes EXEC | MFMA | 4 |
| VALU VGPR write, MFMA read | non-MFMA, non-dot VALU writes a VGPR | MFMA reads it | 2 |
| MFMA result read | MFMA writes a VGPR | non-MFMA VALU, VMEM or DS reads it | passes + 3, + 1 unless 2 passes |
| MFMA result overwritten | MFMA writes a VGPR | non-MFMA VALU, VMEM or DS writes it | passes + 3, + 1 unless 2 passes |
| MFMA SrcC overwritten | MFMA reads a VGPR as SrcC | non-MFMA VALU, VMEM or DS writes it | 1, 3, 7, 15 for 2, 4, 8, 16 passes |
| MFMA result, MFMA SrcC | MFMA writes VGPRs | MFMA reads some of them as SrcC (the very same range: none, 2 after 2 passes) | passes + 2 |
| MFMA result, MFMA SrcA/B | MFMA writes a VGPR | MFMA reads it as A, B or a scale | passes + 3, + 1 unless 2 passes |
| dot result | v_dot* writes a VGPR | another VALU reads or writes it, the same dot reads it as A or B | 3 |
| wide store data overwritten | VMEM store of more than 64 bits of data | an instruction writes a data VGPR | 2; 1 for a buffer store with an SGPR soffset |
| permlane source | VALU writes a VGPR | v_permlane* reads it (gfx950 checkPermlaneHazards) | 2 |
| v_cmpx, permlane | v_cmpx (writes EXEC) | v_permlane* | 4 |
| VALU VCC write, v_div_fmas | VALU writes vcc | v_div_fmas | 4 |
| M0 write, M0 read | SALU writes m0 | LDS DMA (a load with lds), s_sendmsg, s_ttracedata, s_movrel, ds_*addtid, GDS | 1 |
| s_setreg, s_getreg/s_setreg | s_setreg of a hardware register | s_getreg or s_setreg of the same | 2 |
| s_setreg TRAPSTS, s_rfe | s_setreg of HW_REG_TRAPSTS | s_rfe_b64 | 1 |

MFMA passes: v_mfma_scale_f32_16x16x128_f8f6f4 and 32x32x64 take 4 and 8 when both A and B
are fp6/fp4 (cbsz, blgp >= 2), else 8 and 16; any other MFMA is held to the most passes of its
shape (2 for 4x4, 8 for 16x16, 16 for 32x32). Every MFMA is held to the XDL figures, the
larger ones; f64 MFMAs (DGEMM, with their own figures) are not modelled. Not modelled either:
the soft-clause hazards (only with XNACK on) and the SMRD ones (gfx6 only).
"""

import heapq
import re
from typing import NamedTuple

from .assembly import Instruction, parse

_ASM_START, _ASM_END = ";;#ASMSTART", ";;#ASMEND"
# The largest requirement of any class (a 16-pass MFMA's result: 16 + 3 + 1).
_WINDOW = 20
_REGISTER = re.compile(r"(?<![\w$])(?:([vas])(?:(\d+)|\[(\d+):(\d+)\])|(vcc|exec)(_lo|_hi)?|(m0))"
                       r"(?!\w)")
EXEC = frozenset({"exec_lo", "exec_hi"})
VCC = frozenset({"vcc_lo", "vcc_hi"})
_VMEM = ("buffer_", "global_", "flat_", "scratch_")
_TRANSCENDENTAL = re.compile(r"^v_(?:exp|log|rcp|rcp_iflag|rsq|sqrt|sin|cos)_")
_MFMA = re.compile(r"^v_(?:mfma|smfmac)_")
_MFMA_SHAPE = re.compile(r"_(\d+)x(\d+)x\d+")
# VALUs writing a second, scalar result (a carry or a condition) after the VGPR one.
_SECOND_RESULT = re.compile(r"^v_(?:(?:add|sub|subrev)_co_u32|(?:addc|subb|subbrev)_co_u32|"
                            r"div_scale_|mad_u64_u32|mad_i64_i32)")
# VALUs reading their destination: accumulators, lane writes, conversions writing one byte or
# half of it, and the cross-lane swaps.
_READS_DESTINATION = re.compile(r"^v_(?:fmac_|mac_|pk_fmac_|dot\d+c_|writelane_|cvt_scalef32_"
                                r"(?:sr_)?(?:pk_)?(?:fp4|fp8|bf8)|swap_|permlane)")
# VOP3P and the like, whose op_sel names no destination half.
_PACKED = re.compile(r"^v_(?:pk_|dot|mad_mix|fma_mix|mfma|smfmac|cvt_scalef32|permlane)")
_DS_RETURNS = re.compile(r"^ds_(?:read|load|swizzle|permute|bpermute|consume|append|\w+_rtn)")
_SALU_WRITES_NOTHING = ("s_cmp", "s_bitcmp", "s_waitcnt", "s_nop", "s_branch", "s_cbranch",
                        "s_barrier", "s_endpgm", "s_setprio", "s_sleep", "s_sendmsg", "s_setreg",
                        "s_store", "s_buffer_store", "s_scratch_store", "s_dcache", "s_icache",
                        "s_trap", "s_ttracedata", "s_set_gpr_idx", "s_setkill", "s_rfe",
                        "s_setpc", "s_incperflevel", "s_decperflevel", "s_atc_probe")
_NO_FALL_THROUGH = ("s_branch", "s_endpgm", "s_setpc_b64")
_M0_READERS = re.compile(r"^(?:s_sendmsg|s_ttracedata|s_movrel|ds_\w*addtid|v_interp_)")
_WIDE_STORE = re.compile(r"^(?:buffer|global|flat|scratch)_(?:store|atomic)")
_HWREG = re.compile(r"hwreg\((\w+)")


def register_names(text: str) -> frozenset:
    """The registers of every kind an operand text names (tools.gfx950.assembly.registers
    gives VGPR numbers only): v7, v[4:6] -> v4 v5 v6; s and a likewise; vcc and exec as their
    halves (vcc_lo, vcc_hi); m0."""
    found = set()
    for kind, single, first, last, pair, half, m0 in _REGISTER.findall(text):
        if kind:
            found.update(f"{kind}{n}" for n in ([int(single)] if single else
                                                range(int(first), int(last) + 1)))
        elif pair:
            found.update([pair + half] if half else [pair + "_lo", pair + "_hi"])
        else:
            found.add(m0)
    return frozenset(found)


def _vector(names) -> frozenset:
    return frozenset(n for n in names if n[0] in "va" and n[1:].isdigit())


class Operation(NamedTuple):
    """An instruction as the hazard classes see it."""
    instruction: Instruction
    defs: frozenset     # registers written
    uses: frozenset     # registers read
    operands: tuple     # the registers of each operand

    @property
    def mnemonic(self) -> str:
        return self.instruction.mnemonic

    @property
    def text(self) -> str:
        return self.instruction.text

    @property
    def is_valu(self) -> bool:
        return self.mnemonic.startswith("v_")

    @property
    def is_mfma(self) -> bool:
        return bool(_MFMA.match(self.mnemonic))

    @property
    def is_vmem(self) -> bool:
        return self.mnemonic.startswith(_VMEM)

    @property
    def is_memory(self) -> bool:
        """VMEM or LDS: the non-VALU consumers of the MFMA classes."""
        return self.is_vmem or self.mnemonic.startswith("ds_")

    @property
    def is_dpp(self) -> bool:
        return self.is_valu and _is_dpp(self.mnemonic, self.text)

    @property
    def is_permlane(self) -> bool:
        return self.mnemonic.startswith("v_permlane")

    @property
    def is_lane_access(self) -> bool:
        return self.mnemonic.startswith(("v_readlane", "v_readfirstlane", "v_writelane"))

    def operand(self, index: int) -> frozenset:
        return self.operands[index] if index < len(self.operands) else frozenset()


def operation(instruction: Instruction) -> Operation:
    """The registers an instruction writes and reads."""
    mnemonic, text = instruction.mnemonic, instruction.text
    operands = tuple(register_names(o) for o in instruction.operands)
    if not operands:
        return Operation(instruction, frozenset(), frozenset(), operands)
    written = set()
    if mnemonic.startswith("v_"):
        written = {0}
        if _SECOND_RESULT.match(mnemonic) and len(operands) > 1 and not _vector(operands[1]):
            written.add(1)
        if mnemonic.startswith(("v_swap_", "v_permlane")):
            written.add(1)
    elif mnemonic.startswith(_VMEM):
        returns = "_atomic" in mnemonic and re.search(r"\b(?:glc|sc0)\b", text)
        if ("_load" in mnemonic and not re.search(r"\blds\b", text)) or returns:
            written = {0}
    elif mnemonic.startswith("ds_"):
        written = {0} if _DS_RETURNS.match(mnemonic) else set()
    elif mnemonic.startswith("s_") and not mnemonic.startswith(_SALU_WRITES_NOTHING):
        written = {0}
    defs = frozenset().union(*(operands[i] for i in written))
    uses = frozenset().union(*(o for i, o in enumerate(operands) if i not in written))
    reads_destination = (_READS_DESTINATION.match(mnemonic) or _dst_sel_part(mnemonic, text)
                         or "UNUSED_PRESERVE" in text
                         or (mnemonic.startswith("v_") and _is_dpp(mnemonic, text)))
    if 0 in written and reads_destination:
        uses |= operands[0]
    if mnemonic.startswith("v_cmpx"):
        defs |= EXEC
    if mnemonic.startswith("v_div_fmas"):
        uses |= VCC
    return Operation(instruction, defs, uses, operands)


def _is_dpp(mnemonic: str, text: str) -> bool:
    return mnemonic.endswith("_dpp") or bool(re.search(r"\b(?:quad_perm|row_\w+|wave_\w+):", text))


def _dst_sel_part(mnemonic: str, text: str) -> bool:
    """A VALU writing part of its destination VGPR: SDWA with a dst_sel other than DWORD, or a
    VOP3 op_sel whose last (destination) bit is set."""
    if mnemonic.endswith("_sdwa"):
        found = re.search(r"dst_sel:(\w+)", text)
        return bool(found) and found.group(1) != "DWORD"
    op_sel = re.search(r"\bop_sel:\[([\d,]+)\]", text)
    return bool(op_sel) and not _PACKED.match(mnemonic) and op_sel.group(1).split(",")[-1] == "1"


def _scalar(names) -> frozenset:
    return frozenset(n for n in names if not (n[0] in "va" and n[1:].isdigit()))


def mfma_passes(op: Operation) -> int:
    """The passes of an MFMA (see the module's note)."""
    shape = _MFMA_SHAPE.search(op.mnemonic)
    m = int(shape.group(1)) if shape else 32
    most = {4: 2, 16: 8}.get(m, 16)
    if "f8f6f4" in op.mnemonic:
        formats = [int(f) for f in re.findall(r"\b(?:cbsz|blgp):(\d+)", op.text)]
        if len(formats) == 2 and min(formats) >= 2:
            return most // 2
    return most


def _xdl_result(passes: int) -> int:
    return passes + 3 + (passes != 2)


def _reads_or_writes(producer: Operation, consumer: Operation) -> bool:
    return bool(_vector(producer.defs) & (consumer.uses | consumer.defs))


def _conversion_forwarding(p, c):
    return 1 if p.mnemonic.startswith("v_cvt_scalef32_") and _reads_or_writes(p, c) else 0


def _dst_sel_forwarding(p, c):
    partial = p.is_valu and not p.mnemonic.startswith("v_cvt_scalef32_") and (
        _dst_sel_part(p.mnemonic, p.text))
    return 1 if partial and _reads_or_writes(p, c) else 0


def _transcendental_forwarding(p, c):
    return 1 if (_TRANSCENDENTAL.match(p.mnemonic) and c.is_valu
                 and not _TRANSCENDENTAL.match(c.mnemonic) and _vector(p.defs) & c.uses) else 0


def _valu_sgpr_valu(p, c):
    return 2 if p.is_valu and c.is_valu and _scalar(p.defs) & c.uses else 0


def _valu_sgpr_vmem(p, c):
    return 5 if p.is_valu and c.is_vmem and _scalar(p.defs) & c.uses else 0


def _valu_sgpr_lane_select(p, c):
    lane_select = c.operand(2) if c.mnemonic.startswith(("v_readlane", "v_writelane")) else frozenset()
    return 4 if p.is_valu and _scalar(p.defs) & lane_select else 0


def _valu_vgpr_readlane(p, c):
    source = c.operand(1) if c.mnemonic.startswith(("v_readlane", "v_readfirstlane")) else frozenset()
    return 1 if p.is_valu and _vector(p.defs) & source else 0


def _valu_exec_lane_access(p, c):
    return 4 if p.is_valu and c.is_lane_access and p.defs & EXEC else 0


def _valu_exec_dpp(p, c):
    return 5 if p.is_valu and c.is_dpp and p.defs & EXEC else 0


def _vgpr_dpp(p, c):
    return 2 if c.is_dpp and _vector(p.defs) & c.uses else 0


def _valu_exec_mfma(p, c):
    return 4 if p.is_valu and not p.is_mfma and c.is_mfma and p.defs & EXEC else 0


def _valu_vgpr_mfma(p, c):
    legacy = p.is_valu and not p.is_mfma and not p.mnemonic.startswith("v_dot")
    return 2 if legacy and c.is_mfma and _vector(p.defs) & c.uses else 0


def _mfma_result_read(p, c):
    other = (c.is_valu and not c.is_mfma) or c.is_memory
    return _xdl_result(mfma_passes(p)) if (p.is_mfma and other
                                           and _vector(p.defs) & c.uses) else 0


def _mfma_result_overwritten(p, c):
    other = (c.is_valu and not c.is_mfma) or c.is_memory
    return _xdl_result(mfma_passes(p)) if (p.is_mfma and other
                                           and _vector(p.defs) & c.defs) else 0


def _mfma_srcc_overwritten(p, c):
    other = (c.is_valu and not c.is_mfma) or c.is_memory
    if not (p.is_mfma and other and _vector(p.operand(3)) & c.defs):
        return 0
    return {2: 1, 4: 3, 8: 7}.get(mfma_passes(p), 15)


def _mfma_srcc(p, c):
    if not (p.is_mfma and c.is_mfma and _vector(p.defs) & c.operand(3)):
        return 0
    passes = mfma_passes(p)
    if c.operand(3) == p.operand(0):
        return 2 if passes == 2 else 0
    return passes + 2


def _mfma_src_ab(p, c):
    if not (p.is_mfma and c.is_mfma):
        return 0
    sources = frozenset().union(*(o for i, o in enumerate(c.operands) if i not in (0, 3)))
    return _xdl_result(mfma_passes(p)) if _vector(p.defs) & sources else 0


def _dot_result(p, c):
    if not (p.mnemonic.startswith("v_dot") and c.is_valu and not c.is_mfma):
        return 0
    written = _vector(p.defs)
    if c.mnemonic != p.mnemonic:
        return 3 if written & (c.uses | c.defs) else 0
    return 3 if written & (c.operand(1) | c.operand(2)) else 0


def _wide_store_data(p):
    """The data VGPRs of a VMEM store (or atomic) of more than 64 bits, and the wait states a
    write of them needs; (frozenset(), 0) for any other instruction."""
    if not _WIDE_STORE.match(p.mnemonic):
        return frozenset(), 0
    buffer = p.mnemonic.startswith("buffer_")
    at = 0 if buffer else (2 if re.search(r"\b(?:glc|sc0)\b", p.text) else 1)
    data = _vector(p.operand(at))
    if len(data) <= 2:
        return frozenset(), 0
    soffset = p.operand(3) if buffer else frozenset()
    return data, 1 if _scalar(soffset) else 2


def _wide_store_overwritten(p, c):
    data, required = _wide_store_data(p)
    return required if data & c.defs else 0


def _permlane_source(p, c):
    return 2 if p.is_valu and c.is_permlane and _vector(p.defs) & c.uses else 0


def _cmpx_permlane(p, c):
    return 4 if p.mnemonic.startswith("v_cmpx") and c.is_permlane else 0


def _vcc_div_fmas(p, c):
    return 4 if p.is_valu and c.mnemonic.startswith("v_div_fmas") and p.defs & VCC else 0


def _m0(p, c):
    reader = (_M0_READERS.match(c.mnemonic) or (c.is_vmem and re.search(r"\blds\b", c.text))
              or (c.mnemonic.startswith("ds_") and re.search(r"\bgds\b", c.text)))
    salu = p.mnemonic.startswith("s_")
    return 1 if salu and reader and "m0" in p.defs else 0


def _setreg(p, c):
    if not p.mnemonic.startswith("s_setreg"):
        return 0
    written = _HWREG.search(p.text)
    if c.mnemonic == "s_rfe_b64":
        return 1 if written and written.group(1) == "HW_REG_TRAPSTS" else 0
    read = _HWREG.search(c.text) if c.mnemonic.startswith(("s_getreg", "s_setreg")) else None
    return 2 if written and read and written.group(1) == read.group(1) else 0


CLASSES = {
    "conversion forwarding": _conversion_forwarding,
    "dst-sel forwarding": _dst_sel_forwarding,
    "transcendental forwarding": _transcendental_forwarding,
    "VALU SGPR write, VALU read": _valu_sgpr_valu,
    "VALU SGPR write, VMEM read": _valu_sgpr_vmem,
    "VALU SGPR write, lane select": _valu_sgpr_lane_select,
    "VALU VGPR write, readlane": _valu_vgpr_readlane,
    "VALU EXEC write, lane access": _valu_exec_lane_access,
    "VALU EXEC write, DPP": _valu_exec_dpp,
    "VGPR write, DPP read": _vgpr_dpp,
    "VALU EXEC write, MFMA": _valu_exec_mfma,
    "VALU VGPR write, MFMA read": _valu_vgpr_mfma,
    "MFMA result read": _mfma_result_read,
    "MFMA result overwritten": _mfma_result_overwritten,
    "MFMA SrcC overwritten": _mfma_srcc_overwritten,
    "MFMA result, MFMA SrcC": _mfma_srcc,
    "MFMA result, MFMA SrcA/B": _mfma_src_ab,
    "dot result": _dot_result,
    "wide store data overwritten": _wide_store_overwritten,
    "permlane source": _permlane_source,
    "v_cmpx, permlane": _cmpx_permlane,
    "VALU VCC write, v_div_fmas": _vcc_div_fmas,
    "M0 write, M0 read": _m0,
    "s_setreg, s_getreg/s_setreg/s_rfe": _setreg,
}


def asm_lines(amdgcn: str) -> set:
    """The line numbers (1-based) between each `;;#ASMSTART` and its `;;#ASMEND`."""
    inside, lines = False, set()
    for number, line in enumerate(amdgcn.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(_ASM_START):
            inside = True
        elif stripped.startswith(_ASM_END):
            inside = False
        elif inside:
            lines.add(number)
    return lines


def wait_states(instruction: Instruction) -> int:
    """The wait states an instruction provides: s_nop N, N + 1; any other, 1."""
    if instruction.mnemonic == "s_nop":
        return int(instruction.operands[0], 0) + 1
    return 1


def predecessors(program) -> list:
    """For each instruction index, the indices control can come from: the instruction before
    it (unless that one never falls through) and every branch to a label before it."""
    listed = program.instructions
    found = [[] for _ in listed]
    for at, instruction in enumerate(listed):
        if at + 1 < len(listed) and instruction.mnemonic not in _NO_FALL_THROUGH:
            found[at + 1].append(at)
        target = program.labels.get(instruction.target) if instruction.is_branch else None
        if target is not None and target < len(listed):
            found[target].append(at)
    return found


def _nearest(start, edges, weights, limit: int) -> dict:
    """{index: fewest wait states between it and start} over `edges` (predecessors or
    successors), for those fewer than limit; the wait states are those of the instructions
    strictly between."""
    best, queue = {}, [(0, at) for at in edges[start]]
    while queue:
        waits, at = heapq.heappop(queue)
        if at in best:
            continue
        best[at] = waits
        further = waits + weights[at]
        if further < limit:
            queue.extend((further, nxt) for nxt in edges[at] if nxt not in best)
            heapq.heapify(queue)
    return best


def asm_hazards(amdgcn: str) -> list:
    """Every hazard of CLASSES whose producer or consumer lies in an asm region and whose wait
    states are fewer than required, in consumer then producer order."""
    program = parse(amdgcn)
    listed = program.instructions
    inside = asm_lines(amdgcn)
    in_asm = [i.line in inside for i in listed]
    if not any(in_asm):
        return []
    operations = [operation(i) for i in listed]
    weights = [wait_states(i) for i in listed]
    before = predecessors(program)
    after = [[] for _ in listed]
    for at, sources in enumerate(before):
        for source in sources:
            after[source].append(at)
    consumers = {at for at, asm in enumerate(in_asm) if asm}
    for at in list(consumers):
        consumers.update(_nearest(at, after, weights, _WINDOW))
    hazards = []
    for consumer in sorted(consumers):
        c = operations[consumer]
        for producer, waits in sorted(_nearest(consumer, before, weights, _WINDOW).items()):
            if not (in_asm[producer] or in_asm[consumer]):
                continue
            p = operations[producer]
            for name, required in CLASSES.items():
                needed = required(p, c)
                if needed > waits:
                    hazards.append(dict(hazard=name, line=p.instruction.line,
                                        instruction=p.text, next_line=c.instruction.line,
                                        next_instruction=c.text, wait_states=waits,
                                        required=needed))
    return hazards
