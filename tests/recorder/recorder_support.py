"""Helpers shared by the recorder tests."""

from __future__ import annotations

from pathlib import Path

from tests.ledger.ledger_backends import BACKENDS

__all__ = ["BACKENDS", "write_kubeconfig"]


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: test, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: test, user: {}}]\n"
        "contexts: [{name: test, context: {cluster: test, user: test, namespace: default}}]\n"
        "current-context: test\n"
    )
    return path
