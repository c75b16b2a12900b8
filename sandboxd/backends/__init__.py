"""Workspace backends: one module per implementation of ``sandboxd.ports``."""
