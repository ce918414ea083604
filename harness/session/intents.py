"""The 12 intent labels a session carries, and which tools each intent may route to.

The labels are the contract between suites (``intent`` field), metrics (per-intent tables) and the
fine-tuning intent head (label index = position in ``INTENTS``). Append new labels at the end only:
reordering would silently change the meaning of trained intent heads.
"""

from __future__ import annotations

INTENTS: tuple[str, ...] = (
    "fix_test_failure",  # a named Jest test fails; make it pass without touching the test
    "refactor_function_signature",  # change parameters/return shape and update every caller
    "add_type_annotation",  # add JSDoc/TS-style types without changing behaviour
    "debug_runtime_error",  # a thrown TypeError/ReferenceError at run time
    "fix_async_bug",  # missing await, unhandled promise, wrong ordering of async work
    "fix_off_by_one",  # loop bounds, slice ends, inclusive/exclusive ranges
    "fix_data_mutation",  # shared state or an argument mutated in place
    "fix_regex",  # a regular expression that matches too much or too little
    "fix_date_handling",  # time zones, month indexing, date arithmetic
    "fix_error_handling",  # errors swallowed, wrong error type, missing rejection
    "fix_module_export",  # wrong export/import shape between modules
    "update_test_mock",  # a jest mock configured wrongly for the code under test
)

_READ = ("jest_run", "file_read", "list_files", "search", "git_diff", "git_status")
_EDIT = ("file_edit", "file_write")

# Tools each intent may use; the tool-routing head masks the rest. Every intent may read and run
# tests; only intents whose fix can need a new file may use file_write.
ALLOWED_TOOLS: dict[str, tuple[str, ...]] = {
    intent: _READ
    + (_EDIT if intent in {"refactor_function_signature", "fix_module_export"} else ("file_edit",))
    for intent in INTENTS
}


def intent_index(label: str) -> int:
    """Index of ``label`` in INTENTS; raises KeyError naming the known labels."""
    try:
        return INTENTS.index(label)
    except ValueError:
        raise KeyError(f"unknown intent {label!r}; known: {', '.join(INTENTS)}") from None
