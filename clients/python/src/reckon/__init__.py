"""Reckon's Python client: effects, runs, sagas, turns, events, and the connector side.

- :class:`Client` and :class:`AsyncClient` speak Reckon's HTTP API (``docs/api.md``).
- :mod:`reckon.connector` serves the connector wire protocol and the HTTP turn handler.
- :func:`tool` makes an agent's tool calls effects, performed at most once.
"""

from .__about__ import RECKON_VERSION, __version__
from ._transport import RequestInfo
from .aio import AsyncClient, AsyncEventStream
from .client import SAGA_SETTLED_STATES, SETTLED_STATES, Client, JSONObject, Position
from .errors import (
    APIError,
    Conflict,
    Forbidden,
    Gone,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ReckonError,
    ServerError,
    TransportError,
    Unauthorized,
    Unavailable,
    Unprocessable,
    UnsupportedMediaType,
    WaitTimeout,
)
from .events import Event, EventStream
from .signing import sign, verify
from .tool import (
    AwaitingConfirmation,
    Journal,
    OutcomeUnknown,
    Step,
    Tool,
    ToolFailed,
    acall_tool,
    call_tool,
    tool,
    tool_key,
)

__all__ = [
    "RECKON_VERSION", "__version__", "RequestInfo", "AsyncClient", "AsyncEventStream", "SAGA_SETTLED_STATES",
    "SETTLED_STATES", "Client", "JSONObject", "Position", "APIError", "Conflict", "Forbidden", "Gone",
    "InvalidRequest", "MethodNotAllowed", "NotFound", "PayloadTooLarge", "RateLimited", "ReckonError",
    "ServerError", "TransportError", "Unauthorized", "Unavailable", "Unprocessable", "UnsupportedMediaType",
    "WaitTimeout", "Event", "EventStream", "sign", "verify", "AwaitingConfirmation", "Journal", "OutcomeUnknown",
    "Step", "Tool", "ToolFailed", "acall_tool", "call_tool", "tool", "tool_key",
]
