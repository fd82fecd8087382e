"""The ``StreamingDataLoader``'s default collate: torch's ``default_collate``, faster on MDS samples.

``default_collate`` turns each numpy value into a tensor one by one and then stacks the tensors,
about 2.3 µs per sample on a five-column sample in a DataLoader worker; stacking a column with numpy
first and wrapping the result once takes a third of that. The result is the same (types, dtypes,
shapes, values), and anything this module does not recognise goes to ``default_collate`` itself, so
its errors and its handling of other types are kept. A side effect: the batch owns its memory, so
torch no longer warns that the shard's read-only memory map is not writable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate

# numpy dtypes that torch.from_numpy accepts and that default_collate would stack (bool, ints,
# unsigned ints, floats, complex); others (strings, objects, datetimes) keep default_collate's path.
_TENSOR_KINDS = frozenset("biufc")


def collate_samples(batch: list[Any]) -> Any:
    """``default_collate(batch)``, with dict samples collated column by column through numpy."""
    if not batch or type(batch[0]) is not dict:
        return default_collate(batch)
    names = batch[0].keys()
    if any(sample.keys() != names for sample in batch if type(sample) is dict):
        return default_collate(batch)  # ragged or mixed samples: its error, or its behaviour
    return {name: _collate_column([sample[name] for sample in batch]) for name in names}


def _collate_column(values: list[Any]) -> Any:
    first = values[0]
    kind = type(first)
    if not all(type(value) is kind for value in values):
        return default_collate(values)
    if kind is str or kind is bytes:
        return values  # default_collate leaves a batch of strings or bytes as the list
    if kind is np.ndarray:
        if first.dtype.kind in _TENSOR_KINDS and first.dtype.isnative and _same_layout(values):
            return torch.from_numpy(np.stack(values))
    elif issubclass(kind, np.generic) and first.dtype.kind in _TENSOR_KINDS and first.dtype != np.uint64:
        # (default_collate cannot batch uint64 scalars: they keep its path, and its error)
        return torch.from_numpy(np.array(values, dtype=first.dtype))
    return default_collate(values)


def _same_layout(arrays: list[np.ndarray]) -> bool:
    shape, dtype = arrays[0].shape, arrays[0].dtype
    return all(array.shape == shape and array.dtype == dtype for array in arrays)
