"""``python -m gpufleet.testbed up|down|status [--federation]``: the testbed for people (``make testbed-up``, ``make federation-up``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gpufleet.errors import InputError
from gpufleet.policy import load_policy, resolve
from gpufleet.testbed import Testbed, TestbedError, ensure
from gpufleet.testbed.federation import Federation

DEFAULT_RUN = Path.home() / ".cache" / "gpufleet-testbed" / "run"
DEFAULT_POLICY = Path("examples/fleet.yaml")
DEFAULT_FEDERATION_RUN = Path.home() / ".cache" / "gpufleet-testbed" / "federation"
DEFAULT_FEDERATION_POLICY = Path("examples/federation.yaml")


def _federation(action: str, run_dir: Path, policy: Path) -> None:
    """``--federation``: the same three actions for a manager and its workers."""
    if action == "up":
        fleet = resolve(load_policy(policy))
        began = time.monotonic()
        kubeconfigs = Federation(run_dir, ensure()).up(fleet)
        print(f"federation up in {time.monotonic() - began:.1f}s ({len(kubeconfigs) - 1} workers)")
        for name, path in kubeconfigs.items():
            print(f"{name}: KUBECONFIG={path}")
    elif action == "down":
        Federation(run_dir).down()
        print("federation stopped")
    else:
        for name, parts in Federation(run_dir).running().items():
            print(f"{name}: " + (", ".join(parts) if parts else "nothing"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpufleet.testbed", description=__doc__)
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--run-dir", type=Path, default=None, help="state, certificates and logs")
    parser.add_argument("--policy", type=Path, default=None, help="the fleet policy whose nodes to fake")
    parser.add_argument(
        "--federation",
        action="store_true",
        help="a MultiKueue manager and one testbed per cluster of a policy with clusters: (docs/multikueue.md)",
    )
    args = parser.parse_args(argv)
    try:
        if args.federation:
            _federation(args.action, args.run_dir or DEFAULT_FEDERATION_RUN, args.policy or DEFAULT_FEDERATION_POLICY)
        elif args.action == "up":
            fleet = resolve(load_policy(args.policy or DEFAULT_POLICY))
            began = time.monotonic()
            binaries = ensure()
            built = time.monotonic()
            bed = Testbed(args.run_dir or DEFAULT_RUN, binaries)
            state = bed.up(fleet)
            print(f"binaries ready in {built - began:.1f}s; testbed up in {time.monotonic() - built:.1f}s")
            print(f"logs in {bed.logs}")
            print(f"export KUBECONFIG={state.kubeconfig}")
        elif args.action == "down":
            Testbed(args.run_dir or DEFAULT_RUN).down()
            print("testbed stopped")
        else:
            running = Testbed(args.run_dir or DEFAULT_RUN).running()
            print("running: " + (", ".join(running) if running else "nothing"))
    except InputError as exc:
        print(exc.summary(), file=sys.stderr)
        return 2
    except TestbedError as exc:
        print(f"testbed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
