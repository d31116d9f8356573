-- The trace context of the span that enqueued an effect (effects/tracing.go): the propagator's
-- carrier as JSON, e.g. {"traceparent": "00-<trace id>-<span id>-01", "tracestate": "…"}. Every
-- span Reckon makes for the effect later — its dispatch, the connector's call, reconciliation,
-- compensation, callback, deadline — continues that trace, in whichever process and after however
-- many restarts. NULL when the enqueuing context carried no valid span (tracing off): nothing more
-- is written then. Nullable without a default, so adding it rewrites nothing.
ALTER TABLE reckon_effects ADD COLUMN trace_context jsonb;
