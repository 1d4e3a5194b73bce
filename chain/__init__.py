"""chain: run a long sequential computation on Slurm as a self-driving
chain of checkpointed jobs."""

__version__ = "0.1.0"
