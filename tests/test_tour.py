"""The tour is the map of the curriculum: every notebook is in it, in the README's table, and in
the tour notebook's own text, and each lesson's prerequisites are lessons."""

import json
from pathlib import Path

from mlsys_workbench import tour

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb") if p.stem != "00_tour")


def test_every_notebook_is_in_the_curriculum():
    listed = [lesson.notebook for lesson in tour.CURRICULUM]
    assert len(listed) == len(set(listed)), "a notebook is listed twice"
    assert sorted(listed) == NOTEBOOKS, (
        f"missing from tour.CURRICULUM: {sorted(set(NOTEBOOKS) - set(listed))}; "
        f"listed but not in notebooks/: {sorted(set(listed) - set(NOTEBOOKS))}")


def test_lessons_name_known_tracks_and_prerequisites():
    names = {lesson.notebook for lesson in tour.CURRICULUM}
    for lesson in tour.CURRICULUM:
        assert lesson.track in tour.TRACKS, lesson
        assert set(lesson.assumes) <= names, lesson
        assert lesson.notebook not in lesson.assumes, lesson


def test_tour_notebook_shows_the_curriculum():
    cells = json.loads((REPO / "notebooks" / "00_tour.ipynb").read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert tour.curriculum_markdown() in text, (
        "notebooks/00_tour.ipynb's curriculum cell is out of date: paste "
        "mlsys_workbench.tour.curriculum_markdown() into it")


def test_readme_lists_every_notebook():
    readme = (REPO / "README.md").read_text()
    missing = [nb for nb in NOTEBOOKS if f"`{nb}`" not in readme]
    assert not missing, f"README's notebook table lacks {missing}"


def test_every_lesson_says_how_long_it_takes():
    untimed = [lesson.notebook for lesson in tour.CURRICULUM
               if lesson.full_min is None or lesson.smoke_min is None]
    assert not untimed, (
        f"no full-size or SMOKE=1 time for {untimed}: run the notebook once at each size on "
        f"{tour.TIMED_ON} (`python -m mlsys_workbench.figures --only NN` keeps per-cell times "
        "in the executed copy) and give its Lesson full_min and smoke_min")
    for lesson in tour.CURRICULUM:
        assert 0 < lesson.smoke_min <= lesson.full_min, lesson


def test_readme_rows_carry_the_tour_times():
    """The README's notebook table states the same times as the tour (one source: tour.py)."""
    rows = {line.split("|")[1].strip().strip("`"): line
            for line in (REPO / "README.md").read_text().splitlines()
            if line.startswith("| `")}
    wrong = [f"{lesson.notebook}: README says {rows.get(lesson.notebook)!r}, the tour "
             f"{lesson.time()!r}" for lesson in tour.CURRICULUM
             if f"| {lesson.time()} |" not in rows.get(lesson.notebook, "")]
    assert not wrong, "\n".join(wrong)


def test_time_format():
    lesson = tour.Lesson("x", "memory", "y", full_min=16.4, smoke_min=0.7)
    assert lesson.time() == "16 min / 40 s"
    assert tour.Lesson("x", "memory", "y", full_min=2.5, smoke_min=1).time() == "2.5 min / 60 s"
    assert tour.Lesson("x", "memory", "y").time() == "? / ?"
