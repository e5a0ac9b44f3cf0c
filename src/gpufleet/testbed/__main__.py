"""``python -m gpufleet.testbed up|down|status``: the testbed for people (``make testbed-up``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gpufleet.errors import InputError
from gpufleet.policy import load_policy, resolve
from gpufleet.testbed import Testbed, TestbedError, ensure

DEFAULT_RUN = Path.home() / ".cache" / "gpufleet-testbed" / "run"
DEFAULT_POLICY = Path("examples/fleet.yaml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpufleet.testbed", description=__doc__)
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--run-dir", type=Path, default=DEFAULT_RUN, help="state, certificates and logs")
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY, help="the fleet policy whose nodes to fake")
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            fleet = resolve(load_policy(args.policy))
            began = time.monotonic()
            binaries = ensure()
            built = time.monotonic()
            bed = Testbed(args.run_dir, binaries)
            state = bed.up(fleet)
            print(f"binaries ready in {built - began:.1f}s; testbed up in {time.monotonic() - built:.1f}s")
            print(f"logs in {bed.logs}")
            print(f"export KUBECONFIG={state.kubeconfig}")
        elif args.action == "down":
            Testbed(args.run_dir).down()
            print("testbed stopped")
        else:
            running = Testbed(args.run_dir).running()
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
