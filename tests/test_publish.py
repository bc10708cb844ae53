"""`make report`: a full `make figures` run published as docs/REPORT.md with small pictures."""

import json

import numpy as np
import pytest
from PIL import Image

from mlsys_workbench.figures import TOPICS
from mlsys_workbench.publish import IMAGE_BYTES, PublishError, main, publish


def fake_run(folder, smoke=False, failed=None, extra_png=True):
    """A manifest with the first two topics' figures and one figure no topic names."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    figures = {}
    for _, notebook, name in [t for t in TOPICS if t[2]][:2] + [(None, "99_x.ipynb", "extra")]:
        # noise: a picture that does not compress, so the shrinking has work to do
        pixels = rng.integers(0, 255, (900, 1600, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{name}.png")
        figures[name] = {"claim": "paper says 2x", "value": {"ratio": 1.5}, "timings": {},
                         "notebook": notebook, "files": [f"{name}.html", f"{name}.png"]}
    manifest = {"figures": figures, "smoke": smoke, "failed": failed or {},
                "notebook_seconds": {"04_tflms_batch_size.ipynb": 960.0}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return [n for n in figures if n != "extra"]


def test_publish_writes_the_report_and_small_pictures(tmp_path):
    names = fake_run(tmp_path / "run")
    docs = tmp_path / "docs"
    report = publish(tmp_path / "run", docs).read_text()
    for name in names:
        picture = docs / "img" / "report" / f"{name}.png"
        assert picture.stat().st_size < IMAGE_BYTES
        assert f"](img/report/{name}.png)" in report   # linked and shown
    assert not (docs / "img" / "report" / "extra.png").exists()  # no topic names it
    assert ".html)" not in report                    # the HTML files are not published
    assert "## The pictures" in report and "| `04_tflms_batch_size.ipynb` | 16.0 |" in report


def test_a_second_run_removes_only_the_pictures_it_published(tmp_path):
    fake_run(tmp_path / "run")
    docs = tmp_path / "docs"
    publish(tmp_path / "run", docs)
    mine = docs / "img" / "report" / "by_hand.png"
    mine.write_bytes(b"not ours")
    outside = docs / "keep.png"
    outside.write_bytes(b"outside")
    ledger = docs / "img" / "report" / "published.json"
    ledger.write_text(json.dumps(json.loads(ledger.read_text()) + ["../../keep.png"]))
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    dropped = sorted(n for n in manifest["figures"] if n != "extra")[0]
    del manifest["figures"][dropped]
    (tmp_path / "run" / "manifest.json").write_text(json.dumps(manifest))
    publish(tmp_path / "run", docs)
    assert not (docs / "img" / "report" / f"{dropped}.png").exists()
    assert mine.read_bytes() == b"not ours"
    assert outside.read_bytes() == b"outside"   # an edited ledger never reaches outside


@pytest.mark.parametrize("kind, match", [("smoke", "SMOKE=1"), ("failed", "04_x.ipynb"),
                                         ("missing", "no manifest")])
def test_a_run_that_cannot_be_published_is_refused(tmp_path, capsys, kind, match):
    if kind != "missing":
        fake_run(tmp_path / "run", smoke=kind == "smoke",
                 failed={"04_x.ipynb": "boom"} if kind == "failed" else None)
    with pytest.raises(PublishError, match=match):
        publish(tmp_path / "run", tmp_path / "docs")
    assert not (tmp_path / "docs" / "REPORT.md").exists()
    assert main([str(tmp_path / "run"), str(tmp_path / "docs")]) == 1
    assert match in capsys.readouterr().err
