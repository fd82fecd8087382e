"""Stand-in for ``torchvision.transforms.functional``: only ``to_tensor``."""

from typing import Any

import numpy as np
import torch


def to_tensor(pic: Any) -> torch.Tensor:
    """PIL image or HWC ndarray -> CHW float tensor (uint8 input scaled to [0, 1])."""
    arr = np.asarray(pic)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    tensor = torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))
    if tensor.dtype == torch.uint8:
        return tensor.float().div(255)
    return tensor
