"""Publish a full ``make figures`` run into the documentation: ``docs/REPORT.md`` and its pictures.

``make figures`` writes into an ignored folder (``figures/`` by default), so a reader of the
repository or of the site would otherwise have to rerun hours of notebooks to see one table.
``publish(figures_dir, docs_dir)`` (``make report``) writes

- ``docs_dir/REPORT.md``: the run's report (``figures.report_markdown``), each figure linked to
  its picture, and after the side-by-side table one picture per topic;
- ``docs_dir/img/report/NAME.png``: those pictures, shrunk (palette colours, at most
  ``MAX_WIDTH`` pixels wide) to stay under ``IMAGE_BYTES`` each, since they are committed.

It refuses a smoke run (its sizes are not the papers') and a run where a notebook failed (the
report would be partial). Pictures it published before and that this run lacks are removed;
the folder's ``published.json`` lists what it wrote, and nothing else there is touched.

    python -m mlsys_workbench.publish figures docs
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

from PIL import Image

from .figures import TOPICS, read_manifest, report_markdown, topic_figures

IMAGES = Path("img") / "report"   # under docs_dir
LEDGER = "published.json"
IMAGE_BYTES = 180_000             # tests/test_figures.py keeps committed pictures under 200 KB
MAX_WIDTH = 1100


class PublishError(ValueError):
    """The run cannot be published (a smoke run, a failed notebook, no manifest)."""


def small_png(source: Path) -> bytes:
    """``source`` as a palette PNG under IMAGE_BYTES (narrowed step by step if it must be)."""
    image = Image.open(source).convert("RGB")
    width = min(image.width, MAX_WIDTH)
    while True:
        height = round(image.height * width / image.width)
        shrunk = image.resize((width, height), Image.LANCZOS) if width != image.width else image
        buffer = io.BytesIO()
        # 128 colours keep plotly's flat fills and text edges; dithering would only add bytes.
        shrunk.quantize(colors=128, dither=Image.Dither.NONE).save(buffer, "PNG", optimize=True)
        if buffer.tell() < IMAGE_BYTES or width <= 400:
            return buffer.getvalue()
        width = int(width * 0.85)


def _check_run(manifest: dict, figures_dir: Path) -> None:
    if not manifest.get("figures"):
        raise PublishError(f"{figures_dir}: no figures in its manifest.json (run make figures)")
    if manifest.get("smoke", True):
        raise PublishError(f"{figures_dir}: a SMOKE=1 run (small sizes, not the papers' "
                           "settings); publish a full `make figures` run")
    if manifest.get("failed"):
        raise PublishError(f"{figures_dir}: notebooks failed in this run: "
                           f"{', '.join(sorted(manifest['failed']))}; rerun them "
                           "(make figures ONLY=...) before publishing")


def _remove_stale(folder: Path, keep: set[str]) -> None:
    ledger = folder / LEDGER
    if ledger.is_file():
        for name in json.loads(ledger.read_text()):
            # only a plain picture name of this folder: an edited ledger never reaches outside it
            if name not in keep and name == Path(name).name and name.endswith(".png"):
                (folder / name).unlink(missing_ok=True)


def publish(figures_dir: str | Path, docs_dir: str | Path) -> Path:
    """Write docs_dir/REPORT.md and its pictures from the run in ``figures_dir``; return the
    report's path."""
    figures_dir, docs_dir = Path(figures_dir), Path(docs_dir)
    if not (figures_dir / "manifest.json").is_file():
        raise PublishError(f"{figures_dir}: no manifest.json (run make figures first)")
    manifest = read_manifest(figures_dir)
    _check_run(manifest, figures_dir)
    folder = docs_dir / IMAGES
    folder.mkdir(parents=True, exist_ok=True)
    pictures: dict[str, str] = {}   # figure name -> its picture, relative to docs_dir
    for _topic, notebook, figure in TOPICS:
        for name in topic_figures(manifest, notebook, figure):
            if f"{name}.png" in manifest["figures"][name].get("files", []):
                pictures[name] = (IMAGES / f"{name}.png").as_posix()
    _remove_stale(folder, {f"{name}.png" for name in pictures})
    for name in pictures:
        (folder / f"{name}.png").write_bytes(small_png(figures_dir / f"{name}.png"))
    (folder / LEDGER).write_text(json.dumps(sorted(f"{n}.png" for n in pictures), indent=1))

    def link(file: str) -> str | None:   # only the published pictures exist beside the docs
        return pictures.get(file.removesuffix(".png")) if file.endswith(".png") else None

    text = report_markdown(manifest, link)
    shown = [f"### {topic}\n\n![{topic}]({pictures[name]})\n"
             for topic, notebook, figure in TOPICS
             for name in topic_figures(manifest, notebook, figure) if name in pictures]
    head, sep, rest = text.partition("\n## Every figure")
    text = head + "\n## The pictures\n\n" + "\n".join(shown) + sep + rest
    report = docs_dir / "REPORT.md"
    report.write_text(text)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlsys_workbench.publish",
                                     description="Publish a full make figures run into docs/.")
    parser.add_argument("figures", help="the run's folder (make figures' FIGURES_DIR)")
    parser.add_argument("docs", nargs="?", default="docs", help="the docs folder (default docs)")
    args = parser.parse_args(argv)
    try:
        report = publish(args.figures, args.docs)
    except (PublishError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {report} and its pictures in {Path(args.docs) / IMAGES}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
