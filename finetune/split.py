"""Held-out evaluation: which sessions train and which the in-training harness evaluates.

``data.split`` names a YAML file of one of two kinds:

- by session (``{train: [ids], eval: [ids]}``; the bundled suite's is
  ``finetune/splits/jest-bugfix.yaml``);
- by project (``{by: project, projects: {NAME: [id patterns]}, train: [NAMES], eval: [NAMES]}``):
  each session belongs to the one project whose ``fnmatch`` patterns match its id (a session of
  none or of two is an error), so whole projects are held out: a model is evaluated on code bases
  it never trained on, not on other bugs of a repository it memorised.

Training keeps the ``train`` sessions (projects) of ``data.sessions``; the ``harness_eval``
callback evaluates the ``eval`` ones of its suite unless it names its own ``sessions``. Whatever
the source, training on what is evaluated measures memorisation, so once every data source is
assembled (sessions, rollouts, reward rollouts, preference pairs) the build refuses an overlap —
of sessions, and under a project split of projects — unless
``callbacks.harness_eval.allow_overlap: true`` says it is meant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml

from finetune.errors import ConfigError
from finetune.evaluation import DEFAULT_SUITE, load_eval_suites
from finetune.evaluation import KEY as EVAL_KEY

KEY = "data.split"


@dataclass(frozen=True)
class Split:
    """``train``/``eval``: session ids, or project names when ``projects`` (name, id patterns)."""

    train: tuple[str, ...]
    eval: tuple[str, ...]
    projects: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def group_of(self, session_id: str) -> str:
        """What is held out for ``session_id``: its project under a project split, else itself."""
        if not self.projects:
            return session_id
        names = [n for n, pats in self.projects if any(fnmatchcase(session_id, p) for p in pats)]
        if len(names) != 1:
            where = f"several projects ({', '.join(names)})" if names else "no project"
            raise ConfigError(KEY, f"session {session_id!r} matches {where} of the split")
        return names[0]


def load_split(path: Path) -> Split:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(KEY, f"cannot read {path}: {exc}") from None
    if isinstance(raw, dict) and raw.get("by") == "project":
        return _project_split(path, raw)
    if not isinstance(raw, dict) or set(raw) != {"train", "eval"}:
        raise ConfigError(
            KEY, f"{path}: expected exactly the keys train and eval (or by: project, projects)"
        )
    return Split(**_parts(path, raw, "session ids"))


def _parts(path: Path, raw: dict[str, Any], what: str) -> dict[str, tuple[str, ...]]:
    lists = {}
    for part in ("train", "eval"):
        ids = raw[part]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise ConfigError(KEY, f"{path}: {part} must be a non-empty list of {what}")
        if len(set(ids)) != len(ids):
            raise ConfigError(KEY, f"{path}: {part} names {what[:-1]} twice")
        lists[part] = tuple(ids)
    both = sorted(set(lists["train"]) & set(lists["eval"]))
    if both:
        raise ConfigError(KEY, f"{path}: in both train and eval: {', '.join(both)}")
    return lists


def _project_split(path: Path, raw: dict[str, Any]) -> Split:
    if set(raw) != {"by", "projects", "train", "eval"}:
        raise ConfigError(KEY, f"{path}: by: project needs exactly by, projects, train and eval")
    projects = raw["projects"]
    if not isinstance(projects, dict) or not projects:
        raise ConfigError(KEY, f"{path}: projects must map each name to a list of id patterns")
    for name, pats in projects.items():
        if not isinstance(pats, list) or not pats or not all(isinstance(p, str) for p in pats):
            raise ConfigError(KEY, f"{path}: projects.{name} must be a non-empty list of patterns")
    parts = _parts(path, raw, "project names")
    listed = set(parts["train"]) | set(parts["eval"])
    if listed != set(projects):
        odd = sorted(listed ^ set(projects))
        raise ConfigError(
            KEY, f"{path}: every project in train or eval, and only those: {', '.join(odd)}"
        )
    pairs = tuple((str(n), tuple(p)) for n, p in projects.items())
    return Split(**parts, projects=pairs)


def split_of(cfg: Any) -> Split | None:
    return load_split(cfg.path_of(KEY)) if cfg.get(KEY, str, None) else None


def train_sessions(sessions: list[dict[str, Any]], cfg: Any) -> list[dict[str, Any]]:
    """The sessions of ``data.sessions`` that ``data.split`` trains on (all without a split)."""
    split = split_of(cfg)
    if split is None:
        return sessions
    if split.projects:
        keep = set(split.train)
        kept = [s for s in sessions if split.group_of(s["session_id"]) in keep]
        if not kept:
            raise ConfigError(KEY, "no session of the train projects in data.sessions")
        return kept
    have = {s["session_id"] for s in sessions}
    missing = sorted(set(split.train) - have)
    if missing:
        raise ConfigError(KEY, f"train ids not in data.sessions: {', '.join(missing)}")
    keep = set(split.train)
    return [s for s in sessions if s["session_id"] in keep]


def eval_defaults(cfg: Any, spec: Any) -> dict[str, Any]:
    """``sessions=`` for the callback: the split's eval sessions when the callback names none
    (under a project split, those of its suite in the eval projects)."""
    split = split_of(cfg)
    named = isinstance(spec, dict) and spec.get("sessions") is not None
    if not split or named:
        return {}
    if not split.projects:
        return {"sessions": list(split.eval)}
    named = spec.get("suite", DEFAULT_SUITE) if isinstance(spec, dict) else DEFAULT_SUITE
    suites, _ = load_eval_suites(named, None)
    held = set(split.eval)
    every = [s.session_id for st in suites for s in st.sessions]
    ids = [i for i in every if split.group_of(i) in held]
    if not ids:
        names = ", ".join(st.name for st in suites)
        raise ConfigError(f"{EVAL_KEY}.suite", f"no session of {names} in an eval project")
    return {"sessions": ids}


def check_held_out(
    trained: Mapping[str, Iterable[str]], callbacks: Sequence[Any], split: Split | None = None
) -> None:
    """Refuse evaluating what is trained on: ``trained`` maps each data source (its config key)
    to the session ids it trains on; under a project split, whole projects are compared.
    Unless the callback allows the overlap."""
    from finetune.callbacks import HarnessEval  # composer: the train extra

    for cb in callbacks:
        if not isinstance(cb, HarnessEval) or cb.allow_overlap:
            continue
        evaluated = cb.evaluated_ids()
        for source, ids in trained.items():
            both = sorted(set(ids) & set(evaluated))
            if both:
                raise ConfigError(
                    f"{EVAL_KEY}.sessions",
                    f"{len(both)} evaluated session(s) are also trained on through {source} "
                    f"({_some(both)}): that measures memorisation; use a held-out split ({KEY}, "
                    f"e.g. finetune/splits/jest-bugfix.yaml) or set {EVAL_KEY}.allow_overlap: true",
                )
            if split is not None and split.projects:
                held = {split.group_of(i) for i in evaluated}
                mixed = sorted(i for i in set(ids) if split.group_of(i) in held)
                if mixed:
                    projects = sorted({split.group_of(i) for i in mixed})
                    raise ConfigError(
                        KEY,
                        f"project(s) {', '.join(projects)} are evaluated and trained on through "
                        f"{source} ({_some(mixed)}): a project split holds out whole projects",
                    )


def _some(ids: Sequence[str]) -> str:
    return ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
