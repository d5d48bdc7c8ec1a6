"""Packages depend one way: broker -> coordinators -> storage -> protocol, and client -> protocol. A client
never imports the server (the ``kbroker`` entry point is therefore the broker's, ``broker/cli.py``)."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALLOWED = {
    "protocol": {"protocol"},
    "storage": {"storage", "protocol"},
    "coordinators": {"coordinators", "storage", "protocol"},
    "client": {"client", "protocol"},
    "broker": {"broker", "coordinators", "storage", "protocol", "client"},
}


def imported_packages(path: str) -> set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names & set(ALLOWED)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_go_one_way(package):
    wrong = {}
    for directory, _, files in os.walk(os.path.join(ROOT, package)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                bad = imported_packages(path) - ALLOWED[package]
                if bad:
                    wrong[os.path.relpath(path, ROOT)] = sorted(bad)
    assert not wrong, f"{package} may import only {sorted(ALLOWED[package])}: {wrong}"
