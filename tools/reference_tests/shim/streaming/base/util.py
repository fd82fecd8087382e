"""``streaming.base.util``: the public helpers (``merge_index`` and the parsers behind size and count arguments)."""

from mds_core import merge_index
from mds_core.order.mixing import parse_epoch_size as number_abbrev_to_int
from mds_core.sizes import bytes_to_int
from streaming._not_offered import NotOffered

__all__ = ["bytes_to_int", "merge_index", "number_abbrev_to_int"]

# Imported at the top of test files; the tests that use them are not public-API tests.
clean_stale_shared_memory = NotOffered("streaming.base.util.clean_stale_shared_memory")
get_list_arg = NotOffered("streaming.base.util.get_list_arg")
retry = NotOffered("streaming.base.util.retry")
