"""tools.gfx950.calibration: the walked figures of a public point's kernel written into the
model's data, a stored figure the walk does not reproduce refused, --check writing nothing."""

import json

import pytest

from mxfp4_mm.tools.gfx950 import calibration
from mxfp4_mm.tools.gfx950.critical_path import ISSUE_CYCLES, VMEM_CYCLES

ASM = ("\tbuffer_load_dwordx4 v[4:7], v20, s[8:11], 0 offen\n"
       "\ts_waitcnt vmcnt(0)\n"
       "\tv_mov_b32 v0, 0\n"
       "\ts_endpgm\n")


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "p1__gemm.s").write_text(ASM)
    (tmp_path / "index.json").write_text(json.dumps([dict(
        point="p1", kernel="gemm", file="p1__gemm.s", k_tiles=1, workgroups=512,
        waves_per_workgroup=4, occupancy=1)]))
    return tmp_path


def _data(**stored):
    return {"points": [{"id": "p1", "kernels": [dict(kernel="gemm", **stored)]}]}


def test_the_walked_figures_are_written_into_the_points_kernel(folder):
    data = _data(instructions=4)
    assert calibration.calibrate(data, folder) == []
    kernel = data["points"][0]["kernels"][0]
    # 512 workgroups of 4 waves on 256 CUs, one resident at a time: two rounds of 1 wave
    walk = ISSUE_CYCLES + VMEM_CYCLES + 2 * ISSUE_CYCLES
    assert kernel == dict(kernel="gemm", instructions=4, global_round_trips=1, lds_waits=0,
                          barriers=0, busiest_simd_issue=8, issue_cycles=4 * ISSUE_CYCLES,
                          latency_cycles=[walk, walk], busiest_simd_cycles=[2 * walk] * 2)


def test_a_stored_figure_the_walk_does_not_reproduce_is_refused_and_nothing_written(folder):
    data = _data(instructions=5)
    problems = calibration.calibrate(data, folder)
    assert problems == ["p1__gemm.s: instructions walked 4, the data holds 5"]
    assert data == _data(instructions=5)


def test_check_writes_nothing_and_says_whether_the_data_lacks_walked_figures(folder, tmp_path,
                                                                             capsys):
    path = tmp_path / "points.json"
    path.write_text(json.dumps(_data()))
    assert calibration.main([str(folder), "--data", str(path), "--check"]) == 1
    assert json.loads(path.read_text()) == _data()
    assert calibration.main([str(folder), "--data", str(path)]) == 0
    assert calibration.main([str(folder), "--data", str(path), "--check"]) == 0
    assert "busiest_simd_cycles" in json.loads(path.read_text())["points"][0]["kernels"][0]


def test_a_folder_without_an_index_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        calibration.main([str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "index.json does not exist" in err


def test_the_data_file_holds_the_walk_of_every_public_kernel():
    """Every kernel of every public point carries the cycle walk (the latency members are
    fitted on all of them)."""
    data = json.loads(calibration.DATA.read_text())
    assert all("busiest_simd_cycles" in k and "busiest_simd_issue" in k
               for point in data["points"] for k in point["kernels"])
