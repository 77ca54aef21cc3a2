"""An HTTP client for ``attune serve`` (docs/serve.md, docs/openapi.json).

Standard library only (``urllib.request``)::

    from attune import Client

    c = Client("http://127.0.0.1:8080", api_key="atk_...")
    c.add_documents("ann", [{"id": "n1", "text": "Fix the crash in the config parser"}])
    r = c.retrieve("ann", "config parser crash", k=2, task="commit_subject")
    c.feedback(r["request_id"], utilities={d["id"]: 1.0 for d in r["documents"][:1]})

Every method returns the server's JSON answer as a dict (typed below with ``TypedDict``),
and every error answer raises a subclass of :class:`attune.errors.ApiError` that carries
the server's ``status``, ``field`` and ``message``.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, TypedDict, Union, cast

from .errors import (
    ApiError,
    AuthError,
    BadRequest,
    ConnectionError,
    NotFound,
    RateLimited,
    ServerError,
)

__all__ = [
    "Client",
    "DocumentLike",
    "ServedDocument",
    "RetrieveResponse",
    "FeedbackResponse",
    "DocumentsWritten",
    "DeletedDocument",
    "DeletedUser",
    "RerankResult",
    "RerankResponse",
    "SearchHit",
    "SearchResponse",
]

# --- The server's answers (docs/openapi.json, components.schemas) ---------------------------


class ServedDocument(TypedDict):
    """A document of a retrieve answer, best first."""

    id: str
    text: str
    score: float
    source: str  # "user" or "corpus"


class RetrieveResponse(TypedDict):
    """``POST /v1/retrieve``: the documents and the ids that name this answer."""

    request_id: str  # "req_" + 24 hex digits; give it to feedback()
    model_version: str  # "SPEC@vN", or "SPEC@request" for a spec the call named
    documents: List[ServedDocument]


class FeedbackResponse(TypedDict):
    """``POST /v1/feedback``: how many records were committed."""

    request_id: str
    records: int


class DocumentsWritten(TypedDict):
    """A documents PUT/POST: how many documents were stored."""

    documents: int


class DeletedDocument(TypedDict):
    """A document DELETE: the deleted document's id."""

    deleted: str


class DeletedUser(TypedDict):
    """``DELETE /v1/users/{user}``: the user and how many stored rows were removed."""

    deleted: str
    rows: int


class StoredDocument(TypedDict, total=False):
    """A stored document read back: ``id``, ``text`` and ``date`` (YYYY-MM-DD) when it has one."""

    id: str
    text: str
    date: str


class DocumentPage(TypedDict):
    """``GET /v1/users/{user}/documents`` or ``GET /v1/corpus/documents``: one page in id order."""

    documents: List[StoredDocument]
    total: int
    next: Optional[str]


class RerankResult(TypedDict):
    """One result of a rerank: the position in the request's documents and its score."""

    index: int
    relevance_score: float


class RerankResponse(TypedDict):
    """``POST /v1/rerank`` (Cohere-style)."""

    results: List[RerankResult]
    model_version: str


class SearchHit(TypedDict):
    """One corpus passage of ``GET /search`` (ColBERTv2-style)."""

    text: str
    long_text: str
    pid: str
    rank: int
    score: float


class SearchResponse(TypedDict):
    """``GET /search``."""

    query: str
    topk: List[SearchHit]
    request_id: str
    model_version: str


#: A document to store: a mapping with ``id``, ``text`` and optionally ``date``
#: (YYYY-MM-DD), or an ``(id, text)`` / ``(id, text, date)`` tuple.
DocumentLike = Union[Mapping[str, Any], Tuple[str, str], Tuple[str, str, Optional[str]]]

_STATUS_ERRORS: Dict[int, Type[ApiError]] = {
    400: BadRequest,
    401: AuthError,
    403: AuthError,
    404: NotFound,
    413: BadRequest,
    422: BadRequest,
    429: RateLimited,
}


def _error_class(status: int) -> Type[ApiError]:
    if status in _STATUS_ERRORS:
        return _STATUS_ERRORS[status]
    if status >= 500:
        return ServerError
    return ApiError


def _document(doc: DocumentLike, where: str) -> Dict[str, Any]:
    """One document as the server reads it: ``{"id", "text"[, "date"]}``."""
    if isinstance(doc, Mapping):
        return dict(doc)
    parts: List[Any] = list(doc) if isinstance(doc, (tuple, list)) else []
    if len(parts) in (2, 3):
        out: Dict[str, Any] = {"id": parts[0], "text": parts[1]}
        if len(parts) == 3 and parts[2] is not None:
            out["date"] = parts[2]
        return out
    raise TypeError(f"{where}: a document is a mapping {{id, text, date?}} or an (id, text[, date]) tuple, "
                    f"not {type(doc).__name__}")


def _segment(value: str, what: str) -> str:
    """A user or document id as one path segment, escaped ('/' cannot be in one: no route matches it)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value or "/" in value:
        raise ValueError(f"{what} {value!r}: an id in a URL path must be one non-empty segment, without '/'")
    return urllib.parse.quote(value, safe="")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Client:
    """A client of one ``attune serve`` server, as one tenant (one API key).

    Args:
        url: the server's base URL, e.g. ``"http://127.0.0.1:8080"``.
        api_key: the tenant's key (``attune tenant add NAME`` prints it), sent as
            ``Authorization: Bearer KEY``; default: the environment's ``ATTUNE_API_KEY``.
        timeout: seconds to wait for each answer (connect and read) before raising
            :class:`attune.errors.ConnectionError`.
        use_proxy: send requests through the environment's HTTP proxy (``http_proxy``...).
            Default: yes, except to a loopback address, which never goes through a proxy.

    The client holds no connection between calls, so one instance may be shared by threads.
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        api_key: Optional[str] = None,
        *,
        timeout: float = 30.0,
        use_proxy: Optional[bool] = None,
    ) -> None:
        if "://" not in url:
            url = "http://" + url
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"url {url!r}: expected http://HOST:PORT")
        self.url = url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("ATTUNE_API_KEY")
        self.timeout = timeout
        if use_proxy is None:
            use_proxy = not _is_loopback(parsed.hostname)
        handlers: List[urllib.request.BaseHandler] = []
        if not use_proxy:
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        key = (self.api_key[:12] + "...") if self.api_key else None
        return f"Client({self.url!r}, api_key={key!r})"

    # --- transport ---------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Optional[Any] = None,
        *,
        query: Optional[Mapping[str, Any]] = None,
        auth: bool = True,
        raw: bool = False,
    ) -> Any:
        """Sends one request and returns the parsed JSON answer (or its text with ``raw``).

        The building block of every other method; use it for an endpoint this client has no
        method for. ``path`` starts with ``/``; ``body`` is sent as JSON.

        Raises:
            BadRequest, AuthError, NotFound, RateLimited, ServerError, ApiError: an error answer.
            ConnectionError: no answer (refused, reset, timed out).
        """
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None
        headers = {"Accept": "application/json", "User-Agent": "attune-python"}
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if auth and self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as e:
            payload = e.read() if e.fp is not None else b""
            raise self._api_error(e.code, payload, method, url) from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, socket.timeout):
                reason = f"no answer within {self.timeout:g} s"
            raise ConnectionError(url, str(reason)) from e
        except (socket.timeout, TimeoutError) as e:
            raise ConnectionError(url, f"no answer within {self.timeout:g} s") from e
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionError(url, f"{type(e).__name__}: {e}") from e
        text = payload.decode("utf-8", errors="replace")
        if raw:
            return text
        try:
            return json.loads(text) if text else None
        except ValueError as e:
            raise ServerError(200, f"the answer is not JSON: {text[:200]!r}", method=method, url=url) from e

    @staticmethod
    def _api_error(status: int, payload: bytes, method: str, url: str) -> ApiError:
        text = payload.decode("utf-8", errors="replace")
        body: Optional[Dict[str, Any]] = None
        message, field = text.strip() or http.client.responses.get(status, "error"), None
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            body = parsed
            err = parsed.get("error")
            if isinstance(err, dict):
                message = str(err.get("message", message))
                field = err.get("field")
            elif isinstance(err, str):
                message = err
        return _error_class(status)(status, message, field=field, body=body, method=method, url=url)

    # --- service -----------------------------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok"}`` when the server is up (no key needed)."""
        return cast(Dict[str, Any], self.request("GET", "/healthz", auth=False))

    def wait_ready(self, timeout: float = 10.0, interval: float = 0.05) -> None:
        """Polls ``/healthz`` until the server answers, or raises ConnectionError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.health()
                return
            except ConnectionError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(interval)

    def metrics(self) -> str:
        """``GET /metrics``: Prometheus text (no key needed)."""
        return cast(str, self.request("GET", "/metrics", auth=False, raw=True))

    def openapi(self) -> Dict[str, Any]:
        """``GET /openapi.json``: the OpenAPI document the server runs with."""
        return cast(Dict[str, Any], self.request("GET", "/openapi.json", auth=False))

    # --- retrieval and feedback --------------------------------------------------------------

    def retrieve(
        self,
        user: str,
        query: str,
        k: Optional[int] = None,
        *,
        task: Optional[str] = None,
        agent: Optional[str] = None,
        retriever: Optional[str] = None,
        sources: Optional[Sequence[str]] = None,
    ) -> RetrieveResponse:
        """``POST /v1/retrieve``: ranks ``user``'s documents and the tenant's corpus for ``query``.

        Args:
            user: whose documents may be served (with the corpus).
            query: the query text.
            k: how many documents (server default 5, at most ``limits.max_k``).
            task: the task whose metric scores ``output`` feedback later (``"commit_subject"``...).
            agent: an agent the server's config declares; its model serves the call.
            retriever: a spec the config's ``retrievers`` allows, to rank this call instead.
            sources: ``["user"]``, ``["corpus"]`` or both (the default).

        Returns:
            ``{"request_id", "model_version", "documents": [{"id", "text", "score", "source"}]}``.
        """
        body: Dict[str, Any] = {"user": user, "query": query}
        for name, value in (("k", k), ("task", task), ("agent", agent), ("retriever", retriever)):
            if value is not None:
                body[name] = value
        if sources is not None:
            body["sources"] = list(sources)
        return cast(RetrieveResponse, self.request("POST", "/v1/retrieve", body))

    def feedback(
        self,
        request_id: str,
        utilities: Optional[Union[Mapping[str, float], Sequence[Mapping[str, Any]]]] = None,
        *,
        reward: Optional[float] = None,
        output: Optional[str] = None,
        reference: Optional[str] = None,
    ) -> FeedbackResponse:
        """``POST /v1/feedback``: how much a served answer helped. Acknowledged once committed.

        Give at least one of:
            utilities: per served document, ``{doc_id: utility}`` or
                ``[{"id", "utility", "source"?}]`` (``source`` only for an id served from both
                the user's documents and the corpus).
            reward: one number for the whole list served.
            output, reference: what the LLM wrote with the documents and what it should have
                written; the server scores it with the request's task metric (the retrieve
                call must have named a ``task``).

        Returns:
            ``{"request_id", "records"}``: how many feedback records were written.
        """
        body: Dict[str, Any] = {"request_id": request_id}
        if utilities is not None:
            body["utilities"] = dict(utilities) if isinstance(utilities, Mapping) else [dict(u) for u in utilities]
        if reward is not None:
            body["reward"] = reward
        if output is not None:
            body["output"] = output
        if reference is not None:
            body["reference"] = reference
        return cast(FeedbackResponse, self.request("POST", "/v1/feedback", body))

    # --- documents ---------------------------------------------------------------------------

    def add_documents(self, user: str, documents: Iterable[DocumentLike]) -> DocumentsWritten:
        """``PUT /v1/users/{user}/documents``: inserts or replaces documents of a user.

        ``documents``: mappings ``{"id", "text", "date"?}`` or ``(id, text[, date])`` tuples,
        at most ``limits.max_documents_per_call`` (default 1000) in one call. All are
        written in one transaction, or none.
        """
        docs = [_document(d, f"documents[{i}]") for i, d in enumerate(documents)]
        return cast(DocumentsWritten, self.request("PUT", f"/v1/users/{_segment(user, 'user')}/documents", {"documents": docs}))

    def add_document(self, user: str, doc_id: str, text: str, date: Optional[str] = None) -> DocumentsWritten:
        """``PUT /v1/users/{user}/documents/{id}``: inserts or replaces one document of a user."""
        body: Dict[str, Any] = {"text": text}
        if date is not None:
            body["date"] = date
        return cast(DocumentsWritten, self.request("PUT", f"/v1/users/{_segment(user, 'user')}/documents/{_segment(doc_id, 'doc_id')}", body))

    def delete_document(self, user: str, doc_id: str) -> DeletedDocument:
        """``DELETE /v1/users/{user}/documents/{id}``; NotFound when the user has no such document."""
        return cast(DeletedDocument, self.request("DELETE", f"/v1/users/{_segment(user, 'user')}/documents/{_segment(doc_id, 'doc_id')}"))

    def delete_user(self, user: str) -> DeletedUser:
        """``DELETE /v1/users/{user}``: removes the user's documents, requests and feedback.

        A user with nothing stored is not an error (``rows`` 0).
        """
        return cast(DeletedUser, self.request("DELETE", f"/v1/users/{_segment(user, 'user')}"))

    def add_corpus_documents(self, documents: Iterable[DocumentLike]) -> DocumentsWritten:
        """``POST /v1/corpus/documents``: inserts or replaces documents of the tenant's shared corpus."""
        docs = [_document(d, f"documents[{i}]") for i, d in enumerate(documents)]
        return cast(DocumentsWritten, self.request("POST", "/v1/corpus/documents", {"documents": docs}))

    def delete_corpus_document(self, doc_id: str) -> DeletedDocument:
        """``DELETE /v1/corpus/documents/{id}``; NotFound when the corpus has no such document."""
        return cast(DeletedDocument, self.request("DELETE", f"/v1/corpus/documents/{_segment(doc_id, 'doc_id')}"))

    def _page(self, path: str, after: Optional[str], limit: Optional[int]) -> DocumentPage:
        query: Dict[str, Any] = {}
        if after is not None:
            query["after"] = after
        if limit is not None:
            query["limit"] = limit
        return cast(DocumentPage, self.request("GET", path + ("?" + urllib.parse.urlencode(query) if query else "")))

    def _all(self, path: str, limit: int) -> Iterator[StoredDocument]:
        after: Optional[str] = None
        while True:
            page = self._page(path, after, limit)
            yield from page["documents"]
            if page["next"] is None:
                return
            after = page["next"]

    def list_documents(self, user: str, *, after: Optional[str] = None, limit: Optional[int] = None) -> DocumentPage:
        """``GET /v1/users/{user}/documents``: one page of a user's documents in id order
        (``limit`` a page, default 100; ``after``: the previous page's ``next``)."""
        return self._page(f"/v1/users/{_segment(user, 'user')}/documents", after, limit)

    def iter_documents(self, user: str, *, page_size: int = 1000) -> Iterator[StoredDocument]:
        """Every document of a user, in id order, a page at a time."""
        return self._all(f"/v1/users/{_segment(user, 'user')}/documents", page_size)

    def get_document(self, user: str, doc_id: str) -> StoredDocument:
        """``GET /v1/users/{user}/documents/{id}``; NotFound when the user has no such document."""
        return cast(StoredDocument, self.request("GET", f"/v1/users/{_segment(user, 'user')}/documents/{_segment(doc_id, 'doc_id')}"))

    def list_corpus_documents(self, *, after: Optional[str] = None, limit: Optional[int] = None) -> DocumentPage:
        """``GET /v1/corpus/documents``: one page of the tenant's shared corpus in id order."""
        return self._page("/v1/corpus/documents", after, limit)

    def iter_corpus_documents(self, *, page_size: int = 1000) -> Iterator[StoredDocument]:
        """Every document of the tenant's shared corpus, in id order, a page at a time."""
        return self._all("/v1/corpus/documents", page_size)

    def get_corpus_document(self, doc_id: str) -> StoredDocument:
        """``GET /v1/corpus/documents/{id}``; NotFound when the corpus has no such document."""
        return cast(StoredDocument, self.request("GET", f"/v1/corpus/documents/{_segment(doc_id, 'doc_id')}"))

    def conversation_feedback(
        self,
        conversation_id: str,
        user: str,
        messages: Union[str, Sequence[Mapping[str, str]]],
    ) -> Dict[str, Any]:
        """``POST /v1/conversations/{id}/feedback``: what ``user`` asserted in a conversation, curated
        by the server's ``user_feedback.llm`` into the tenant's shared corpus, the user's own
        documents, or nowhere (paper 004's user feedback; docs/serve.md).

        ``messages``: ``[{"role": "user" | "assistant" | "system", "content": ...}]``, or the
        conversation as one text of ``role: content`` lines.

        Returns ``{"conversation_id", "filing": "shared" | "personal" | "rejected" |
        "no_information" | "failed", "document_id", "summary", "evidence", "model_calls"}``.
        Raises ServerError (503) when the server curates no user feedback.
        """
        body: Dict[str, Any] = {"user": user}
        if isinstance(messages, str):
            body["conversation"] = messages
        else:
            body["messages"] = [dict(m) for m in messages]
        path = f"/v1/conversations/{_segment(conversation_id, 'conversation_id')}/feedback"
        return cast(Dict[str, Any], self.request("POST", path, body))

    # --- drop-in endpoints -------------------------------------------------------------------

    def rerank(
        self,
        query: str,
        documents: Sequence[Union[str, Mapping[str, Any]]],
        top_n: Optional[int] = None,
    ) -> RerankResponse:
        """``POST /v1/rerank`` (Cohere-style): orders the given texts for ``query``; nothing is stored.

        ``documents``: strings or ``{"text": ...}`` mappings. Each result's ``index`` is a
        position in ``documents``.
        """
        body: Dict[str, Any] = {"query": query, "documents": [d if isinstance(d, str) else dict(d) for d in documents]}
        if top_n is not None:
            body["top_n"] = top_n
        return cast(RerankResponse, self.request("POST", "/v1/rerank", body))

    def search(self, query: str, k: Optional[int] = None) -> SearchResponse:
        """``GET /search`` (ColBERTv2-style): the tenant's corpus only; recorded like a retrieve."""
        return cast(SearchResponse, self.request("GET", "/search", query={"query": query, "k": k}))
