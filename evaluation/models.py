"""Evaluation stores nothing of its own yet: it reads releases, predictions and annotations."""
