"""Configs beyond the built-in table: the lookup's order (table, a file's exact shape, a file's
(N, K) and M bucket, the dequant path where it is served, the heuristic), the tuned-shapes file
(launchers.tuned_shapes: round trip, "dequant" and "aiter" named per bucket, one-line errors
naming the file and the entry, MXFP4_MM_CONFIGS at import), the notice for
untuned shapes (once per bucket, MXFP4_MM_QUIET), and the one-file submission leaving the file
out."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mxfp4_mm.launchers import configs, tuned_shapes
from mxfp4_mm.launchers.aiter_path import AITER_CONFIG
from mxfp4_mm.launchers.configs import (GEMM_CONFIGS, M_BUCKET_CAP, config_lookup, m_bucket,
                                        note_untuned, untuned_shapes)
from mxfp4_mm.launchers.gemm_config import DEQUANT_CONFIG, GemmConfig, config_from_fields
from mxfp4_mm.launchers.targets import SM90
from mxfp4_mm.launchers.heuristics import heuristic_config
from mxfp4_mm.launchers.tuned_shapes import ConfigFileError, file_entry, load_configs, write_configs

ROOT = Path(__file__).resolve().parents[1]
TASK_SHAPE = (16, 2112, 7168)
N, K = 4096, 1024


@pytest.fixture(autouse=True)
def fresh_and_noticed(fresh_lookup, monkeypatch):
    """Each test starts with no file entries and no untuned shape seen, notices on."""
    monkeypatch.delenv(configs.QUIET_VARIABLE, raising=False)


def config(block_m=32, block_n=64, **fields):
    return GemmConfig(block_m, block_n, 512, **fields)


@pytest.mark.parametrize("m, bucket", [(1, 1), (2, 2), (3, 4), (64, 64), (65, 128),
                                       (M_BUCKET_CAP, M_BUCKET_CAP),
                                       (M_BUCKET_CAP + 1, M_BUCKET_CAP), (10 ** 6, M_BUCKET_CAP)])
def test_m_bucket_is_the_next_power_of_two_up_to_the_cap(m, bucket):
    assert m_bucket(m) == bucket


def test_the_lookup_takes_the_table_then_the_exact_shape_then_the_bucket_then_the_heuristic():
    exact, bucket = config(block_n=32), config(block_n=128)
    configs.add_entries("gfx950", {(100, N, K): exact}, {(N, K, 128): bucket})
    assert config_lookup("gfx950", 100, N, K) == (exact, "file")
    assert config_lookup("gfx950", 97, N, K) == (bucket, "bucket")       # 97 -> bucket 128
    assert config_lookup("gfx950", 128, N, K) == (bucket, "bucket")
    assert config_lookup("gfx950", 129, N, K) == (heuristic_config("gfx950", 129, N, K), "heuristic")
    assert config_lookup("gfx950", 64, N, K) == (heuristic_config("gfx950", 64, N, K), "heuristic")
    assert config_lookup("sm_90", 100, N, K)[1] == "heuristic"          # another arch's entry


def test_task_shapes_keep_the_tables_entries_whatever_a_file_holds():
    m, n, k = TASK_SHAPE
    configs.add_entries("gfx950", {TASK_SHAPE: config()}, {(n, k, m_bucket(m)): config()})
    assert config_lookup("gfx950", *TASK_SHAPE) == (GEMM_CONFIGS["gfx950"][TASK_SHAPE], "table")
    assert config_lookup("gfx950", m - 1, n, k) == (config(), "bucket")


def test_the_interpreter_takes_gfx950s_file_entries():
    configs.add_entries("gfx950", {}, {(N, K, 8): config()})
    assert config_lookup("interpreter", 5, N, K) == (config(), "bucket")


def test_a_file_round_trips_and_a_later_entry_for_the_same_key_replaces_the_earlier(tmp_path):
    path = tmp_path / "tuned.json"
    first = [file_entry("gfx950", N, K, config(quantize_a_once=True, num_warps=8), "a",
                        m_bucket=2048),
             file_entry("sm_90", N, K, config(split_k=2, split_k_reduce="last_program"), "b", m=7)]
    write_configs(path, first)
    write_configs(path, [file_entry("gfx950", N, K, config(block_m=64), "c", m_bucket=2048)])
    assert load_configs(path) == 2
    assert config_lookup("gfx950", 1500, N, K) == (config(block_m=64), "bucket")
    assert config_lookup("sm_90", 7, N, K) == (config(split_k=2, split_k_reduce="last_program"),
                                               "file")
    notes = sorted(entry["note"] for entry in json.loads(path.read_text())["entries"])
    assert notes == ["b", "c"]


def test_two_files_loaded_in_turn_both_serve(tmp_path):
    """A second file adds to the first's entries of the same arch, and replaces only its keys."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    write_configs(first, [file_entry("gfx950", N, K, config(block_n=32), "a", m_bucket=16),
                          file_entry("gfx950", N, K, config(block_n=32), "a", m=100)])
    write_configs(second, [file_entry("gfx950", N, K, config(block_n=128), "b", m_bucket=64),
                           file_entry("gfx950", N, K, config(block_n=256), "b", m=200)])
    load_configs(first)
    load_configs(second)
    assert config_lookup("gfx950", 9, N, K) == (config(block_n=32), "bucket")
    assert config_lookup("gfx950", 100, N, K) == (config(block_n=32), "file")
    assert config_lookup("gfx950", 50, N, K) == (config(block_n=128), "bucket")
    assert config_lookup("gfx950", 200, N, K) == (config(block_n=256), "file")
    write_configs(first, [file_entry("gfx950", N, K, config(block_m=64), "c", m_bucket=16)])
    load_configs(first)
    assert config_lookup("gfx950", 9, N, K) == (config(block_m=64), "bucket")
    assert config_lookup("gfx950", 50, N, K) == (config(block_n=128), "bucket")


def test_an_entry_at_the_bucket_cap_loads_and_serves_every_m_above_half_the_cap(tmp_path):
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"entries": [good_entry(m_bucket=M_BUCKET_CAP)]}))
    assert load_configs(path) == 1
    wanted = GemmConfig(64, 128, 256)
    for m in (5000, M_BUCKET_CAP, 4 * M_BUCKET_CAP):
        assert config_lookup("gfx950", m, N, K) == (wanted, "bucket"), m
    assert config_lookup("gfx950", M_BUCKET_CAP // 2, N, K)[1] == "heuristic"


def good_entry(**changes):
    entry = {"arch": "gfx950", "n": N, "k": K, "m_bucket": 64,
             "config": {"block_m": 64, "block_n": 128, "block_k": 256}}
    entry.update(changes)
    return {key: value for key, value in entry.items() if value is not None}


@pytest.mark.parametrize("entry, why", [
    (good_entry(m_bucket=48), "\"m_bucket\" must be a power of two"),
    (good_entry(m_bucket=2 * M_BUCKET_CAP), "\"m_bucket\" must be a power of two"),
    (good_entry(m=5), "exactly one of \"m\" and \"m_bucket\""),
    (good_entry(m_bucket=None), "exactly one of \"m\" and \"m_bucket\""),
    (good_entry(m_bucket=None, m=0), "\"m\" must be a positive integer"),
    (good_entry(k=100), "\"k\" of 64"),
    (good_entry(n=24), "multiple of 16"),
    (good_entry(arch=7), "\"arch\" must be"),
    (good_entry(config={"block_m": 64, "block_n": 48, "block_k": 256}), "block_n=48"),
    (good_entry(config={"block_m": 64, "block_n": 64, "block_k": 256, "tile": 3}), "tile"),
    (good_entry(config=[64, 64, 256]), "\"config\" must be an object"),
    (good_entry(extra=1), "unknown key 'extra'"),
    ("not an object", "expected an object"),
])
def test_a_bad_entry_is_one_line_naming_the_file_and_the_entry_and_nothing_is_added(
        tmp_path, entry, why):
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"entries": [good_entry(), entry]}))
    with pytest.raises(ConfigFileError) as error:
        load_configs(path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{path}: entry 1")
    assert why in message
    assert configs.FILE_BUCKETS == {} and configs.FILE_SHAPES == {}


@pytest.mark.parametrize("entry, name", [
    (good_entry(m_bucket=48), f"entry 0 (gfx950 N={N} K={K} M bucket 48)"),
    (good_entry(m_bucket=None, m=0), f"entry 0 (gfx950 N={N} K={K} M=0)"),
    ("not an object", "entry 0"),
])
def test_a_bad_entry_is_named_by_its_arch_n_k_and_m_or_bucket(tmp_path, entry, name):
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"entries": [entry]}))
    with pytest.raises(ConfigFileError) as error:
        load_configs(path)
    assert str(error.value).startswith(f"{path}: {name}: ")


@pytest.mark.parametrize("text, why", [("{", "not JSON"), ("[]", "expected an object"),
                                       ('{"entries": 3}', "expected an object")])
def test_a_file_that_is_not_a_list_of_entries_is_one_line_naming_it(tmp_path, text, why):
    path = tmp_path / "tuned.json"
    path.write_text(text)
    with pytest.raises(ConfigFileError, match=f"^{path}: {why}") as error:
        load_configs(path)
    assert "\n" not in str(error.value)


def test_a_missing_file_is_one_line_naming_it(tmp_path):
    with pytest.raises(ConfigFileError, match="missing.json: cannot be read"):
        load_configs(tmp_path / "missing.json")


def test_the_notice_comes_once_per_bucket_and_names_the_tuning_command(capsys):
    heuristic = heuristic_config("sm_90", 100, N, K)
    note_untuned("sm_90", 100, N, K, heuristic)
    note_untuned("sm_90", 120, N, K, heuristic)          # the same bucket, 128
    note_untuned("sm_90", 129, N, K, heuristic_config("sm_90", 129, N, K))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert f"N={N} K={K} M bucket 128 (M=100)" in lines[0] and heuristic.label in lines[0]
    assert f"python -m tools.tune --shapes {N},{K} --m 128 --configs FILE" in lines[0]
    assert "M bucket 256" in lines[1]
    assert untuned_shapes() == [(N, K, 128), (N, K, 256)]


def test_the_interpreters_notice_names_the_modelled_sweep(capsys):
    note_untuned("interpreter", 3, N, K, heuristic_config("interpreter", 3, N, K))
    assert f"python -m tools.isa --sweep {N},{K} --m 4 --configs FILE" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["1", "yes", "true"])
def test_quiet_set_to_anything_but_0_silences_the_notice_but_the_shape_is_still_listed(
        capsys, monkeypatch, value):
    monkeypatch.setenv(configs.QUIET_VARIABLE, value)
    note_untuned("sm_90", 100, N, K, heuristic_config("sm_90", 100, N, K))
    assert capsys.readouterr().err == ""
    assert untuned_shapes() == [(N, K, 128)]


@pytest.mark.parametrize("value", ["0", ""])
def test_quiet_set_to_0_or_empty_keeps_the_notice(capsys, monkeypatch, value):
    monkeypatch.setenv(configs.QUIET_VARIABLE, value)
    note_untuned("sm_90", 100, N, K, heuristic_config("sm_90", 100, N, K))
    assert "untuned shape" in capsys.readouterr().err


def test_a_shape_with_a_file_entry_takes_no_notice_and_is_proven_with_its_config(
        capsys, device):
    from mxfp4_mm.launchers.ladder import proven_launcher
    m, n, k = 5, 64, 256
    entry = GemmConfig(16, 32, 256)
    configs.add_entries("gfx950", {}, {(n, k, 8): entry})
    launcher = proven_launcher("interpreter", "interpreter", m, n, k, (k, 1), device)
    assert launcher.config == entry
    proven_launcher("interpreter", "interpreter", 9, n, k, (k, 1), device)   # bucket 16: none
    assert capsys.readouterr().err.count("untuned shape") == 1
    assert untuned_shapes() == [(n, k, 16)]


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    environment = dict(os.environ, TRITON_INTERPRET="1", **env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=300)


def test_the_environment_variable_loads_a_file_at_import_and_a_bad_one_is_one_line(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    write_configs(good, [file_entry("gfx950", N, K, config(block_m=64), "x", m_bucket=16)])
    bad.write_text(json.dumps({"entries": [good_entry(m_bucket=3)]}))
    code = ("from mxfp4_mm import launchers; from mxfp4_mm.launchers.configs import config_lookup; "
            f"print(config_lookup('gfx950', 9, {N}, {K})[1])")
    loaded = run_python(code, MXFP4_MM_CONFIGS=str(good))
    assert loaded.stdout.split() == ["bucket"] and loaded.stderr == ""
    refused = run_python(code, MXFP4_MM_CONFIGS=str(bad))
    assert refused.stdout.split() == ["heuristic"]
    assert refused.stderr.splitlines() == [
        f"mxfp4-mm: MXFP4_MM_CONFIGS: {bad}: entry 0 (gfx950 N={N} K={K} M bucket 3): "
        f"\"m_bucket\" must be a power of two from 1 to the cap, got 3; not loaded"]


def test_the_one_file_submission_leaves_the_file_out():
    from mxfp4_mm.tools.bundle import build_bundle
    text = build_bundle(ROOT)
    assert "load_configs" not in text and "CONFIGS_VARIABLE" not in text
    assert "def note_untuned" in text and "def config_lookup" in text


def test_a_model_or_an_n_k_pair_stands_for_each_m_and_task_shapes_stay_as_given():
    from mxfp4_mm.tools.cli import parse_model_shapes
    from mxfp4_mm.tools.model_shapes import MODEL_LAYERS
    shapes = parse_model_shapes(["llama-3-8b", "4096,1024", "16,2112,7168", "4096,4096"], (1, 2048))
    pairs = list(MODEL_LAYERS["llama-3-8b"].values())
    assert shapes[:8] == [(m, n, k) for n, k in pairs for m in (1, 2048)]
    assert shapes[8:] == [(1, 4096, 1024), (2048, 4096, 1024), (16, 2112, 7168)]   # no repeat


def test_tools_tune_writes_its_winners_as_bucket_entries_that_load(tmp_path):
    from mxfp4_mm.tools.tune import write_file_entries
    winner = config(block_m=128, num_warps=8, quantize_a_once=True)
    result = {"config": vars(winner)}
    write_file_entries("sm_90", {(1500, N, K): (result, "tools.tune: 12.3 µs")},
                       tmp_path / "t.json")
    load_configs(tmp_path / "t.json")
    assert config_lookup("sm_90", 1025, N, K) == (winner, "bucket")
    entry, = json.loads((tmp_path / "t.json").read_text())["entries"]
    assert entry["m_bucket"] == 2048 and "tuned at M=1500" in entry["note"]


def test_tools_tune_tries_a_quantized_once_up_to_256_rows_from_m_64():
    from mxfp4_mm.tools.tune import QUANTIZE_ONCE_FROM_M, tile_candidates
    large = tile_candidates("sm_90", 4096, N, K, 132)
    once = [c for c in large if c.quantize_a_once]
    assert once and max(c.block_m for c in once) == 256
    small = tile_candidates("sm_90", QUANTIZE_ONCE_FROM_M - 1, N, K, 132)
    assert not any(c.quantize_a_once for c in small)

def test_table_and_file_entries_come_before_the_dequant_path(tmp_path):
    m, n, k = 2 * SM90.vendor_gemm_from_m, 4096, 4096
    entry = GemmConfig(128, 128, 256, quantize_a_once=True)
    configs.add_entries("sm_90", {}, {(n, k, configs.m_bucket(m)): entry})
    assert config_lookup("sm_90", m, n, k) == (entry, "bucket")


def test_the_tuned_shapes_file_names_dequant_and_aiter_per_bucket(tmp_path):
    path = tmp_path / "tuned.json"
    write_configs(path, [file_entry("sm_90", 4096, 4096, DEQUANT_CONFIG, "dequant", m_bucket=2048),
                         file_entry("gfx950", 4096, 4096, AITER_CONFIG, "aiter", m_bucket=4096)])
    hand = tmp_path / "hand.json"
    hand.write_text('{"entries": [{"arch": "sm_90", "n": 2112, "k": 7168, "m_bucket": 8192, '
                    '"config": {"path": "dequant", "num_warps": 4}}, {"arch": "gfx950", "n": 2112, '
                    '"k": 7168, "m": 3000, "config": {"path": "aiter"}}]}')
    assert load_configs(path) == 2 and load_configs(hand) == 2
    assert config_lookup("sm_90", 1500, 4096, 4096) == (DEQUANT_CONFIG, "bucket")
    assert config_lookup("gfx950", 3000, 4096, 4096) == (AITER_CONFIG, "bucket")
    assert config_lookup("sm_90", 8000, 2112, 7168)[0] == config_from_fields(
        {"path": "dequant", "num_warps": 4})
    assert config_lookup("gfx950", 3000, 2112, 7168) == (AITER_CONFIG, "file")
