"""Providers: what each refuses (``contract``), its profile, and the planner."""
