"""The tuned-shapes file: configs for a model's shapes, kept outside the code.

A JSON object {"entries": [ENTRY, ...]}, each ENTRY

    {"arch": "gfx950", "n": 4096, "k": 4096, "m_bucket": 128,
     "config": {"block_m": 64, "block_n": 128, "block_k": 512}, "note": "where it comes from"}

with either "m_bucket" (a power of two from 1 to launchers.configs.M_BUCKET_CAP: the entry
serves every M whose bucket it is) or "m" (that exact M). "config" holds GemmConfig fields
(those left out take their defaults; "path" names the launcher, launchers.gemm_config.GEMM_PATHS:
{"path": "dequant"} or {"path": "aiter"} alone is a whole config); "note" is optional. N must be a multiple of 16 and K
of 64, as for every call.

`load_configs(path)` reads one and adds its entries to the lookup (launchers.configs:
exact entries after the built-in table's, bucket entries after those); a file with any bad
entry adds none and raises ConfigFileError, one line naming the file and the entry. At the
import of `launchers`, MXFP4_MM_CONFIGS=path loads one (a bad one prints that line on stderr
and is skipped). `write_configs(path, entries)` merges entries into a file (an entry with the
same arch, N, K and M or bucket is replaced): python -m tools.tune and python -m tools.isa
--sweep write with it. The one-file submission leaves this module out (tools.bundle).
"""

import json
import os
import sys
from pathlib import Path

from .configs import add_entries, is_m_bucket
from .gemm_config import GemmConfig, config_from_fields, non_default_fields

CONFIGS_VARIABLE = "MXFP4_MM_CONFIGS"
_KEYS = {"arch", "n", "k", "m", "m_bucket", "config", "note"}


class ConfigFileError(ValueError):
    """A tuned-shapes file that cannot be read; the message is one line naming the file and
    the entry."""


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def entry_key(entry: dict) -> tuple:
    """(arch, n, k, "m" or "m_bucket", its value): what makes two entries the same."""
    kind = "m" if "m" in entry else "m_bucket"
    return entry["arch"], entry["n"], entry["k"], kind, entry[kind]


def parse_entry(entry) -> tuple:
    """entry -> (arch, key, GemmConfig, is_bucket), key (m, n, k) or (n, k, m bucket);
    ValueError (one line) naming what is wrong."""
    if not isinstance(entry, dict):
        raise ValueError(f"expected an object, got {type(entry).__name__}")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (keys: {', '.join(sorted(_KEYS))})")
    if not isinstance(entry.get("arch"), str) or not entry["arch"]:
        raise ValueError("\"arch\" must be a target name such as \"gfx950\" or \"sm_90\"")
    n, k = entry.get("n"), entry.get("k")
    if not (_whole(n) and _whole(k) and n > 0 and k > 0 and n % 16 == 0 and k % 64 == 0):
        raise ValueError(f"\"n\" must be a positive multiple of 16 and \"k\" of 64, got "
                         f"n={n!r}, k={k!r}")
    if ("m" in entry) == ("m_bucket" in entry):
        raise ValueError("give exactly one of \"m\" and \"m_bucket\"")
    if "m" in entry and not (_whole(entry["m"]) and entry["m"] > 0):
        raise ValueError(f"\"m\" must be a positive integer, got {entry['m']!r}")
    if "m_bucket" in entry and not is_m_bucket(entry["m_bucket"]):
        raise ValueError(f"\"m_bucket\" must be a power of two from 1 to the cap, got "
                         f"{entry['m_bucket']!r}")
    if not isinstance(entry.get("config"), dict):
        raise ValueError("\"config\" must be an object of GemmConfig fields")
    try:
        config = config_from_fields(entry["config"])
    except TypeError as error:    # an unknown field
        raise ValueError(f"config: {error}") from None
    if "m" in entry:
        return entry["arch"], (entry["m"], n, k), config, False
    return entry["arch"], (n, k, entry["m_bucket"]), config, True


def _entry_name(index: int, entry) -> str:
    if isinstance(entry, dict):
        m = f"M={entry['m']}" if "m" in entry else f"M bucket {entry.get('m_bucket')}"
        return f"entry {index} ({entry.get('arch')} N={entry.get('n')} K={entry.get('k')} {m})"
    return f"entry {index}"


def read_entries(path) -> list:
    """The file's entries, each checked; ConfigFileError on the first bad one."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as error:
        raise ConfigFileError(f"{path}: cannot be read ({error.strerror or error})") from None
    except ValueError as error:
        raise ConfigFileError(f"{path}: not JSON ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise ConfigFileError(f"{path}: expected an object {{\"entries\": [...]}}")
    for index, entry in enumerate(data["entries"]):
        try:
            parse_entry(entry)
        except ValueError as error:
            raise ConfigFileError(f"{path}: {_entry_name(index, entry)}: "
                                  f"{' '.join(str(error).split())}") from None
    return data["entries"]


def load_configs(path) -> int:
    """Add the file's entries to the config lookup; the number added."""
    by_arch = {}
    entries = read_entries(path)
    for entry in entries:
        arch, key, config, is_bucket = parse_entry(entry)
        shapes, buckets = by_arch.setdefault(arch, ({}, {}))
        (buckets if is_bucket else shapes)[key] = config
    for arch, (shapes, buckets) in by_arch.items():
        add_entries(arch, shapes, buckets)
    return len(entries)


def load_configs_from_environment() -> None:
    """MXFP4_MM_CONFIGS=path: load it; a bad file is one line on stderr and skipped."""
    path = os.environ.get(CONFIGS_VARIABLE, "")
    if not path:
        return
    try:
        load_configs(path)
    except ConfigFileError as error:
        print(f"mxfp4-mm: {CONFIGS_VARIABLE}: {error}; not loaded", file=sys.stderr, flush=True)


def file_entry(arch: str, n: int, k: int, config: GemmConfig, note: str, m_bucket: int = None,
               m: int = None) -> dict:
    """An entry for write_configs: config's fields that differ from GemmConfig's defaults."""
    where = {"m": m} if m is not None else {"m_bucket": m_bucket}
    return {"arch": arch, "n": n, "k": k, **where, "config": non_default_fields(config),
            "note": note}


def write_configs(path, entries: list) -> None:
    """Merge `entries` into the file at `path` (created if missing), one entry a line."""
    path = Path(path)
    merged = {entry_key(e): e for e in (read_entries(path) if path.exists() else [])}
    for entry in entries:
        parse_entry(entry)
        merged[entry_key(entry)] = entry
    ordered = sorted(merged.values(), key=entry_key)
    lines = ",\n".join("  " + json.dumps(e) for e in ordered)
    path.write_text("{\"entries\": [\n" + lines + "\n]}\n")
