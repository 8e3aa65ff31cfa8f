"""Helpers shared by test files, one definition each. A test file imports them from here (or from
the factories next to it), never from another test_*.py file."""
