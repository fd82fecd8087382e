"""Proofs of concept of the December 2026 security review, one module per finding, and the threats docs/security.md names."""
