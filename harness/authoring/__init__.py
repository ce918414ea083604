"""Making suites: `etai suite validate --jest` (check.py), `etai suite record` (record.py) and
`etai suite build` (build/). They use the run (preflights, result storage); nothing below uses them.
"""

# The memory of the sandboxes `suite build` and `suite mine` test a project in, written into the
# suite.yaml they make (`sandbox.memory_mb`) so that every later replay gets the same: a session
# kept at this size can fail for memory below it (ts-jest projects peak above the run's 1024 MB).
MEMORY_MB = 2048
