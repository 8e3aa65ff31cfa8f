"""Test helpers that need heavy optional dependencies (torch, transformers); import explicitly."""
