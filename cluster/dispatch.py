"""API registry and per-request dispatch.

``ApiRegistry.register(api_key, min_version, max_version, handler, *, advertised_min=None,
error_response=None, raw=None)``: ``handler`` is ``async def handler(ctx, request) -> response``
(request = the decoded kio object of the request's version; response = the kio
response object of the same version, or ``None`` to send nothing, e.g. Produce acks=0).
A hot API may instead give ``raw``, ``async def raw(ctx, header, frame) -> RawResponse``,
which reads the frame and encodes the answer itself (handler ``None``).
``error_response(request, error_code) -> response`` (optional) builds that API's error
response; it is used for handler crashes (UNKNOWN_SERVER_ERROR) and unsupported versions
(UNSUPPORTED_VERSION). Without it those cases close the connection, as Kafka does when
it cannot answer.

ApiVersions is answered from the registry: it advertises exactly what is registered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from cluster import metrics
from cluster.codec import (
    CodecError,
    ErrorCode,
    RequestHeader,
    decode_body,
    decode_header,
    encode_response,
    request_schema,
)
from cluster.log_limit import LogLimiter
from cluster.security.authorizer import Operation, ResourceType
from cluster.security.sasl import SASL_HANDSHAKE, AuthenticationFailed, Gate, SaslAuthenticator
from cluster.security.tls import ANONYMOUS
from cluster.services import NodeServices

log = logging.getLogger("kcoord.dispatch")
warn = LogLimiter(log)  # bad input is logged, but a flood of it is not

Handler = Callable[["RequestContext", Any], Awaitable[Any]]
ErrorResponder = Callable[[Any, ErrorCode], Any]


@dataclass(frozen=True, slots=True)
class RawResponse:
    """What a raw handler returns: the encoded response frame and its error code (metrics)."""

    data: bytes
    error_code: ErrorCode


# A raw handler reads the frame and encodes the response itself (no kio on its path); it
# raises CodecError for a body it cannot read.
RawHandler = Callable[["RequestContext", RequestHeader, bytes], Awaitable[RawResponse]]


class LongPolls:
    """The long-poll waits (Fetch's ``max_wait``) of one connection, cut short as soon as another
    request is behind them: responses leave in request order, so a FindCoordinator or Metadata
    queued behind a Fetch would otherwise wait out the Fetch's whole wait (librdkafka sends them
    on the connection it fetches on; after a coordinator died each lookup took 500 ms). A Fetch
    answered early with what it has is valid Kafka; the client simply fetches again."""

    __slots__ = ("_waiters", "_behind")

    def __init__(self, behind: Callable[[], bool] = lambda: False) -> None:
        self._waiters: set[asyncio.Future[None]] = set()
        self._behind = behind

    def behind(self) -> bool:
        """Another request of the connection waits for this one's answer."""
        return self._behind()

    def add(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def discard(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def cut_short(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)


def _unbounded() -> int:
    return 1 << 62


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str  # Java InetAddress.toString() style: "/127.0.0.1"
    node: NodeServices  # the node it came to (cluster.node.Node)
    client_port: int = 0
    connection_id: int = 0
    listener: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    long_polls: LongPolls = field(default_factory=LongPolls)  # of the connection it came on
    auth: SaslAuthenticator | None = None  # the connection's SASL exchange, on a SASL listener
    principal: str = ANONYMOUS  # who the client is ("User:alice"), for the ACLs
    room: Callable[[], int] = _unbounded  # bytes a large answer may still take (queued.max.request.bytes)

    @property
    def ip(self) -> str:
        """The client's address as ACL hosts name it ("127.0.0.1")."""
        return self.client_host[1:]

    def allowed(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        """May this request's principal do ``op`` on the resource (always, without an authorizer)?"""
        access = self.node.access
        return not access.enabled or access.allowed(self.principal, self.ip, op, rtype, name)


# Checks a whole request before its handler runs, when the node has an authorizer: the error code
# to answer it with (through the API's error response), or None to serve it.
Authorize = Callable[[RequestContext, Any], ErrorCode | None]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler | None  # None when ``raw`` serves the API
    advertised_min: int
    error_response: ErrorResponder | None
    raw: RawHandler | None = None
    # the answer to a version outside the range, when the API has one that every version of a
    # client can read (ApiVersions: Kafka's v0 UNSUPPORTED_VERSION with the API list)
    unknown_version: Callable[[], Any] | None = None
    authorize: Authorize | None = None
    advertise_if: Callable[[], bool] | None = None  # advertised in ApiVersions only while this holds


class ApiRegistry:
    def __init__(self) -> None:
        self._apis: dict[int, ApiSpec] = {}

    def register(
        self,
        api_key: int,
        min_version: int,
        max_version: int,
        handler: Handler | None,
        *,
        advertised_min: int | None = None,
        error_response: ErrorResponder | None = None,
        raw: RawHandler | None = None,
        unknown_version: Callable[[], Any] | None = None,
        authorize: Authorize | None = None,
        advertise_if: Callable[[], bool] | None = None,
    ) -> None:
        if min_version > max_version:
            raise ValueError(f"api {api_key}: min_version {min_version} > max_version {max_version}")
        if (handler is None) == (raw is None):
            raise ValueError(f"api {api_key}: give either a handler or a raw handler")
        if authorize is not None and (error_response is None or handler is None):
            raise ValueError(f"api {api_key}: a whole-request check answers through error_response, for a handler")
        for v in range(min_version, max_version + 1):
            if request_schema(api_key, v) is None:
                raise ValueError(f"api {api_key} v{v} has no kio schema")
        adv = min_version if advertised_min is None else advertised_min
        self._apis[api_key] = ApiSpec(api_key, min_version, max_version, handler, adv, error_response, raw,
                                       unknown_version, authorize, advertise_if)

    def get(self, api_key: int) -> ApiSpec | None:
        return self._apis.get(api_key)

    def advertised(self) -> list[tuple[int, int, int]]:
        """``(api_key, min, max)`` for ApiVersions, sorted by key."""
        return sorted((s.api_key, s.advertised_min, s.max_version) for s in self._apis.values()
                      if s.advertise_if is None or s.advertise_if())

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._apis


class CloseConnection(Exception):
    """Dispatch decided to close the connection (already logged); ``answer``: written first."""

    def __init__(self, answer: bytes | None = None) -> None:
        super().__init__()
        self.answer = answer


class AnswerThenClose(Exception):
    """Raised by a handler: send ``response``, then close (a failed SASL exchange, as Kafka does)."""

    def __init__(self, response: Any) -> None:
        super().__init__()
        self.response = response


@dataclass(slots=True)
class ConnInfo:
    host: str
    port: int
    connection_id: int
    listener: str = ""  # the name of the listener it came in through (config `listeners`)
    long_polls: LongPolls = field(default_factory=LongPolls)
    auth: SaslAuthenticator | None = None  # on a SASL listener: its exchange (complete once authenticated)
    tls_principal: str | None = None  # on an SSL listener: User:<mapped certificate subject> or User:ANONYMOUS
    room: Callable[[], int] = _unbounded  # bytes a large answer may still take of the server's budget

    @property
    def principal(self) -> str:
        """Who the client is, as Kafka's default principal builder says: the SASL identity on a SASL
        listener, the certificate's on an SSL one, ``User:ANONYMOUS`` otherwise."""
        if self.auth is not None:
            return self.auth.principal or ANONYMOUS
        return self.tls_principal or ANONYMOUS


class Dispatcher:
    def __init__(self, registry: ApiRegistry, node: NodeServices, *, max_array_items: int = 1 << 62) -> None:
        self.registry = registry
        self.node = node
        self.max_array_items = max_array_items

    async def handle(self, frame: bytes, conn: ConnInfo) -> bytes | None:
        """Handle one request frame. Returns the encoded response, ``None`` for no
        response, or raises ``CloseConnection``."""
        auth = conn.auth
        if auth is not None and not auth.complete:
            token_reply = self._before_authentication(frame, conn, auth)
            if token_reply is not None:
                return token_reply
        elif auth is not None and auth.expires_at is not None:
            self._session_check(frame, conn, auth)
        try:
            header = decode_header(frame)
        except CodecError as e:
            warn.warning("bad_request_header", "event=bad_request_header conn=%d peer=%s:%d error=%r", conn.connection_id, conn.host,
                        conn.port, str(e))
            raise CloseConnection from None
        spec = self.registry.get(header.api_key)
        if spec is None:
            warn.warning("unknown_api_key", "event=unknown_api_key conn=%d peer=%s:%d api_key=%d api_version=%d client_id=%r",
                        conn.connection_id, conn.host, conn.port, header.api_key, header.api_version,
                        header.client_id)
            raise CloseConnection
        if not spec.min_version <= header.api_version <= spec.max_version:
            metrics.count_error(header.api_key, "unsupported_version")  # metrics
            return self._unsupported_version(spec, header, frame, conn)
        if spec.handler is None:  # served raw: register takes a handler or a raw handler
            assert spec.raw is not None
            return await self._handle_raw(spec, spec.raw, header, frame, conn)
        try:
            request = decode_body(header, frame, self.max_array_items)
        except CodecError as e:
            raise self._bad_body(header, conn, e) from None
        ctx = self._context(header, conn)
        started = time.perf_counter()  # metrics: latency, requests and errors per API
        try:
            denied = spec.authorize(ctx, request) if spec.authorize is not None and self.node.access.enabled else None
            if denied is None:
                response = await spec.handler(ctx, request)
            else:
                assert spec.error_response is not None  # register() holds them together
                response = spec.error_response(request, denied)
        except CloseConnection:
            metrics.observe_request(header.api_key, time.perf_counter() - started, None, "connection_closed")
            raise
        except AnswerThenClose as e:
            metrics.observe_request(header.api_key, time.perf_counter() - started, e.response, "connection_closed")
            raise CloseConnection(encode_response(header.api_key, header.correlation_id, e.response)) from None
        except Exception as e:  # noqa: BLE001 - one failing request must not take others down
            response = self._crash_response(spec, header, conn, e, lambda: request)
        metrics.observe_request(header.api_key, time.perf_counter() - started, response)  # metrics
        if response is None:
            return None
        try:
            return encode_response(header.api_key, header.correlation_id, response)
        except Exception as e:  # noqa: BLE001 - a response kio cannot write: say which, close
            log.error("event=response_encode_failed conn=%d api_key=%d api_version=%d error=%r", conn.connection_id,
                      header.api_key, header.api_version, f"{type(e).__name__}: {e}")
            raise CloseConnection from None

    def _before_authentication(self, frame: bytes, conn: ConnInfo, auth: SaslAuthenticator) -> bytes | None:
        """Kafka's SaslServerAuthenticator ahead of the APIs: after a v0 handshake a frame is a
        bare token (answered with a bare frame); otherwise only ApiVersions and the SASL APIs pass
        (None: dispatch it), anything else closes the connection."""
        if auth.expects_raw_token:
            try:
                reply = auth.authenticate(frame)
            except AuthenticationFailed as e:
                log.info("event=sasl_authentication_failed conn=%d peer=%s:%d listener=%s reason=%r",
                         conn.connection_id, conn.host, conn.port, conn.listener, str(e))
                raise CloseConnection from None
            if auth.complete:
                log.info("event=sasl_authenticated conn=%d peer=%s:%d principal=%s", conn.connection_id,
                         conn.host, conn.port, auth.principal)
            return len(reply or b"").to_bytes(4, "big") + (reply or b"")
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        gate = auth.gate(api_key)
        if gate in (Gate.SERVE, Gate.HANDSHAKE, Gate.AUTHENTICATE):
            return None
        if gate is Gate.ILLEGAL_STATE:  # after a v1 handshake: that API's error answer, then close
            raise CloseConnection(self._illegal_sasl_state(frame))
        warn.warning("unauthenticated_request", "event=unauthenticated_request conn=%d peer=%s:%d api_key=%d "
                     "action=close", conn.connection_id, conn.host, conn.port, api_key)
        raise CloseConnection

    @staticmethod
    def _session_check(frame: bytes, conn: ConnInfo, auth: SaslAuthenticator) -> None:
        """KIP-368 on an authenticated connection: a SaslHandshake starts re-authentication; once the
        session has expired anything else closes the connection, unanswered."""
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if api_key == SASL_HANDSHAKE and auth.begin_reauth():
            log.info("event=sasl_reauthentication_started conn=%d peer=%s:%d principal=%s", conn.connection_id,
                     conn.host, conn.port, auth.principal)
        elif auth.expired():
            log.info("event=sasl_session_expired conn=%d peer=%s:%d principal=%s api_key=%d action=close",
                     conn.connection_id, conn.host, conn.port, auth.principal, api_key)
            raise CloseConnection

    def _illegal_sasl_state(self, frame: bytes) -> bytes | None:
        try:
            header = decode_header(frame)
            spec = self.registry.get(header.api_key)
            if spec is None or spec.error_response is None:
                return None
            request = decode_body(header, frame, self.max_array_items)
            return encode_response(header.api_key, header.correlation_id,
                                   spec.error_response(request, ErrorCode.illegal_sasl_state))
        except Exception:  # noqa: BLE001 - no answer then: the connection closes all the same
            return None

    @staticmethod
    def _bad_body(header: RequestHeader, conn: ConnInfo, e: CodecError) -> CloseConnection:
        warn.warning("bad_request_body", "event=bad_request_body conn=%d peer=%s:%d api_key=%d api_version=%d error=%r",
                    conn.connection_id, conn.host, conn.port, header.api_key, header.api_version, str(e))
        return CloseConnection()

    @staticmethod
    def _crash_response(spec: ApiSpec, header: RequestHeader, conn: ConnInfo, e: Exception,
                        request: Callable[[], Any]) -> Any:
        """A handler failed: logged, answered with UNKNOWN_SERVER_ERROR where the API can say it."""
        log.error("event=handler_error conn=%d api_key=%d api_version=%d correlation_id=%d error=%r",
                  conn.connection_id, header.api_key, header.api_version, header.correlation_id,
                  f"{type(e).__name__}: {e}")
        if spec.error_response is None:
            raise CloseConnection from None
        try:
            return spec.error_response(request(), ErrorCode.unknown_server_error)
        except Exception as e2:  # noqa: BLE001
            log.error("event=error_response_failed api_key=%d error=%r", header.api_key, str(e2))
            raise CloseConnection from None

    def _context(self, header: RequestHeader, conn: ConnInfo) -> RequestContext:
        return RequestContext(
            api_key=header.api_key,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
            client_host="/" + conn.host,
            node=self.node,
            client_port=conn.port,
            connection_id=conn.connection_id,
            listener=conn.listener,
            long_polls=conn.long_polls,
            auth=conn.auth,
            principal=conn.principal,
            room=conn.room,
        )

    async def _handle_raw(self, spec: ApiSpec, raw: RawHandler, header: RequestHeader, frame: bytes,
                          conn: ConnInfo) -> bytes:
        started = time.perf_counter()
        try:
            answer = await raw(self._context(header, conn), header, frame)
        except CodecError as e:
            raise self._bad_body(header, conn, e) from None
        except Exception as e:  # noqa: BLE001 - one failing request must not take others down
            response = self._crash_response(spec, header, conn, e, lambda: decode_body(header, frame, self.max_array_items))
            return encode_response(header.api_key, header.correlation_id, response)
        metrics.observe_request(header.api_key, time.perf_counter() - started, answer)  # metrics
        return answer.data

    def _unsupported_version(self, spec: ApiSpec, header: RequestHeader, frame: bytes, conn: ConnInfo) -> bytes:
        if spec.unknown_version is not None:
            log.info("event=unknown_version_answered conn=%d peer=%s:%d api_key=%d api_version=%d client_id=%r",
                     conn.connection_id, conn.host, conn.port, header.api_key, header.api_version, header.client_id)
            return encode_response(header.api_key, header.correlation_id, spec.unknown_version())
        if spec.error_response is not None and request_schema(header.api_key, header.api_version) is not None:
            try:
                request = decode_body(header, frame, self.max_array_items)
                response = spec.error_response(request, ErrorCode.unsupported_version)
                warn.warning("unsupported_version", "event=unsupported_version conn=%d peer=%s:%d api_key=%d api_version=%d "
                            "action=error_response", conn.connection_id, conn.host, conn.port, header.api_key,
                            header.api_version)
                return encode_response(header.api_key, header.correlation_id, response)
            except Exception:  # noqa: BLE001 - fall through to closing
                pass
        warn.warning("unsupported_version", "event=unsupported_version conn=%d peer=%s:%d api_key=%d api_version=%d action=close",
                    conn.connection_id, conn.host, conn.port, header.api_key, header.api_version)
        raise CloseConnection
