"""A GateResult for CI: JUnit XML (one testcase per rule, one per session of the gated agent),
Markdown fit for a job summary page, and JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from reports._gate import GateResult

_HEADLINE = {
    0: "✅ gate passed",
    1: "❌ gate failed",
    3: "⚠️ the gate cannot decide: a run is incomplete or measured nothing",
}


def junit_xml(result: GateResult) -> str:
    root = ET.Element("testsuites", name="etai gate")
    rules = ET.SubElement(root, "testsuite", name="etai gate rules")
    for r in result.rules:
        case = ET.SubElement(rules, "testcase", classname="etai.gate", name=r.rule)
        if r.undefined:  # not the model's failure: an error, as a session's infra_error is
            ET.SubElement(case, "error", message=r.detail, type="Undefined").text = r.detail
        elif not r.passed:
            ET.SubElement(case, "failure", message=r.detail, type="GateRuleFailed").text = r.detail
        else:
            ET.SubElement(case, "system-out").text = r.detail
    if result.incomplete:
        case = ET.SubElement(rules, "testcase", classname="etai.gate", name="run complete")
        text = "; ".join(result.incomplete)
        ET.SubElement(case, "error", message=text, type="RunIncomplete").text = text
    sessions = ET.SubElement(root, "testsuite", name=f"etai sessions: {result.agent}")
    for s in result.sessions:
        case = ET.SubElement(
            sessions,
            "testcase",
            classname=f"etai.sessions.{result.agent}",
            name=s.session_id,
            time=f"{s.duration_s:.3f}",
        )
        if s.status == "failed":
            ET.SubElement(case, "failure", message=s.message, type="NotGreen").text = s.message
        elif s.status == "error":
            ET.SubElement(case, "error", message=s.message, type="InfraError").text = s.message
        elif s.status == "skipped":
            ET.SubElement(
                case,
                "skipped",
                message="reference_broken: the session's own reference is not green",
            )
    for suite in (rules, sessions):
        cases = suite.findall("testcase")
        counts = {
            tag: sum(1 for c in cases if c.find(tag) is not None)
            for tag in ("failure", "error", "skipped")
        }
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(counts["failure"]))
        suite.set("errors", str(counts["error"]))
        suite.set("skipped", str(counts["skipped"]))
    for attr in ("tests", "failures", "errors", "skipped"):
        root.set(attr, str(sum(int(s.get(attr)) for s in (rules, sessions))))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def markdown(result: GateResult) -> str:
    out = [
        f"### {_HEADLINE[result.exit_code]}",
        "",
        f"Candidate `{result.agent}` in `{result.candidate}`"
        + (
            f", baseline `{result.baseline_agent}` in `{result.baseline}`"
            if result.baseline
            else ""
        )
        + ".",
        "",
    ]
    out += [f"- {why}" for why in result.incomplete] + ([""] if result.incomplete else [])
    out += [f"- note: {n}" for n in result.notes] + ([""] if result.notes else [])
    out += [
        "| rule | result | value | baseline | test | p | SE session / project | detectable | detail |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result.rules:
        cells = [
            f"`{r.rule}`",
            "pass" if r.passed else "undefined" if r.undefined else "**FAIL**",
            _num(r.value),
            _num(r.baseline),
            r.test or "–",
            _num(r.p),
            f"{_num(r.se_session)} / {_num(r.se_project)}" if r.se_session is not None else "–",
            _num(r.mde),
            r.detail,
        ]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    by = {
        st: [s for s in result.sessions if s.status == st]
        for st in ("passed", "failed", "error", "skipped")
    }
    out += [
        "",
        (
            f"Sessions: {len(by['passed'])} passed, {len(by['failed'])} failed, {len(by['error'])} infra errors, "
            f"{len(by['skipped'])} reference_broken (of {len(result.sessions)})."
        ),
    ]
    if by["failed"]:
        out.append("Not green: " + ", ".join(f"`{s.session_id}`" for s in by["failed"]))
    return "\n".join(out) + "\n"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def write(
    result: GateResult,
    *,
    junit: str | Path | None = None,
    md: str | Path | None = None,
    json_path: str | Path | None = None,
) -> None:
    for path, text in (
        (junit, lambda: junit_xml(result)),
        (md, lambda: markdown(result)),
        (json_path, lambda: json.dumps(result.to_dict(), indent=2) + "\n"),
    ):
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text(), encoding="utf-8")
