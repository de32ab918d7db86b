# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The demo's report as one self-contained HTML file: the per-domain summary, the stage timeline
(inlined as a data URI) and every trajectory, expandable turn by turn. No server, no network:
CSS and JS are inline and the rollouts travel as JSON inside the page; the JS renders them."""

from __future__ import annotations

import base64
import dataclasses
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nemo_gym_prorl.demo.trajectory_view import TrajectoryView, view_of

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d1d1f;background:#fafafa}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:4px 10px;text-align:right}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
img{max-width:100%;border:1px solid #ddd;background:#fff}
details.trajectory{background:#fff;border:1px solid #ddd;border-radius:6px;margin:6px 0;padding:4px 10px}
details.trajectory>summary{cursor:pointer;font-weight:600}
.facts{color:#2e7d32;font-size:12px;margin:4px 0}
.turn{border-left:3px solid #4c72b0;margin:8px 0;padding-left:10px}
.turn-head{font-weight:600;font-size:12px;color:#444}
.step{margin:4px 0}.step .label{font-size:11px;text-transform:uppercase;color:#666}
.step pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;padding:6px;border-radius:4px;background:#f5f5f5}
.tool_call pre{background:#fff4e0}.invalid_tool_call pre{background:#fde2e2}.observation pre{background:#eef3f8}
.user pre,.system pre{background:#eaf2ff}
button{margin:0 6px 8px 0}
"""

_JS = """
const data = JSON.parse(document.getElementById('trajectories').textContent);
const LABELS = {assistant:'model', tool_call:'tool call', invalid_tool_call:'malformed tool call',
  observation:'observation', system:'system', user:'user'};
function el(tag, cls, text){const e=document.createElement(tag); if(cls) e.className=cls;
  if(text!==undefined) e.textContent=text; return e;}
function stepNode(step){
  const box = el('div', 'step ' + step.kind);
  box.appendChild(el('div', 'label', LABELS[step.kind] + (step.name ? ' ' + step.name : '')));
  box.appendChild(el('pre', null, step.text || '(empty)'));
  return box;
}
function render(view){
  const d = el('details', 'trajectory'); d.id = 'trajectory-' + view.index;
  d.appendChild(el('summary', null, view.title));
  const facts = Object.entries(view.facts).filter(([k,v]) => v !== null && v !== '' && k !== 'task')
    .map(([k,v]) => k + '=' + (typeof v === 'object' ? JSON.stringify(v) : v)).join(', ');
  d.appendChild(el('div', 'facts', facts));
  view.prompt.forEach(s => d.appendChild(stepNode(s)));
  view.turns.forEach(t => {
    const turn = el('div', 'turn'); turn.dataset.turn = t.number;
    turn.appendChild(el('div', 'turn-head', 'turn ' + t.number + ': ' + t.prompt_tokens +
      ' prompt tokens, ' + t.generated_tokens + ' generated'));
    t.steps.forEach(s => turn.appendChild(stepNode(s)));
    d.appendChild(turn);
  });
  return d;
}
const list = document.getElementById('trajectory-list');
data.forEach(v => list.appendChild(render(v)));
document.getElementById('expand').onclick = () => list.querySelectorAll('details').forEach(d => d.open = true);
document.getElementById('collapse').onclick = () => list.querySelectorAll('details').forEach(d => d.open = false);
document.body.dataset.rendered = String(data.length);
"""


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_cell(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value) or "-"
    return "-" if value is None else str(value)


def _as_mapping(row: Any) -> Mapping[str, Any]:
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
    if isinstance(row, Mapping):
        return row
    raise TypeError(f"a summary row must be a mapping or a dataclass, not {type(row).__name__}")


def table_html(rows: Sequence[Any]) -> str:
    """Any rows (mappings or dataclass instances) as a table; columns in first-seen order."""
    mappings = [_as_mapping(r) for r in rows]
    columns: list[str] = list(dict.fromkeys(k for m in mappings for k in m))
    if not columns:
        return "<p>(no rows)</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(m.get(c)))}</td>" for c in columns) + "</tr>"
        for m in mappings
    )
    return f'<table id="summary"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _view_json(view: TrajectoryView) -> dict[str, Any]:
    return dataclasses.asdict(view) | {"title": view.title}


def _script_json(value: Any) -> str:
    # Inside <script>, "</script>" or "<!--" in a model's output must not end the element.
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")


def write_html_report(
    path: Path,
    *,
    title: str,
    rows: Sequence[Any],
    records: Sequence[Mapping[str, Any]],
    timeline_png: Path | None = None,
    notes: Sequence[str] = (),
) -> Path:
    """Write the report; `records` are rollout records (Gym `/run` results)."""
    views = [_view_json(view_of(r, i)) for i, r in enumerate(records, 1)]
    timeline = ""
    if timeline_png is not None and timeline_png.exists():
        data = base64.b64encode(timeline_png.read_bytes()).decode()
        timeline = (
            f'<h2>Timeline</h2><img id="timeline" alt="stage timeline" src="data:image/png;base64,{data}">'
        )
    notes_html = "".join(f"<p>{html.escape(n)}</p>" for n in notes)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<style>{_CSS}</style></head>
<body><h1>{html.escape(title)}</h1>{notes_html}
<h2>Per domain</h2>{table_html(rows)}
{timeline}
<h2>Trajectories ({len(views)})</h2>
<button id="expand">expand all</button><button id="collapse">collapse all</button>
<div id="trajectory-list"></div>
<script type="application/json" id="trajectories">{_script_json(views)}</script>
<script>{_JS}</script>
</body></html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
