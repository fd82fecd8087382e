"""Only the optional C part; everything else is in pyproject.toml.

``mds_core.order.shuffle._fisher_yates`` is numpy's Fisher-Yates shuffle, draw for draw, without its cache
misses, and py1e's key drawing (``-ffp-contract=off``: every float operation rounds as numpy's). Without a C compiler the build skips it and the library uses numpy's shuffle (same order,
slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "mds_core.order.shuffle._fisher_yates",
            ["mds_core/order/shuffle/_fisher_yates.c"],
            extra_compile_args=["-O2", "-ffp-contract=off"],
            optional=True,
        )
    ]
)
