"""A federation of testbeds: a MultiKueue manager (no nodes) and one worker per declared cluster.

Each member is a whole testbed (its own etcd, API server, controllers, scheduler and Kueue, from
``testbed.cluster``) in its own folder under the run folder: ``manager/`` and ``workers/<cluster>/``.
The manager's Kueue runs the Configuration ``gpufleet render`` writes for it (with ``multiKueue``;
MultiKueue itself is Beta and on by default in Kueue v0.19.2) and starts no kwok; each worker is
the testbed of the policy narrowed to its pools. For each worker the manager gets the Secret the policy
names, in ``kueue-system``, holding a kubeconfig Kueue accepts: the server by IP, the CA and a client
certificate inline (Kueue refuses file paths, ``insecure-skip-tls-verify``, token files and exec
plugins). The client is the worker's admin (``system:masters``): the testbed's users are all trusted;
a production worker gives the manager a narrower identity (docs/multikueue.md).

``python -m gpufleet.testbed up|down|status --federation`` starts and stops all of them with one command.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml

from gpufleet import files
from gpufleet.policy import resolve
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.residency import project
from gpufleet.render.multikueue import manager_configuration
from gpufleet.render.worker_secret import worker_secret
from gpufleet.testbed.binaries import Binaries
from gpufleet.testbed.cluster import Testbed
from gpufleet.testbed.processes import TestbedError

STATE = "federation.json"


def inline_kubeconfig(server: str, ca: Path, cert: Path, key: Path, name: str) -> dict[str, Any]:
    """A kubeconfig with every credential inline, as Kueue's MultiKueue requires of a Secret's kubeconfig."""

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": data(ca)}}],
        "users": [{"name": name, "user": {"client-certificate-data": data(cert), "client-key-data": data(key)}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


class Federation:
    """The manager and workers of one policy, in one run folder. Not thread-safe."""

    def __init__(self, run_dir: Path, binaries: Binaries | None = None) -> None:
        self.run = run_dir.resolve()
        self._binaries = binaries
        self.manager = Testbed(self.run / "manager", binaries)
        self.state_file = self.run / STATE

    def worker(self, name: str) -> Testbed:
        return Testbed(self.run / "workers" / name, self._binaries)

    def workers(self) -> dict[str, Testbed]:
        """The workers that have a folder, by name (those ``up`` started, running or not)."""
        folder = self.run / "workers"
        names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        return {name: self.worker(name) for name in names}

    def up(self, fleet: Fleet) -> dict[str, str]:
        """Start the manager, then each worker, then the manager's kubeconfig Secrets; return each member's
        kubeconfig path (``manager`` and the cluster names). On failure stop what started; logs stay."""
        policy = fleet.policy
        if not policy.clusters:
            raise TestbedError("the policy declares no clusters: a federation needs clusters: (docs/multikueue.md)")
        if self.state_file.exists():
            raise TestbedError(f"a federation may already run from {self.run}; run down first")
        started: list[Testbed] = []
        try:
            manager = self.manager.up(fleet, kueue_config=manager_configuration(fleet), fake_nodes=False)
            started.append(self.manager)
            kubeconfigs = {"manager": manager.kubeconfig}
            for cluster in policy.clusters:
                bed = self.worker(cluster.name)
                state = bed.up(resolve(project(policy, {cluster.name})))
                started.append(bed)
                kubeconfigs[cluster.name] = state.kubeconfig
                self._secret(cluster.kubeconfigSecret, cluster.name, bed, state.server)
        except BaseException:
            for bed in reversed(started):
                bed.down()
            raise
        files.write_text(self.state_file, json.dumps(kubeconfigs, indent=2))
        return kubeconfigs

    def _secret(self, secret: str, name: str, bed: Testbed, server: str) -> None:
        """The Secret ``gpufleet worker-secret`` writes for this worker, applied to the manager."""
        config = inline_kubeconfig(server, bed.pki / "ca.crt", bed.pki / "admin.crt", bed.pki / "admin.key", name)
        text = yaml.safe_dump(config, sort_keys=False)
        path = self.manager.config / f"{name}-secret.yaml"
        with files.atomic_path(path, mode=0o600) as tmp:
            tmp.write_text(yaml.safe_dump(worker_secret(secret, text, f"{name}.kubeconfig")), encoding="utf-8")
        self.manager.kubectl("apply", "--server-side", f"--filename={path}")

    def kubeconfigs(self) -> dict[str, str]:
        return dict(json.loads(self.state_file.read_text(encoding="utf-8"))) if self.state_file.exists() else {}

    def running(self) -> dict[str, list[str]]:
        return {"manager": self.manager.running(), **{n: bed.running() for n, bed in self.workers().items()}}

    def down(self) -> None:
        """Stop every worker, then the manager (each newest process first); logs stay."""
        for bed in self.workers().values():
            bed.down()
        self.manager.down()
        self.state_file.unlink(missing_ok=True)
