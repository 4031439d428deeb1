"""Build the one-file popcorn submission from the modular tree.

    python -m tools.bundle [-o dist/submission.py] [--leaderboard NAME] [--gpu NAME]

The modules that submission.py reaches through project imports (of mxfp4_mm.kernels and
mxfp4_mm.launchers, or relative ones inside them: `from ..kernels import formats`) are laid
out in dependency order in one namespace: project imports are dropped and `module.name`
references become `name` (so two modules may not define the same top-level name: the build
fails, naming both); an import of mxfp4_mm.task becomes one of the runner's own task. External imports go once at the top. The output is checked: it parses, is under
1,000,000 bytes (the runner's limit), imports only the standard library, torch, triton and task (and aiter, inside a
try/except only: the last-resort path where aiter imports), holds no `chr(` and not the word
the runner forbids (each module's source is checked first, so the error names the file
and the line). Comments are dropped (the AST is unparsed); docstrings stay.
The same tree always gives the same bytes. dist/ is not committed: build it before submitting.
UNBUNDLED_MODULES are left out, with every top-level statement of a bundled module that uses
a name imported from one: the tuned-shapes file (launchers.tuned_shapes) is for models, and
the submission does not read it.
"""

import ast
import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mxfp4_mm"            # the project's top-level name; the bundle names modules without it
PROJECT_PACKAGES = ("kernels", "launchers")
RUNNER_MODULES = ("task",)      # files the runner has beside the submission, by their own names
ALLOWED_IMPORTS = {"torch", "triton", "task"}
OPTIONAL_IMPORTS = {"aiter"}    # on the runner's machine; allowed only inside try/except
MAX_BYTES = 1_000_000         # the runner refuses a larger file
MODULE_MARKER = "# ---- "      # the bundle's line before each module's code
# The problem's leaderboard and the GPU it runs on (gpu-mode/reference-kernels
# problems/amd_202602.yaml): the only names the #!POPCORN header can usefully carry.
LEADERBOARD = "amd-mxfp4-mm"
GPUS = ("MI355X",)
UNBUNDLED_MODULES = ("launchers.tuned_shapes",)
FORBIDDEN = "str" + "eam"   # the runner rejects files containing it; this tool is not submitted


class BundleError(Exception):
    pass


def _module_path(root: Path, name: str) -> Path:
    path = root.joinpath(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def project_module(name: str):
    """The project's module `name` without the top-level name ("mxfp4_mm.launchers.gemm" ->
    "launchers.gemm", "mxfp4_mm" -> ""), or None for another distribution's module."""
    if name == PACKAGE:
        return ""
    return name[len(PACKAGE) + 1:] if name.startswith(PACKAGE + ".") else None


def _bundled(name) -> bool:
    return name is not None and name.split(".")[0] in PROJECT_PACKAGES


def _project_imports(tree: ast.Module, root: Path):
    """[(module name, alias bound in this module or None, names imported from it)]."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _bundled(project_module(alias.name)):
                    found.append((project_module(alias.name), alias.asname or alias.name, ()))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module == PACKAGE:
            found += [(alias.name, alias.asname or alias.name, ()) for alias in node.names
                      if _bundled(alias.name) and _module_path(root, alias.name).exists()]
        elif isinstance(node, ast.ImportFrom) and node.module and \
                _bundled(project_module(node.module)):
            module = project_module(node.module)
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                if _module_path(root, submodule).exists() or \
                        (root / module.replace(".", "/") / f"{alias.name}.py").exists():
                    found.append((submodule, alias.asname or alias.name, ()))
                else:
                    found.append((module, None, (alias.name,)))
    return found


def _is_project_import(node) -> bool:
    if isinstance(node, ast.Import):
        return all(_bundled(project_module(a.name)) for a in node.names)
    return isinstance(node, ast.ImportFrom) and bool(node.module) and \
        (node.module == PACKAGE or _bundled(project_module(node.module)))


def _runner_module_imports(tree: ast.Module) -> ast.Module:
    """`from mxfp4_mm.task import x` -> `from task import x` (RUNNER_MODULES)."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and \
                project_module(node.module) in RUNNER_MODULES:
            node.module = project_module(node.module)
    return tree


class _FlattenModuleReferences(ast.NodeTransformer):
    def __init__(self, aliases):
        self.aliases = aliases

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.aliases:
            return ast.copy_location(ast.Name(id=node.attr, ctx=node.ctx), node)
        return node


def _defined_names(tree: ast.Module):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def _source_path(root: Path, name: str) -> Path:
    return _module_path(root, name) if name != "submission" else root / "submission.py"


class _AbsoluteImports(ast.NodeTransformer):
    """A relative import of module `name` (`from .formats import x`, `from ..kernels import
    formats`) as the same import through the top-level name (`from mxfp4_mm.kernels.formats
    import x`); a relative import that climbs above the root is an error."""

    def __init__(self, root: Path, name: str):
        self.name, self.path = name, _source_path(root, name)
        self.package = name if self.path.name == "__init__.py" else name.rpartition(".")[0]

    def visit_ImportFrom(self, node):
        if node.level:
            parts = self.package.split(".") if self.package else []
            if node.level - 1 > len(parts):
                raise BundleError(f"{self.path} (module {self.name}) line {node.lineno}: a "
                                  f"relative import above the project's root")
            parts = parts[:len(parts) - node.level + 1] + ([node.module] if node.module else [])
            node.module, node.level = ".".join([PACKAGE] + parts), 0
        return node


def _load(root: Path, name: str):
    """The module's AST, its relative imports made absolute (_AbsoluteImports)."""
    path = _source_path(root, name)
    return _AbsoluteImports(root, name).visit(ast.parse(path.read_text(), filename=str(path)))


def _forbidden_lines(text: str) -> list:
    return [number for number, line in enumerate(text.splitlines(), 1) if FORBIDDEN in line.lower()]


def _chr_lines(text: str) -> list:
    return [number for number, line in enumerate(text.splitlines(), 1) if "chr(" in line]


def check_source(root: Path, name: str) -> None:
    """The runner's forbidden word and `chr(` (the way to disguise it), in the module's source
    (comments included)."""
    path = _source_path(root, name)
    text = path.read_text()
    for lines, what in ((_forbidden_lines(text), "contains the word the runner forbids"),
                        (_chr_lines(text), "calls chr(), which the runner treats as evasion")):
        if lines:
            raise BundleError(f"{path.relative_to(root)} (module {name}) line "
                              f"{', '.join(map(str, lines))}: {what}")


def _unbundled_names(tree: ast.Module) -> set:
    """Names a module imports from UNBUNDLED_MODULES."""
    return {alias.asname or alias.name for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module and
            project_module(node.module) in UNBUNDLED_MODULES
            for alias in node.names}


def _uses_any(node, names: set) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def module_order(root: Path) -> list:
    """Project modules reached from submission.py, dependencies first."""
    order, visiting = [], set()

    def visit(name):
        if name in order:
            return
        if name in visiting:
            raise BundleError(f"import cycle through {name}")
        visiting.add(name)
        for dependency, _, _ in _project_imports(_load(root, name), root):
            if dependency not in UNBUNDLED_MODULES:
                visit(dependency)
        visiting.discard(name)
        order.append(name)

    visit("submission")
    return order


def build_bundle(root: Path = ROOT, leaderboard=LEADERBOARD, gpu=GPUS[0]) -> str:
    root = Path(root)
    external, from_imports, bodies, owners = [], {}, [], {}
    for name in module_order(root):
        check_source(root, name)
        tree = _runner_module_imports(_load(root, name))
        unbundled = _unbundled_names(tree)
        tree.body = [node for node in tree.body
                     if _is_project_import(node) or not _uses_any(node, unbundled)]
        aliases = {alias for _, alias, _ in _project_imports(tree, root) if alias}
        tree = _FlattenModuleReferences(aliases).visit(tree)
        for defined in _defined_names(tree):
            if defined in owners:
                raise BundleError(f"top-level name {defined!r} is defined in both "
                                  f"{owners[defined]} and {name}")
            owners[defined] = name
        body = []
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if _is_project_import(node):
                    continue
                if isinstance(node, ast.ImportFrom):   # one line per module, each name once
                    names = from_imports.setdefault(node.module, [])
                    names.extend(a for a in map(ast.unparse, node.names) if a not in names)
                elif ast.unparse(node) not in external:
                    external.append(ast.unparse(node))
            elif not (node is tree.body[0] and isinstance(node, ast.Expr)
                      and isinstance(getattr(node, "value", None), ast.Constant)):
                body.append(ast.unparse(node))
        bodies.append(f"{MODULE_MARKER}{name}\n" + "\n\n".join(body))
    external += [f"from {module} import {', '.join(names)}" for module, names in from_imports.items()]
    code = "\n".join(external) + "\n\n" + "\n\n\n".join(bodies) + "\n"
    digest = hashlib.sha256(code.encode()).hexdigest()[:16]
    text = (f"#!POPCORN leaderboard {leaderboard}\n#!POPCORN gpu {gpu}\n"
            f"# Generated by `python -m tools.bundle` from the mxfp4-mm tree (sources sha256 "
            f"{digest}); do not edit.\n{code}")
    check_bundle(text)
    return text


def _part_of_line(text: str, number: int) -> str:
    """Which part of the bundle line `number` is in: the header or a module."""
    part = "the header"
    for line in text.splitlines()[:number]:
        if line.startswith(MODULE_MARKER):
            part = "module " + line[len(MODULE_MARKER):]
    return part


def _guarded_imports(tree: ast.Module) -> set:
    """ids of the import statements in the body of a try that has an except clause."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and node.handlers:
            for statement in node.body:
                guarded.update(id(n) for n in ast.walk(statement)
                               if isinstance(n, (ast.Import, ast.ImportFrom)))
    return guarded


def check_bundle(text: str) -> None:
    lines = _forbidden_lines(text)
    if lines:
        raise BundleError(f"bundle line {lines[0]} ({_part_of_line(text, lines[0])}): contains "
                          f"the word the runner forbids")
    lines = _chr_lines(text)
    if lines:
        raise BundleError(f"bundle line {lines[0]} ({_part_of_line(text, lines[0])}): calls "
                          f"chr(), which the runner treats as evasion")
    if len(text.encode()) > MAX_BYTES:
        raise BundleError(f"the bundle is {len(text.encode()):,} bytes, over the runner's "
                          f"{MAX_BYTES:,}")
    tree = ast.parse(text)
    guarded = _guarded_imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            roots = [(node.module or "").split(".")[0]]
        else:
            continue
        for module in roots:
            if module in OPTIONAL_IMPORTS and id(node) not in guarded:
                raise BundleError(f"bundle line {node.lineno} ({_part_of_line(text, node.lineno)})"
                                  f": imports {module} outside a try/except (it is optional)")
            if module not in ALLOWED_IMPORTS | OPTIONAL_IMPORTS and \
                    module not in sys.stdlib_module_names:
                raise BundleError(f"bundle line {node.lineno} ({_part_of_line(text, node.lineno)})"
                                  f": imports {module}")


def tracked_by_git(path: Path, root: Path = None) -> bool:
    """Whether git tracks `path` in the repository at `root` (default ROOT; False where there
    is none)."""
    root = ROOT if root is None else root
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    found = subprocess.run(["git", "-C", str(root), "ls-files", "--error-unmatch", "--",
                            str(relative)], capture_output=True)
    return found.returncode == 0


def project_file(path: Path, root: Path = None) -> bool:
    """Whether `path` is one of the project's own files: one git tracks, or, where `root`
    (default ROOT) is no git checkout (a copy of the tree), any file there outside dist/."""
    root = ROOT if root is None else root
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    checkout = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                              capture_output=True, text=True)
    if checkout.returncode == 0 and Path(checkout.stdout.strip()).resolve() == root.resolve():
        return tracked_by_git(path, root)
    return path.is_file() and relative.parts[0] != "dist"


def bundle_output(word: str) -> str:
    """argparse type of -o: a file that can be written and is none of the project's own
    (project_file: the project's submission.py, say, is never overwritten)."""
    import argparse
    from .cli import output_file
    output_file(word, make_folders=True)
    if project_file(Path(word)):
        raise argparse.ArgumentTypeError(f"{word} is a file of the repository; write the "
                                         f"bundle elsewhere (default dist/submission.py)")
    return word


def build_parser():
    from .cli import ArgumentParser
    parser = ArgumentParser("tools.bundle", description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="dist/submission.py", type=bundle_output,
                        help="where to write the one-file submission (default dist/submission.py)")
    parser.add_argument("--leaderboard", default=LEADERBOARD, choices=[LEADERBOARD],
                        help=f"the leaderboard named in the #!POPCORN header (default "
                             f"{LEADERBOARD})")
    parser.add_argument("--gpu", default=GPUS[0], choices=GPUS,
                        help=f"the GPU named in the #!POPCORN header (default {GPUS[0]})")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        text = build_bundle(ROOT, args.leaderboard, args.gpu)
    except BundleError as error:
        print(f"tools.bundle: {error}", file=sys.stderr)
        return 1
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(f"wrote {output} ({len(text.encode())} bytes) from "
          f"{', '.join(module_order(ROOT))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
