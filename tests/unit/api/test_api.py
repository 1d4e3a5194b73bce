"""The package ``chain.api`` (``chain/api/__init__.py``): each name it
offers is its home module's, imported on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from chain import api


@pytest.mark.parametrize("name", api.__all__)
def test_every_name_is_its_home_modules_own(name: str) -> None:
    value = getattr(api, name)
    assert getattr(importlib.import_module(value.__module__), name) is value
    assert value.__module__.startswith("chain.api.")
    assert name in dir(api)


def test_a_name_it_does_not_offer_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'chain.api' has no attribute 'refuse_live_submitter'"):
        _ = api.refuse_live_submitter


def test_importing_it_imports_none_of_its_modules() -> None:
    probe = "import chain.api, sys; print(sorted(m for m in sys.modules if m.startswith('chain.api.')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
