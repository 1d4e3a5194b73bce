"""What runs inside a launched app's workers. ``rank_run.py`` is run as a
script by path (``torchrun ... rank_run.py train.py ARGS``), so this
directory holds nothing a user's import could find in its place."""
