"""What the broker imports, ``pip install kbroker`` installs: every third-party module the project's packages import
is a distribution ``pyproject.toml`` names in ``dependencies``, but for the Spark client (the ``spark`` extra) and
the pytest plugin (loaded by pytest only). The test extra installs more, so a forgotten one goes unnoticed by the
suite and breaks the Docker image and every user's install instead: cryptography did (the broker did not start),
and lz4 and zstandard did (every LZ4 or zstd batch the broker had to read was refused as corrupt)."""

import ast
import os
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("broker", "protocol", "storage", "coordinators", "client")
OPTIONAL = {os.path.join("client", "spark"): "spark", os.path.join("broker", "pytest_plugin.py"): "pytest"}


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``prometheus_client`` is ``prometheus-client``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(group: str | None = None) -> set[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    requirements = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return {normalized(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in requirements}


def third_party_imports(path: str) -> set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "kbroker"}


def test_every_module_the_broker_imports_is_a_declared_dependency():
    distributions = packages_distributions()
    required, missing = declared(), {}
    for package in PACKAGES:
        for directory, _, files in os.walk(os.path.join(ROOT, package)):
            for name in (n for n in files if n.endswith(".py")):
                path = os.path.relpath(os.path.join(directory, name), ROOT)
                if any(path.startswith(prefix) for prefix in OPTIONAL):
                    continue
                for module in third_party_imports(os.path.join(ROOT, path)):
                    names = {normalized(d) for d in distributions.get(module, [module])}
                    if not names & required:
                        missing.setdefault(module, []).append(path)
    assert not missing, f"imported but not in pyproject's dependencies: {missing}"


def test_the_spark_client_needs_only_its_extra():
    distributions = packages_distributions()
    allowed = declared() | declared("spark")
    for directory, _, files in os.walk(os.path.join(ROOT, "client", "spark")):
        for name in (n for n in files if n.endswith(".py")):
            for module in third_party_imports(os.path.join(directory, name)):
                assert {normalized(d) for d in distributions.get(module, [module])} & allowed, (name, module)
