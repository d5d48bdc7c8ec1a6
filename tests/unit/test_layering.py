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


def _package(module: str) -> str:
    """The project package a module name belongs to (``kbroker.protocol.errors`` -> ``protocol``)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "kbroker" and len(parts) > 1 else parts[0]


def imported_packages(path: str) -> set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {_package(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(_package(node.module))
    return names & set(ALLOWED)


def test_the_project_is_imported_as_kbroker_only():
    """Installed, the folders are ``kbroker.broker``, ``kbroker.protocol`` ...: an import of a bare ``protocol``
    would find a user's module of that name, or nothing."""
    bare = {}
    for package in ALLOWED:
        for directory, _, files in os.walk(os.path.join(ROOT, package)):
            for name in (n for n in files if n.endswith(".py")):
                path = os.path.join(directory, name)
                tree = ast.parse(open(path, encoding="utf-8").read(), path)
                found = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0
                         and n.module and n.module.split(".")[0] in ALLOWED]
                found += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                          if a.name.split(".")[0] in ALLOWED]
                if found:
                    bare[os.path.relpath(path, ROOT)] = found
    assert not bare, bare


def test_pyproject_lists_every_package():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    present = {"kbroker"} | {"kbroker." + os.path.relpath(d, ROOT).replace(os.sep, ".")
                             for package in ALLOWED for d, _, files in os.walk(os.path.join(ROOT, package))
                             if "__init__.py" in files}
    assert listed == present


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


# The broker's top level: its entry points (cli, main, embedded, the pytest plugin), the Broker hub and the
# metadata store, and rooms a newcomer can tell apart by their names. A new module goes into a room.
BROKER_TOP_LEVEL = {"__init__.py", "cli.py", "main.py", "embedded.py", "pytest_plugin.py", "server.py",
                    "metadata.py"}
BROKER_ROOMS = {"network", "partitions", "transactions", "configuration", "admin", "coordination", "cluster",
                "replication", "security", "handlers", "metrics", "shares"}


def test_the_broker_reads_as_rooms():
    entries = [e for e in os.listdir(os.path.join(ROOT, "broker")) if not e.startswith((".", "__pycache__"))]
    assert {e for e in entries if e.endswith(".py")} == BROKER_TOP_LEVEL
    assert {e for e in entries if os.path.isdir(os.path.join(ROOT, "broker", e))} == BROKER_ROOMS


def test_partitions_do_not_know_the_network_edge():
    """The append and fetch paths (broker/partitions) never import the request side: connections, handlers,
    the Broker hub; requests reach them, not the other way round."""
    edge = {"kbroker.broker.network", "kbroker.broker.handlers", "kbroker.broker.server"}
    wrong = {}
    for directory, _, files in os.walk(os.path.join(ROOT, "broker", "partitions")):
        for name in (n for n in files if n.endswith(".py")):
            path = os.path.join(directory, name)
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            found = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                     and any(n.module == e or n.module.startswith(e + ".") for e in edge)}
            if found:
                wrong[name] = sorted(found)
    assert not wrong, wrong
