"""The conversion forwarding hazard of gfx950, found in assembly text.

gfx950 does not forward the result of a `v_cvt_scalef32_*` conversion to the very next
instruction: AMD's notes ask for a NOP or an instruction writing another VGPR in between
(LLVM models it as GCNSubtarget::hasCvtScaleForwardingHazard and puts `s_nop 0` after the
conversions it emits itself, but never looks inside an inline-asm string). A conversion that
writes one byte or half of its destination keeps the rest, so it also reads its destination.

`conversion_hazards(amdgcn)` lists every `v_cvt_scalef32_*` whose destination VGPR, or any
register of a range holding it, is read by the next instruction in program order (labels,
directives and comments between them do not count as instructions; an `s_nop` does).
"""

import re

from tools.gfx950.assembly import parse, registers

CONVERSION = "v_cvt_scalef32_"
# Instructions whose first operand is a VGPR they write; every other first operand is read
# (stores' addresses and data, s_* operands, v_cmp's SGPR destination holds no VGPR anyway).
_WRITES_FIRST_OPERAND = re.compile(r"^(v_|ds_read|ds_load|buffer_load|global_load|flat_load|"
                                   r"scratch_load|ds_(?:add|max|min|swizzle|bpermute|permute)_rtn)")
# Conversions to packed fp4/fp8 that write part of their destination and keep the rest.
_KEEPS_PART_OF_DESTINATION = re.compile(r"^v_cvt_scalef32_(?:sr_)?(?:pk_)?(?:fp4|fp8|bf8)")


def read_registers(mnemonic: str, operands) -> set:
    """The VGPRs an instruction reads."""
    if not operands:
        return set()
    sources = operands[1:] if _WRITES_FIRST_OPERAND.match(mnemonic) else operands
    read = set().union(*(registers(o) for o in sources)) if sources else set()
    if _KEEPS_PART_OF_DESTINATION.match(mnemonic):
        read |= registers(operands[0])
    return read


def conversion_hazards(amdgcn: str) -> list:
    """[{"line", "instruction", "next_line", "next_instruction"}] for each conversion whose
    result the next instruction reads."""
    listed = parse(amdgcn).instructions
    hazards = []
    for conversion, reader in zip(listed, listed[1:]):
        if not conversion.mnemonic.startswith(CONVERSION) or not conversion.operands:
            continue
        if registers(conversion.operands[0]) & read_registers(reader.mnemonic, reader.operands):
            hazards.append(dict(line=conversion.line, instruction=conversion.text,
                                next_line=reader.line, next_instruction=reader.text))
    return hazards
