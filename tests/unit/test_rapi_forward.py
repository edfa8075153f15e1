"""A candidate's RAPI forwards to the master's: request as it came, answer streamed back."""

from __future__ import annotations

from treq.testing import StubTreq
from twisted.internet import defer, error
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.web.client import ResponseDone, ResponseNeverReceived
from twisted.web.http_headers import Headers
from twisted.web.resource import Resource

from ganeti.rapi.forward import ForwardingResource, forwarded_headers


class Local(Resource):
    isLeaf = True

    def render(self, request):
        return b"local"


class Response:
    code, phrase = 201, b"Created"

    def __init__(self):
        self.headers = Headers({b"Content-Type": [b"application/json"], b"Connection": [b"close"]})

    def deliverBody(self, protocol):
        protocol.dataReceived(b'{"job": ')
        protocol.dataReceived(b"7}")
        protocol.connectionLost(Failure(ResponseDone()))


class Agent:
    """Answers each request with the next outcome (the last one repeats)."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)
        self.requests = []

    def request(self, method, url, headers, producer):
        body = producer._inputFile.read() if producer is not None else b""
        self.requests.append((method, url, headers, body))
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        return defer.succeed(outcome) if not isinstance(outcome, Exception) else defer.fail(outcome)


def serve(master, *outcomes, method="POST", path="/2/instances?dry-run=1", body=b'{"a": 1}', window=5.0):
    """Forward one request; C{master} is a value, or a list of the values of successive lookups."""
    agent = Agent(*outcomes)
    clock = Clock()
    masters = list(master) if isinstance(master, list) else [master]
    resource = ForwardingResource(Local(), lambda: masters.pop(0) if len(masters) > 1 else masters[0], 5080, agent,
                                  clock, window=window)
    stub = StubTreq(resource)
    d = stub.request(method, "https://node3" + path, data=body,
                     headers={b"Authorization": [b"Basic amFjazphYmM="], b"Connection": [b"keep-alive"]})
    stub.flush()
    out = []
    d.addCallback(lambda response: stub.content(response).addCallback(lambda content: (response, content)))
    d.addBoth(out.append)
    for _ in range(int(window * 10) + 20):
        stub.flush()
        if out:
            break
        clock.advance(0.1)
        stub.flush()
    return agent, out[0]


def test_the_master_serves_itself():
    agent, (response, content) = serve(None, Response())
    assert content == b"local" and agent.requests == []


def test_a_candidate_forwards_request_and_credentials_and_streams_the_answer():
    agent, (response, content) = serve("127.0.1.1", Response())
    (method, url, headers, body), = agent.requests
    assert (method, url, body) == (b"POST", b"https://127.0.1.1:5080/2/instances?dry-run=1", b'{"a": 1}')
    assert headers.getRawHeaders(b"Authorization") == [b"Basic amFjazphYmM="]
    assert not headers.hasHeader(b"Connection") and not headers.hasHeader(b"Host")
    assert response.code == 201 and content == b'{"job": 7}'
    assert response.headers.getRawHeaders(b"Content-Type") == [b"application/json"]


def test_an_unreachable_master_is_a_502_after_the_window():
    agent, (response, content) = serve("127.0.1.1", error.ConnectionRefusedError(), window=3.0)
    assert response.code == 502 and b"cannot be reached" in content
    assert len(agent.requests) > 3


def test_a_refused_request_goes_to_the_new_master():
    """A failover: the old master refuses, ssconf then names the new one, which answers."""
    agent, (response, content) = serve(["127.0.1.1", "127.0.1.2"], error.ConnectionRefusedError(),
                                       Response())
    assert response.code == 201 and content == b'{"job": 7}'
    assert [url for _, url, _, _ in agent.requests] == [b"https://127.0.1.1:5080/2/instances?dry-run=1",
                                                        b"https://127.0.1.2:5080/2/instances?dry-run=1"]
    assert agent.requests[1][3] == b'{"a": 1}'


def test_this_node_became_master_serves_itself():
    agent, (response, content) = serve(["127.0.1.1", None], error.ConnectionRefusedError(), Response())
    assert content == b"local" and len(agent.requests) == 1


def test_a_lost_post_is_not_sent_twice():
    """A POST whose connection broke after it was sent may have been done: 502, outcome unknown."""
    agent, (response, content) = serve(["127.0.1.1", "127.0.1.2"], ResponseNeverReceived([Failure(error.ConnectionLost())]),
                                       Response())
    assert response.code == 502 and b"Outcome unknown" in content
    assert len(agent.requests) == 1


def test_a_lost_get_is_sent_again():
    agent, (response, content) = serve(["127.0.1.1", "127.0.1.1", "127.0.1.2"],
                                       ResponseNeverReceived([Failure(error.ConnectionLost())]), Response(),
                                       method="GET", path="/2/jobs/7", body=b"")
    assert response.code == 201 and len(agent.requests) == 2


def test_hop_by_hop_headers_stay():
    kept = forwarded_headers(Headers({b"Transfer-Encoding": [b"chunked"], b"X-Ok": [b"1"], b"TE": [b"x"]}))
    assert dict(kept.getAllRawHeaders()) == {b"X-Ok": [b"1"]}
