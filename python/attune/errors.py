"""The exceptions of the attune Python package.

Every error this package raises is an :class:`AttuneError`. The HTTP client raises one
subclass per kind of answer, so callers can catch what they can act on::

    try:
        client.retrieve("ann", "config parser", k=0)
    except attune.BadRequest as e:
        print(e.field, e.message)  # k  "k" must be a whole number from 1

The CLI wrappers raise :class:`CliError` (or :class:`BinaryNotFound` when there is no
``attune`` program to run).
"""

from __future__ import annotations

import builtins
from typing import Any, Dict, Optional, Sequence

__all__ = [
    "AttuneError",
    "ApiError",
    "BadRequest",
    "AuthError",
    "NotFound",
    "RateLimited",
    "ServerError",
    "ConnectionError",
    "CliError",
    "BinaryNotFound",
]


class AttuneError(Exception):
    """The base class of every error raised by this package."""


class ApiError(AttuneError):
    """An error answer of ``attune serve``: a status >= 400 and its JSON error body.

    The server answers ``{"error": {"status": 400, "field": "k", "message": "..."}}``; the
    fields of that object are the attributes of this exception.

    Attributes:
        status: the HTTP status code.
        field: the request field, parameter or header at fault (``"k"``,
            ``"documents[2].id"``, ``"Authorization"``), or ``None`` when the server named none.
        message: the server's message (or the raw body when it was not the error JSON).
        body: the parsed JSON body, or ``None`` when the body was not JSON.
        method: the HTTP method of the call.
        url: the URL of the call.
    """

    def __init__(
        self,
        status: int,
        message: str,
        field: Optional[str] = None,
        body: Optional[Dict[str, Any]] = None,
        method: str = "",
        url: str = "",
    ) -> None:
        self.status = status
        self.message = message
        self.field = field
        self.body = body
        self.method = method
        self.url = url
        where = f" ({field})" if field else ""
        call = f" [{method} {url}]" if method else ""
        super().__init__(f"HTTP {status}{where}: {message}{call}")


class BadRequest(ApiError):
    """400 (a bad field, named in :attr:`field`), 413 (body too large) or 422 (bad input data)."""


class AuthError(ApiError):
    """401 (no key, or an unknown or revoked one) or 403 (refused)."""


class NotFound(ApiError):
    """404: no such route, document or request id (``field`` says which when it is a field)."""


class RateLimited(ApiError):
    """429: the API key is over its ``limits.requests_per_second``; retry later."""


class ServerError(ApiError):
    """A 5xx answer: a failure on the server's side."""


class ConnectionError(AttuneError, builtins.ConnectionError):  # noqa: A001 - the name is the point
    """The server could not be reached or did not answer in time (refused, reset, timeout).

    It is also a built-in :class:`ConnectionError`, so ``except ConnectionError`` written for
    other libraries catches it too.

    Attributes:
        url: the URL of the call.
        reason: what went wrong, as the socket layer said it.
    """

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        # Exception.__init__, not OSError's, which reads (errno, strerror) from the arguments.
        Exception.__init__(self, f"cannot reach {url}: {reason}")

    def __str__(self) -> str:
        return f"cannot reach {self.url}: {self.reason}"


class CliError(AttuneError):
    """An ``attune`` command that exited with a status other than 0.

    attune exits 2 on a usage error (a bad option, value, task or spec) and 1 on a runtime
    error, with one line on stderr naming the file, record and field at fault.

    Attributes:
        returncode: the exit status (negative: killed by that signal).
        stderr: everything the command wrote on stderr.
        message: the last non-empty line of stderr (attune's error line).
        args_: the command line that was run.
        verb: the verb (``"eval"``, ``"tenant add"``).
    """

    def __init__(self, args: Sequence[str], returncode: int, stderr: str, verb: str = "") -> None:
        self.args_ = list(args)
        self.verb = verb
        self.returncode = returncode
        self.stderr = stderr
        lines = [line for line in stderr.splitlines() if line.strip()]
        self.message = lines[-1] if lines else ""
        name = f"attune {verb}" if verb else "attune"
        super().__init__(f"{name}: exit {returncode}: {self.message or '(nothing on stderr)'}")

    @property
    def usage_error(self) -> bool:
        """True when attune refused the command line itself (exit 2)."""
        return self.returncode == 2


class BinaryNotFound(AttuneError, FileNotFoundError):
    """No ``attune`` program: not given, not in ``ATTUNE_BIN``, not on ``PATH``."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "attune binary not found"
