"""gpufleet: a queue in front of the card.

Plan, render, simulate, enforce and audit a shared GPU fleet on Kubernetes with Kueue.
"""

from gpufleet import compiled

__version__ = "0.1.0"

compiled.guard()  # before any compiled module is imported: never run one older than its source
