"""Making suites: `etai suite validate --jest` (check.py), `etai suite record` (record.py) and
`etai suite build` (build/). They use the run (preflights, result storage); nothing below uses them.
"""
