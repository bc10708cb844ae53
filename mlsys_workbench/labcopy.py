"""`make lab`'s working copy: JupyterLab opens copies of the notebooks, never the tracked files.

JupyterLab saves outputs into the notebook it has open (every two minutes, and on close), and the
repository keeps its notebooks without outputs. So `make lab` serves ``lab/`` (ignored by git):
each notebook of ``notebooks/`` is copied there once, when the copy is missing. A copy that
exists is the user's work and is never written over; when the tracked notebook has changed
since it was copied, one line says so and how to get the new one.

    python -m mlsys_workbench.labcopy notebooks lab
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

ORIGINS = ".origins.json"   # in the copy folder: notebook -> sha256 of the tracked file copied


@dataclass
class CopyReport:
    copied: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    changed_upstream: list[str] = field(default_factory=list)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def copy_notebooks(source: str | Path, dest: str | Path) -> CopyReport:
    """Copy each ``*.ipynb`` of `source` into `dest` unless `dest` holds one of that name."""
    source, dest = Path(source), Path(dest)
    if not source.is_dir():
        raise FileNotFoundError(f"no notebooks folder {source}")
    if dest.resolve() == source.resolve():
        raise ValueError(f"the working copy {dest} must not be the tracked folder {source}")
    dest.mkdir(parents=True, exist_ok=True)
    origins_path = dest / ORIGINS
    origins = json.loads(origins_path.read_text()) if origins_path.is_file() else {}
    report = CopyReport()
    for tracked in sorted(source.glob("*.ipynb")):
        copy = dest / tracked.name
        sha = _sha(tracked)
        if copy.exists():
            report.kept.append(tracked.name)
            if origins.get(tracked.name, sha) != sha:
                report.changed_upstream.append(tracked.name)
            continue
        shutil.copyfile(tracked, copy)
        origins[tracked.name] = sha
        report.copied.append(tracked.name)
    origins_path.write_text(json.dumps(origins, indent=1, sort_keys=True) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m mlsys_workbench.labcopy NOTEBOOKS_DIR COPY_DIR", file=sys.stderr)
        return 2
    report = copy_notebooks(*args)
    if report.copied:
        print(f"{len(report.copied)} notebooks copied into {args[1]}/ (JupyterLab works on "
              f"these copies; {args[0]}/ stays as committed)")
    for name in report.changed_upstream:
        print(f"{args[0]}/{name} has changed since {args[1]}/{name} was copied; your copy is "
              f"kept: rename or delete it to get the new one")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
