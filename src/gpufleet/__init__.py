"""gpufleet: a queue in front of the card.

Plan, render, simulate, enforce and audit a shared GPU fleet on Kubernetes with Kueue.
"""

__version__ = "0.1.0"
