"""MkDocs hook (mkdocs.yml `hooks`): links from a page of docs/ to a file of the repository outside
docs/ (`../harness/runs/loop.py`, `../README.md`) are not pages of the site. MkDocs would warn
that they are missing, which fails a strict build; here each one is checked against the
repository instead, and shown as its text. A link to a file the repository lacks stays a warning,
so `mkdocs build --strict` fails on it as on a broken link between pages."""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.etai_repo_links")

# [text](target) not preceded by "!" (images are site files); a target without a scheme or anchor-only
_LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+)\)")
_FENCE = re.compile(r"^(```|~~~)")


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    here = posixpath.dirname(page.file.src_uri)

    def repl(m: re.Match) -> str:
        text, target = m.group(1), m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        path = target.split("#", 1)[0]
        inside = posixpath.normpath(posixpath.join(here, path))
        if not inside.startswith("../"):
            return m.group(0)  # a page of the site: MkDocs checks it
        repo_path = posixpath.normpath(posixpath.join("docs", inside))
        if not (root / repo_path).exists():
            log.warning(
                f"{page.file.src_uri}: link to {target}, which is not a file of the repository"
            )
            return m.group(0)
        shown = text.replace("\\_", "_").strip("`")
        return text if shown in (repo_path, repo_path.rstrip("/")) else f"{text} (`{repo_path}`)"

    out, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        out.append(line if fenced else _LINK.sub(repl, line))
    return "\n".join(out)
