"""compilerkit.measure.timing: the shared best-of-N timer. Checked with callables that count
their calls and a clock that advances by known amounts, not with wall-clock speed."""

from __future__ import annotations

import pytest

from compilerkit.measure import timing


def _fake_clock(monkeypatch, steps):
    """A "wall" clock that a callable advances by its own step each call."""
    now = [0.0]
    monkeypatch.setitem(timing.CLOCKS, "wall", lambda: now[0])

    def call(name, calls):
        def f():
            calls.append(name)
            now[0] += steps[name].pop(0)
        return f
    return call


def test_warm_up_then_interleaved_rounds_keep_the_best(monkeypatch):
    steps = {"a": [9.0, 3.0, 1.0, 2.0], "b": [9.0, 5.0, 6.0, 4.0]}   # first: the warm-up
    calls = []
    call = _fake_clock(monkeypatch, steps)
    best = timing.best_of({"a": call("a", calls), "b": call("b", calls)}, 3, "wall")
    assert best == {"a": 1.0, "b": 4.0}                     # the warm-up (9 s) is not counted
    assert calls == ["a", "b"] + ["a", "b"] * 3             # in turn, every round


def test_one_callable_gives_its_seconds(monkeypatch):
    call = _fake_clock(monkeypatch, {"f": [7.0, 2.0, 0.5]})
    assert timing.best_of(call("f", []), 2, "wall") == 0.5


def test_shuffled_rounds_are_seeded(monkeypatch):
    def order(seed):
        calls = []
        call = _fake_clock(monkeypatch, {k: [1.0] * 9 for k in "abcd"})
        timing.best_of({k: call(k, calls) for k in "abcd"}, 2, "wall", shuffle=seed)
        return calls[4:]
    assert order(3) == order(3)
    assert sorted(order(3)[:4]) == list("abcd") and sorted(order(3)[4:]) == list("abcd")


def test_bad_clock_and_repeat_are_named():
    with pytest.raises(ValueError, match="clock must be one of"):
        timing.best_of(lambda: None, 1, "cpu")
    with pytest.raises(ValueError, match="repeat must be at least 1"):
        timing.best_of(lambda: None, 0)


def test_load_is_three_numbers():
    assert len(timing.load()) == 3
