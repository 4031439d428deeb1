"""The project's one top-level name, from a checkout: `mxfp4_mm.kernels`, `mxfp4_mm.launchers`,
`mxfp4_mm.tools`, `mxfp4_mm.submission`, `mxfp4_mm.reference` and `mxfp4_mm.task` are the
folders and files of the checkout's root, the folder above this one (`__path__` says where a
package's modules are). Installed, by a wheel or editable, mxfp4_mm is the same names as a
namespace package (pyproject.toml) without this file, and the only top-level name installed.

Wherever the root is on sys.path (its tools, its tests, a script run there), its folders and
files are also found under their own names, but not all of them import so: `tools` does
(`python -m tools.NAME`; a tool imports the rest of the root through mxfp4_mm), and so do the
root's files (`submission`, `reference`, `task`: the runner imports `submission` and `task` by
those names); `launchers` does not (its modules import `..kernels`, above a top-level package);
`kernels` steps aside (`step_aside`) for another distribution of that name, and is the folder
where there is none.
"""

import importlib
import os
import sys

__path__ = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]


def step_aside(name: str) -> None:
    """Called by a package of the root imported under its own top-level name `name`: the
    module of that name found without the root on sys.path (another distribution's, such as
    Hugging Face's `kernels`, which transformers imports) takes the name; where there is none,
    the import goes on as it began."""
    root = os.path.realpath(__path__[0])
    ours = sys.modules.pop(name)
    hidden = [(i, entry) for i, entry in enumerate(sys.path)
              if os.path.realpath(entry or os.curdir) == root]
    for i, _ in reversed(hidden):
        del sys.path[i]
    try:
        importlib.import_module(name)       # ends in sys.modules[name], which the import returns
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        sys.modules[name] = ours
    finally:
        for i, entry in hidden:
            sys.path.insert(i, entry)
