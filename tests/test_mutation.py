"""tools.mutation's summary: the product (kernels/, launchers/) and the tools scored apart."""

from mxfp4_mm.tools import mutation

SURVIVOR_DIFF = "--- a\n+++ b\n-    x = 1\n+    x = 2\n"


def test_modules_and_files_are_product_or_tools():
    assert mutation.area("launchers.tuner.x_select__mutmut_3") == "product"
    assert mutation.area("kernels.formats.x_pack_nibbles__mutmut_1") == "product"
    assert mutation.area("kernels/preshuffle_gemm.py") == "product"
    assert mutation.area("tools.bundle.x_build__mutmut_2") == "tools"


def test_the_summary_scores_product_and_tools_apart_and_lists_equivalents_as_such():
    results = {
        "launchers.a.x_f__mutmut_1": (1, ""),                 # killed
        "launchers.a.x_f__mutmut_2": (0, SURVIVOR_DIFF),      # survived
        "launchers.a.x_g__mutmut_1": (0, SURVIVOR_DIFF),      # equivalent
        "tools.b.x_h__mutmut_1": (0, SURVIVOR_DIFF),          # survived
        "tools.b.x_h__mutmut_2": (None, ""),                  # not run
    }
    kernels = {"k-killed": "killed", "k-survived": "survived", "k-late": None}
    equivalents = {("launchers.a.x_g", "x = 2"): "why"}
    lines, scores = mutation.summarize(results, kernels, equivalents, 12.0,
                                       {k: "kernels/preshuffle_gemm.py" for k in kernels})
    assert scores == {"product": 100.0 * 2 / 4, "tools": 0.0, "all": 100.0 * 2 / 5}
    product = next(line for line in lines if line.startswith("product (kernels/, launchers/)"))
    assert "killed: 2 (kernels 1), survived: 2, equivalent: 1, not run (budget): 1" in product
    tools = next(line for line in lines if line.startswith("tools (tools/)"))
    assert "killed: 0 (kernels 0), survived: 1, equivalent: 0, not run (budget): 1" in tools
    assert "survived (product): launchers.a.x_f__mutmut_2" in lines
    assert "survived (tools): tools.b.x_h__mutmut_1" in lines
    assert "survived (product): kernel mutant k-survived" in lines
    assert not any("x_g__mutmut_1" in line for line in lines)


def test_every_test_mutmut_is_told_to_select_exists():
    """A renamed test left in [tool.mutmut]'s selection makes mutmut's first run fail."""
    import subprocess
    import sys
    from pathlib import Path

    import pytest
    tomllib = pytest.importorskip("tomllib")      # Python 3.11+
    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]
    selected = config["pytest_add_cli_args_test_selection"]
    assert all((root / name.split("::")[0]).is_file() for name in selected)
    node_ids = [name for name in selected if "::" in name]
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                                "-p", "no:cacheprovider", *node_ids], cwd=root,
                               capture_output=True, text=True)
    assert collected.returncode == 0, collected.stdout[-1000:] + collected.stderr[-1000:]
