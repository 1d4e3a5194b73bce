"""``hydra/launcher=chain``: a Hydra multirun as a chain sweep.

Each job of the multirun is one chain (``chain.api.sweep_handle.Sweep``)
whose working directory is the job's own Hydra output directory (the
multirun's ``hydra.sweep.dir`` / ``hydra.sweep.subdir``), and the multirun's
sweep directory is a chain sweep that ``chain sweep status``, ``report``,
``cancel`` and ``resume`` take. The modules, from the pure ones out:

- ``config``: the launcher's structured config, every chain setting by its
  own name (registered as ``hydra/launcher=chain``);
- ``_mapping``: that config checked by chain's own converters, and the
  chain settings it resolves to;
- ``_command``: the app command each chain runs (the user's script again,
  in single-run mode, for its job's overrides), and the job's parameters;
- ``_jobs``: the multirun's jobs as the sweep's points, on a re-run too;
- ``job``: the small program that command starts, in the job's directory;
- ``launcher``: ``ChainLauncher``, which Hydra calls.

Hydra executes every module under ``hydra_plugins`` at each start to find
its plugins, before it registers them as imported (a dataclass of a module
with postponed annotations fails there): the helpers are ``_``-named, which
the scan skips, and chain's heavy parts are imported only when a multirun
launches.
"""
