"""`etai suite mine`: sessions from real fixes in a project's git history (commits that change its
source and its tests, kept when a test the commit brings fails at the parent and passes at the
commit in every run). history.py reads the git side, fix.py writes a fix as a session's edits and
instruction, jest_runs.py runs a commit's tests at the parent and at the commit in the sandbox,
session.py writes a kept commit as a session (its held-out split among it), mine.py picks the
commits, drives them and writes the suite, cli.py is the command, options.py what it asks for."""
