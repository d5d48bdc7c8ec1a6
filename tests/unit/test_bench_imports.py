"""``make bench`` starts by importing every bench module: one that no longer imports (a renamed helper) fails the
whole bench, and nothing in the test suite runs it. This imports each, so a renaming breaks a fast test."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bench

MODULES = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.ispkg)


@pytest.mark.parametrize("name", MODULES)
def test_every_bench_module_imports(name):
    module = importlib.import_module(f"bench.{name}")
    assert module.__name__ == f"bench.{name}"

