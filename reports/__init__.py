"""ETAI reports."""
