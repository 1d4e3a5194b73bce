"""The package ``chain`` itself (``chain/__init__.py``): the error family
and the version imported at once, the Python API on first use only."""

from __future__ import annotations

import subprocess
import sys

import pytest

import chain
from chain import errors


def test_the_error_family_is_exported_from_chain() -> None:
    from chain import ChainError, CheckpointError, ConfigError  # the README's names

    assert issubclass(ConfigError, ChainError) and CheckpointError.exit_code == 3
    family = {
        name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, errors.ChainError)
    }
    assert family <= set(chain.__all__)
    assert all(getattr(chain, name) is getattr(errors, name) for name in family)
    # still cheap: `import chain` loads no API (chain --help stays fast), only the errors and their codes
    probe = "import chain, sys; print(sorted(m for m in sys.modules if m.startswith('chain')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['chain', 'chain.errors', 'chain.primitives', 'chain.primitives.codes']"


def test_chain_and_sweep_are_the_apis_own_imported_on_first_use() -> None:
    from chain.api.handle import Chain
    from chain.api.sweep_handle import Sweep

    assert chain.Chain is Chain and chain.Sweep is Sweep
    with pytest.raises(AttributeError, match="module 'chain' has no attribute 'submit'"):
        _ = chain.submit
