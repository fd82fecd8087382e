"""The code location's component instances, one folder each, loaded by ``pipelines.definitions``.

``datasets/defs.yaml`` is the dataset registry (``pipelines.components.DatasetRegistry``); ``dg check
yaml`` validates it and ``dg list defs`` shows what it makes.
"""
