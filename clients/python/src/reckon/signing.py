"""Signatures of Reckon's callbacks and webhook deliveries: ``t=<unix>,v1=<hex HMAC-SHA256>``."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Optional

#: How far a signature's timestamp may be from the clock (what the server allows).
TOLERANCE_SECONDS = 300


def sign(secret: str, body: bytes, timestamp: Optional[int] = None) -> str:
    """The ``Reckon-Signature`` of ``body``: HMAC-SHA256 keyed with ``secret`` over ``"<t>.<body>"``."""
    if not secret:
        raise ValueError("an empty secret")
    t = int(time.time()) if timestamp is None else int(timestamp)
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verify(secret: str, body: bytes, signature: str, *, now: Optional[float] = None,
           tolerance: float = TOLERANCE_SECONDS) -> bool:
    """Whether ``signature`` (a ``Reckon-Signature`` header) signs ``body`` with ``secret``, recently.

    Use it on a webhook subscription's deliveries: the MAC is compared in constant time and a
    timestamp further than ``tolerance`` seconds from the clock is refused.
    """
    parts = dict(p.split("=", 1) for p in signature.split(",") if "=" in p)
    t, v1 = parts.get("t", ""), parts.get("v1", "")
    if not t.isdigit() or len(v1) != 64:
        return False
    want = sign(secret, body, int(t)).split("v1=", 1)[1]
    if not hmac.compare_digest(want, v1):
        return False
    return abs((time.time() if now is None else now) - int(t)) <= tolerance
