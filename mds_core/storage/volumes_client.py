"""The Databricks SDK client behind ``VolumesFileSystem``.

Its configuration, and its errors as the builtin exceptions ``RemoteStore`` sorts by (404 ``FileNotFoundError``, 401/403
``PermissionError``, timeouts ``TimeoutError``; anything else is retried).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any, cast
from urllib.parse import urlparse

from mds_core.errors import ConfigurationError

_log = logging.getLogger(__name__)

# fsspec options that RemoteStore passes to every filesystem; they mean nothing here
_FSSPEC_OPTIONS = ("use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache")
_CREDENTIALS_HINT = (
    "set DATABRICKS_HOST with DATABRICKS_TOKEN (a personal access token) or with DATABRICKS_CLIENT_ID and "
    "DATABRICKS_CLIENT_SECRET (an OAuth service principal), or pick a ~/.databrickscfg profile with "
    "DATABRICKS_CONFIG_PROFILE (storage_options host=, token=, profile= do the same)"
)


class OneAttemptClock:
    """A ``databricks.sdk.clock.Clock`` for the SDK's retry loop.

    Its first sleep jumps past every deadline, so no call retries.

    The loop (``databricks.sdk.retries.retried``) re-checks ``time() < deadline`` after sleeping and then
    raises ``TimeoutError`` from the error it gave up on; ``translate_error`` unwraps that.
    """

    def __init__(self) -> None:
        self._ahead = 0.0
        self._lock = threading.Lock()

    def time(self) -> float:
        """The wall time, pushed ahead by every sleep."""
        return time.time() + self._ahead

    def sleep(self, seconds: float) -> None:
        """Jump the clock past every deadline instead of sleeping."""
        with self._lock:
            self._ahead += 10**7  # about four months: far past any retry_timeout_seconds


def workspace_client(url: str, timeout: float | None, options: dict[str, Any]) -> Any:
    """A Databricks ``WorkspaceClient`` for ``url`` whose calls do not retry and time out after ``timeout``."""
    from databricks.sdk import WorkspaceClient
    from databricks.sdk.clock import Clock
    from databricks.sdk.config import Config

    options = {k: v for k, v in options.items() if k not in _FSSPEC_OPTIONS}
    if "instance" in options:  # the name fsspec's old DatabricksFileSystem used
        options.setdefault("host", options.pop("instance"))
    known = {attr.name for attr in Config.attributes()}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigurationError(
            f"{url}: unknown storage option(s) {unknown} for Databricks; use fields of "
            f"databricks.sdk.config.Config such as host, token, profile"
        )
    _check_explicit_host(url, options)
    options.setdefault("disable_experimental_files_api_client", True)
    # Bounds the host-metadata probe the SDK makes when the client is created (our clock does not reach it).
    options.setdefault("retry_timeout_seconds", 1)
    if timeout is not None:
        options.setdefault("http_timeout_seconds", timeout)
    try:
        # cast: the SDK types its clock as the Clock ABC but only calls time() and sleep(), which
        # OneAttemptClock has; subclassing Clock would import the optional SDK with this module.
        with _host_metadata_quiet(url):
            config = Config(clock=cast(Clock, OneAttemptClock()), **options)
    except ValueError as err:
        raise ConfigurationError(
            f"{url}: no usable Databricks credentials: {_CREDENTIALS_HINT}. The Databricks SDK said: {err}"
        ) from None
    if not config.host:
        raise ConfigurationError(f"{url}: no Databricks workspace: {_CREDENTIALS_HINT}")
    _check_https(url, config.host)
    return WorkspaceClient(config=config)


# Options that carry a credential of their own, for the host they name. Without one, the SDK takes the
# credentials from the environment or a profile, which belong to the host that the environment or profile names.
_OWN_CREDENTIALS = ("token", "client_secret", "password", "azure_client_secret", "google_credentials")
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def _check_explicit_host(url: str, options: dict[str, Any]) -> None:
    """Refuse a ``host`` option that would receive the environment's (or a profile's) credentials.

    The SDK pairs an explicit ``host`` with ``DATABRICKS_TOKEN`` (or a profile's token) as readily as
    with the workspace they belong to; whoever sets the option (run config, a dataset's settings)
    would receive that token. A host given with its own credentials, or the environment's own host, is fine.
    """
    host = options.get("host")
    if not host or any(options.get(name) for name in _OWN_CREDENTIALS):
        return
    ambient = os.environ.get("DATABRICKS_HOST") if "profile" not in options else _profile_host(options["profile"])
    if ambient is None or _origin(host) != _origin(ambient):
        raise ConfigurationError(
            f"{url}: storage option host={_origin(host)} is not the workspace your credentials are for "
            f"({'the profile ' + repr(options['profile']) if 'profile' in options else '$DATABRICKS_HOST'}: "
            f"{_origin(ambient) if ambient else 'not set'}), and the Databricks SDK would send them there. "
            "Give that host's own token in storage_options, or set DATABRICKS_HOST to it"
        )


def _check_https(url: str, host: str) -> None:
    """Tokens go over TLS only: plain ``http`` is refused, but for a server on this machine (tests)."""
    parsed = urlparse(_origin(host))
    if parsed.scheme != "https" and parsed.hostname not in _LOOPBACK:
        raise ConfigurationError(
            f"{url}: the Databricks workspace {_origin(host)} is not https; a token sent over plain http can be "
            "read on the way (only a loopback host, for tests, may use http)"
        )


def _origin(host: str) -> str:
    """``scheme://host[:port]``, lowercased; ``https`` where no scheme is given (as the SDK assumes)."""
    parsed = urlparse(host if "://" in host else f"https://{host}")
    return f"{parsed.scheme.lower()}://{parsed.netloc.lower()}"


def _profile_host(profile: str) -> str | None:
    """The host a ``~/.databrickscfg`` profile names (``$DATABRICKS_CONFIG_FILE`` moves the file)."""
    import configparser

    parser = configparser.ConfigParser()
    parser.read(os.path.expanduser(os.environ.get("DATABRICKS_CONFIG_FILE", "~/.databrickscfg")))
    return parser.get(profile, "host", fallback=None)


@contextlib.contextmanager
def _host_metadata_quiet(url: str) -> Iterator[None]:
    """The SDK's warning that the workspace serves no host metadata, as one debug line of ours.

    The SDK logs it with ``logging.warning`` each time a client is created, and Python prints an
    unhandled warning to stderr: one line per loader worker and per store, about an optional endpoint
    (``/.well-known/databricks-config``) that the configuration we pass makes unnecessary.
    """
    sdk_logger = logging.getLogger("databricks.sdk")  # the logger of databricks/sdk/config.py

    def demote(record: logging.LogRecord) -> bool:
        if "resolve config from host metadata" not in record.getMessage():
            return True
        _log.debug("%s: the workspace serves no host metadata; using the explicit configuration", url)
        return False

    sdk_logger.addFilter(demote)
    try:
        yield
    finally:
        sdk_logger.removeFilter(demote)


def translate_error(err: Exception, url: str, timeout: float | None, operation: Any, host: str) -> Exception:
    """The SDK's errors as the builtin ones ``RemoteStore`` sorts by; others are returned unchanged."""
    import requests
    from databricks.sdk.errors import NotFound, PermissionDenied, ResourceConflict, Unauthenticated

    from mds_core.storage.throttle import Throttled

    if isinstance(err, TimeoutError) and isinstance(err.__cause__, Exception) and "Timed out after" in str(err):
        err = err.__cause__  # the SDK's retry loop gave up after one attempt (see _OneAttemptClock)
    if isinstance(err, NotFound):
        return FileNotFoundError(f"{url}: not found ({_message(err)})")
    if isinstance(err, (Unauthenticated, PermissionDenied)):
        status = 401 if isinstance(err, Unauthenticated) else 403
        return PermissionError(
            f"{url}: the Databricks Files API of {host} refused the request ({_status(status, err)}: "
            f"{_message(err)}). Check the credentials (a valid, unexpired DATABRICKS_TOKEN, or the profile or "
            f"service principal in use, for the workspace in DATABRICKS_HOST) and that they hold READ VOLUME on "
            f"the volume, WRITE VOLUME to write, and USE CATALOG and USE SCHEMA on its catalog and schema"
        )
    retry_after = getattr(err, "retry_after_secs", None)  # the SDK sets it on 429 and 503 only
    if retry_after is not None:
        return Throttled(f"{url}: {_status(_http_status(err), err)}: {_message(err)}", float(retry_after))
    if isinstance(err, ResourceConflict) and getattr(operation, "__name__", "") == "upload":
        return FileExistsError(f"{url}: already exists ({_message(err)})")
    if isinstance(err, requests.Timeout):
        return TimeoutError(f"no answer within the {timeout} s timeout from the Databricks Files API ({err})")
    if isinstance(err, TypeError) and _raised_in_sdk(err):
        # databricks-sdk 0.162 fails so while describing an error response that is not JSON (from a
        # proxy or load balancer, say) to a request with a body: report the failure, not the SDK's slip.
        return OSError(
            f"{url}: the request failed with a response the Databricks SDK could not parse "
            f"(not JSON; a proxy or load balancer answering?): {type(err).__name__}: {err}"
        )
    return err


def _raised_in_sdk(err: BaseException) -> bool:
    frame = err.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and f"{os.sep}databricks{os.sep}sdk{os.sep}" in frame.tb_frame.f_code.co_filename


def _http_status(err: Exception) -> int:
    from databricks.sdk.errors import TooManyRequests

    return 429 if isinstance(err, TooManyRequests) else 503


def _status(status: int, err: Exception) -> str:
    """``403 PERMISSION_DENIED``; the status once where the service sent no error code of its own."""
    code = str(getattr(err, "error_code", "") or "")
    return f"{status} {code}" if code and code != str(status) else str(status)


def _message(err: Exception) -> str:
    """The service's message, without the configuration dump the SDK appends to 401s and 403s."""
    return str(err).split(" Config: ", 1)[0].split("\n", 1)[0][:500]
