"""Turning training cells into the papers' tables and figures."""
