"""attune from Python: a client for ``attune serve`` and wrappers around the ``attune`` CLI.

Standard library only; nothing here loads torch or any native library (the models run in
the ``attune`` processes).

- :class:`Client`: the HTTP API of ``attune serve`` (retrieve, feedback, documents, user
  deletion, rerank, search), with typed errors (:class:`BadRequest`, :class:`AuthError`,
  :class:`NotFound`, :class:`RateLimited`, :class:`ServerError`, :class:`ConnectionError`).
- :class:`Attune`: runs CLI verbs (``eval``, ``rank``, ``metrics``, ``train``, ``tenant``,
  ``serve``...) and returns their parsed JSON; :class:`CliError` when one fails.
- :func:`train_metadata`: the JSON metadata of a trained folder.
"""

from .cli import Attune, Report, Server, find_binary, train_metadata
from .client import Client
from .errors import (
    ApiError,
    AttuneError,
    AuthError,
    BadRequest,
    BinaryNotFound,
    CliError,
    ConnectionError,
    NotFound,
    RateLimited,
    ServerError,
)

__version__ = "0.1.0"

__all__ = [
    "Attune",
    "Client",
    "Report",
    "Server",
    "find_binary",
    "train_metadata",
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
