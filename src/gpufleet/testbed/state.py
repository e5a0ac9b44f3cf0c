"""What a running testbed is, as clients and ``down`` find it again: the ports its processes listen
on, its certificates, and ``<run>/state.json``. Apart from the start-up steps (``cluster``) so that a
client reading the state need not load how the control plane is started."""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpufleet.testbed import pki
from gpufleet.testbed.processes import Started

PORT_NAMES = (
    "etcd",
    "etcd_peer",
    "apiserver",
    "controller_manager",
    "scheduler",
    "kueue_webhook",
    "kueue_health",
)


@dataclass(frozen=True)
class Ports:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kueue_webhook: int
    kueue_health: int

    @classmethod
    def free(cls) -> Ports:
        """Ports the kernel hands out now; held together so no two are the same."""
        sockets = []
        try:
            for _ in PORT_NAMES:
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                sockets.append(s)
            return cls(*(s.getsockname()[1] for s in sockets))
        finally:
            for s in sockets:
                s.close()


@dataclass(frozen=True)
class Certificates:
    server: str
    ca: pki.KeyPair
    apiserver: pki.KeyPair
    admin: pki.KeyPair
    webhook: pki.KeyPair
    tokens: pki.KeyPair  # the service-account signing key (.key) and its public half (.pub)


@dataclass(frozen=True)
class State:
    """What ``down`` and clients need to find a running testbed again (``<run>/state.json``)."""

    kubeconfig: str
    server: str
    ports: Ports
    processes: list[Started]
    timings: dict[str, float]  # seconds each start-up step took

    def dump(self) -> str:
        def plain(value: Any) -> Any:
            return str(value) if isinstance(value, Path) else value

        data = asdict(self)
        data["processes"] = [{k: plain(v) for k, v in p.items()} for p in data["processes"]]
        return json.dumps(data, indent=2)

    @classmethod
    def load(cls, text: str) -> State:
        data = json.loads(text)
        return cls(
            kubeconfig=data["kubeconfig"],
            server=data["server"],
            ports=Ports(**data["ports"]),
            processes=[
                Started(p["name"], p["pid"], Path(p["log"]), tuple(p["argv"]), tuple(map(tuple, p["env"])))
                for p in data["processes"]
            ],
            timings=data.get("timings", {}),
        )


def admin_kubeconfig(server: str, ca: Path, client: pki.KeyPair) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testbed", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "admin", "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": "admin"}}],
        "current-context": "testbed",
    }
