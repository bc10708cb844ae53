"""`make lab`'s working copy: copies what is missing, never writes over the user's copy, and says
when the tracked notebook has changed since."""

import pytest

from mlsys_workbench.labcopy import copy_notebooks, main


def test_copies_once_and_keeps_the_users_work(tmp_path, capsys):
    tracked, lab = tmp_path / "notebooks", tmp_path / "lab"
    tracked.mkdir()
    (tracked / "a.ipynb").write_text("original a")
    (tracked / "b.ipynb").write_text("original b")
    first = copy_notebooks(tracked, lab)
    assert first.copied == ["a.ipynb", "b.ipynb"]
    (lab / "a.ipynb").write_text("the student's outputs")
    (tracked / "b.ipynb").write_text("b, updated upstream")
    (tracked / "c.ipynb").write_text("a new lesson")
    assert main([str(tracked), str(lab)]) == 0
    assert (lab / "a.ipynb").read_text() == "the student's outputs"
    assert (lab / "b.ipynb").read_text() == "original b"          # kept: it is the user's copy
    assert (lab / "c.ipynb").read_text() == "a new lesson"
    assert (tracked / "a.ipynb").read_text() == "original a"       # the tracked file untouched
    said = capsys.readouterr().out
    assert "b.ipynb has changed" in said and "a.ipynb has changed" not in said


def test_refuses_to_copy_onto_the_tracked_folder(tmp_path):
    (tmp_path / "x.ipynb").write_text("x")
    with pytest.raises(ValueError, match="must not be the tracked folder"):
        copy_notebooks(tmp_path, tmp_path)
