"""Slurm backends: the command-line clients (``cli``; every parser of their
output in ``parse``) and Slurm's C API through pyslurm (``pyslurm``; whether
it can be used here in ``pyslurm_load``)."""
