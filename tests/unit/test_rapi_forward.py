"""A candidate's RAPI forwards to the master's: request as it came, answer streamed back."""

from __future__ import annotations

from treq.testing import StubTreq
from twisted.internet import defer, error
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.web.client import ResponseDone
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
    def __init__(self, outcome):
        self.outcome = outcome
        self.requests = []

    def request(self, method, url, headers, producer):
        body = producer._inputFile.read() if producer is not None else b""
        self.requests.append((method, url, headers, body))
        return defer.succeed(self.outcome) if not isinstance(self.outcome, Exception) else defer.fail(self.outcome)


def serve(master, outcome, method="POST", path="/2/instances?dry-run=1", body=b'{"a": 1}'):
    agent = Agent(outcome)
    resource = ForwardingResource(Local(), lambda: master, 5080, agent, Clock())
    stub = StubTreq(resource)
    d = stub.request(method, "https://node3" + path, data=body,
                     headers={b"Authorization": [b"Basic amFjazphYmM="], b"Connection": [b"keep-alive"]})
    stub.flush()
    out = []
    d.addCallback(lambda response: stub.content(response).addCallback(lambda content: (response, content)))
    d.addBoth(out.append)
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


def test_an_unreachable_master_is_a_502():
    agent, (response, content) = serve("127.0.1.1", error.ConnectionRefusedError())
    assert response.code == 502 and b"cannot be reached" in content


def test_hop_by_hop_headers_stay():
    kept = forwarded_headers(Headers({b"Transfer-Encoding": [b"chunked"], b"X-Ok": [b"1"], b"TE": [b"x"]}))
    assert dict(kept.getAllRawHeaders()) == {b"X-Ok": [b"1"]}
