"""GemmConfig: one kernel config, for the launcher of its path (launchers.paths), each path's
fields checked by that path's rules (PATH_RULES), and the configs every arch shares
(DEQUANT_CONFIG, FITTING_CONFIG). Which config serves a shape: launchers.configs.
"""

from dataclasses import dataclass, fields
from typing import Optional

from ..kernels import formats
from ..kernels.preshuffle_gemm import SCALED_MFMA_K

# The launchers a config can choose (launchers.paths.build_launcher): "preshuffle", the fused
# GEMM of kernels.preshuffle_gemm; "dequant", A quantized, A and B dequantized to bf16 and the
# vendor GEMM (launchers.dequant); "aiter", aiter's quantize + gemm_a4w4 (launchers.aiter_path,
# where aiter imports); "hopper", kernels.hopper_gemm's fused GEMM for GPUs without FP4 MMA
# (CUDA only: it dequantizes both operands to bf16 for tl.dot).
GEMM_PATHS = ("preshuffle", "dequant", "aiter", "hopper")
TILE_FIELDS = ("block_m", "block_n", "block_k")
# The fields each path does not read: each keeps GemmConfig's default (PATH_DEFAULTS where the
# path has its own), so that two configs that serve alike are equal. "preshuffle" reads them
# all (swap_ab its own rule refuses); "hopper" has no wave split, no XCD remap, no choice of
# when B's scales load and no HIP options (it runs on CUDA); "dequant" reads the tiles and
# warps of its dequantize kernel (kernels.dequantize): block_m rows of A, block_n rows of B and
# block_k columns a program (32 x 256 in 8 warps: 84 VGPRs on gfx950, where 64 x 256 in 4
# warps needs 330 and 128 x 256 spills); "aiter" reads none.
PATH_FIELDS = {"hopper": ("block_m", "block_n", "block_k", "split_k", "split_k_reduce",
                          "group_m", "num_warps", "num_stages", "cache_modifier",
                          "reduce_block_m", "reduce_block_n", "store_modifier",
                          "quantize_a_once", "swap_ab"),
               "dequant": TILE_FIELDS + ("num_warps",), "aiter": ()}
# The values a config of a path takes where they are left out (config_from_fields).
PATH_DEFAULTS = {"dequant": dict(block_m=32, block_n=32, block_k=256, num_warps=8),
                 "aiter": dict(block_m=16, block_n=32, block_k=256)}


@dataclass(frozen=True)
class GemmConfig:
    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1                 # requested K splits
    split_k_reduce: str = "kernel"   # who sums the splits: "kernel" (a 2nd launch) or "last_program"
    group_m: int = 1
    num_warps: int = 4
    num_stages: int = 1
    cache_modifier: Optional[str] = None   # for the B and B-scale loads
    waves_per_eu: int = 0            # HIP only
    matrix_instr_nonkdim: int = 16   # HIP only
    reduce_block_m: int = 16
    reduce_block_n: int = 64
    num_xcds: int = 1                # > 1: remap programs so that neighbours share an XCD's L2
    store_modifier: Optional[str] = None   # for the C and partials stores, e.g. ".wt"
    b_scales_first: Optional[bool] = None  # the B-scale load before A and B; None: see below
    quantize_a_once: bool = False    # A quantized by a kernel of its own, then the GEMM on it
    wave_split_k: int = 1            # K slices of each K tile, one per group of waves
    path: str = "preshuffle"         # which launcher serves it (GEMM_PATHS)
    swap_ab: bool = False            # "hopper" only: each tile computed as C^T = B @ A^T

    def __post_init__(self):
        problems = _field_problems(self)
        if self.path not in GEMM_PATHS:
            problems.append(f"path={self.path!r} is not one of {', '.join(GEMM_PATHS)}")
        else:
            problems += PATH_RULES[self.path](self)
        if problems:
            raise ValueError("bad GemmConfig: " + "; ".join(problems))

    @property
    def label(self) -> str:
        """Short form, e.g. "16x128x512 sk14/lp w4 s1 .cg" (lp/rk: who reduces the splits);
        "dequant 32x32x256 w8" and "aiter" for the other paths."""
        if self.path == "aiter":
            return "aiter"
        if self.path == "dequant":
            return f"dequant {self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps}"
        text = f"{self.block_m}x{self.block_n}x{self.block_k} sk{self.split_k}"
        if self.split_k > 1:
            text += "/lp" if self.split_k_reduce == "last_program" else "/rk"
        text += f" w{self.num_warps} s{self.num_stages}"
        options = (self.cache_modifier, self.waves_per_eu and f"wpe{self.waves_per_eu}",
                   self.num_xcds > 1 and f"xcd{self.num_xcds}",
                   self.store_modifier and f"store{self.store_modifier}",
                   self.b_scales_first is not None
                   and ("bs-first" if self.b_scales_first else "bs-last"),
                   self.quantize_a_once and "a-once",
                   self.wave_split_k > 1 and f"wk{self.wave_split_k}",
                   self.path == "hopper" and "hopper",
                   self.swap_ab and "swap")
        return " ".join([text] + [option for option in options if option])

    @property
    def loads_b_scales_first(self) -> bool:
        """Whether each K tile loads B's scales before A and B. By default where their
        conversion to the MFMA layout needs no LDS (BLOCK_N >= 128): issued after B, the load
        starts only once B's conversion has waited for B, a second round trip. Narrower tiles
        convert them through LDS first, where loading them first costs a round trip instead.
        The compiler can still wait for them before issuing the rest (tools.isa shows the
        round trips), which is why a config may choose."""
        return self.block_n >= 128 if self.b_scales_first is None else self.b_scales_first

    def splits_for(self, k: int) -> tuple:
        """(number of splits actually launched, K elements per split) for this K."""
        size = formats.pad_to(formats.cdiv(k, self.split_k), self.block_k)
        return formats.cdiv(k, size), size


def _field_problems(config) -> list:
    """The rules of every path's fields (the tiles divide the preshuffled weight's)."""
    problems = []
    if config.block_n <= 0 or config.block_n % 32 or 256 % config.block_n:
        problems.append(f"block_n={config.block_n} must be a multiple of 32 dividing 256")
    if config.block_k < 256 or config.block_k & (config.block_k - 1):
        problems.append(f"block_k={config.block_k} must be a power of two >= 256")
    if config.block_m < 16 or config.block_m & (config.block_m - 1):
        problems.append(f"block_m={config.block_m} must be a power of two >= 16")
    if config.split_k < 1 or config.group_m < 1:
        problems.append("split_k and group_m must be >= 1")
    if config.split_k_reduce not in ("kernel", "last_program"):
        problems.append(f"split_k_reduce={config.split_k_reduce!r} is not 'kernel' or "
                        f"'last_program'")
    if config.cache_modifier not in (None, ".cg", ".ca", ".cv"):
        problems.append(f"cache_modifier={config.cache_modifier!r} is not a load modifier")
    if config.store_modifier not in (None, ".wb", ".cg", ".cs", ".wt"):
        problems.append(f"store_modifier={config.store_modifier!r} is not a store modifier")
    return problems


def _preshuffle_problems(config) -> list:
    """kernels.preshuffle_gemm's: each wave slice of a K tile holds whole scaled MFMAs."""
    problems = []
    if config.num_xcds < 1:
        problems.append(f"num_xcds={config.num_xcds} must be >= 1")
    if (config.wave_split_k < 1 or config.wave_split_k & (config.wave_split_k - 1)
            or config.block_k // config.wave_split_k < SCALED_MFMA_K):
        problems.append(f"wave_split_k={config.wave_split_k} must be a power of two leaving "
                        f">= {SCALED_MFMA_K} of block_k={config.block_k} to a slice")
    if config.swap_ab:
        problems.append("swap_ab needs path='hopper'")
    return problems


def _unread_field_problems(config) -> list:
    """A path's fields outside PATH_FIELDS left at their defaults."""
    read, defaults = PATH_FIELDS[config.path], PATH_DEFAULTS.get(config.path, {})
    unread = [f.name for f in fields(config) if f.name not in read + ("path",)
              and getattr(config, f.name) != defaults.get(f.name, f.default)]
    if not unread:
        return []
    return [f"path={config.path!r} reads only {', '.join(read) or 'no field'}; leave "
            f"{', '.join(unread)} out"]


# Each path's own rules, beside the fields' (_field_problems): [problem] of a config.
PATH_RULES = {"preshuffle": _preshuffle_problems, "hopper": _unread_field_problems,
              "dequant": _unread_field_problems, "aiter": _unread_field_problems}


def config_from_fields(config_fields: dict) -> GemmConfig:
    """GemmConfig(**config_fields), a path other than "preshuffle" taking its PATH_DEFAULTS
    where they are left out (a tuned-shapes file may say {"path": "aiter"})."""
    defaults = PATH_DEFAULTS.get(config_fields.get("path"), {})
    return GemmConfig(**{**defaults, **config_fields})


# The "dequant" path's config, which config_lookup serves from Target.vendor_gemm_from_m on.
DEQUANT_CONFIG = config_from_fields({"path": "dequant"})
# The last config of our own the ladder tries (launchers.ladder): small tiles, one stage, no
# split; it fits every target's shared memory and spills on none (tests/test_fit.py).
FITTING_CONFIG = GemmConfig(16, 32, 256, num_warps=4, num_stages=1)


def non_default_fields(config: GemmConfig) -> dict:
    """The fields of `config` that differ from GemmConfig's defaults (the tiles always)."""
    return {f.name: getattr(config, f.name) for f in fields(config)
            if getattr(config, f.name) != f.default}
