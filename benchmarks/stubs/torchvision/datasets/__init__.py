"""Stand-in for ``torchvision.datasets``: only ``VisionDataset`` (used as a base class)."""

from collections.abc import Callable
from typing import Any

from torch.utils.data import Dataset


class VisionDataset(Dataset):
    """Attribute-compatible subset of torchvision's VisionDataset."""

    def __init__(self,
                 root: str | None = None,
                 transforms: Callable | None = None,
                 transform: Callable | None = None,
                 target_transform: Callable | None = None) -> None:
        self.root = root
        self.transforms = transforms
        self.transform = transform
        self.target_transform = target_transform

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


__all__ = ['VisionDataset']
