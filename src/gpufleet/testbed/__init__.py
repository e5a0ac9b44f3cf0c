"""The testbed: a real Kubernetes control plane with Kueue and kwok fake GPU nodes, on loopback.

Built from pinned Go modules (``testbed/go.mod``), started from a gpufleet policy, and used by the
end-to-end tests and by people (``python -m gpufleet.testbed up``). See docs/testbed.md.
"""

from gpufleet.testbed.binaries import Binaries, ensure
from gpufleet.testbed.cluster import Testbed
from gpufleet.testbed.processes import TestbedError
from gpufleet.testbed.state import State

__all__ = ["Binaries", "State", "Testbed", "TestbedError", "ensure"]
