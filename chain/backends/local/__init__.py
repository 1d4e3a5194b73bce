"""The embedded local backend: Slurm-like jobs as supervised local processes.

``backend`` (the Backend), ``sbatch`` (what it reads from a script),
``spool`` (job records on disk), ``dependency`` (sbatch dependencies),
``supervisor`` (the per-job process), ``commands`` (debugging verbs).
"""
