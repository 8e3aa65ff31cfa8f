"""StateLab's PostgreSQL backend: Django's, with a connection health check that costs no round trip
(base.py)."""
