"""Slurm backends: the command-line clients (``cli``, parsers in ``parse``)
and Slurm's C API through pyslurm (``pyslurm``)."""
