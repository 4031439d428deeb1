"""CI runs what README shows: .ci/run holds README's setup block, then its commands block, verbatim,
and refuses to run when README differs."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_block(name):
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"^<!-- {name}: begin.*?-->\n(.*?)^<!-- {name}: end -->", text,
                      re.M | re.S)
    assert match, f"README.md has no {name} block"
    lines = [line[4:] for line in match[1].splitlines() if line.startswith("    ")]
    assert lines, f"README.md's {name} block is empty"
    return lines


def test_ci_runs_readme_setup_then_its_commands_verbatim():
    printed = subprocess.run([str(ROOT / ".ci" / "run"), "--print"], capture_output=True,
                             text=True, check=True, timeout=60).stdout.splitlines()
    assert printed[0].startswith("set -e")
    assert printed[1:] == readme_block("setup") + readme_block("commands")


def test_the_setup_makes_a_fresh_environment_and_the_commands_test():
    setup, commands = readme_block("setup"), readme_block("commands")
    assert setup[0].startswith("python3 -m venv ")
    assert any(line.startswith("pip install torch==") for line in setup)   # the CPU build here
    assert any('pip install -e ".[test]"' in line for line in setup)
    assert [line.split("#")[0].strip() for line in commands] == \
        ["python -m tools.check", "python -m pytest -q"]


def test_the_script_parses():
    script = subprocess.run([str(ROOT / ".ci" / "run"), "--print"], capture_output=True,
                            text=True, check=True, timeout=60).stdout
    subprocess.run(["bash", "-n", "-c", script], check=True, timeout=60)


def test_the_script_holds_readmes_lines_and_refuses_a_readme_that_differs(tmp_path):
    script = (ROOT / ".ci" / "run").read_text()
    for line in readme_block("setup") + readme_block("commands"):
        assert line in script.splitlines(), line
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text(script)
    (tmp_path / ".ci" / "run").chmod(0o755)
    readme = (ROOT / "README.md").read_text()
    (tmp_path / "README.md").write_text(readme.replace("pip install torch==2.13.0",
                                                       "pip install torch"))
    done = subprocess.run([str(tmp_path / ".ci" / "run"), "--print"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "differ from README.md" in done.stderr
