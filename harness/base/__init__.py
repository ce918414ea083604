"""What every other package stands on: typed errors, the one Registry, result provenance, progress
bars, SIGTERM handling and terminal tables. Imports nothing else of the harness.
"""
