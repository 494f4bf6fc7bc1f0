"""HTML markup of the run report: one page, inline CSS, images as data URIs, every text escaped.

Nothing here reads files or computes metrics; `tootsie.report.run_report` gathers
the content and this module only lays it out, so the page has no external
reference (no script, stylesheet, font or image URL) and opens offline. It
holds no clock time either (when it was written is the file's, or the
executor's metadata): the same runs give the same bytes.
"""

import html
from dataclasses import dataclass

import yaml

from tootsie.report.panels import Panel, Table

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto; \
max-width: 1180px; color: #111827; }
h1 { font-size: 24px; margin-bottom: 4px; } \
h2 { font-size: 18px; margin: 28px 0 6px; border-bottom: 1px solid #e5e7eb; }
h3 { font-size: 15px; margin: 14px 0 4px; } .meta, .note { color: #4b5563; font-size: 13px; }
img { max-width: 100%; display: block; } table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #d1d5db; padding: 3px 8px; text-align: right; } th { background: #f3f4f6; }
td:first-child, th:first-child { text-align: left; } .missing { color: #9a3412; font-style: italic; }
pre { background: #f9fafb; border: 1px solid #e5e7eb; padding: 8px; font-size: 12px; \
max-height: 420px; overflow: auto; }
ul { font-size: 13px; }
"""


@dataclass(frozen=True)
class RunConfig:
    """A run's config as shown in the report."""

    label: str
    source: str | None
    config: dict[str, object] | None


@dataclass(frozen=True)
class ReportContent:
    """Everything on the page, in order."""

    title: str
    directory: str
    overview: Table
    panels: tuple[Panel, ...]
    spikes: Table
    spike_note: str
    mixture: Panel
    configs: tuple[RunConfig, ...]
    skipped: tuple[str, ...]


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def table_html(table: Table) -> str:
    """A plain HTML table."""
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in row) + "</tr>" for row in table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def panel_html(panel: Panel) -> str:
    """A section with the panel's title, figure (or why it is missing), note and table."""
    figure = f'<img alt="{_e(panel.title)}" src="{panel.image}">' if panel.image else ""
    note = f'<p class="{"note" if panel.image else "note missing"}">{_e(panel.note)}</p>'
    table = table_html(panel.table) if panel.table and panel.table.rows else ""
    return f"<section><h2>{_e(panel.title)}</h2>{figure}{note}{table}</section>"


def _config_html(run: RunConfig) -> str:
    if run.config is None:
        return (
            f'<h3>{_e(run.label)}</h3><p class="note missing">'
            "No config found (no .executor_info.json or config.json next to its metrics).</p>"
        )
    text = yaml.safe_dump(run.config, sort_keys=False, allow_unicode=True)
    return f'<h3>{_e(run.label)}</h3><p class="note">from {_e(run.source)}</p><pre>{_e(text)}</pre>'


def render_page(content: ReportContent) -> str:
    """The whole report page."""
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(content.title)}</title><style>{STYLE}</style></head><body>",
        f'<h1>{_e(content.title)}</h1><p class="meta">{_e(content.directory)} · written by tootsie report</p>',
        "<section><h2>Runs at a glance</h2>" + table_html(content.overview) + "</section>",
        *(panel_html(panel) for panel in content.panels),
        f'<section><h2>Loss spikes</h2><p class="note">{_e(content.spike_note)}</p>'
        + (table_html(content.spikes) if content.spikes.rows else "")
        + "</section>",
        panel_html(content.mixture),
        "<section><h2>Config</h2>" + "".join(_config_html(run) for run in content.configs) + "</section>",
        "<section><h2>What was skipped</h2><ul>"
        + "".join(f"<li>{_e(line)}</li>" for line in content.skipped)
        + "</ul></section>",
        "</body></html>",
    ]
    return "\n".join(parts)
