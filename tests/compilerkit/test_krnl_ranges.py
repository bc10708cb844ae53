"""The flat-offset rule that lets panel and group loops run in parallel (dialects/krnl_ranges.py):
whenever it says the iterations of a loop touch disjoint offsets, enumerating every offset of
every iteration must agree (soundness, by hypothesis), and hand-worked panels of a Conv are
accepted while overlapping ones are refused."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from compilerkit.dialects.krnl_ranges import disjoint_forms


def offsets(use, a):
    """Every flat offset access `use` = (m, F, inner, const) touches when the loop is at a."""
    m, _, inner, const = use
    ranges = [range(lo, hi) for _, lo, hi in inner]
    return {m * a + const + sum(c * v for (c, _, _), v in zip(inner, vs, strict=True))
            for vs in itertools.product(*ranges)}


def overlap(uses, trips):
    """Whether two different iterations touch a common offset (brute force)."""
    seen = {a: set().union(*(offsets(u, a) for u in uses)) for a in range(*trips)}
    return any(seen[a] & seen[b] for a, b in itertools.combinations(seen, 2))


# Small coefficients (positions within a panel) and whole-row ones (other channels), so that
# spans land near the step between iterations and near the row length, where rules break.
term = st.tuples(st.one_of(st.integers(-3, 6), st.sampled_from([24, 48])), st.just(0),
                 st.integers(1, 6))
use = st.tuples(st.sampled_from([0, 3, 4, 6, 8, 12, -6]), st.just({}),
                st.lists(term, max_size=3), st.integers(-4, 30))


@settings(max_examples=600, deadline=None)
@given(uses=st.lists(use, min_size=1, max_size=3), hi=st.integers(2, 6),
       rows=st.lists(st.sampled_from([12, 24, 48]), max_size=2))
def test_said_disjoint_means_disjoint(uses, hi, rows):
    trips = (0, hi)
    if disjoint_forms(uses, trips, rows) is None:
        assert not overlap(uses, trips)


def panel_uses(width, panel, channels=4, plane=96):
    """A Conv's output panel loop: out[oc, jp * panel + q] written by the bias fill (q < width)
    and by a matmul over rows oc < channels (row stride `plane`) and columns q < width."""
    fill = (panel, {}, [(plane, 0, channels), (1, 0, width)], 0)
    tile = (panel, {}, [(plane, 0, channels), (1, 0, width)], 0)
    return [fill, tile]


def test_conv_panels_split_by_columns():
    # 4 panels of 24 pixels of a 96-pixel plane, all 4 channels each: disjoint by columns
    # within rows of 96, although each panel's offsets span 3 * 96 + 23 elements.
    uses = panel_uses(width=24, panel=24)
    assert disjoint_forms(uses, (0, 4), rows=[96]) is None
    assert not overlap(uses, (0, 4))
    # Without the row length only whole offsets are compared: refused (conservative).
    assert disjoint_forms(uses, (0, 4)) is not None


def test_overlapping_panels_are_refused():
    # Panels 25 wide every 24 pixels share a column: iterations would race.
    uses = panel_uses(width=25, panel=24)
    assert overlap(uses, (0, 3))
    assert "spans" in disjoint_forms(uses, (0, 3), rows=[96])


def test_panels_past_the_row_are_refused():
    # 5 panels of 24 would run past a 96-pixel row into the next channel's plane: the last
    # panel of channel 0 is the first of channel 1.
    uses = panel_uses(width=24, panel=24)
    assert overlap(uses, (0, 5))
    assert disjoint_forms(uses, (0, 5), rows=[96]) is not None
    # Panels 22 wide every 25 pixels: the fourth ends on pixel 96, the next channel's first,
    # which the first panel also writes (refused); three panels starting 24 in end on the
    # row's last pixel, 95 (accepted).
    ragged = [(25, f, inner[:1] + [(1, 0, 22)], 0) for _, f, inner, _ in uses]
    assert overlap(ragged, (0, 4))
    assert disjoint_forms(ragged, (0, 4), rows=[96]) is not None
    inside = [(m, f, inner, 24) for m, f, inner, _ in uses]
    assert disjoint_forms(inside, (0, 3), rows=[96]) is None
    assert not overlap(inside, (0, 3))


def test_per_panel_column_buffer():
    # col[jp, e] for e < 72 written by im2col and read by the matmul as B (72 = K x width):
    # whole offsets 72 apart.
    store = (72, {}, [(24, 0, 3), (1, 0, 24)], 0)
    b_read = (72, {}, [(24, 0, 3), (1, 0, 24)], 0)
    assert disjoint_forms([store, b_read], (0, 8)) is None
    shared = (0, {}, [(24, 0, 3), (1, 0, 24)], 0)  # one buffer for every panel: refused
    assert "every iteration" in disjoint_forms([shared, b_read], (0, 8))
