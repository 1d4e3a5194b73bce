"""The pure core: no I/O, no clock, no scheduler.

``model`` (job and chain states, the exit contract, counter parsing),
``decision`` (a runner's outcome -> the chain's next step), ``margin``
(adaptive runner margin), ``poll`` (when to ask the scheduler), ``retry``
(the one retry policy), ``settings`` (the one settings table), ``timefmt``
(Slurm time syntax) and ``names`` (job and script names).
"""
