"""A stand-in for the reference's ``streaming`` package, made of mds_core, for running its tests.

``from streaming import X`` and ``from streaming.base.... import X`` resolve to mds_core's
equivalent of X wherever the reference's name is public API (the table in
``tools/reference_tests/plugin/reference_rule.py``). Only calling conventions are adapted here (a
class where mds_core has a function, the reference's argument order); the behaviour is
mds_core's. Modules mds_core deliberately does without resolve to placeholders
(``streaming._not_offered``), so a test file that imports them still collects its public tests.
"""

import streaming._not_offered as _not_offered
from mds_core import LocalDataset, MDSWriter, Stream, StreamingDataLoader, StreamingDataset

_not_offered.install()

__version__ = "0.13.0"
CSVWriter = JSONWriter = TSVWriter = XSVWriter = _not_offered.NotOffered("streaming.XSVWriter")

__all__ = ["LocalDataset", "MDSWriter", "Stream", "StreamingDataLoader", "StreamingDataset"]
