"""Reports: usage accounting, chain metrics, the progress plot, ``chain report``."""
