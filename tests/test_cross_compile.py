"""Every gfx950 config cross-compiles to a gfx950 code object with the runner's Triton (3.6.0,
tools.isa, offline); the sm_90 entries compile to PTX for the instruction report, to cubins
without a stack (no spills) and within an H100's shared memory.

Every quantizer: the software one, and the two hardware forms, whose code must hold
v_cvt_scalef32_pk_fp4_bf16 ("hardware") or _f32 ("hardware-f32") and no hazard at the edges of
its inline asm (tools.gfx950.hazards). Every GEMM must use a scaled MFMA; no kernel may use
scratch or spill; every kernel has a critical path (tools.gfx950.critical_path) and a modelled
time (tools.gfx950.model); the search ranks the config space by it (tools.gfx950.search).
Compiling needs real JIT functions, so tools.isa runs in a process without the interpreter,
with the installed Triton where it is 3.6.0, else one it installs into .triton/3.6.0 on first use
(about a minute, once); where that install fails (no network) the tests skip.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mxfp4_mm.kernels.preshuffle_gemm import a_rows
from mxfp4_mm.launchers.configs import GEMM_CONFIGS
from mxfp4_mm.launchers.gemm_config import GemmConfig

ROOT = Path(__file__).resolve().parents[1]
RUNNER_TRITON = "3.6.0"
SCALED_MFMA = ("v_mfma_scale_f32_16x16x128_f8f6f4", "v_mfma_scale_f32_32x32x64_f8f6f4")
ENV = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


def _with_runners_triton(script: str, runners_triton: list, timeout=900):
    """`python -c script` with the runner's Triton (conftest's runners_triton) on the path."""
    env = dict(ENV, PYTHONPATH=os.pathsep.join([*runners_triton, str(ROOT)]))
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _isa(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "tools.isa", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module", params=["software", "hardware", "hardware-f32"])
def isa_rows(request, tmp_path_factory, runners_triton):
    folder = tmp_path_factory.mktemp("isa")
    out = folder / f"{request.param}.json"
    done = _isa("--arch", "gfx950", "--quantizer", request.param, "--json", str(out),
                "--asm-dir", str(folder / "asm"))
    assert done.returncode == 0, done.stderr[-2000:]
    return request.param, json.loads(out.read_text()), done.stdout


def test_every_gfx950_config_is_compiled_by_the_runners_triton(isa_rows):
    _, rows, _ = isa_rows
    assert {row["triton"] for row in rows} == {RUNNER_TRITON}
    gemm_shapes = {tuple(r["shape"]) for r in rows if r["kernel"] == "gemm"}
    assert gemm_shapes == set(GEMM_CONFIGS["gfx950"])
    two_launches = {s for s, c in GEMM_CONFIGS["gfx950"].items()
                    if c.split_k > 1 and c.split_k_reduce == "kernel"}
    assert {tuple(r["shape"]) for r in rows if r["kernel"] == "reduce"} == two_launches


def test_no_table_kernel_has_a_hazard_at_its_inline_asm(isa_rows):
    """No table kernel of any quantizer leaves a hazard with its producer or consumer in an
    asm string short of its wait states (tools.gfx950.hazards, every class true on gfx950)."""
    quantizer, rows, _ = isa_rows
    for row in rows:
        assert row["hazards"] == [], (quantizer, row["shape"], row["kernel"], row["hazards"][:2])


CHAINED_PROBE = '''
import triton, triton.language as tl, torch
from mxfp4_mm.tools.gfx950.cross_compile import GFX950, compile_for

CHAINED = tl.constexpr("v_cvt_scalef32_pk_fp4_bf16 $0, $1, $5\\n\\t"
           "v_cvt_scalef32_pk_fp4_bf16 $0, $2, $5 op_sel:[0,0,1,0]\\n\\t"
           "v_cvt_scalef32_pk_fp4_bf16 $0, $3, $5 op_sel:[0,0,0,1]\\n\\t"
           "v_cvt_scalef32_pk_fp4_bf16 $0, $4, $5 op_sel:[0,0,1,1]")

@triton.jit
def chained(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    p = tl.load(x_ptr + offsets)
    scale = tl.full((BLOCK,), 1.0, tl.float32)
    word = tl.inline_asm_elementwise(CHAINED, "=&v,v,v,v,v,v", [p, p + 1, p + 2, p + 3, scale],
                                     dtype=tl.uint32, is_pure=True, pack=1)
    tl.store(out_ptr + offsets, word)

x = torch.empty(256, dtype=torch.int32, device="meta")
compiled = compile_for(chained, (x, x, 256), dict(num_warps=4))
print(compiled.asm["amdgcn"])
'''


def test_the_hazard_check_flags_a_kernel_with_conversions_chained_into_one_word(tmp_path,
                                                                                runners_triton):
    """Four conversions into one VGPR, each reading the bytes the previous one wrote (the
    quantizer's asm before it interleaved two words), compiled by Triton 3.6.0 for gfx950."""
    from mxfp4_mm.tools.gfx950.hazards import asm_hazards
    (tmp_path / "chained_probe.py").write_text(CHAINED_PROBE)
    env = dict(ENV, PYTHONPATH=os.pathsep.join([*runners_triton, str(ROOT), str(tmp_path)]))
    done = subprocess.run([sys.executable, "-m", "chained_probe"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    hazards = asm_hazards(done.stdout)
    chained = [h for h in hazards if h["next_instruction"].startswith("v_cvt_scalef32_pk_fp4_bf16")]
    assert len(chained) == 3 and all("op_sel" in h["next_instruction"] for h in chained), hazards


def test_no_scratch_and_no_spills(isa_rows):
    _, rows, _ = isa_rows
    for row in rows:
        assert row["scratch_bytes"] == 0, row["shape"]
        assert row["vgpr_spills"] == 0 and row["sgpr_spills"] == 0, row["shape"]


def test_gemm_uses_the_scaled_mfma_buffer_loads_and_the_chosen_quantizer(isa_rows):
    quantizer, rows, _ = isa_rows
    for row in (r for r in rows if r["kernel"] == "gemm"):
        assert any(row["counts"].get(name, 0) for name in SCALED_MFMA), row["shape"]
        cvts = {name for name, v in row["counts"].items()
                if name.startswith("v_cvt_scalef32_pk_fp4_") and v}
        expected = {"hardware": {"v_cvt_scalef32_pk_fp4_bf16"},
                    "hardware-f32": {"v_cvt_scalef32_pk_fp4_f32"}}.get(quantizer, set())
        assert cvts == expected, (quantizer, row["shape"])
        # tt.pointer_range=32, as the AMD JIT gives tensors: A and B come by buffer loads.
        assert not any(name.startswith("global_load") for name in row["counts"]), row["shape"]
        assert any(name.startswith("buffer_load") for name in row["counts"]), row["shape"]


def test_report_has_the_documented_keys_and_sane_figures(isa_rows):
    _, rows, _ = isa_rows
    for row in rows:
        assert {"shape", "kernel", "config", "triton", "vgprs", "lds_bytes", "scratch_bytes",
                "waves_per_simd", "occupancy", "allocated_vgprs", "workgroups", "counts",
                "asm"} <= set(row)
        assert 1 <= row["waves_per_simd"] <= 8 and row["workgroups"] >= 1
        assert row["allocated_vgprs"] >= row["vgprs"]
        # the estimate from the registers used is not a bound on the allocation's own figure:
        # AGPRs are allocated after the aligned arch VGPRs, waves_per_eu pads the allocation
        assert 1 <= row["occupancy"] <= 8
        if row["config"]["waves_per_eu"] and row["kernel"] == "gemm":
            assert row["occupancy"] <= row["config"]["waves_per_eu"]
        # The real occupancy is LLVM's own figure for the code object.
        llvm = re.search(r"; Occupancy: (\d+)", Path(row["asm"]).read_text())
        assert llvm and int(llvm.group(1)) == row["occupancy"], row["asm"]
    for row in (r for r in rows if r["kernel"] == "gemm"):
        c = row["config"]
        elements_per_lane = a_rows(row["shape"][0], c["block_m"]) * c["block_k"] / (
            64 * c["num_warps"])
        # The quantizer is most, not all, of one K tile's instructions.
        assert 0 < row["quantizer_instructions_per_element"] * elements_per_lane \
            < row["k_tile_instructions"], row["shape"]
        assert row["mfma_replication"] >= 1, row["shape"]
        k_tiles = GemmConfig(**c).splits_for(row["shape"][2])[1] // c["block_k"]
        # a loop where there are more K tiles than the pipeliner's stages peel out of it
        assert row["k_loop"] == (k_tiles > c["num_stages"]), row["shape"]


CRITICAL_PATH = {"instructions", "global_round_trips", "lds_waits", "barriers", "issue_cycles",
                 "latency_cycles", "busiest_simd_issue", "busiest_simd_cycles"}


def _assert_critical_paths(rows):
    """Every kernel row carries its critical path (tools.gfx950.critical_path); a GEMM that
    reduces split-K in the kernel also the other programs', shorter than the last one's."""
    for row in rows:
        config = GemmConfig(**row["config"])
        splits = config.splits_for(row["shape"][2])[0]
        in_kernel = row["kernel"] == "gemm" and splits > 1 and \
            config.split_k_reduce == "last_program"
        assert "critical_path_error" not in row, (row["shape"], row["critical_path_error"])
        assert row["launches_per_call"] == (
            2 if splits > 1 and config.split_k_reduce == "kernel" else 1)
        others = row.get("critical_path_other_programs")
        for path in (row["critical_path"], others or row["critical_path"]):
            assert set(path) == CRITICAL_PATH, row["shape"]
            assert path["instructions"] > 0 and path["global_round_trips"] >= 1, row["shape"]
            assert path["busiest_simd_issue"] % path["instructions"] == 0, row["shape"]
            assert path["busiest_simd_issue"] >= path["instructions"], row["shape"]
            assert path["issue_cycles"] >= 4 * path["instructions"], row["shape"]
            assert path["issue_cycles"] < path["latency_cycles"][0] \
                <= path["latency_cycles"][1] <= path["busiest_simd_cycles"][1], row["shape"]
        assert (others is not None) == in_kernel, row["shape"]
        if in_kernel:
            last = row["critical_path"]
            assert others["global_round_trips"] < last["global_round_trips"], row["shape"]
            assert others["instructions"] < last["instructions"], row["shape"]


def test_every_kernel_row_carries_its_critical_path_and_the_table_prints_it_per_call(
        isa_rows):
    """Per call: launches, round trips per launch · LDS waits · barriers, the busiest-SIMD
    issue of its launches together, its modelled µs under each member of the family (the same
    on each of its rows, from tools.gfx950.model), their range with the members at its ends,
    and aiter's figures beside the benchmark shapes; then the benchmark shapes' ranges beside
    aiter's and the best public config's, the geomeans, ours against the best public config
    by member, and each member with its errors."""
    from mxfp4_mm.tools.gfx950 import model
    _, rows, printed = isa_rows
    _assert_critical_paths(rows)
    section = printed.split("critical path of one program per call")[1]
    table, summary = section.split("modelled µs per call, benchmark shapes")
    lines = {line.split()[0]: line for line in table.splitlines()[2:] if line.strip()}
    assert set(lines) == {"x".join(map(str, shape)) for shape in GEMM_CONFIGS["gfx950"]}
    data = model.load_points()
    family = model.family(data)
    modelled = {}
    for shape in GEMM_CONFIGS["gfx950"]:
        call = [r for r in rows if tuple(r["shape"]) == shape]
        paths = [r["critical_path"] for r in call]
        trips = "+".join(str(p["global_round_trips"]) for p in paths)
        line = lines["x".join(map(str, shape))]
        assert f" {len(call)}  {trips if len(call) == 1 else f'({trips})'} · " \
               f"{sum(p['lds_waits'] for p in paths)} · {sum(p['barriers'] for p in paths)} " \
            in line, line
        issue = sum(p["busiest_simd_issue"] for p in paths)
        cycles = tuple(sum(p["busiest_simd_cycles"][i] for p in paths) for i in range(2))
        expected = family.figures(model.Call(shape, issue, len(call), call[0]["workgroups"],
                                             sum(p["global_round_trips"] for p in paths),
                                             cycles), data)
        for row in call:
            assert row["modelled_us_by_member"] == {m: round(us, 2) for m, us in expected.items()}
            assert row["modelled_us"] == round(max(expected.values()), 2)
            found = row["modelled_range"]
            assert expected[found["low_member"]] == min(expected.values())
            assert expected[found["high_member"]] == max(expected.values())
        low, high = f"{min(expected.values()):.2f}", f"{max(expected.values()):.2f}"
        assert (low if low == high else f"{low}–{high}") in line, line
        assert f"{found['low_member']} .. {found['high_member']}" in line, line
        modelled[shape] = call[0]["modelled_us_by_member"]
    aiter_point, aiter_call = model.aiter_points(data)[(16, 2112, 7168)]
    aiter = family.figures(aiter_call, data)
    assert lines["16x2112x7168"].endswith(
        f"2, (1+2) · 47 · 12, 2658, {min(aiter.values()):.2f}–{max(aiter.values()):.2f} µs")
    assert "µs" not in lines["16x3072x1536"].split("..")[-1]          # not a benchmark shape
    by_shape = {line.split()[0]: line for line in summary.splitlines()[2:]
                if line.strip() and not line.startswith(("the family", "  "))}
    best = model.best_public(data)
    for shape in BENCHMARK_SHAPES:
        ours, public = modelled[shape], family.figures(best[shape][1], data)
        margins = ", ".join(f"{ours[m] - public[m]:+.2f}" for m in family.fits)
        assert by_shape["x".join(map(str, shape))].endswith(margins)
    geomean = {m: model.geomean(modelled[s][m] for s in BENCHMARK_SHAPES) for m in family.fits}
    assert by_shape["geomean"].split()[1] == \
        f"{min(geomean.values()):.2f}–{max(geomean.values()):.2f}"
    for name, fit in family.fits.items():
        assert f"  {name}: {fit.describe()}" in summary


BENCHMARK_SHAPES = [(4, 2880, 512), (16, 2112, 7168), (32, 4096, 512), (32, 2880, 512),
                    (64, 7168, 2048), (256, 3072, 1536)]


def test_the_hardware_quantizers_fast_path_spends_at_most_8_instructions_per_element(
        isa_rows):
    """With the hardware quantizer (gfx950's), on every benchmark shape's GEMM: what an
    ordinary tile runs (the slow path's instructions excluded) is at most 8 static instructions
    per element of the tile the MFMA takes, per lane (the software recipe's fast path: about
    23); where the program quantizes every row of that tile, per A element it quantizes."""
    quantizer, rows, _ = isa_rows
    gemms = {tuple(r["shape"]): r for r in rows if r["kernel"] == "gemm"}
    bar = {"hardware": 8, "hardware-f32": 9}.get(quantizer, 30)
    for shape in BENCHMARK_SHAPES:
        row = gemms[shape]
        assert 0 < row["fast_path_instructions_per_tile_element"] <= bar, (quantizer, shape)
        if a_rows(shape[0], row["config"]["block_m"]) == row["config"]["block_m"]:
            assert row["fast_path_instructions_per_element"] \
                == row["fast_path_instructions_per_tile_element"]
        assert row["fast_path_instructions_per_element"] \
            < row["quantizer_instructions_per_element"], (quantizer, shape)


def test_the_compiled_split_k_hand_over_holds_and_each_single_break_of_it_fails(isa_rows):
    """The table's in-kernel split-K GEMMs, compiled: partials written through, each wave's
    wait before the barrier, one counter atomic, system-scope partial loads, no whole-L2
    writeback or invalidate. Their own code broken one piece at a time fails the check."""
    from mxfp4_mm.tools.gfx950.release_order import release_problems
    _, rows, _ = isa_rows
    in_kernel = [r for r in rows if "release_ordered" in r]
    assert in_kernel
    for row in in_kernel:
        code = Path(row["asm"]).read_text()
        assert row["release_ordered"] and release_problems(code) == []
        assert "buffer_wbl2" not in code and "buffer_inv" not in code
        counter = re.search(r"\t(?:buffer|global)_atomic_add [^\n]* sc0\n", code)
        before, after = code[:counter.start()], code[counter.start():]
        store = re.search(r"(\t(?:buffer|global)_store_\w+ [^\n]*?) sc0 sc1\n", before)
        not_written_through = before[:store.start()] + store.group(1) + "\n" + \
            before[store.end():] + after
        wait = re.search(r"\ts_waitcnt vmcnt\(0\)\n", before[store.end():])
        cut = store.end() + wait.start()
        wait_after = (before[:cut] + before[cut + wait.end() - wait.start():]
                      + after.replace("\n", "\n\ts_waitcnt vmcnt(0)\n", 1))
        load = re.search(r"(\t(?:buffer|global)_load_\w+ [^\n]*?) sc0 sc1\n", after)
        cached_load = before + after[:load.start()] + load.group(1) + " sc0 nt\n" + \
            after[load.end():]
        for broken, problem in ((not_written_through, "partial store not written through"),
                                (wait_after, "no unconditional s_waitcnt"),
                                (cached_load, "partial load after the counter")):
            assert any(p.startswith(problem) for p in release_problems(broken)), \
                (row["shape"], problem)


def test_every_import_time_candidate_compiles_without_spills_and_splits_release_ordered(
        tmp_path, runners_triton):
    """tools.isa --candidates: each gfx950 candidate of the tuner (the table's entry first),
    every kernel, Triton 3.6.0; each in-kernel split-K reduce is release-ordered; every kernel
    has no conversion hazard and a critical path."""
    from mxfp4_mm.launchers.candidates import CANDIDATES
    from mxfp4_mm.launchers.tuner import candidate_configs
    out = tmp_path / "candidates.json"
    done = _isa("--arch", "gfx950", "--candidates", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert {row["triton"] for row in rows} == {RUNNER_TRITON}
    for shape in CANDIDATES["gfx950"]:
        configs = candidate_configs("gfx950", shape)
        gemms = [r for r in rows if tuple(r["shape"]) == shape and r["kernel"] == "gemm"]
        assert [GemmConfig(**r["config"]) for r in gemms] == configs, shape
        assert [r["candidate"] for r in gemms] == list(range(len(configs)))
    in_kernel = [r for r in rows if r["kernel"] == "gemm" and r["config"]["split_k"] > 1
                 and r["config"]["split_k_reduce"] == "last_program"]
    assert in_kernel and all(r["release_ordered"] is True for r in in_kernel)
    assert not any("release_ordered" in r for r in rows if r not in in_kernel)
    for row in rows:
        assert "error" not in row, row["shape"]
        assert row["scratch_bytes"] == 0 and row["vgpr_spills"] == 0, (row["shape"],
                                                                       row["config"])
        assert row["hazards"] == [], (row["shape"], row["config"], row["hazards"][:2])
    _assert_critical_paths(rows)


def test_narrow_tiles_with_fewer_warps_have_less_mfma_replication(runners_triton):
    """16x32x512 tiles: 4 warps issue 4x the MFMAs they need, 2 warps 2x; with 1 warp Triton
    3.6 gives up the scaled MFMA and multiplies in bf16 (once)."""
    done = _with_runners_triton(NARROW, runners_triton)
    assert done.returncode == 0, done.stderr[-2000:]
    narrow = {int(w): row for w, row in json.loads(done.stdout).items()}
    assert [narrow[w]["mfma_replication"] for w in (1, 2, 4)] == [1.0, 2.0, 4.0]
    assert all(narrow[w]["counts"].get(SCALED_MFMA[0]) == 8 for w in (2, 4))
    assert not any(name.startswith("v_mfma_scale") for name in narrow[1]["counts"])
    assert all(row["triton"] == RUNNER_TRITON for row in narrow.values())


NARROW = """
import json
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.tools.gfx950.report import call_rows
print(json.dumps({w: call_rows((4, 2880, 512), GemmConfig(16, 32, 512, num_warps=w), "software")[0]
                  for w in (1, 2, 4)}))
"""


def test_the_search_ranks_eligible_calls_by_their_worst_modelled_time(runners_triton):
    """tools.gfx950.search on 4x2880x512 with a reduced space: stage 1 tries every tile and
    split, stage 2 each neighbour of the best and of each member's best; ranked() keeps the
    eligible calls by the family's maximum (the minimax call first); members_best() gives each
    member's own best; tools.isa --sweep prints them."""
    done = _with_runners_triton(SEARCH, runners_triton)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["stage1"] == [[16, 32, 512, 1], [16, 64, 512, 1]]
    assert found["modelled"] == sorted(found["modelled"])
    assert found["modelled"] == [max(by_member.values()) for by_member in found["by_member"]]
    assert found["eligible"] and all(found["eligible"])
    for member, us in found["members_best"].items():
        assert us == min(by_member[member] for by_member in found["by_member"])
    assert "calls compiled" in found["printed"]
    assert "by the family's worst modelled µs" in found["printed"]
    assert "each member's own best" in found["printed"]


SEARCH = """
import json
from mxfp4_mm.tools.gfx950 import search
from mxfp4_mm.tools import isa
search.BLOCKS_N, search.BLOCKS_K, search.REFINE_TOP = (32, 64), (512,), 1
search.WARPS, search.STAGES, search.WAVES_PER_EU = (2,), (1,), (0,)
shape = (4, 2880, 512)
configs = search.tile_configs(shape)
calls = search.search(shape, "hardware")
best = search.ranked(calls)
print(json.dumps(dict(
    stage1=sorted([c.block_m, c.block_n, c.block_k, c.split_k] for c in configs),
    modelled=[rows[0]["modelled_us"] for rows in best],
    by_member=[rows[0]["modelled_us_by_member"] for rows in best],
    members_best={m: rows[0]["modelled_us_by_member"][m]
                  for m, rows in search.members_best(calls).items()},
    eligible=[search.eligible(rows) for rows in best],
    printed=isa.format_sweep(shape, calls))))
"""


SYNTHETIC_ASM = """\t.file\t1 "{kernels}" "preshuffle_gemm.py"
\t.file\t2 "{library}" "standard.py"
\t.file\t3 "{kernels}" "quantize.py"
\t.file\t4 "{kernels}" "splitk_reduce.py"
\t.loc\t1 80 0 prologue_end ; preshuffle_gemm.py:80:0
\ts_load_dwordx4 s[0:3], s[0:1], 0x0
.LBB0_1:
\t.loc\t2 43 17 ; standard.py:43:17 @[ quantize.py:30:12 @[ preshuffle_gemm.py:124:63 ] ]
\tv_max_f32_e32 v1, v1, v2
\t.loc\t3 40 5 ; quantize.py:40:5 @[ preshuffle_gemm.py:124:63 ]
\tv_cvt_scalef32_pk_fp4_f32 v3, v1, v2, v4
\t.loc\t2 43 17 ; standard.py:43:17 @[ quantize.py:60:12 @[ quantize.py:{slow}:20 @[ preshuffle_gemm.py:124:63 ] ] ]
\tv_cmp_u_f32_e32 vcc, v1, v1
\t.loc\t2 50 1 ; standard.py:50:1 @[ preshuffle_gemm.py:41:27 ]
\tv_add_u32_e32 v5, v5, v6
\t.loc\t1 125 10 ; preshuffle_gemm.py:125:10
\tv_mfma_scale_f32_16x16x128_f8f6f4 a[0:3], v[0:7], v[8:15], a[0:3], v1, v2
\ts_cbranch_scc1 .LBB0_1
\t.loc\t3 {fast} 5 ; quantize.py:{fast}:5 @[ preshuffle_gemm.py:124:63 ]
\tv_lshrrev_b32_e32 v1, 8, v1
\t.loc\t4 {last} 5 ; splitk_reduce.py:{last}:5 @[ preshuffle_gemm.py:170:5 ]
\tbuffer_load_dwordx4 v[0:3], v1, s[0:3], 0 offen
\t.loc\t1 0 0 is_stmt 0 ; :0:0
\ts_endpgm
.Lfunc_end0:
"""

ATTRIBUTE = """
import json, sys
from pathlib import Path
import triton
from mxfp4_mm.launchers.gemm_config import GemmConfig
from mxfp4_mm.tools.gfx950 import report as isa
from mxfp4_mm.tools.gfx950.assembly import k_loop, parse
asm = Path(sys.argv[1]).read_text().format(kernels=isa.QUANTIZER_SOURCE.parent,
                                           library=Path(triton.__file__).parent / "language",
                                           slow=isa.slow_path_lines()[0],
                                           fast=isa.fast_path_lines()[0],
                                           last=isa.last_program_lines()[0])
program, project = parse(asm), isa._project_frame_resolver(asm)
head, last = k_loop(program)
print(json.dumps(dict(
    sides={str(flag): [isa.branch_side(project, flag)(i) for i in program.instructions]
           for flag in (True, False)},
    body=[i.mnemonic for i in program.instructions[head:last + 1]],
    per_tile=isa.per_k_tile(program, project, GemmConfig(16, 32, 256, num_warps=4), 16, 1024),
    paths=isa.critical_paths(program, project, 4, [2], reduces_in_kernel=True))))
"""


def test_quantizer_attribution_and_branch_sides_follow_the_inlining_chain(tmp_path):
    """An instruction inlined from Triton's library counts for the project frame that called it:
    the quantizer's when that is kernels/quantize.py, the GEMM's when it is the GEMM. The
    critical path's side of an instruction: "off" on the quantizer's slow path, "on" on its
    fast path; on the last program's split-K reduce, "on" or "off" by the program walked."""
    asm = tmp_path / "synthetic.s"
    asm.write_text(SYNTHETIC_ASM)
    done = subprocess.run([sys.executable, "-c", ATTRIBUTE, str(asm)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    # v_cmp_u_f32 is called (through two frames) from a line of the slow branch of `if fast:`.
    assert found["sides"]["True"] == [None, None, None, "off", None, None, None, "on", "on",
                                      None]
    assert found["sides"]["False"] == found["sides"]["True"][:8] + ["off", None]
    assert found["body"] == ["v_max_f32_e32", "v_cvt_scalef32_pk_fp4_f32", "v_cmp_u_f32_e32",
                             "v_add_u32_e32", "v_mfma_scale_f32_16x16x128_f8f6f4",
                             "s_cbranch_scc1"]
    per_tile = found["per_tile"]
    assert per_tile["k_loop"] and per_tile["k_tile_instructions"] == 6
    # 3 quantizer instructions (v_max, the conversion, v_cmp; 2 off the slow path) over
    # 16*256 / (64*4) = 16 A elements per lane.
    assert per_tile["quantizer_instructions_per_element"] == round(3 / 16, 1)
    assert per_tile["fast_path_instructions_per_element"] == round(2 / 16, 1)
    # One 16x16x128 MFMA per wave, 4 waves, for a 16x32x256 tile: 4*32768 / 131072.
    assert per_tile["mfma_replication"] == 1.0
    # 4 K tiles: the load, 4 passes of 6, the last 3; 2 waves on the busiest SIMD, together.
    path = dict(instructions=28, global_round_trips=0, lds_waits=0, barriers=0,
                busiest_simd_issue=56)
    for found_path in (found["paths"]["critical_path"],
                       found["paths"]["critical_path_other_programs"]):
        assert {key: found_path[key] for key in path} == path
        # no wait: the walk is the issue; the second wave adds its issue
        assert found_path["issue_cycles"] == 4 * 28
        assert found_path["latency_cycles"] == [4 * 28] * 2
        assert found_path["busiest_simd_cycles"] == [2 * 4 * 28] * 2


def test_sm90_report_counts_the_quantizer_and_the_mma(tmp_path, runners_triton):
    """tools.isa --arch sm_90: every sm_90 entry compiles to PTX with MMA instructions, and
    pre-quantizing A removes instructions (the in-register quantizer's share)."""
    out = tmp_path / "sm90.json"
    done = _isa("--arch", "sm_90", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert {tuple(row["shape"]) for row in rows} == set(GEMM_CONFIGS["sm_90"])
    for row in rows:
        assert row["triton"] == RUNNER_TRITON
        assert row["mma"] > 0 and row["ptx_fused"] > row["ptx_a_prequantized"] > 0, row["shape"]
        assert 0 < row["quantizer_share"] < 1
        assert row["est_warp_instructions"] >= row["ptx_fused"] * row["programs"]
        assert 0 < row["registers"] <= 255 and row["stack_bytes"] == 0, row["shape"]
        assert 0 < row["shared_bytes"] <= 232448


def test_usage_errors_exit_2_and_cross_compile_explains_itself():
    done = _isa("--sweep", "4,2880,512,1", timeout=120)
    assert done.returncode == 2 and "M,N,K" in done.stderr and "4,2880,512,1" in done.stderr
    done = _isa("--sweep", "4,2880", timeout=120)
    assert done.returncode == 2 and "N,K 4,2880: N must be a multiple of 16" in done.stderr
    done = _isa("--markdown", "x.md", timeout=120)
    assert done.returncode == 2 and "--compare-tritons" in done.stderr
    shown = subprocess.run([sys.executable, "-m", "tools.gfx950.cross_compile", "--help"], cwd=ROOT,
                           env=ENV, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "A library for tools.isa" in shown.stdout
    done = _isa("--sweep", "4,2880,512", "--arch", "sm_90", timeout=120)
    assert done.returncode == 2 and "--arch gfx950" in done.stderr
    done = _isa("--shapes", "4,2880,512", "--sweep", "4,2880,512", timeout=120)
    assert done.returncode == 2 and "--shapes goes alone" in done.stderr
    done = _isa("--shapes", "4,2888,512", timeout=120)
    assert done.returncode == 2 and "4,2888,512" in done.stderr


def test_the_quantize_once_launches_compile_clean_for_gfx950_and_the_sweep_writes_a_file(
        tmp_path, runners_triton):
    """tools.isa --sweep on an N,K pair at a small and a large M: per shape a chosen path and
    its config, the quantize-once path only at the large M, every compiled call of either path
    without a spill, scratch or hazard, and the choices written as bucket entries that load."""
    from mxfp4_mm.launchers import configs
    from mxfp4_mm.launchers.tuned_shapes import read_entries
    figures, tuned = tmp_path / "figures.json", tmp_path / "tuned.json"
    done = _isa("--sweep", "1024,512", "--m", "8,4096", "--json", str(figures),
                "--configs", str(tuned))
    assert done.returncode == 0, done.stderr[-2000:]
    calls = json.loads(figures.read_text())
    once = [c for c in calls if c["path"] == "quantize-once"]
    assert once and {tuple(c["shape"]) for c in once} == {(4096, 1024, 512)}
    assert all(c["eligible"] for c in once)
    assert [launch["kernel"] for launch in once[0]["launches"]] == ["quantize", "gemm"]
    assert all(launch["busiest_simd_mfma_clocks"] > 0 for c in calls for launch in c["launches"]
               if launch["kernel"] == "gemm")
    entries = read_entries(tuned)
    assert sorted(e["m_bucket"] for e in entries) == [8, configs.m_bucket(4096)]
    assert "4096x1024x512" in done.stdout and "8x1024x512" in done.stdout
