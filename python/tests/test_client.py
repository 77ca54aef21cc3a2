"""attune.Client against a real `attune serve` on loopback (the `served` fixture)."""

from __future__ import annotations

import builtins
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Iterator

import pytest

import attune
from conftest import Served

COMMITS = [
    ("n1", "Fix the crash in the config parser when a key is empty", "2026-10-02"),
    ("n2", "Add a --quiet flag to the importer", None),
    ("n3", "Document the release process", None),
    ("n4", "Speed up the test suite by caching fixtures", None),
    ("n5", "Rename the logging helpers", None),
]


def test_health_metrics_and_openapi(client: attune.Client) -> None:
    assert client.health() == {"status": "ok"}
    assert "/v1/retrieve" in client.openapi()["paths"]
    client.retrieve("nobody", "warm up")
    assert 'attune_requests_total{route="retrieve",status="200"}' in client.metrics()


def test_documents_added_are_retrieved_back(client: attune.Client) -> None:
    assert client.add_documents("ann", COMMITS) == {"documents": len(COMMITS)}
    r = client.retrieve("ann", "config parser crash", k=3, task="commit_subject")
    assert r["request_id"].startswith("req_")
    assert r["model_version"].startswith("bm25@")
    assert len(r["documents"]) == 3
    top = r["documents"][0]
    assert (top["id"], top["source"], top["text"]) == ("n1", "user", COMMITS[0][1])
    assert [d["score"] for d in r["documents"]] == sorted((d["score"] for d in r["documents"]), reverse=True)

    # One document by its own URL; then replace it, then delete it.
    assert client.add_document("ann", "n6", "The parser now reads config files with comments") == {"documents": 1}
    ids = [d["id"] for d in client.retrieve("ann", "parser comments config files", k=5)["documents"]]
    assert ids[0] == "n6"
    client.add_document("ann", "n6", "Bump the version", date="2026-11-01")
    assert "parser" not in next(d["text"] for d in client.retrieve("ann", "version bump", k=6)["documents"] if d["id"] == "n6")
    assert client.delete_document("ann", "n6") == {"deleted": "n6"}
    assert "n6" not in [d["id"] for d in client.retrieve("ann", "version bump", k=10)["documents"]]
    with pytest.raises(attune.NotFound) as e:
        client.delete_document("ann", "n6")
    assert e.value.status == 404 and e.value.field == "id"


def test_ids_are_escaped_path_segments(client: attune.Client) -> None:
    # Spaces, '%', '?', '#' and non-ASCII travel escaped; the user sees only its own documents.
    user, doc = "bob smith?%#\u00e9", "b 1?#"
    client.add_documents(user, [(doc, "a note about gardening tools")])
    docs = client.retrieve(user, "gardening", k=5, sources=["user"])["documents"]
    assert [d["id"] for d in docs] == [doc]
    assert client.get_document(user, doc) == {"id": doc, "text": "a note about gardening tools"}
    assert [d["id"] for d in client.iter_documents(user)] == [doc]
    assert client.list_documents(user)["total"] == 1
    assert client.delete_document(user, doc) == {"deleted": doc}
    assert client.delete_user(user)["rows"] >= 1
    # A '/' cannot be in one path segment: refused before any request.
    with pytest.raises(ValueError):
        client.add_documents("../bob", [("b1", "x")])
    with pytest.raises(ValueError):
        client.delete_document("ann", "")


def test_corpus_search_and_sources(client: attune.Client) -> None:
    client.add_corpus_documents([{"id": "faq-7", "text": "The config parser rejects empty keys since 2.1"},
                                 ("faq-8", "Releases are cut every second Tuesday")])
    hits = client.search("empty keys", k=3)
    assert hits["query"] == "empty keys" and hits["request_id"].startswith("req_")
    assert hits["topk"][0]["pid"] == "faq-7" and hits["topk"][0]["rank"] == 1
    only_corpus = client.retrieve("carol", "config parser empty keys", k=5, sources=["corpus"])["documents"]
    assert {d["source"] for d in only_corpus} == {"corpus"} and only_corpus[0]["id"] == "faq-7"
    # Read back: one by id, and the whole corpus a page at a time.
    assert client.get_corpus_document("faq-8") == {"id": "faq-8", "text": "Releases are cut every second Tuesday"}
    page = client.list_corpus_documents(limit=1)
    assert page["total"] == 2 and [d["id"] for d in page["documents"]] == ["faq-7"] and page["next"] == "faq-7"
    assert [d["id"] for d in client.iter_corpus_documents(page_size=1)] == ["faq-7", "faq-8"]
    assert client.delete_corpus_document("faq-8") == {"deleted": "faq-8"}
    with pytest.raises(attune.NotFound):
        client.delete_corpus_document("faq-8")
    with pytest.raises(attune.NotFound):
        client.get_corpus_document("faq-8")
    client.delete_corpus_document("faq-7")


def test_feedback_is_accepted_in_every_form(client: attune.Client) -> None:
    client.add_documents("dana", COMMITS)
    r = client.retrieve("dana", "config parser crash", k=3, task="commit_subject")
    ids = [d["id"] for d in r["documents"]]
    assert client.feedback(r["request_id"], {ids[0]: 1.0, ids[1]: 0.0}) == {"request_id": r["request_id"], "records": 2}
    assert client.feedback(r["request_id"], [{"id": ids[2], "utility": 0.5, "source": "user"}])["records"] == 1
    assert client.feedback(r["request_id"], reward=0.7)["records"] == 1
    assert client.feedback(r["request_id"], output="Fix config parser crash",
                           reference="Fix the crash in the config parser")["records"] == 1
    # A document the request did not serve: 400 naming the field, nothing written.
    unserved = next(c[0] for c in COMMITS if c[0] not in ids)
    with pytest.raises(attune.BadRequest) as e:
        client.feedback(r["request_id"], {unserved: 1.0})
    assert e.value.field == "utilities[0].id" and unserved in e.value.message
    with pytest.raises(attune.NotFound) as nf:
        client.feedback("req_000000000000000000000000", {"n1": 1.0})
    assert nf.value.field == "request_id"
    with pytest.raises(attune.BadRequest):  # nothing to record
        client.feedback(r["request_id"])


def test_bad_requests_name_the_field(client: attune.Client) -> None:
    cases = [
        (lambda: client.retrieve("ann", "config", k=0), "k"),
        (lambda: client.retrieve("ann", ""), "query"),
        (lambda: client.add_documents("ann", [{"id": "x"}]), "documents[0].text"),
        (lambda: client.add_documents("ann", []), "documents"),
        (lambda: client.retrieve("ann", "config", task="no_such_task"), "task"),
        (lambda: client.rerank("q", []), "documents"),
    ]
    for call, field in cases:
        with pytest.raises(attune.BadRequest) as e:
            call()
        err = e.value
        assert (err.status, err.field) == (400, field), str(err)
        assert err.body is not None and err.body["error"]["field"] == field and err.body["error"]["status"] == 400
        assert err.message and isinstance(err, attune.ApiError) and isinstance(err, attune.AttuneError)
    with pytest.raises(attune.BadRequest) as e:
        client.request("POST", "/v1/retrieve", None)  # no body
    assert e.value.field == "body"
    with pytest.raises(attune.NotFound) as nf:
        client.request("GET", "/v1/nothing-here")
    assert nf.value.status == 404


def test_keys(served: Served, client: attune.Client) -> None:
    with pytest.raises(attune.AuthError) as e:
        attune.Client(served.server.url, "atk_" + "0" * 40).retrieve("ann", "config")
    assert (e.value.status, e.value.field) == (401, "Authorization")
    with pytest.raises(attune.AuthError) as e:
        attune.Client(served.server.url, "").retrieve("ann", "config")
    assert "no API key" in e.value.message
    # A second key works until it is revoked; the next request with it gets 401.
    spare = served.runner.tenant_add("acme", key_only=True)
    c2 = served.server.client(spare)
    assert c2.retrieve("ann", "config")["request_id"]
    assert served.runner.tenant_revoke(spare[:12]) == 1
    with pytest.raises(attune.AuthError):
        c2.retrieve("ann", "config")
    assert client.health()["status"] == "ok"  # the first key still works


def test_tenants_are_isolated(served: Served, client: attune.Client) -> None:
    client.add_documents("erin", COMMITS)
    r = client.retrieve("erin", "config parser", k=3)
    other = served.server.client(served.other_key)
    assert other.retrieve("erin", "config parser", k=3)["documents"] == []
    with pytest.raises(attune.NotFound) as e:
        other.feedback(r["request_id"], {r["documents"][0]["id"]: 1.0})
    assert e.value.field == "request_id"


def test_delete_user_removes_documents_requests_and_feedback(served: Served, client: attune.Client) -> None:
    client.add_documents("frank", COMMITS)
    r = client.retrieve("frank", "config parser crash", k=2)
    client.feedback(r["request_id"], {d["id"]: 1.0 for d in r["documents"]})
    gone = client.delete_user("frank")
    # the documents, the request, its 2 feedback records, and the BM25 statistics the query stored
    assert gone["deleted"] == "frank" and gone["rows"] == len(COMMITS) + 1 + 2 + 1
    assert client.retrieve("frank", "config parser crash", k=5, sources=["user"])["documents"] == []
    assert client.delete_user("frank")["rows"] == 1  # the retrieve just above is a request of frank's
    with pytest.raises(attune.NotFound):
        client.feedback(r["request_id"], reward=1.0)
    acme = next(t for t in served.runner.tenant_list() if t["name"] == "acme")
    assert acme["active_keys"] >= 1 and acme["keys"][0]["prefix"] == served.key[:12]


def test_rerank(client: attune.Client) -> None:
    r = client.rerank("config parser", ["release notes", "parser config fix", {"text": "config file format"}], top_n=2)
    assert [x["index"] for x in r["results"]] == [1, 2]
    assert r["results"][0]["relevance_score"] > r["results"][1]["relevance_score"]
    assert r["model_version"].startswith("bm25@")


# --- the transport, without attune: closed ports, silent servers, other error statuses -------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_is_a_connection_error() -> None:
    c = attune.Client(f"http://127.0.0.1:{_free_port()}", "k", timeout=2)
    with pytest.raises(attune.ConnectionError) as e:
        c.retrieve("ann", "q")
    assert isinstance(e.value, builtins.ConnectionError) and isinstance(e.value, attune.AttuneError)
    with pytest.raises(attune.ConnectionError):
        c.wait_ready(timeout=0.2)


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)  # accepts connections (the kernel does), never answers
        c = attune.Client(f"http://127.0.0.1:{s.getsockname()[1]}", "k", timeout=0.3)
        with pytest.raises(attune.ConnectionError) as e:
            c.health()
    assert "no answer within 0.3 s" in str(e.value)


class _Canned(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        status = int(self.path.strip("/"))
        body = json.dumps({"error": {"status": status, "message": f"canned {status}"}}).encode() \
            if status != 502 else b"<html>bad gateway</html>"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def canned() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Canned)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status,kind", [(400, attune.BadRequest), (401, attune.AuthError), (403, attune.AuthError),
                                         (404, attune.NotFound), (413, attune.BadRequest), (422, attune.BadRequest),
                                         (429, attune.RateLimited), (500, attune.ServerError),
                                         (502, attune.ServerError), (418, attune.ApiError)])
def test_statuses_map_to_error_classes(canned: str, status: int, kind: type) -> None:
    with pytest.raises(attune.ApiError) as e:
        attune.Client(canned, "k").request("GET", f"/{status}")
    assert type(e.value) is kind and e.value.status == status and e.value.field is None
    assert e.value.message == (f"canned {status}" if status != 502 else "<html>bad gateway</html>")


def test_client_arguments() -> None:
    assert attune.Client("127.0.0.1:9").url == "http://127.0.0.1:9"
    with pytest.raises(ValueError):
        attune.Client("ftp://x")
    with pytest.raises(TypeError):
        attune.Client("http://127.0.0.1:9").add_documents("u", ["just a string"])  # type: ignore[list-item]
    assert "atk_01234567..." in repr(attune.Client("http://127.0.0.1:9", "atk_0123456789abcdef"))


def test_conversation_feedback_is_filed_by_the_servers_curator(cli: attune.Attune, client: attune.Client) -> None:
    # The session's server curates no user feedback: 503, typed.
    with pytest.raises(attune.ServerError) as e:
        client.conversation_feedback("c1", "ann", "user: zstdtool compresses archives")
    assert e.value.status == 503
    # A server with the planted curator files a preference into the user's own documents.
    key = cli.tenant_add("curated")
    with cli.serve(config={"user_feedback": {"llm": "planted:curator"}}) as server:
        c = server.client(key)
        r = c.conversation_feedback("c2", "bob", [{"role": "user", "content": "I prefer vim for my editing"}])
        assert r["filing"] == "personal" and r["document_id"] == "uf-c2"
        assert c.conversation_feedback("c3", "bob", "user: ok")["filing"] == "no_information"
        got = c.retrieve("bob", "prefer vim editing", k=5)
        assert any(d["id"] == "uf-c2" for d in got["documents"])
        assert not any(d["id"] == "uf-c2" for d in c.retrieve("ann", "prefer vim editing", k=5)["documents"])
        # Filed into bob's documents, not the shared corpus.
        assert c.get_document("bob", "uf-c2")["text"] == r["summary"]
        assert c.list_corpus_documents()["total"] == 0
