"""A run: the runner (suite x agents x samples, resumable), the replay loop of one episode, the
session kind, executors, crash-safe result storage and the metrics over result rows.
"""
