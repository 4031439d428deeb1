"""Compile a Triton kernel for a GPU this machine does not have (gfx950, sm_90), offline, with
the Triton release of your choice (the leaderboard runner's is RUNNER_TRITON).

A library for tools.isa: `python -m tools.gfx950.cross_compile` only prints this text.

`compile_for(kernel, args, options, target)` (with `specialization(kernel, args, target)`, the
specialization it compiles, which tells two compiles apart) takes the same full argument tuple that the
launchers pass (tensors may live on the "meta" device) and specializes it the way the JIT
does: constexpr parameters and integers equal to 1 become constants, and the target backend
gives each tensor and integer its attributes from its own specialization rules. So 16-aligned
pointers and integers divisible by 16 get the divisibility hint, and on HIP every tensor
argument (all are under 2 GiB) gets `tt.pointer_range=32`, as the AMD JIT of Triton 3.6-3.9
does while AMDGCN_USE_BUFFER_OPS is on (its default): the loads become buffer loads, as on
the device. The result is a CompiledKernel whose `asm` holds the target's assembly
(e.g. asm["amdgcn"]) and `metadata` its resources. `kernel` must be a JITFunction: compile
outside the interpreter (TRITON_INTERPRET unset).

`side_triton(version)` returns ROOT/.triton/<version>, a Triton installed from the package
index with `pip install --target ... --no-deps` on first use (the project's torch stays), and
`triton_paths(version)` gives the PYTHONPATH entries for that release (none where this process
runs it), and `run_with_triton(version, module_args)` runs `python -m <module_args>` with them
first on PYTHONPATH.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend

GFX950 = GPUTarget("hip", "gfx950", 64)
SM90 = GPUTarget("cuda", 90, 32)
RUNNER_TRITON = "3.6.0"   # the leaderboard runner's compiler (docs/task.md)
ROOT = Path(__file__).resolve().parents[2]
SIDE_TRITONS = ROOT / ".triton"
SIDE_TRITON_ENV = "MXFP4_SIDE_TRITON"   # set in a process started by run_with_triton

_POINTER_TYPES = {torch.bfloat16: "*bf16", torch.float32: "*fp32", torch.uint8: "*u8",
                  torch.float16: "*fp16", torch.int32: "*i32", torch.int16: "*i16"}


def specialization(kernel, args, target=GFX950) -> tuple:
    """(signature, constexprs, attrs) of `args` as the JIT of `target` specializes them."""
    backend = make_backend(target)
    signature, constexprs, attrs = {}, {}, {}
    constexpr_indices = set(kernel.constexprs)
    for index, (name, value) in enumerate(zip(kernel.arg_names, args)):
        if index in constexpr_indices or value is None or isinstance(value, bool):
            signature[name] = "constexpr"
            constexprs[name] = value
        elif isinstance(value, torch.Tensor):
            signature[name] = _POINTER_TYPES[value.dtype]
            attrs[(index,)] = backend.parse_attr(
                backend.get_tensor_specialization(value, align=True))
        elif isinstance(value, int):
            if value == 1:
                signature[name] = "constexpr"
                constexprs[name] = 1
            else:
                signature[name] = "i32"
                attrs[(index,)] = backend.parse_attr(
                    backend.get_int_specialization(value, align=True))
        else:
            raise TypeError(f"cannot specialize argument {name}={value!r}")
    return (tuple(signature.items()), tuple(constexprs.items()),
            tuple((index, tuple(map(tuple, attr))) for index, attr in attrs.items()))


def compile_for(kernel, args, options, target=GFX950):
    signature, constexprs, attrs = specialization(kernel, args, target)
    source = ASTSource(kernel, dict(signature), constexprs=dict(constexprs),
                       attrs={index: [list(attr) for attr in attr_list]
                              for index, attr_list in attrs})
    return triton.compile(source, target=target, options=options)


class SideInstallError(Exception):
    """A Triton release pip cannot install, in one line."""


def _pip(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check"],
                          capture_output=True, text=True)


def index_releases() -> list:
    """The Triton releases the package index lists; [] where pip cannot list them."""
    for line in _pip("index", "versions", "triton").stdout.splitlines():
        if line.startswith("Available versions:"):
            return [word.strip() for word in line.partition(":")[2].split(",")]
    return []


def side_triton(version: str) -> Path:
    """ROOT/.triton/<version>, installed from the package index first if it is missing; a
    release the index does not list is a SideInstallError before anything is printed."""
    folder = SIDE_TRITONS / version
    if (folder / "triton").is_dir():
        return folder
    releases = index_releases()
    if releases and version not in releases:
        raise SideInstallError(f"triton {version} is not on the package index (it has "
                               f"{', '.join(releases)})")
    print(f"tools.gfx950.cross_compile: installing triton=={version} into {folder} (pip --no-deps, about 640 MiB; once)",
          file=sys.stderr, flush=True)
    partial = SIDE_TRITONS / f".partial-{version}-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    done = _pip("install", "--quiet", "--no-deps", "--target", str(partial), f"triton=={version}")
    if done.returncode:
        shutil.rmtree(partial, ignore_errors=True)
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        raise SideInstallError(f"pip could not install triton=={version}: "
                               f"{(errors or [f'exit code {done.returncode}'])[-1]}")
    try:
        partial.rename(folder)        # atomic: a concurrent installer's folder wins
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    print(f"tools.gfx950.cross_compile: installed triton=={version}", file=sys.stderr, flush=True)
    return folder


def triton_paths(version: str) -> list:
    """The PYTHONPATH entries that give a child process Triton <version>: none where this
    process runs that version, else its side install (side_triton)."""
    return [] if version == triton.__version__ else [str(side_triton(version))]


def run_with_triton(version: str, module_args: list) -> int:
    """`python -m <module_args>` in ROOT with Triton <version> (triton_paths)."""
    paths = triton_paths(version) + [str(ROOT)] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    env[SIDE_TRITON_ENV] = version
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", *module_args], cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    import argparse
    from ..cli import ArgumentParser
    ArgumentParser("tools.gfx950.cross_compile", description=__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(__doc__)
