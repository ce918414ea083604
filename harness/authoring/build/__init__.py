"""`etai suite build`: bug-fix sessions from a real Jest project.

A package of its own under harness (not suites/): it writes suites in the session format that
harness/suites/load.py loads, runs Jest only through harness.sandbox, and is a command of the harness;
suites/ holds suites and suite kinds. harness/sandbox/deps.py installs and mounts node_modules, mutants.py finds
mutants on the syntax tree (mutate.js), compose.py writes a kept mutant as a session, jest_runs.py
runs the baseline and the mutants in the sandbox, held_out.py and split.py choose and check a kept
mutant's held-out cases, build.py drives them and keeps the summary, cli.py is the command, options.py what it asks for.
"""
