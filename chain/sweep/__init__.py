"""Sweeps: many chains, one per point of a parameter grid, seen as one thing.

The layers, from the pure core out:

- ``params``: a parameter's values (from TOML or from ``--param NAME=VALUES``),
  the points of a grid or a list; ``naming``: a point's directory name;
  ``command``: a point's app command (placeholders, exported parameters);
  ``spec``: a sweep file's text as shared settings and points; ``record``:
  ``sweep.json``, the sweep's own record; ``table``: the status rows and the
  state counts. None of them does I/O.
- ``store``: the sweep directory (its record under a lock, each point's
  ``params.json``); ``report``: the sweep's CSV, figure and metric table.
- ``chain.api.sweep_handle.Sweep`` drives them with the chain API, and
  ``chain sweep`` (``chain.cli.sweep``) only adapts ``Sweep``.
"""
