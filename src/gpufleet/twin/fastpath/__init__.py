"""The twin's own shortcuts, not Kueue's: each gives the reference path's answer for less work.

ONE switch turns every one of them off: ``Twin(spec, fast=False)`` is the reference path, Kueue's
``schedule()`` step by step with every verdict worked out afresh; ``fast=True`` is the default.
``tests/twin/test_paths.py`` (random clusters and streams through the three twins below) and
``python -m bench simulate_week --check-paths N`` hold the two paths to the same cycles,
admissions, evictions and reasons. Named for what each saves:

* ``verdict_memo``: working a head's verdict (flavors, preemption targets) out again while quota,
  reservation times and evicted flags stand still (the reference: ``scheduler/assignments.FreshVerdicts``);
* ``fit_plans``: trying the flavors one by one for a plain Fit, the common outcome in a busy cluster;
* ``preemption_bound``: building candidate lists for a fair-sharing search that surely finds no targets;
* ``quiet_streaks``: the full order of a quiet cycle (nothing admitted or evicted), and one result
  per streak of them; only where the caller also asks for it (``streaks=True``, the simulator).

Kueue's modules take these in from ``kueue.Twin`` (a plan maker, a bound factory, a memo), so none
of them imports this package. Three smaller shortcuts stay inside the rule they shorten, switched
by the same ``fast``: the share cache (``cache/fair_sharing.FairShare(cache=...)``, with the
tournament's within-quota test), the preemptor's reused candidate order and per-target bounds
(``scheduler/preemption/preemption.Preemptor(bounded=...)``), and flavor assignment's replays
of an earlier answer where the tree reads the same (``scheduler/flavorassigner``, with a plan maker).
"""
