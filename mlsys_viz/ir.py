"""IR side by side: the texts of a compiler's stages (ONNX IR, Kernel IR, LLVM IR, asm / PTX) in
scrolling panes; choosing one op (a select, or a click on any line that came from it) highlights
the lines it produced in every pane and scrolls each pane to them, in the browser.

Plain data in: `stages` {stage: text} (in pane order), `ranges` {node: {stage: [(first, last),
...]}} with 1-based inclusive line numbers, optionally `nodes` [{"name", "op"}] for the select's
labels (compilerkit.views.ir_view_data makes all three). Nothing here knows compilerkit.

Real listings are long (LeNet's asm is 63,000 lines, 61,000 of them weight data; its LLVM IR has
1 MB lines of constants), so `ir_panes` cuts lines beyond `max_chars` and folds runs of more
than `fold_over` lines that no node claims to their first and last few lines; ranges are
renumbered to the displayed rows. The HTML is one self-contained fragment (inline CSS and a few
lines of JS, no network): `IRSideBySide` shows it in JupyterLab through `_repr_html_` (scripts of
trusted outputs run) and `.save(path)` writes a standalone page that works from file://.
"""

from __future__ import annotations

import html
import json
import tempfile
import uuid
from pathlib import Path

PANE_TITLES = {"onnx-ir": "ONNX IR", "kernel-ir": "Kernel IR", "llvm-ir": "LLVM IR",
               "asm": "Assembly", "ptx": "PTX"}
KEEP = 8  # lines kept at each end of a folded run


def _fold(lines, claimed, fold_over, max_chars):
    """(displayed lines, original line number per displayed line or None for a fold marker)."""
    shown, numbers, n = [], [], len(lines)
    k = 0
    while k < n:
        if (k + 1) in claimed:
            end = k + 1
        else:
            end = k
            while end < n and (end + 1) not in claimed:
                end += 1
            if end - k > fold_over:
                for j in range(k, k + KEEP):
                    shown.append(lines[j])
                    numbers.append(j + 1)
                shown.append(f"… {end - k - 2 * KEEP} lines that no op produced, folded …")
                numbers.append(None)
                for j in range(end - KEEP, end):
                    shown.append(lines[j])
                    numbers.append(j + 1)
                k = end
                continue
        for j in range(k, end):
            text = lines[j]
            if len(text) > max_chars:
                text = text[:max_chars] + f" … ({len(lines[j]) - max_chars} more characters)"
            shown.append(text)
            numbers.append(j + 1)
        k = end
    return shown, numbers


def ir_panes(stages, ranges, nodes=None, fold_over: int = 400, max_chars: int = 240) -> dict:
    """The side-by-side view as data: {"stages": [stage], "titles": {stage: title},
    "panes": {stage: {"lines": [str], "numbers": [int | None]}}, "nodes": [{"name", "op",
    "label"}], "ranges": {node: {stage: [(first_row, last_row)]}}} where rows are 1-based
    positions in the displayed `lines` (after folding)."""
    stages = dict(stages)
    if not stages:
        raise ValueError("no stages to show")
    if nodes is None:
        nodes = [{"name": n} for n in ranges]
    nodes = [{"name": n["name"], "op": n.get("op", ""),
              "label": f"{n['name']}  ({n['op']})" if n.get("op") else n["name"]}
             for n in nodes]
    unknown = [n["name"] for n in nodes if n["name"] not in ranges]
    if unknown:
        raise ValueError(f"nodes without ranges: {unknown[:5]}")
    panes, shown_ranges = {}, {n["name"]: {} for n in nodes}
    for stage, text in stages.items():
        lines = text.splitlines()
        claimed = set()
        for node in ranges.values():
            for a, b in node.get(stage, []):
                if not 1 <= a <= b <= len(lines):
                    raise ValueError(f"{stage}: range {(a, b)} outside lines 1..{len(lines)}")
                claimed.update(range(a, b + 1))
        shown, numbers = _fold(lines, claimed, fold_over, max_chars)
        row_of = {num: row for row, num in enumerate(numbers, start=1) if num is not None}
        panes[stage] = {"lines": shown, "numbers": numbers}
        for n in nodes:
            rows = [(row_of[a], row_of[b]) for a, b in ranges[n["name"]].get(stage, [])]
            shown_ranges[n["name"]][stage] = rows
    return {"stages": list(stages), "titles": {s: PANE_TITLES.get(s, s) for s in stages},
            "panes": panes, "nodes": nodes, "ranges": shown_ranges}


CSS = """
#ROOT { font-family: system-ui, sans-serif; font-size: 16px; }
#ROOT .ck-bar { display: flex; gap: 8px; align-items: center; margin: 4px 0 6px; }
#ROOT .ck-bar select { font-size: 16px; max-width: 60%; }
#ROOT .ck-grid { display: grid; gap: 6px;
  grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); }
#ROOT .ck-pane { border: 1px solid #ccc; border-radius: 4px; min-width: 0; }
#ROOT .ck-title { background: #f3f3f3; padding: 3px 6px; font-weight: 600;
  border-bottom: 1px solid #ccc; display: flex; justify-content: space-between; }
#ROOT .ck-count { font-weight: 400; color: #555; }
#ROOT .ck-code { height: HEIGHTpx; overflow: auto; font: 14px/1.35 ui-monospace, monospace;
  white-space: pre; }
#ROOT .ck-line { padding: 0 6px 0 0; cursor: pointer; }
#ROOT .ck-line .ck-no { display: inline-block; width: 4.2em; color: #999; text-align: right;
  padding-right: 6px; user-select: none; }
#ROOT .ck-line.ck-own { box-shadow: inset 3px 0 0 #d0d7e2; }
#ROOT .ck-line.ck-fold { color: #888; font-style: italic; cursor: default; }
#ROOT .ck-line.ck-hl { background: #ffe7a8; box-shadow: inset 3px 0 0 #e08a00; }
"""

# Client side: the select and clicks on lines choose a node; its rows get `ck-hl` in every pane
# and each pane scrolls to its first highlighted row. Works the same in JupyterLab and from a
# file, since it only touches the fragment's own elements.
JS = """
(function () {
  const root = document.getElementById(ROOT_ID);
  const data = JSON.parse(root.querySelector('script.ck-data').textContent);
  const select = root.querySelector('select');
  const panes = {};
  root.querySelectorAll('.ck-pane').forEach(p => { panes[p.dataset.stage] = p; });
  const owner = {};  // stage -> row -> node index, for clicks on any pane
  data.nodes.forEach((node, i) => {
    for (const [stage, spans] of Object.entries(data.ranges[node] || {})) {
      owner[stage] = owner[stage] || {};
      for (const [a, b] of spans) for (let r = a; r <= b; r++) {
        if (!(r in owner[stage])) owner[stage][r] = i;
      }
    }
  });
  function show(i) {
    root.querySelectorAll('.ck-hl').forEach(el => el.classList.remove('ck-hl'));
    const node = data.nodes[i];
    root.dataset.selected = node === undefined ? '' : node;
    for (const [stage, pane] of Object.entries(panes)) {
      const rows = pane.querySelectorAll('.ck-line');
      const spans = (node === undefined ? [] : (data.ranges[node] || {})[stage]) || [];
      let first = null, count = 0;
      for (const [a, b] of spans) for (let r = a; r <= b; r++) {
        rows[r - 1].classList.add('ck-hl'); count++;
        if (first === null) first = rows[r - 1];
      }
      pane.querySelector('.ck-count').textContent = node === undefined ? '' :
        (count === 1 ? '1 line' : count ? count + ' lines' : 'no lines');
      const code = pane.querySelector('.ck-code');
      if (first) code.scrollTop = first.offsetTop - code.offsetTop - 20;
    }
  }
  select.addEventListener('change', () => show(parseInt(select.value, 10)));
  root.querySelectorAll('.ck-pane').forEach(p => p.addEventListener('click', ev => {
    const line = ev.target.closest('.ck-line');
    if (!line) return;
    const i = (owner[p.dataset.stage] || {})[parseInt(line.dataset.row, 10)];
    if (i === undefined) return;
    select.value = String(i);
    show(i);
  }));
  if (data.selected >= 0) { select.value = String(data.selected); show(data.selected); }
})();
"""


def _pane_html(stage, title, pane, owned):
    rows = []
    for row, (text, num) in enumerate(zip(pane["lines"], pane["numbers"], strict=True), start=1):
        if num is None:
            rows.append(f'<div class="ck-line ck-fold" data-row="{row}"><span class="ck-no">'
                        f'</span>{html.escape(text)}</div>')
            continue
        cls = "ck-line ck-own" if row in owned else "ck-line"
        rows.append(f'<div class="{cls}" data-row="{row}"><span class="ck-no">{num}</span>'
                    f'{html.escape(text)}</div>')
    return (f'<div class="ck-pane" data-stage="{html.escape(stage)}"><div class="ck-title">'
            f'<span>{html.escape(title)}</span><span class="ck-count"></span></div>'
            f'<div class="ck-code">{"".join(rows)}</div></div>')


class IRSideBySide:
    """The side-by-side view: `.html` (a fragment), `.data` (as `ir_panes`), `.save(path)`."""

    def __init__(self, data: dict, selected: str | None = None, height: int = 420):
        names = [n["name"] for n in data["nodes"]]
        if selected is not None and selected not in names:
            raise ValueError(f"no node {selected!r}; nodes: {names[:10]}")
        self.data = data
        self.selected = selected
        self.height = height
        self.html = self._render()

    def _render(self) -> str:
        d = self.data
        root = "ck-ir-" + uuid.uuid4().hex[:10]
        options = "".join(f'<option value="{i}">{html.escape(n["label"])}</option>'
                          for i, n in enumerate(d["nodes"]))
        panes = []
        for stage in d["stages"]:
            owned = {r for node in d["ranges"].values() for a, b in node.get(stage, [])
                     for r in range(a, b + 1)}
            panes.append(_pane_html(stage, d["titles"][stage], d["panes"][stage], owned))
        names = [n["name"] for n in d["nodes"]]
        payload = {"nodes": names, "ranges": d["ranges"],
                   "selected": names.index(self.selected) if self.selected else -1}
        # "</" inside the JSON would end the script element early.
        blob = json.dumps(payload).replace("</", "<\\/")
        css = CSS.replace("#ROOT", f"#{root}").replace("HEIGHT", str(self.height))
        js = JS.replace("ROOT_ID", json.dumps(root))
        return (f'<div id="{root}" class="ck-ir-view"><style>{css}</style>'
                f'<div class="ck-bar"><label>ONNX op:</label><select>'
                f'<option value="-1">(choose an op, or click a line)</option>{options}'
                f'</select><span style="color:#666">highlighted lines came from it in '
                f'every stage</span></div><div class="ck-grid">{"".join(panes)}</div>'
                f'<script type="application/json" class="ck-data">{blob}</script>'
                f'<script>{js}</script></div>')

    def _repr_html_(self) -> str:
        return self.html

    def save(self, path) -> Path:
        """A standalone HTML page (no network needed)."""
        path = Path(path)
        path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'>"
                        "<title>IR side by side</title></head><body>"
                        f"{self.html}</body></html>", encoding="utf-8")
        return path

    def save_png(self, path, width: int = 1400) -> Path:
        """A PNG of the view as a browser draws it (headless Chromium; see export.py)."""
        from .export import html_to_png

        path = Path(path)
        with tempfile.TemporaryDirectory() as tmp:
            page = self.save(Path(tmp) / "ir.html")
            return html_to_png(page, path, width=width, height=self.height + 80)


def ir_side_by_side(stages, ranges, nodes=None, selected: str | None = None,
                    height: int = 420, fold_over: int = 400,
                    max_chars: int = 240) -> IRSideBySide:
    """The linked panes as an `IRSideBySide` (display it, or `.save("ir.html")`)."""
    return IRSideBySide(ir_panes(stages, ranges, nodes, fold_over, max_chars), selected,
                        height)
