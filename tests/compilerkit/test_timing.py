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


def test_samples_keep_every_timed_call_round_by_round(monkeypatch):
    call = _fake_clock(monkeypatch, {"a": [9.0, 3.0, 1.0], "b": [9.0, 5.0, 6.0]})
    assert timing.samples({"a": call("a", []), "b": call("b", [])}, 2, "wall") == \
        {"a": [3.0, 1.0], "b": [5.0, 6.0]}
    one = _fake_clock(monkeypatch, {"f": [2.0, 4.0]})
    assert timing.samples(one("f", []), 2, "wall", warmup=False) == [2.0, 4.0]


def test_several_clocks_read_around_the_same_calls(monkeypatch):
    # wall advances by the call's time, thread CPU by half of it: the two columns are kept
    # apart and each one's best is taken on its own.
    now = {"wall": 0.0, "thread": 0.0}
    monkeypatch.setitem(timing.CLOCKS, "wall", lambda: now["wall"])
    monkeypatch.setitem(timing.CLOCKS, "thread", lambda: now["thread"])
    steps = iter([(4.0, 1.0), (2.0, 3.0), (3.0, 0.5)])

    def f():
        w, c = next(steps)
        now["wall"] += w
        now["thread"] += c
    got = timing.samples(f, 3, ("wall", "thread"), warmup=False)
    assert got == [(4.0, 1.0), (2.0, 3.0), (3.0, 0.5)]
    steps = iter([(4.0, 1.0), (2.0, 3.0), (3.0, 0.5)])
    assert timing.best_of(f, 3, ("wall", "thread"), warmup=False) == (2.0, 0.5)


def test_counts_per_contender_and_the_call_before_each(monkeypatch):
    calls = []
    call = _fake_clock(monkeypatch, {"a": [1.0] * 4, "slow": [1.0] * 4})
    got = timing.samples({"a": call("a", calls), "slow": call("slow", calls)},
                         {"a": 3, "slow": 1}, "wall", warmup=False,
                         before=lambda: calls.append("-"))
    assert {k: len(v) for k, v in got.items()} == {"a": 3, "slow": 1}
    # the slow one runs in the first round only; every timed call follows its `before`
    assert calls == ["-", "a", "-", "slow", "-", "a", "-", "a"]
    with pytest.raises(ValueError, match=r"repeat gives no count for \['slow'\]"):
        timing.samples({"a": lambda: None, "slow": lambda: None}, {"a": 2}, "wall")
    with pytest.raises(ValueError, match=r"repeat\['a'\] must be at least 1"):
        timing.samples({"a": lambda: None}, {"a": 0}, "wall")


def test_a_budget_stops_after_the_round_that_passes_it_three_rounds_at_least(monkeypatch):
    call = _fake_clock(monkeypatch, {"f": [10.0] * 20})
    assert len(timing.samples(call("f", []), 20, "wall", warmup=False, budget_s=5)) == 3
    call = _fake_clock(monkeypatch, {"f": [10.0] * 20})
    assert len(timing.samples(call("f", []), 20, "wall", warmup=False, budget_s=45)) == 5
    call = _fake_clock(monkeypatch, {"f": [10.0] * 20})
    assert len(timing.samples(call("f", []), 2, "wall", warmup=False, budget_s=5)) == 2


def test_no_clock_is_named():
    with pytest.raises(ValueError, match="names no clock"):
        timing.samples(lambda: None, 1, ())
    with pytest.raises(ValueError, match="clock must be one of"):
        timing.best_of(lambda: None, 1, ("wall", "gpu"))


def test_steady_times_each_call_right_after_an_untimed_one_of_its_own(monkeypatch):
    # first call of each pair: the untimed one (slow: it starts from the other's state)
    steps = {"a": [9.0, 8.0, 1.0, 8.0, 2.0], "b": [9.0, 7.0, 3.0, 7.0, 4.0]}
    calls = []
    call = _fake_clock(monkeypatch, steps)
    got = timing.samples({"a": call("a", calls), "b": call("b", calls)}, 2, "wall", steady=True)
    assert got == {"a": [1.0, 2.0], "b": [3.0, 4.0]}
    assert calls == ["a", "b"] + ["a", "a", "b", "b"] * 2


def test_parallel_ceiling_names_bad_arguments():
    for bad in (0, -1.0, float("nan"), float("inf"), "1"):
        with pytest.raises(ValueError, match="seconds must be a positive number"):
            timing.parallel_ceiling(seconds=bad)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="repeat must be a whole number"):
            timing.parallel_ceiling(repeat=bad)
