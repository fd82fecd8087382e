"""The one answer to "is this a URL?", and the path and join rules that go with it.

A location is *remote* when it has a scheme of two or more letters other than ``file``
(``s3://``, ``gs://``, ``dbfs:/``...). Plain paths, Windows drives (``C:``) and ``file://`` URLs
are local; ``local_path`` turns the latter into a plain path.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlparse

PathLike = str | os.PathLike[str]


def is_remote(location: PathLike | None) -> bool:
    """True for a URL with a scheme other than ``file``; plain paths (and ``C:``) are local."""
    if location is None:
        return False
    scheme = urlparse(os.fspath(location)).scheme
    return len(scheme) > 1 and scheme != "file"


def local_path(location: PathLike) -> str:
    """A plain path for a local path or a ``file://`` URL."""
    location = os.fspath(location)
    return urlparse(location).path if location.startswith("file://") else location


def join(root: PathLike, *parts: str) -> str:
    """``root`` joined with ``parts``: with ``/`` for a URL (keeping its scheme), else as a path."""
    root = os.fspath(root)
    if is_remote(root):
        return "/".join([root.rstrip("/"), *(part.strip("/") for part in parts if part)])
    return os.path.join(local_path(root), *parts)


def redact(location: PathLike) -> str:
    """``location`` without the credentials a URL may carry.

    ``scheme://user:password@host/...``, and a Spark Connect URL's ``;token=...`` parameter.

    fsspec reads a user and password from a URL's authority (ftp, sftp, http, smb...), so a URL
    given as a landing zone or warehouse may hold a secret. Every message, log line and piece of
    asset metadata that shows a URL shows it through this.
    """
    text = os.fspath(location)
    if not is_remote(text):
        return text
    text = _CONNECT_TOKEN.sub(r"\1***", text)
    parsed = urlparse(text)
    if "@" not in parsed.netloc:
        return text
    return parsed._replace(netloc="***@" + parsed.netloc.rsplit("@", 1)[1]).geturl()


_CONNECT_TOKEN = re.compile(r"(;token=)[^;]*", re.IGNORECASE)
