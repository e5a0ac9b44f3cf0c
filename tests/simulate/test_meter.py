"""The meter's integrals: a rate counts from when it is set until it changes, bucket by bucket."""

from __future__ import annotations

from gpufleet.simulate.meter import Meter


def test_rates_integrate_within_and_across_buckets_and_stop_at_zero() -> None:
    """2 GPUs over [0, 5), none over [5, 25), 1 over [25, 35): 10 + 10 GPU-seconds, the last run
    split between buckets 2 and 3."""
    meter = Meter(10)
    meter.set("alloc", 2.0)
    meter.advance(5)
    meter.add("alloc", -2.0)
    meter.advance(25)
    meter.add("alloc", 1.0)
    meter.advance(35)
    assert meter.total("alloc") == 20.0
    assert meter.means("alloc", 4) == [1.0, 0.0, 0.5, 0.5]


def test_a_series_set_back_to_zero_and_again_counts_only_while_it_is_not() -> None:
    meter = Meter(100)
    meter.set("waiting", 3)
    meter.set("waiting", 0)
    meter.advance(50)
    meter.set("waiting", 1)
    meter.advance(60)
    assert meter.total("waiting") == 10.0
    assert meter.rate("waiting") == 1
