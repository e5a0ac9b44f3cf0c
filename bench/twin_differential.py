"""The twin against the real Kueue on random scenarios, on demand (issue 18): agreement count and every miss.

Starts its own testbed (real kube-apiserver, etcd, Kueue v0.19.2, kwok), runs ``--count`` seeded
scenarios from ``tests/e2e/random_scenarios.py`` (grouped by Kueue Configuration, ``--batch`` at a time
side by side in disjoint cohorts), and prints, per scenario, agreement or what disagreed, then the
counts by category. ``--repeat`` runs every disagreeing seed again under a new name prefix: a seed
whose two Kueue runs differ is Kueue's own nondeterminism, one that repeats is a twin finding. Each
disagreement's scenario, both outcomes and the twin's input are written under ``--out``.

``--rejudge DIR`` judges saved reproducers again against the twin as it is now, without a testbed;
``--keep-all DIR`` saves every seed's reproducer, agreeing ones too, so that a change to the twin can
be judged against a whole run's Kueue outcomes in seconds (rejudging one run's folder with the twin
that ran it must give the run's own count).

Run: ``python -m bench twin_differential [--count 300] [--first 0 | --seeds N...] [--batch 8] [--repeat] [--out DIR]
[--keep-all DIR]``.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

from gpufleet.policy import load_policy, resolve
from gpufleet.testbed import Testbed, ensure
from tests.e2e.random_differential import Outcome, rejudge, run_seeds

REPO = Path(__file__).resolve().parents[1]
POLICY = REPO / "tests" / "e2e" / "fleet.yaml"
UNWRITTEN = "KueueWroteNothing"


def save(outcome: Outcome, out: Path, label: str = "") -> Path:
    return outcome.save(out / f"seed-{outcome.scenario.seed}{label}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--first", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, nargs="+", help="these seeds instead of --first/--count")
    parser.add_argument("--batch", type=int, default=16, help="scenarios side by side on the testbed")
    parser.add_argument("--repeat", action="store_true", help="run each disagreeing seed a second time")
    parser.add_argument("--out", type=Path, default=Path("twin-differential-findings"))
    parser.add_argument("--rejudge", type=Path, help="judge the reproducers saved under DIR again (no testbed)")
    parser.add_argument(
        "--keep-all", type=Path, metavar="DIR", help="save every seed's reproducer under DIR, agreeing ones too"
    )
    args = parser.parse_args()
    if args.rejudge:
        agree = total = 0
        for folder in sorted(args.rejudge.glob("seed-*"), key=lambda f: f.name):
            real = [f for f in rejudge(folder).disagreements if f != UNWRITTEN]
            agree, total = agree + (not real), total + 1
            print(f"{folder.name}: {', '.join(real) or 'agrees now'}", flush=True)
        print(f"\n{agree} of {total} saved scenarios agree with the twin as it is now")
        return
    seeds = args.seeds or list(range(args.first, args.first + args.count))
    fleet = resolve(load_policy(POLICY))
    counts: collections.Counter[str] = collections.Counter()
    missed: list[Outcome] = []
    began = time.monotonic()
    last_timings: dict[str, float] | None = None
    with tempfile.TemporaryDirectory(prefix="gpufleet-differential-") as run:
        bed = Testbed(Path(run) / "testbed", ensure(REPO))
        bed.up(fleet)
        try:
            for outcome in run_seeds(bed, seeds, Path(run) / "work", batch_size=args.batch):
                found = outcome.disagreements
                if outcome.timings is not last_timings:
                    last_timings = outcome.timings
                    print(f"batch from seed {outcome.scenario.seed}: {outcome.timings}", flush=True)
                real = [f for f in found if f != UNWRITTEN]  # unwritten, and marked so: agreement
                if args.keep_all:
                    save(outcome, args.keep_all)  # a corpus a later twin change is rejudged against
                counts["disagree" if real else "agree"] += 1
                counts.update(found)
                line = f"seed {outcome.scenario.seed:>4} [{outcome.scenario.config.key}] "
                if not real:
                    quiet = f" (Kueue left {', '.join(outcome.unwritten)} unwritten)" if found else ""
                    print(line + "agrees" + quiet, flush=True)
                else:
                    print(line + f"DISAGREES on {', '.join(found)}", flush=True)
                    missed.append(outcome)
                    print(f"  kueue: {outcome.real.describe()}\n  twin:  {outcome.twin.describe()}")
                    print(f"  saved {save(outcome, args.out)}")
            if args.repeat and missed:
                print(f"\nagain, under new names: {len(missed)} disagreeing seeds")
                first = {o.scenario.seed: o for o in missed}
                for again in run_seeds(bed, sorted(first), Path(run) / "again", batch_size=args.batch, tag="b"):
                    same = again.kueue_key() == first[again.scenario.seed].kueue_key()
                    counts["kueue repeats itself" if same else "kueue differs between runs"] += 1
                    print(
                        f"seed {again.scenario.seed:>4}: Kueue {'the same' if same else 'DIFFERENT'} the second time"
                        f"; disagreements now {again.disagreements or 'none'}"
                    )
                    if not same:
                        print(f"  second kueue: {again.real.describe()}\n  saved {save(again, args.out, '-again')}")
        finally:
            bed.down()
    elapsed = time.monotonic() - began
    total = counts["agree"] + counts["disagree"]
    print(
        f"\n{counts['agree']} of {total} scenarios agree on admitted, preempted, pending, reasons and usage "
        f"({counts['disagree']} disagree) in {elapsed:.0f}s wall; {counts[UNWRITTEN]} of them with Jobs whose "
        "condition Kueue left unwritten while the twin wrote its own (issue 18, 'What Kueue writes')"
    )
    for key, n in sorted(counts.items()):
        if key not in ("agree", "disagree"):
            print(f"  {key:<28} {n}")


if __name__ == "__main__":
    main()
