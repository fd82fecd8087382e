"""The package the reference's test files import their helpers from (``tests.common``, ``tests.conftest``).

The reference's sdist ships its test files without these helpers; these are ours, written to the
interface its tests use. A regular package, so it wins over any other ``tests`` on ``sys.path``.
"""
