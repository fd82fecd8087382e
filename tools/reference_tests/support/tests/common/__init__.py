"""Helpers the reference's test files import: datasets to write, fixtures and small utilities."""
