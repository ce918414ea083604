"""The report's figures, drawn with matplotlib's Agg backend (no display) into PNG bytes.

Each figure is drawn from a Comparison table, so what a figure shows and what the tables say
cannot disagree. A figure with nothing to show still exists and says so, so that every section
of a report has its figure.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np

from reports._compare import Comparison

STATUS_COLOURS = {
    "passed": "#2e7d32",
    "failed": "#c62828",
    "timeout": "#ef6c00",
    "memory_limit": "#8d6e63",
    "output_limit": "#a1887f",
    "invalid_action": "#f9a825",
    "tampered": "#6a1b9a",
    "infra_error": "#546e7a",
    "reference_broken": "#b0bec5",
    "skipped_budget": "#eceff1",
}


def _plt():
    # matplotlib: the report extra
    import matplotlib

    matplotlib.use("Agg", force=True)  # never a display, also where one is set
    # matplotlib: the report extra
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555")
    ax.set_xticks([])
    ax.set_yticks([])


def _width(n: int) -> float:
    return min(12.0, 6.0 + 0.5 * n)


def pa_curve(c: Comparison) -> bytes:
    fig, ax = _plt().subplots(figsize=(7, 4))
    for arm in c.arms:
        pa = c.metrics[arm]["path_accuracy"]
        js = [j for j, cell in pa.items() if cell["value"] is not None]
        if not js:
            continue
        y = np.array([pa[j]["value"] for j in js])
        # clipped: Wilson's bound at a rate of 1 can round to a hair below it (n=4: 1 - 1e-16)
        err = np.clip(
            [
                [y[i] - pa[j]["lo"] for i, j in enumerate(js)],
                [pa[j]["hi"] - y[i] for i, j in enumerate(js)],
            ],
            0,
            None,
        )
        ax.errorbar(js, y, yerr=err, marker="o", capsize=3, label=arm)
    ax.set(
        xlabel="tool calls (k)",
        ylabel="Path Accuracy@k",
        ylim=(-0.03, 1.03),
        title="Path Accuracy@1..k (95% Wilson)",
    )
    ax.set_xticks(range(1, c.k + 1))
    ax.legend(fontsize=8)
    return _png(fig)


def intents(c: Comparison) -> bytes:
    t = c.intents
    fig, ax = _plt().subplots(figsize=(_width(t["intent"].nunique() if len(t) else 1), 4))
    if t.empty:
        _empty(ax, "no valid episodes")
        return _png(fig)
    names = sorted(t["intent"].astype(str).unique())
    width = 0.8 / len(c.arms)
    for i, arm in enumerate(c.arms):
        sub = t[t["arm"] == arm].set_index(t[t["arm"] == arm]["intent"].astype(str))
        ax.bar(
            np.arange(len(names)) + i * width,
            [sub["pass_rate"].get(n, np.nan) for n in names],
            width,
            label=arm,
        )
    ax.set_xticks(
        np.arange(len(names)) + width * (len(c.arms) - 1) / 2,
        names,
        rotation=30,
        ha="right",
        fontsize=8,
    )
    ax.set(ylabel="pass@1", ylim=(0, 1.05), title="pass@1 by intent")
    ax.legend(fontsize=8)
    return _png(fig)


def statuses(c: Comparison) -> bytes:
    t = c.statuses
    fig, ax = _plt().subplots(figsize=(8, 1.2 + 0.45 * len(c.arms)))
    left = np.zeros(len(t))
    for status in t.columns:
        n = t[status].to_numpy()
        ax.barh(
            range(len(t)),
            n,
            left=left,
            color=STATUS_COLOURS[status],
            label=f"{status} ({int(n.sum())})",
        )
        left += n
    ax.set_yticks(range(len(t)), t.index, fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="episodes", title="Status of every episode")
    ax.legend(
        fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25 - 0.02 * len(c.arms))
    )
    return _png(fig)


def cursor(c: Comparison) -> bytes:
    v = c.rows[c.rows["valid"]]
    data = [(arm, v.loc[v["arm"] == arm, "cursor_px"].dropna().to_numpy()) for arm in c.arms]
    data = [(a, x) for a, x in data if len(x)]
    fig, ax = _plt().subplots(figsize=(7, 1.2 + 0.45 * max(1, len(data))))
    if not data:
        _empty(ax, "no agent placed a cursor in the right file")
        return _png(fig)
    ax.boxplot([x for _, x in data], vert=False, showmeans=True)
    for i, (_, x) in enumerate(data, 1):
        ax.scatter(
            x,
            np.full(len(x), i) + np.linspace(-0.15, 0.15, len(x)),
            s=10,
            alpha=0.6,
            color="#1565c0",
        )
    ax.set_yticks(range(1, len(data) + 1), [a for a, _ in data], fontsize=8)
    ax.set(xlabel="cursor error (px, same file)", title="Cursor error per episode")
    return _png(fig)


def steps_to_green(c: Comparison) -> bytes:
    t = c.steps_to_green
    fig, ax = _plt().subplots(figsize=(_width(len(t.columns)), 4))
    width = 0.8 / len(c.arms)
    for i, arm in enumerate(c.arms):
        ax.bar(np.arange(len(t.columns)) + i * width, t.loc[arm].to_numpy(), width, label=arm)
    ax.set_xticks(np.arange(len(t.columns)) + width * (len(c.arms) - 1) / 2, list(t.columns))
    ax.set(xlabel="first green at tool call", ylabel="episodes", title="Steps to green")
    ax.legend(fontsize=8)
    return _png(fig)


def pairwise(c: Comparison) -> bytes:
    n = len(c.arms)
    fig, ax = _plt().subplots(figsize=(2.5 + 1.2 * n, 1.5 + 1.0 * n))
    if n < 2:
        _empty(ax, "one arm: nothing to pair")
        return _png(fig)
    m = np.full((n, n), np.nan)
    idx = {a: i for i, a in enumerate(c.arms)}
    for p in c.pairs:
        if p.pa_diff is not None:
            m[idx[p.a], idx[p.b]], m[idx[p.b], idx[p.a]] = p.pa_diff, -p.pa_diff
    im = ax.imshow(m, cmap="RdBu", vmin=-1, vmax=1)
    for p in c.pairs:
        for i, j, d in (
            (idx[p.a], idx[p.b], p.pa_diff),
            (idx[p.b], idx[p.a], -p.pa_diff if p.pa_diff is not None else None),
        ):
            if d is not None:
                ax.text(
                    j, i, f"{d:+.2f}\np={p.mcnemar_p:.3g}", ha="center", va="center", fontsize=7
                )
    ax.set_xticks(range(n), c.arms, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(n), c.arms, fontsize=8)
    ax.set_title(
        "row − column: PA@k difference (paired bootstrap);\np = exact McNemar on per-session pass",
        fontsize=9,
    )
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _png(fig)


def training(c: Comparison) -> bytes:
    t = c.training
    names = [col for col in t.columns if col not in ("series", "step", "arm")]
    if t.empty:
        fig, ax = _plt().subplots(figsize=(7, 2))
        _empty(ax, "no training folders among the inputs")
        return _png(fig)
    cols = 3
    rows = -(-len(names) // cols)
    fig, axes = _plt().subplots(rows, cols, figsize=(11, 2.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        ax.set(title=name, xlabel="training step (batches)")
        if t[name].isna().all():
            _empty(ax, "undefined at every step")
            continue
        for series, g in t.groupby("series"):
            ax.plot(g["step"], g[name].astype(float), marker="o", label=str(series))
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    for ax in axes.flat:
        if ax.lines:
            ax.legend(fontsize=8)
            break
    fig.tight_layout()
    return _png(fig)


# The report's figures in section order: (id, title, draw).
FIGURES: list[tuple[str, str, Callable[[Comparison], bytes]]] = [
    ("pa-curve", "Path Accuracy@1..k", pa_curve),
    ("intents", "Per-intent breakdown", intents),
    ("statuses", "Status breakdown", statuses),
    ("cursor", "Cursor-error distribution", cursor),
    ("steps-to-green", "Steps to green", steps_to_green),
    ("pairwise", "Pairwise comparison", pairwise),
    ("training", "Metrics vs training step", training),
]


def draw_all(c: Comparison) -> dict[str, bytes]:
    return {fid: draw(c) for fid, _, draw in FIGURES}
