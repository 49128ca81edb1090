"""Which listeners authenticate, and how: a new connection on a SASL listener (SASL_PLAINTEXT,
SASL_SSL) gets its own ``SaslAuthenticator`` over the node's users (PLAIN: ``sasl_users``; SCRAM:
the cluster's credentials over those derived from ``sasl_users`` at start, ``credentials``); an SSL or
SASL_SSL listener gets its TLS context, asking clients for certificates as its ``ssl.client.auth``
says (for SASL_SSL only when set for that listener, as Kafka does)."""

from __future__ import annotations

import ssl
from collections.abc import Callable

from cluster.config import NodeConfig
from cluster.security.sasl import SaslAuthenticator, SaslConfig
from cluster.security.scram import MECHANISMS as SCRAM_MECHANISMS
from cluster.security.scram import ScramCredential, make_credential
from cluster.security.tls import server_context

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def bootstrap_credentials(config: NodeConfig) -> dict[tuple[str, str], ScramCredential]:
    """The SCRAM credentials of ``sasl_users`` for the enabled SCRAM mechanisms (salted at start; the
    passwords themselves serve PLAIN only)."""
    if not any(config.listener_protocol(x.name) in SASL_PROTOCOLS for x in config.listener_list()):
        return {}
    mechanisms = [m.strip() for m in config.sasl_enabled_mechanisms.split(",") if m.strip()]
    return {(user, m): make_credential(m, password) for user, password in config.sasl_user_list().items()
            for m in mechanisms if m in SCRAM_MECHANISMS}


def authenticators(config: NodeConfig, scram: Callable[[str, str], ScramCredential | None]
                   ) -> dict[str, Callable[[], SaslAuthenticator]]:
    """Listener name -> a factory of a connection's SASL exchange, for the SASL listeners; ``scram``
    finds a (user, mechanism)'s credential as it is when the client authenticates."""
    sasl_listeners = [x.name for x in config.listener_list() if config.listener_protocol(x.name) in SASL_PROTOCOLS]
    if not sasl_listeners:
        return {}
    mechanisms = [m.strip() for m in config.sasl_enabled_mechanisms.split(",") if m.strip()]
    sasl = SaslConfig(mechanisms, config.sasl_user_list() if "PLAIN" in mechanisms else {}, scram,
                      reauth_ms=config.connections_max_reauth_ms)
    return {name: (lambda: SaslAuthenticator(sasl)) for name in sasl_listeners}


def tls_contexts(config: NodeConfig) -> dict[str, ssl.SSLContext]:
    """Listener name -> its TLS context, for the SSL and SASL_SSL listeners."""
    return {x.name: server_context(config, config.client_auth_for(x.name)) for x in config.listener_list()
            if config.listener_protocol(x.name) in TLS_PROTOCOLS}
