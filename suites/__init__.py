"""ETAI suites."""
