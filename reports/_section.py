"""A report section (text, tables, a figure) and how its numbers are printed: shared by the renderer
and the session and suite sections it renders, which import it and never the renderer."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    id: str
    title: str
    text: list[str] = field(default_factory=list)
    tables: list[tuple[list[str], list[list[Any]]]] = field(
        default_factory=list
    )  # str or Link cells
    figure: str | None = None


def fmt(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def cell_ci(cell: dict[str, Any], digits: int = 3) -> str:
    if cell["value"] is None:
        return "–"
    if cell["lo"] is None:
        return fmt(cell["value"], digits)
    return f"{fmt(cell['value'], digits)} [{fmt(cell['lo'], digits)}, {fmt(cell['hi'], digits)}]"
