"""The embedded local backend: Slurm-like jobs as supervised local
processes (``backend``: the Backend; ``supervisor``: the per-job process)."""
