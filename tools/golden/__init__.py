"""The golden-fixture generators: tests/fixtures made again with the reference (README.md beside this file)."""
