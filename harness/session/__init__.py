"""What a session is (the typed records, the cursor rule, the intent labels), its workspace on disk,
and what a result row is (harness/session/records.py). Imports only harness.base.
"""
