"""Atomic writes: single files, the progress counter, and sharded directories.

The app side's name for :mod:`chain.primitives.atomic`, where the writes
live (the chain itself writes its own files with them too): every write goes
to a temporary name in the destination's directory, is fsync'ed and published
with ``os.replace``; a sharded checkpoint directory counts as complete only
when it holds a ``DONE`` marker, written last (:func:`publish_dir`).
"""

from __future__ import annotations

from chain.primitives import atomic as _atomic
from chain.primitives.atomic import *  # the whole public surface: one list, primitives.atomic.__all__

__all__ = _atomic.__all__
