"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2: the wire side of a connection's SASL
exchange (``cluster.security.sasl`` decides; the dispatcher lets nothing else through before it
completes). A failed exchange gets its error answer (UNSUPPORTED_SASL_MECHANISM,
SASL_AUTHENTICATION_FAILED), then the connection closes. Once authenticated, or on a listener
without SASL, both answer ILLEGAL_SASL_STATE, unless connections.max.reauth.ms lets a SaslHandshake
start re-authentication (the dispatcher decides; the final SaslAuthenticate tells the lifetime)."""

from __future__ import annotations

import datetime
import logging
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.dispatch import AnswerThenClose, RequestContext
from cluster.security.sasl import ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED, AuthenticationFailed
from cluster.services import Registers


class Needs(Registers, Protocol):
    """What this module uses of its node (``cluster.services``)."""


log = logging.getLogger("kcoord.sasl")

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


def _handshake_response(version: int, code: int, mechanisms: list[str]) -> Any:
    return mk(resp_mod(SASL_HANDSHAKE, version).SaslHandshakeResponse, error_code=ErrorCode(code),
              mechanisms=tuple(mechanisms))


def _authenticate_response(version: int, code: int, message: str | None = None, token: bytes = b"",
                           lifetime_ms: int = 0) -> Any:
    return mk(resp_mod(SASL_AUTHENTICATE, version).SaslAuthenticateResponse, error_code=ErrorCode(code),
              error_message=message, auth_bytes=token,
              session_lifetime=datetime.timedelta(milliseconds=lifetime_ms) if lifetime_ms else ZERO)


async def handshake(ctx: RequestContext, req: Any) -> Any:
    v = version_of(req)
    auth = ctx.auth
    if auth is None or auth.complete:
        return _handshake_response(v, ILLEGAL_SASL_STATE, [])
    code, enabled = auth.handshake(v, req.mechanism)
    if code:
        log.info("event=sasl_handshake_refused conn=%d peer=%s mechanism=%r", ctx.connection_id, ctx.client_host,
                 req.mechanism)
        raise AnswerThenClose(_handshake_response(v, code, enabled))
    return _handshake_response(v, 0, enabled)


async def authenticate(ctx: RequestContext, req: Any) -> Any:
    v = version_of(req)
    auth = ctx.auth
    if auth is None or auth.complete:
        return _authenticate_response(v, ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request")
    try:
        reply = auth.authenticate(bytes(req.auth_bytes))
    except AuthenticationFailed as e:
        log.info("event=sasl_authentication_failed conn=%d peer=%s listener=%s reason=%r", ctx.connection_id,
                 ctx.client_host, ctx.listener, str(e))
        raise AnswerThenClose(_authenticate_response(v, SASL_AUTHENTICATION_FAILED, str(e))) from None
    if auth.complete:
        log.info("event=sasl_authenticated conn=%d peer=%s listener=%s principal=%s", ctx.connection_id,
                 ctx.client_host, ctx.listener, auth.principal)
        return _authenticate_response(v, 0, None, reply or b"", auth.session_lifetime_ms)
    return _authenticate_response(v, 0, None, reply or b"")


def register(node: Needs) -> None:
    node.registry.register(SASL_HANDSHAKE, 0, 1, handshake,
                           error_response=lambda req, code: _handshake_response(version_of(req), int(code), []))
    node.registry.register(SASL_AUTHENTICATE, 0, 2, authenticate,
                           error_response=lambda req, code: _authenticate_response(version_of(req), int(code)))
