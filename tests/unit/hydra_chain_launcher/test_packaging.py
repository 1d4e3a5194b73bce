"""The launcher ships as a portion of Hydra's ``hydra_plugins`` namespace,
which Hydra's plugin scan finds; the extra and the tests' pin are declared."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[3]


def test_hydra_plugins_stays_a_namespace_listed_with_its_packages() -> None:
    # an __init__.py would make it a regular package hiding every other plugin installed beside it
    assert not (REPO / "hydra_plugins" / "__init__.py").exists()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "hydra_plugins").rglob("__init__.py")}
    # the namespace itself is listed too: an editable install then puts its directory on its __path__,
    # where the scan (pkgutil.walk_packages) looks
    assert on_disk and on_disk | {"hydra_plugins"} <= listed, sorted(on_disk | {"hydra_plugins"} - listed)
    assert project["project"]["optional-dependencies"]["hydra"] == ["hydra-core>=1.3,<1.4"]


def test_the_dev_setup_installs_the_pinned_hydra() -> None:
    setup = (REPO / "scripts" / "setup").read_text()
    installed = r'if \[\[ \$dev -eq 1 \]\]; then\n(\s*#.*\n)*\s*"\$py" -m pip install .* hydra-core==1\.3\.8\n'
    assert re.search(installed, setup), "scripts/setup --dev does not install hydra-core==1.3.8"


def test_hydras_scan_finds_the_launcher_and_its_config() -> None:
    assert "ChainLauncher" in [plugin.__name__ for plugin in Plugins.instance().discover(Launcher)]
    assert "chain.yaml" in ConfigStore.instance().list("hydra/launcher")
