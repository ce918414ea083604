"""A Comparison as a document: one list of sections (text, tables, a figure each), written as
Markdown (figures as PNG files beside it), as one self-contained HTML page (figures inlined as
data: URIs, no script, no outside resource) or as JSON (the numbers only). Beside the Markdown
and HTML goes the viewer's view.html (reports/view), which their per-session tables link into."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

from harness.runs.results import write_json_atomic
from reports import _clusters, _dates, view
from reports._compare import Comparison
from reports._figures import FIGURES
from reports._load import STATUSES
from reports._section import Section, cell_ci, fmt
from reports._sessions import VIEW, Link, Links, links_of

FORMATS = ("md", "html", "json")


def sections(c: Comparison, links: Links | None = None) -> list[Section]:
    """Every section of a comparison; ``links``: its episodes' ids in the view.html beside it."""
    # pandas: loaded when a report or gate is made, not by `etai --help`
    from reports._sessions import session_sections

    if c.kind != "sessions":
        # pandas: loaded when a report or gate is made, not by `etai --help`
        from reports._suites import task_sections

        return task_sections(c) + session_sections(c, links)
    runs = Section(
        "runs",
        "Runs",
        tables=[
            (
                [
                    "run",
                    "suite",
                    "k",
                    "max steps",
                    "samples",
                    "training step",
                    "complete",
                    "folder",
                ],
                [
                    [
                        r["label"],
                        r["suite"],
                        str(r["k"]),
                        fmt(r["max_steps"]),
                        str(r["samples"]),
                        fmt(r["step"]),
                        "yes"
                        if r["complete"]
                        else "NO" + ("" if r["has_summary"] else " (no summary.json)"),
                        r["path"],
                    ]
                    for r in c.runs
                ],
            )
        ],
    )
    runs.text.append(f"{len(c.sessions)} session(s) compared: those every arm has.")
    if c.dropped:
        runs.text.append(f"{len(c.dropped)} session(s) dropped because an arm has no row for them:")
        runs.tables.append(
            (["session", "missing in"], [[s, ", ".join(a)] for s, a in c.dropped.items()])
        )
    runs.text += c.notes

    ks = range(1, c.k + 1)
    agents = Section(
        "agents",
        "Per-agent results",
        text=[
            (
                "Point estimates with 95% intervals: Wilson for rates over valid episodes; a percentile bootstrap "
                "over sessions for means and the median. reference_broken and infra_error rows are in no denominator."
            ),
            (
                "Special-cased rate: valid episodes green on the session's visible verification tests and red "
                "on a held-out case that is a near twin of a passing visible one (it calls only project "
                "functions that passing visible cases call: same code, other inputs): code fitted to the "
                "tests it was shown. Incomplete rate: green on the visible tests and red on held-out cases "
                "none of which is a near twin: a fix that stops short (docs/metrics.md)."
            ),
        ],
    )
    agents.tables.append(
        (
            [
                "arm",
                "sessions",
                "valid",
                *(f"PA@{j}" for j in ks),
                "pass@1",
                "tamper rate",
                "special-cased rate",
                "incomplete rate",
                "steps→green (mean)",
                "path match",
                "cursor px (median)",
                "invalid",
                "infra",
                "broken",
            ],
            [
                [
                    a,
                    str(m["n_sessions"]),
                    str(m["n_valid"]),
                    *(
                        cell_ci(m["path_accuracy"][j]) if j in m["path_accuracy"] else "–"
                        for j in ks
                    ),
                    cell_ci(m["pass@1"]),
                    cell_ci(m["tamper_rate"]),
                    cell_ci(m["special_case_rate"]),
                    cell_ci(m["incomplete_rate"]),
                    cell_ci(m["steps_to_green"], 2),
                    cell_ci(m["path_match"]),
                    cell_ci(m["cursor_px"], 1),
                    str(m["invalid_actions"]),
                    str(m["status_counts"]["infra_error"]),
                    str(m["status_counts"]["reference_broken"]),
                ]
                for a, m in c.metrics.items()
            ],
        )
    )

    curve = Section(
        "pa-curve",
        "Path Accuracy@1..k",
        figure="pa-curve",
        text=[
            "Share of valid episodes green within k tool calls, for every k up to the run's budget."
        ],
    )
    curve.tables.append(
        (
            ["arm", *(f"PA@{j}" for j in ks)],
            [
                [
                    a,
                    *(
                        fmt(m["path_accuracy"][j]["value"]) if j in m["path_accuracy"] else "–"
                        for j in ks
                    ),
                ]
                for a, m in c.metrics.items()
            ],
        )
    )

    intents = Section(
        "intents",
        "Per-intent breakdown",
        figure="intents",
        tables=[
            (
                ["arm", "intent", "episodes", "passed", "pass@1 [95% Wilson]"],
                [
                    [
                        r.arm,
                        str(r.intent),
                        str(r.n),
                        str(r.passed),
                        f"{fmt(r.pass_rate)} [{fmt(r.lo)}, {fmt(r.hi)}]",
                    ]
                    for r in c.intents.itertuples()
                ],
            )
        ],
    )

    status = Section(
        "statuses",
        "Status breakdown",
        figure="statuses",
        text=[
            (
                "Every episode by status. tampered is never a pass; infra_error rows are retried by a rerun; "
                "skipped_budget episodes never ran (a time-boxed evaluation ran out first; in no denominator); "
                "reference_broken sessions are ones whose own reference does not reach green."
            )
        ],
    )
    status.tables.append(
        (
            ["arm", *STATUSES],
            [
                [a, *(str(int(n)) for n in row)]
                for a, row in zip(c.statuses.index, c.statuses.to_numpy())
            ],
        )
    )

    cur = Section(
        "cursor",
        "Cursor-error distribution",
        figure="cursor",
        text=[
            (
                "Pixel distance between the agent's edit location and the human's, through the session's viewport, "
                "for episodes that placed a cursor in the right file."
            )
        ],
    )
    cur.tables.append(
        (
            [
                "arm",
                "median px [95% bootstrap]",
                "episodes with a cursor in the right file",
                "wrong-file rate [95% Wilson]",
            ],
            [
                [
                    a,
                    cell_ci(m["cursor_px"], 1),
                    str(m["cursor_px"]["n"]),
                    cell_ci(m["wrong_file_rate"]),
                ]
                for a, m in c.metrics.items()
            ],
        )
    )

    steps = Section(
        "steps-to-green",
        "Steps to green",
        figure="steps-to-green",
        tables=[
            (
                ["arm", *(str(col) for col in c.steps_to_green.columns)],
                [
                    [a, *(str(int(n)) for n in row)]
                    for a, row in zip(c.steps_to_green.index, c.steps_to_green.to_numpy())
                ],
            )
        ],
    )

    pairs = Section(
        "pairwise",
        "Pairwise comparison (paired tests)",
        figure="pairwise",
        text=[
            (
                "On the sessions both arms have valid rows for. Pass: exact McNemar on the discordant sessions "
                "(an exact sign test on per-session pass rates when there are several samples), two-sided. "
                "PA@k: paired bootstrap over sessions (10,000 resamples, fixed seed) of the mean difference A − B."
            )
        ],
    )
    pairs.tables.append(
        (
            [
                "A",
                "B",
                "sessions",
                "A only passed",
                "B only passed",
                "test",
                "p",
                "PA@k",
                "A − B [95% CI]",
                "bootstrap p",
            ],
            [
                [
                    p.a,
                    p.b,
                    str(p.n),
                    str(p.a_only),
                    str(p.b_only),
                    p.test,
                    f"{p.mcnemar_p:.4g}",
                    str(p.pa_j),
                    "–"
                    if p.pa_diff is None
                    else f"{p.pa_diff:+.3f} [{p.pa_lo:+.3f}, {p.pa_hi:+.3f}]",
                    fmt(p.pa_p, 4),
                ]
                for p in c.pairs
            ],
        )
    )
    if not c.pairs:
        pairs.text.append("Only one arm: nothing to pair.")

    train = Section("training", "Metrics vs training step", figure="training")
    if c.training.empty:
        train.text.append("No training folders (harness-eval/ba<N>/) among the inputs.")
    else:
        cols = list(c.training.columns)
        train.tables.append(
            (cols, [[fmt(v) for v in row] for row in c.training.itertuples(index=False)])
        )
    clusters = _clusters.section(c.arms, c.clustered)
    dates = _dates.section(c.rows, c.arms, min(3, c.k))
    return [
        runs, agents, clusters, curve, intents, dates, status, cur, steps, pairs, train,
    ] + session_sections(c, links)  # fmt: skip


def _md_cell(cell: str | Link) -> str:
    if isinstance(cell, Link):
        text = cell.text.replace("[", "\\[").replace("]", "\\]")
        return f"[{text}]({cell.href})".replace("|", "\\|")
    return cell.replace("|", "\\|")


def _html_cell(cell: str | Link) -> str:
    if isinstance(cell, Link):
        return f'<a href="{html.escape(cell.href)}">{html.escape(cell.text)}</a>'
    return html.escape(cell)


def _md_table(heads: list[str], rows: list[list[str | Link]]) -> list[str]:
    esc = [[_md_cell(cell) for cell in r] for r in [heads, *rows]]
    return [
        "| " + " | ".join(esc[0]) + " |",
        "|" + "---|" * len(heads),
        *("| " + " | ".join(r) + " |" for r in esc[1:]),
    ]


def to_markdown(secs: list[Section], figure_paths: dict[str, str]) -> str:
    out = ["# ETAI report", ""]
    for s in secs:
        out += [f"## {s.title}", ""]
        for t in s.text:
            out += [t, ""]
        if s.figure:
            out += [f"![{s.title}]({figure_paths[s.figure]})", ""]
        for heads, rows in s.tables:
            out += [*_md_table(heads, rows), ""]
    return "\n".join(out)


_CSS = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.85rem}th,td{border:1px solid #ccc;padding:.25rem .5rem;
text-align:left}th{background:#f3f3f3}figure{margin:1rem 0}img{max-width:100%;height:auto}nav a{margin-right:1rem}
section{margin-bottom:2rem}"""


def to_html(secs: list[Section], figures: dict[str, bytes]) -> str:
    e = html.escape
    nav = " ".join(f'<a href="#{s.id}">{e(s.title)}</a>' for s in secs)
    body = []
    for s in secs:
        part = [f'<section id="{s.id}"><h2>{e(s.title)}</h2>']
        part += [f"<p>{e(t)}</p>" for t in s.text]
        if s.figure:
            data = base64.b64encode(figures[s.figure]).decode()
            part.append(
                f'<figure><img id="fig-{s.figure}" alt="{e(s.title)}" src="data:image/png;base64,{data}"></figure>'
            )
        for heads, rows in s.tables:
            part.append(
                "<table><thead><tr>"
                + "".join(f"<th>{e(h)}</th>" for h in heads)
                + "</tr></thead><tbody>"
                + "".join(
                    "<tr>" + "".join(f"<td>{_html_cell(c)}</td>" for c in r) + "</tr>" for r in rows
                )
                + "</tbody></table>"
            )
        body.append("\n".join(part) + "</section>")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>ETAI report</title>'
        f"<style>{_CSS}</style></head><body><h1>ETAI report</h1><nav>{nav}</nav>\n"
        + "\n".join(body)
        + "</body></html>\n"
    )


def to_json(c: Comparison | list[Comparison]) -> dict[str, Any]:
    if isinstance(c, list):  # by suite: each suite's numbers, in order, and what pools them
        pooled, suites = _clusters.pooled(c)
        return {
            "suites": [{"suite": x.suite, "kind": x.kind, **to_json(x)} for x in c],
            "pooled": {"suites": suites, "arms": pooled},
        }

    def clean(x: Any) -> Any:
        if isinstance(x, float) and math.isnan(x):
            return None
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x.item() if hasattr(x, "item") else x

    # arms as a list, so that their order survives the file's sorted keys
    return clean(
        {
            "runs": c.runs,
            "sessions": c.sessions,
            "dropped": c.dropped,
            "notes": c.notes,
            "k": c.k,
            "arms": [{"arm": a, **c.metrics[a]} for a in c.arms],
            "pairs": [p.to_dict() for p in c.pairs],
            "clustered": c.clustered,
            "intents": c.intents.to_dict(orient="records"),
            "statuses": {
                a: dict(zip(c.statuses.columns, map(int, row)))
                for a, row in zip(c.statuses.index, c.statuses.to_numpy())
            },
            "steps_to_green": {
                a: dict(zip(map(str, c.steps_to_green.columns), map(int, row)))
                for a, row in zip(c.steps_to_green.index, c.steps_to_green.to_numpy())
            },
            "training": c.training.astype(object).to_dict(orient="records"),
        }
    )


def document(
    c: Comparison | list[Comparison], draw: bool, links: Links | None = None
) -> tuple[list[Section], dict[str, bytes]]:
    """The sections and figures of one comparison, or of several suites (``--by suite``): the
    model × suite matrix first, then each suite's sections, their ids prefixed with its name."""
    if not isinstance(c, list):
        secs = sections(c, links)
        used = {s.figure for s in secs if s.figure}
        return secs, {f: d(c) for f, _, d in FIGURES if f in used} if draw else {}
    # pandas: loaded when a report or gate is made, not by `etai --help`
    from reports._suites import matrix, slug

    secs, figures = [matrix(c)], {}
    both = _clusters.pooled_section(c)
    secs += [both] if both else []
    for x in c:
        own, drawn = document(x, draw, links)
        p = slug(x.suite)
        for s in own:
            s.id, s.title = f"{p}-{s.id}", f"{x.suite}: {s.title}"
            s.figure = f"{p}-{s.figure}" if s.figure else None
        secs += own
        figures.update({f"{p}-{f}": png for f, png in drawn.items()})
    return secs, figures


def write(
    c: Comparison | list[Comparison], out: str | Path, formats: tuple[str, ...] = ("md", "html")
) -> dict[str, Path]:
    """Write the report in each format into ``out``; return the files written by format."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    links = None
    if {"md", "html"} & set(formats):  # the viewer beside the report, its sessions linked into it
        runs = dict.fromkeys(r["path"] for x in (c if isinstance(c, list) else [c]) for r in x.runs)
        v = view.load_view(list(runs))
        written["view"] = view.write(v, out / VIEW)
        links = links_of(v)
    secs, figures = document(c, bool({"md", "html"} & set(formats)), links)
    if "md" in formats:
        (out / "figures").mkdir(exist_ok=True)
        paths = {}
        for fid, png in figures.items():
            (out / "figures" / f"{fid}.png").write_bytes(png)
            paths[fid] = f"figures/{fid}.png"
        (out / "report.md").write_text(to_markdown(secs, paths), encoding="utf-8")
        written["md"] = out / "report.md"
    if "html" in formats:
        (out / "report.html").write_text(to_html(secs, figures), encoding="utf-8")
        written["html"] = out / "report.html"
    if "json" in formats:
        write_json_atomic(out / "report.json", to_json(c))
        written["json"] = out / "report.json"
    return written
