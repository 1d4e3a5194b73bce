"""The chain directory: its layout, the status store, the runners' records.

Everything is JSON written atomically and validated on load; nothing read
from it is sourced or evaluated.
"""
