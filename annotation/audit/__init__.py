"""The audit trail: who imported, verified, edited, discarded, froze, exported, launched,
cancelled or retried what, and when (docs/architecture.md, "Invariants"). One table
(models.AuditEvent), two sides:

record.py  the write: `audit_record`, called by the service that makes a change, inside its
           transaction; `audit_source` (events of the management commands say they came from the
           command line); `row_changes` / `row_values` (what a save in the Django admin changed)
trail.py   the read: a project's events filtered by action, actor and dates, for the audit page
           and API (views/audit.py, apis/audit.py), and their CSV / JSONL export

This file imports neither: callers import the side they use.
"""
