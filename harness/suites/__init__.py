"""Reading a suite: the loader that checks every session before anything runs (load.py) and the
SuiteKind protocol with its registry (kinds.py).
"""
