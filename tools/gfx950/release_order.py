"""Whether a gfx950 GEMM's in-kernel split-K reduce hands its partials over in order, with no
cache-wide writeback or invalidate, read from its assembly.

The protocol (kernels.preshuffle_gemm, SPLIT_K_SYNC "write_through"): every partial store is
written through (`sc0 sc1`: a system-scope store in LLVM's AMDGPU memory model for GFX942,
which gfx950 follows), each wave waits for its own stores (`s_waitcnt vmcnt(0)`) before the
barrier, one returning atomic add bumps the tile's counter after it, and the last program's
partial loads are system-scope too (`sc0 sc1`), so none can hit a stale line of its XCD's L2.
A `buffer_wbl2` writes back the whole L2 of the XCD and a `buffer_inv` invalidates it: neither
may appear, nor any atomic but the counter's add and its reset.

`release_problems(amdgcn)` lists what breaks the protocol (empty when it holds);
`release_ordered(amdgcn)` is whether the list is empty. Kernels without a returning atomic
add have no in-kernel reduce and are not release-ordered.
"""

import re

from .assembly import parse

_STORE = re.compile(r"^(buffer|global)_store")
_LOAD = re.compile(r"^(buffer|global)_load")
_ATOMIC = re.compile(r"^(buffer|global)_atomic_")
_COUNTER_ATOMIC = re.compile(r"^(buffer|global)_atomic_add$")
_RESET_ATOMIC = re.compile(r"^(buffer|global)_atomic_swap$")
_CACHE_WIDE = ("buffer_wbl2", "buffer_inv")
_CONTROL = re.compile(r"^s_cbranch|^s_and_saveexec|^s_or_saveexec|^s_setpc")


def _instructions(amdgcn: str) -> list:
    """[(mnemonic, operands text)] in program order, s_nop left out."""
    return [(i.mnemonic, ", ".join(i.operands)) for i in parse(amdgcn).instructions
            if not i.mnemonic.startswith("s_nop")]


def _bits(operands: str) -> set:
    return set(re.findall(r"\b(sc0|sc1|nt|glc|slc)\b", operands))


def _system_scope(operands: str) -> bool:
    return {"sc0", "sc1"} <= _bits(operands)


def _is_returning_add(name, operands) -> bool:
    return bool(_COUNTER_ATOMIC.match(name)) and bool(_bits(operands) & {"sc0", "glc"})


def release_problems(amdgcn: str) -> list:
    code = _instructions(amdgcn)
    counter = next((i for i, (name, ops) in enumerate(code) if _is_returning_add(name, ops)),
                   None)
    if counter is None:
        return ["no returning atomic add: no tile counter"]
    problems = [f"`{name}` on the path" for name, _ in code if name in _CACHE_WIDE]
    others = [name for i, (name, _) in enumerate(code) if _ATOMIC.match(name)
              and i != counter and not _RESET_ATOMIC.match(name)]
    problems += [f"an atomic besides the counter's add and reset: `{name}`" for name in others]
    barrier = max((i for i in range(counter) if code[i][0] == "s_barrier"), default=None)
    if barrier is None:
        return problems + ["no barrier before the counter's atomic"]
    stores = [i for i in range(counter) if _STORE.match(code[i][0])]
    if not stores:
        return problems + ["no partial store before the counter's atomic"]
    problems += [f"partial store not written through: `{code[i][0]} {code[i][1]}`"
                 for i in stores if not _system_scope(code[i][1])]
    waited = False
    for name, operands in code[stores[-1] + 1:barrier]:
        if _CONTROL.match(name) or (name.startswith("s_mov") and operands.startswith("exec")):
            break
        if name == "s_waitcnt" and "vmcnt(0)" in operands:
            waited = True
            break
    if not waited:
        problems.append("no unconditional s_waitcnt vmcnt(0) between the last partial store "
                        "and the barrier before the counter's atomic")
    problems += [f"partial load after the counter may read a stale line: `{name} {operands}`"
                 for name, operands in code[counter + 1:]
                 if _LOAD.match(name) and not _system_scope(operands)]
    return problems


def release_ordered(amdgcn: str) -> bool:
    return not release_problems(amdgcn)
