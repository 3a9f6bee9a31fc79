"""The package's own import graph: its cycles, and its imports that reach up the layer order.

    python benchmarks/imports.py            # the numbers, every cycle and every upward import
    python benchmarks/imports.py --edges    # and every import between two of the package's modules

Reads every module under src/rnnrepro with `ast` (nothing is imported), takes each import of another
module of the package, the ones inside functions too (deferred, so that a light command does not load
torch or pandas: they still tie the two modules together) but not those under `if TYPE_CHECKING:`, and
prints:

- the cycles: the strongly connected components of that graph with more than one module. A cycle means no module of it can be read, tested or changed without the others;
- the upward imports: a module importing one of a higher layer in LAYERS below, each with the comment
  beside it (on its line or the line above) that says why it is there.

The project's bound, which tests/test_imports.py holds: no cycle, at most MAX_UPWARD upward imports, each
with its reason. `--check` exits 1 when they are broken.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "rnnrepro"
MAX_UPWARD = 2

# The layers, lowest first: a module may import its own layer's modules and those of the layers before
# it. A module belongs to the layer of the longest name here that is it or a package it is in.
LAYERS: list[tuple[str, str, list[str]]] = [
    ("leaves", "the standard library (and jsonschema) only: paths, names, errors, atomic writes, the console",
     ["rnnrepro", "rnnrepro.layout", "rnnrepro.cell_identity", "rnnrepro.environment_variables",
      "rnnrepro.tuning", "rnnrepro.errors", "rnnrepro.locks", "rnnrepro.machine", "rnnrepro.console",
      "rnnrepro.process_group", "rnnrepro.timing",
      "rnnrepro.train.files", "rnnrepro.train.stopping", "rnnrepro.analysis.inference"]),
    ("data", "the dataset registry, downloads and corpora: no study, no model",
     ["rnnrepro.data"]),
    ("cells and models", "the recurrent cells and the networks built of them, and their arithmetic",
     ["rnnrepro.cells", "rnnrepro.models", "rnnrepro.precision"]),
    ("configuration", "the study files and the config: read, merged and checked against their schemas",
     ["rnnrepro.configuration", "rnnrepro.command_line"]),
    ("cells of your own", "a run's cells of your own, added to the study files' units",
     ["rnnrepro.custom_cells"]),
    ("grid", "the cells of the grid: units x datasets x fractions x seeds, their sizes, folders and targets",
     ["rnnrepro.grid", "rnnrepro.sizing", "rnnrepro.targets", "rnnrepro.artifact_inputs",
      "rnnrepro.evaluation.plan", "rnnrepro.custom_cell_checks", "rnnrepro.lr_choice"]),
    ("run files", "what a training run writes and how it is read back",
     ["rnnrepro.analysis.run_files", "rnnrepro.train.progress_file", "rnnrepro.progress_reading"]),
    ("train", "training and its command line",
     ["rnnrepro.train", "rnnrepro.runtime", "rnnrepro.gpus"]),
    ("evaluation", "evaluating trained cells",
     ["rnnrepro.evaluation"]),
    ("analysis", "the tables, figures and claims of the notebooks, and the notebooks' reader of evaluation outputs",
     ["rnnrepro.analysis", "rnnrepro.evaluation.results"]),
    ("results page", "the results page and the workflow report's captions",
     ["rnnrepro.results_page", "rnnrepro.report"]),
    ("records", "the recorded runs: packed, checked, grown, and rendered into tables, figures and the page",
     ["rnnrepro.record_checks", "rnnrepro.record_commits", "rnnrepro.records", "rnnrepro.readme_scorecard",
      "rnnrepro.estimates"]),
    ("command lines", "the commands that look at or clean the whole grid",
     ["rnnrepro.status", "rnnrepro.watch", "rnnrepro.clean", "rnnrepro.slurm"]),
]


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    deferred: bool  # inside a function
    reason: str  # the comment on the line or the one above it ("" when none)


def module_names(package: Path) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name, from __init__.py)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _comments(source: str) -> dict[int, str]:
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    return comments


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
    return False


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports of other modules of the package in one module, in the order they are written."""
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    comments = _comments(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own_package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from pkg import name`: the submodule pkg.name where there is one, else pkg itself
            targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin
                       for alias in node.names]
        else:
            continue
        if _under_type_checking(node, parents):
            continue
        reason = comments.get(node.lineno) or comments.get(node.lineno - 1, "")
        for target in dict.fromkeys(targets):
            while target and target not in modules:  # `import rnnrepro.x.name` of a name, not a module
                target = target.rpartition(".")[0]
            if target and target not in ("rnnrepro", name):
                found.append(Import(name, target, node.lineno, _in_function(node, parents), reason))
    return sorted(found, key=lambda i: i.line)


def graph(package: Path = PACKAGE) -> list[Import]:
    modules = module_names(package)
    return [edge for name, path in modules.items() for edge in imports_of(name, path, modules)]


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    following: dict[str, set[str]] = {}
    for edge in edges:
        following.setdefault(edge.importer, set()).add(edge.imported)
        following.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(start: str) -> None:  # iterative: a deep chain must not reach Python's recursion limit
        work = [(start, iter(sorted(following[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(following[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(following):
        if node not in index:
            visit(node)
    return sorted(found)


def layer_of(module: str) -> int:
    """The index in LAYERS of the module's layer; a module no layer names is an error to fix here."""
    best = None
    for number, (_, _, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (number, prefix)
    if best is None or best[1] == "rnnrepro" and module != "rnnrepro":
        raise SystemExit(f"benchmarks/imports.py: module {module} is in no layer: add it to LAYERS")
    return best[0]


def upward(edges: list[Import]) -> list[Import]:
    return [edge for edge in edges if layer_of(edge.imported) > layer_of(edge.importer)]


def problems(edges: list[Import]) -> list[str]:
    """What breaks the project's bound: each cycle, too many upward imports, one without its reason."""
    found = [f"import cycle: {' <-> '.join(component)}" for component in cycles(edges)]
    up = upward(edges)
    if len(up) > MAX_UPWARD:
        found.append(f"{len(up)} upward imports, at most {MAX_UPWARD}: move them down (see --help)")
    found += [f"upward import without a reason comment: {edge.importer} line {edge.line} imports {edge.imported}"
              for edge in up if not edge.reason]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", action="store_true", help="also list every import between two modules")
    parser.add_argument("--check", action="store_true", help="exit 1 on a cycle or more upward imports than allowed")
    parser.add_argument("--package", type=Path, default=PACKAGE, help="the package's folder (default: %(default)s)")
    args = parser.parse_args()
    edges = graph(args.package)
    modules = {edge.importer for edge in edges} | {edge.imported for edge in edges}
    pairs = {(edge.importer, edge.imported) for edge in edges}
    deferred = {(edge.importer, edge.imported) for edge in edges if edge.deferred}
    print(f"{len(module_names(args.package))} modules ({len(modules)} in an import), {len(pairs)} imports between two "
          f"of them ({len(deferred)} of them inside functions)")
    found_cycles = cycles(edges)
    print(f"cycles: {len(found_cycles)}")
    for component in found_cycles:
        print(f"  {len(component)} modules: {', '.join(component)}")
        for edge in edges:
            if edge.importer in component and edge.imported in component:
                print(f"    {edge.importer}:{edge.line} -> {edge.imported}{' (in a function)' if edge.deferred else ''}")
    up = upward(edges)
    print(f"upward imports: {len(up)} (at most {MAX_UPWARD})")
    for edge in up:
        print(f"  {edge.importer}:{edge.line} ({LAYERS[layer_of(edge.importer)][0]}) -> {edge.imported} "
              f"({LAYERS[layer_of(edge.imported)][0]}): {edge.reason or 'NO REASON GIVEN'}")
    if args.edges:
        for edge in edges:
            print(f"  {edge.importer}:{edge.line} -> {edge.imported}")
    found = problems(edges)
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
