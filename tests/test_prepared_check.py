"""tools.prepared_check: its shapes and parts refused in one line, a wrong output described by
the K split whose partial product it misses, and each part run on a small shape (the
interpreter on a CPU, compiled on an NVIDIA GPU of sm_90 and up)."""

import pytest
import torch

from mxfp4_mm import reference
from mxfp4_mm.kernels import formats
from mxfp4_mm.launchers.proof import reference_output
from mxfp4_mm.tools import prepared_check
from test_hopper_gemm import hopper_device  # noqa: F401  (a fixture)


def test_bad_shapes_and_parts_are_refused_in_one_line(capsys):
    assert prepared_check.main(["9,128"]) == 2
    assert prepared_check.main(["9,128,1024,wide"]) == 2
    assert prepared_check.main(["--parts", "op,proof", "9,128,1024"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("tools.prepared_check: ") for line in errors)
    assert "'proof'" in errors[2]


def test_an_output_missing_one_splits_partial_product_is_described_by_that_split():
    m, n, k, split_size = 4, 32, 768, 256
    a, _, _, b_shuffle, b_scale_sh = reference.generate_input(m, n, k, seed=5, device="cpu")
    codes = formats.unshuffle_weight(b_shuffle.view(torch.uint8))
    scales = formats.e8m0_unshuffle(b_scale_sh.view(torch.uint8), n, k // 32)
    full = reference_output(a, codes, scales)
    assert prepared_check.wrong_output_lines(full, a, codes, scales, 3, split_size) == ["ok"]
    missing = (full.float() - reference_output(a[:, 256:512], codes[:, 128:256],
                                               scales[:, 8:16]).float()).to(torch.bfloat16)
    lines = prepared_check.wrong_output_lines(missing, a, codes, scales, 3, split_size)
    assert lines[0].startswith("WRONG")
    closest = {}
    for line in lines[2:]:
        split = int(line.split()[1])
        closest[split] = float(line.split("|error + partial| ")[1].split(",")[0])
    assert min(closest, key=closest.get) == 1 and closest[1] < 0.05


@pytest.mark.parametrize("part", prepared_check.PARTS)
def test_each_part_runs_and_is_right_on_a_small_split_shape(hopper_device, part):
    lines = prepared_check.run_part(part, 9, 64, 1088, False, hopper_device)
    assert "2 splits of 768" in lines[0] and len(lines) > 1
    assert all(line.endswith(": ok") for line in lines[1:]), lines
