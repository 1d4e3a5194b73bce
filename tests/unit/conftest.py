"""tests/unit mirrors chain/: tests/unit/<package>/test_<module>.py (docs/development.md).

Every folder here is a package (an ``__init__.py``), so two packages' tests of
same-named modules (core/limits.py, backends/slurm/limits.py) do not collide.
The shared helpers stay beside this file and are imported by bare name
(``from _chains import make_chain``): this folder is put on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
