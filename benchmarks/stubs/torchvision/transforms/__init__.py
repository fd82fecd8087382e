"""Stand-in for ``torchvision.transforms``: only the ``functional`` submodule."""

from torchvision.transforms import functional  # noqa: F401
