"""The layering of the Layout section: every import in gcpipe (lazy ones inside functions
included) points to the module's own package, its own layer or a lower one, and no chain of
imports among the packages comes back to where it started."""
import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

GCPIPE = Path(__file__).resolve().parent.parent / "gcpipe"

# Bottom to top; a package may import its own layer's and any lower layer's.
LAYERS = [
    {"gcpipe", "errors", "paths", "io", "lifetime", "schema", "progress", "stats", "plots", "torch_env"},   # shared utilities
    {"engine"},                                  # the C engine's binding
    {"nn", "protocol"},                          # networks and their C inference; the player protocol
    {"search", "openspiel"},                     # kinds of player built on them
    {"players", "fingerprint"},                  # every kind, defined from configs and specs; the engine's behaviour
    {"train", "match", "workflow", "play"},
    {"analysis"},                                # what a net or search thinks of positions and games
    {"elo", "config", "report", "provenance", "schema_doc"},
    {"cli", "__main__"},                         # the command line and its entry point
]
LAYER = {package: level for level, packages in enumerate(LAYERS) for package in packages}


def _package(module: str) -> str:
    """gcpipe.match.runner -> match; gcpipe.paths -> paths; gcpipe -> gcpipe."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imports(path: Path) -> set[str]:
    module = ".".join(path.relative_to(GCPIPE.parent).with_suffix("").parts)
    package = module.split(".")[:-1]   # the package a relative import starts from
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + [node.module] if node.module else base)
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)   # `from gcpipe import paths`
    return {name for name in found if name.startswith("gcpipe.")}


def _known(module: str) -> bool:
    parts = module.split(".")[1:]
    return GCPIPE.joinpath(*parts).with_suffix(".py").exists() or GCPIPE.joinpath(*parts, "__init__.py").exists()


def test_every_package_has_a_layer():
    packages = {path.stem if path.is_file() else path.name for path in GCPIPE.iterdir()
                if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()}
    assert packages | {"gcpipe"} == set(LAYER)


def _package_imports() -> dict[str, set[tuple[str, str]]]:
    """{package: {(importing file, imported module)}} for imports between different packages."""
    graph = {package: set() for package in LAYER}
    for path in sorted(GCPIPE.rglob("*.py")):
        module = ".".join(path.relative_to(GCPIPE.parent).with_suffix("").parts).removesuffix(".__init__")
        for target in _imports(path):
            if _known(target) and _package(target) != _package(module):
                graph[_package(module)].add((str(path.relative_to(GCPIPE.parent)), target))
    return graph


def test_imports_point_down_the_layers():
    upward = [f"{file} imports {target}" for package, imports in _package_imports().items()
              for file, target in sorted(imports) if LAYER[_package(target)] > LAYER[package]]
    assert upward == []


def test_no_import_cycle_among_the_packages():
    graph = {package: {_package(target) for _, target in imports} for package, imports in _package_imports().items()}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as cycle:
        raise AssertionError(f"import cycle: {' -> '.join(cycle.args[1])}") from None


def test_every_package_is_installed():
    """pyproject.toml lists every package folder: one left out works in an editable install and is
    missing from a wheel (`pip install .`)."""
    import tomllib

    listed = set(tomllib.loads((GCPIPE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(init.parent.relative_to(GCPIPE.parent).parts) for init in GCPIPE.rglob("__init__.py")}
    assert listed == folders
