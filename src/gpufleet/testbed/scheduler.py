"""kube-scheduler as the policy implies it: stock, or with the profile ``render`` writes.

A policy that keeps ``scheduling.nodeScoring: LeastAllocated`` renders no profile, and a cluster then
runs kube-scheduler's defaults: so does the testbed, with no ``--config``. A policy asking for
MostAllocated renders a KubeSchedulerConfiguration (``render.scheduler``); the testbed hands exactly
that to kube-scheduler, with only what a local process needs added: where its kubeconfig is (a
``--config`` file makes kube-scheduler ignore ``--kubeconfig``, ``options.go`` ``ApplyTo``) and that
it leads alone (``--leader-elect=false`` still applies).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

from gpufleet.render.common import Obj

CONFIG_FLAG = "--config="


def configuration(rendered: Sequence[Obj], kubeconfig: Path) -> Obj | None:
    """The file kube-scheduler reads, or None to run it stock (the policy rendered no profile)."""
    if not rendered:
        return None
    (config,) = (copy.deepcopy(doc) for doc in rendered)
    config.setdefault("clientConnection", {})["kubeconfig"] = str(kubeconfig)
    config.setdefault("leaderElection", {})["leaderElect"] = False
    return config


def argv(base: Sequence[str], config: Path | None) -> list[str]:
    """``base`` without any ``--config``, with ``config``'s when given."""
    out = [a for a in base if not a.startswith(CONFIG_FLAG)]
    return [*out, f"{CONFIG_FLAG}{config}"] if config is not None else out
