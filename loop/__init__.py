"""loopdeck's backend: state, journal, control queue, task sources and the loop drivers.

Nothing here imports Textual: the Stop hook must start in milliseconds, and the runner must
work on a machine with no terminal at all. A test enforces it.
"""

__version__ = "0.1.0"
