"""Every word of a change's explanation agrees with the figures printed beside it (issue 33: "eases
NeverAdmissible: never-admissible jobs 13 → 22" said better where the figures said worse)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.simulate.pathologies import Reason
from gpufleet.tune.diff import Effect, judged

NEVER = Reason.NEVER_ADMISSIBLE
LOOP = Reason.PREEMPTION_LOOP
_FIGURES = re.compile(r"(-?[\d,.]+) → (-?[\d,.]+) \((better|worse|unchanged), simulated\)")
_WORDS = {"removes": ("better", "unchanged"), "eases": ("better",), "worsens": ("worse",), "leaves": ("unchanged",)}


def _words_and_figures(line: str) -> tuple[dict[str, str], list[tuple[float, float, str]]]:
    """The word each finding gets in the label, and each effect's (before, after, direction) as printed."""
    label, _, effects = line.partition(": ")
    words = {}
    for part in label.split("; "):
        word, _, names = part.removesuffix(" unchanged").partition(" ")
        words.update(dict.fromkeys(names.split(", "), word))
    figures = [(float(b.replace(",", "")), float(a.replace(",", "")), d) for b, a, d in _FIGURES.findall(effects)]
    return words, figures


@pytest.mark.parametrize(
    ("before", "after", "still", "line"),
    [
        # the case: more stranded jobs, the finding still there
        (13, 22, True, "worsens NeverAdmissible: never-admissible jobs 13 → 22 (worse, simulated)"),
        (13, 22, False, "worsens NeverAdmissible: never-admissible jobs 13 → 22 (worse, simulated)"),
        (22, 13, True, "eases NeverAdmissible: never-admissible jobs 22 → 13 (better, simulated)"),
        (13, 0, False, "removes NeverAdmissible: never-admissible jobs 13 → 0 (better, simulated)"),
        (13, 13, True, "leaves NeverAdmissible unchanged: never-admissible jobs 13 → 13 (unchanged, simulated)"),
        (13, 13, False, "removes NeverAdmissible: never-admissible jobs 13 → 13 (unchanged, simulated)"),
        (
            1234.4,
            1234.45,
            True,
            "leaves NeverAdmissible unchanged: never-admissible jobs 1,234 → 1,234 (unchanged, simulated)",
        ),
    ],
)
def test_the_word_follows_the_figures(before: float, after: float, still: bool, line: str) -> None:
    change = judged(
        "x",
        "a",
        "b",
        reasons=[NEVER],
        still={NEVER} if still else set(),
        effects=[Effect("never-admissible jobs", before, after)],
    )
    assert change.explanation() == line


def test_goodput_is_better_higher() -> None:
    up, down = Effect("goodput GPU-h", 10, 12, True), Effect("goodput GPU-h", 12, 10, True)
    assert (up.direction, down.direction) == ("better", "worse")


figure = st.one_of(st.integers(0, 5000).map(float), st.floats(0, 5000, allow_nan=False).map(lambda x: round(x, 3)))


@given(
    figures=st.lists(st.tuples(figure, figure, st.booleans(), st.booleans()), min_size=1, max_size=2),
)
def test_every_word_agrees_with_its_numbers(figures: list[tuple[float, float, bool, bool]]) -> None:
    """Random before/after figures, finding still there or gone, either sense of better: the printed
    word, the printed direction and the printed numbers agree, finding by finding."""
    reasons = [NEVER, LOOP][: len(figures)]
    effects = [Effect(f"m{i}", b, a, up) for i, (b, a, _, up) in enumerate(figures)]
    still = {r for r, (_, _, there, _) in zip(reasons, figures, strict=True) if there}
    line = judged("x", "a", "b", reasons=reasons, still=still, effects=effects).explanation()
    words, printed = _words_and_figures(line)
    assert set(words) == {r.value for r in reasons}, line
    for reason, (before, after, direction), effect in zip(reasons, printed, effects, strict=True):
        word = words[reason.value]
        shown = "unchanged" if before == after else "better" if (after > before) == effect.higher_is_better else "worse"
        assert direction == shown, line
        assert direction in _WORDS[word], line
