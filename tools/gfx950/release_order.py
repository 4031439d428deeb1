"""Whether a gfx950 GEMM's in-kernel split-K reduce is release-ordered, read from its assembly.

`release_ordered(amdgcn)` holds when the code between the last partial store and the barrier
before the tile counter's atomic has, unconditionally (no branch or exec-mask change before
it), `buffer_wbl2 sc1` followed by `s_waitcnt vmcnt(0)`: every wave then waits for its own
stores and writes the L2 back before the barrier, so the one wave that bumps the counter
afterwards publishes them all, across XCDs. And after the counter's atomic (a returning add),
`buffer_inv sc1` comes before the next barrier: the last program's partial loads, issued after
that barrier, read memory, not stale cache lines. Kernels without a returning atomic are not
release-ordered (they have no in-kernel reduce).
"""

import re

from tools.gfx950.assembly import parse

_STORE = re.compile(r"^(buffer|global)_store")
_COUNTER_ATOMIC = re.compile(r"^(buffer|global)_atomic_add$")
_CONTROL = re.compile(r"^s_cbranch|^s_and_saveexec|^s_or_saveexec|^s_setpc")


def _instructions(amdgcn: str) -> list:
    """[(mnemonic, operands text)] in program order, s_nop left out."""
    return [(i.mnemonic, ", ".join(i.operands)) for i in parse(amdgcn).instructions
            if not i.mnemonic.startswith("s_nop")]


def _is_returning_atomic(name, operands) -> bool:
    return bool(_COUNTER_ATOMIC.match(name)) and bool(re.search(r"\b(sc0|glc)\b", operands))


def release_ordered(amdgcn: str) -> bool:
    code = _instructions(amdgcn)
    counter = next((i for i, (name, ops) in enumerate(code) if _is_returning_atomic(name, ops)),
                   None)
    if counter is None:
        return False
    barrier = max((i for i in range(counter) if code[i][0] == "s_barrier"), default=None)
    if barrier is None:
        return False
    last_store = max((i for i in range(barrier) if _STORE.match(code[i][0])), default=-1)
    release_seen = False
    for name, operands in code[last_store + 1:barrier]:
        if _CONTROL.match(name) or (name.startswith("s_mov") and operands.startswith("exec")):
            return False
        if name == "buffer_wbl2" and "sc1" in operands:
            release_seen = True
        elif release_seen and name == "s_waitcnt" and "vmcnt(0)" in operands:
            break
    else:
        return False
    after = code[counter + 1:]
    next_barrier = next((i for i, (name, _) in enumerate(after) if name == "s_barrier"), len(after))
    return any(name == "buffer_inv" and "sc1" in ops for name, ops in after[:next_barrier])
