"""JUnit XML: one test case per check, so CI systems (GitLab, Jenkins, GitHub test reporters) show
a netbench preflight like a test run.

Mapping (documented in docs/output-json.md, "JUnit"):
- each finding is a test case: ``classname="netbench.<rule>"``, ``name="<subject_kind>:<subject>"``;
- ``fail`` -> ``<failure type="fail">`` (the title as message, evidence and action as text);
- ``warn`` -> a passing case with the text in ``<system-out>`` and a ``severity=warn`` property,
  unless ``warn_as_failure`` (CLI ``--junit-warn-as-failure``) turns it into ``<failure type="warn">``:
  a warning should not break a pipeline by default, yet must be visible in the report;
- ``info`` -> a passing case with ``<system-out>``;
- each rule in ``checks`` that produced no warn/fail finding -> one passing case named ``all``.
Characters XML 1.0 forbids (NUL, ESC ...) are dropped; everything else is escaped by ElementTree.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from netbench.reports.export._common import as_finding, passed_checks
from netbench.reports.export.base import Exporter, ExportFile, RunData

from netbench.common.findings import Finding

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(value: Any) -> str:
    return _XML_BAD.sub("", value if isinstance(value, str) else str(value))


def _details(f: Finding) -> str:
    lines = [f.title]
    if f.evidence:
        lines.append("evidence: " + json.dumps(f.evidence, sort_keys=True, default=str))
    if f.action:
        lines.append("action: " + f.action)
    if f.hosts:
        lines.append("hosts: " + ", ".join(f.hosts))
    return _clean("\n".join(lines))


def to_junit(
    findings: list[Finding | dict[str, Any]],
    checks: list[str] | None,
    run: dict[str, Any],
    *,
    warn_as_failure: bool = False,
) -> str:
    """The JUnit XML document (a ``<testsuites>`` with one ``<testsuite name="netbench">``)."""
    items = [as_finding(f) for f in findings]
    suite = ET.Element("testsuite", name="netbench")
    props = ET.SubElement(suite, "properties")
    for key in ("run_id", "netbench_version", "launcher", "status"):
        if run.get(key) is not None:
            ET.SubElement(props, "property", name=key, value=_clean(run[key]))
    failures = 0
    cases = 0
    for f in items:
        case = ET.SubElement(suite, "testcase", classname=_clean(f"netbench.{f.rule}"),
                             name=_clean(f"{f.subject_kind}:{f.subject}"))
        cases += 1
        if f.severity == "fail" or (f.severity == "warn" and warn_as_failure):
            failures += 1
            failure = ET.SubElement(case, "failure", type=f.severity, message=_clean(f.title))
            failure.text = _details(f)
        else:
            cprops = ET.SubElement(case, "properties")
            ET.SubElement(cprops, "property", name="severity", value=f.severity)
            out = ET.SubElement(case, "system-out")
            out.text = f"{f.severity.upper()}: {_details(f)}"
    for rule in passed_checks(items, checks):
        ET.SubElement(suite, "testcase", classname=_clean(f"netbench.{rule}"), name="all")
        cases += 1
    suite.set("tests", str(cases))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    if run.get("started"):
        suite.set("timestamp", _clean(run["started"]))
    root = ET.Element("testsuites", name="netbench", tests=str(cases), failures=str(failures), errors="0")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def export(data: RunData) -> list[ExportFile]:
    from netbench.reports.export.json_out import CHECKS

    return [ExportFile("junit.xml", to_junit(data.findings, list(CHECKS), data.meta),
                       f"{len(data.findings)} finding(s)")]


EXPORTER = Exporter(
    name="junit",
    files="junit.xml",
    help="JUnit XML, a test case per finding and per passing check, for CI test reporters; of an "
    "analysed run (netbench report).",
    example="netbench export latest --format junit --out ci/",
    render=export,
)
