"""The heuristic config of a shape no table or file names: each chip family's rules in a
module of its own (gfx950, sm90), behind one lookup. A chip takes the rules its record names
(launchers.targets.Target.heuristic).
"""

from ..gemm_config import GemmConfig
from .gfx950 import gfx950_heuristic
from .sm90 import sm90_heuristic
from ..targets import target_facts

HEURISTICS = {"gfx950": gfx950_heuristic, "sm_90": sm90_heuristic}


def heuristic_config(arch: str, m: int, n: int, k: int) -> GemmConfig:
    """A config for any shape on `arch`, by the rules of its family (HEURISTICS)."""
    return HEURISTICS[target_facts(arch).heuristic](m, n, k)
