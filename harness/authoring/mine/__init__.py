"""`etai suite mine`: sessions from real fixes in a project's git history (commits that change its
source and its tests, kept when a test the commit brings fails at the parent and passes at the
commit in every run). history.py reads the git side, fix.py writes a fix as a session, mine.py
runs the checks in the sandbox and writes the suite, cli.py is the command."""
