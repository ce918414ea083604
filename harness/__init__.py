"""ETAI harness."""
