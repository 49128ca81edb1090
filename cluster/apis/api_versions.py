"""ApiVersions (18) v0–4, answered from the registry and, from v3 on, with the node's features."""

from __future__ import annotations

import re
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster import features
from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.dispatch import RequestContext
from cluster.services import Placement, Registers, Registrar


class Needs(Registers, Placement, Protocol):
    """What this module uses of its node (``cluster.services``)."""


API_KEY = 18
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def build_response(registry: Registrar, version: int, error: ErrorCode, lowest_metadata_version: int = 0) -> Any:
    """The answer; ``lowest_metadata_version``: what every node reads (the finalized features
    follow it; 0 in an error answer, which carries none)."""
    m = resp_mod(API_KEY, version)
    keys = tuple(m.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in registry.advertised())
    if error is ErrorCode.invalid_request:
        keys = ()
    if version < 3 or error is not ErrorCode.none:
        return mk(m.ApiVersionsResponse, error_code=error, api_keys=keys, throttle_time=ZERO)
    return mk(m.ApiVersionsResponse, error_code=error, api_keys=keys, throttle_time=ZERO,
              supported_features=tuple(m.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                       for n, lo, hi in features.supported(version)),
              finalized_features_epoch=lowest_metadata_version,
              finalized_features=tuple(m.FinalizedFeatureKey(name=n, min_version_level=level,
                                                             max_version_level=level)
                                       for n, level in features.finalized(lowest_metadata_version)))


def unsupported_version_response(registry: Registrar) -> Any:
    """Kafka's fallback for an ApiVersions version it does not know: a v0-format
    UNSUPPORTED_VERSION response carrying the API list, so the client can retry."""
    return build_response(registry, 0, ErrorCode.unsupported_version)


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    v = version_of(request)
    if v >= 3 and not (_SOFTWARE.match(request.client_software_name or "")
                       and _SOFTWARE.match(request.client_software_version or "")):
        return build_response(node.registry, v, ErrorCode.invalid_request)
    return build_response(node.registry, v, ErrorCode.none, node.topology.lowest_metadata_version())


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 4, handle,
                           error_response=lambda req, code: build_response(node.registry, version_of(req), code),
                           unknown_version=lambda: unsupported_version_response(node.registry))
