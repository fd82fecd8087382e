"""The code location's component instances, one folder each, loaded by ``pipelines.definitions``.

Each folder is one dataset: ``<dataset>/defs.yaml``, a ``pipelines.components.Dataset`` whose attributes
are the dataset's settings. ``dg check yaml`` validates them and ``dg list defs`` shows what each makes.
"""
