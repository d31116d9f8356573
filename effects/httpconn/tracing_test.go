package httpconn_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/effects"
)

// Every call — dispatch, status check, compensate, cancel — carries the W3C traceparent of the
// span in its context (the effects client's connector span), sampled or not; a call without a span
// carries none.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			answer(http.StatusOK, nil, `{"status":"absent"}`)(w, r)
		default:
			answer(http.StatusOK, nil, `{}`)(w, r)
		}
	})
	def := definition(u.URL)
	def.CancelURL = u.URL + "/cancel"
	c := def.Connector(nil)
	calls := func(ctx context.Context) {
		t.Helper()
		_, err := c.Dispatch(ctx, testCall())
		require.NoError(t, err)
		status, err := c.StatusCheck(ctx, testCall())
		require.NoError(t, err)
		require.Equal(t, effects.StatusAbsent, status.Kind)
		_, err = c.Compensate(ctx, testCall(), effects.Original{EffectID: testEffectID})
		require.NoError(t, err)
		require.NoError(t, c.Cancel(ctx, testCall()))
	}

	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled,
	})
	calls(trace.ContextWithSpanContext(context.Background(), sc))
	unsampled := sc.WithTraceFlags(0)
	calls(trace.ContextWithSpanContext(context.Background(), unsampled))
	calls(context.Background())

	got := u.received()
	require.Len(t, got, 12)
	for i, r := range got {
		switch {
		case i < 4:
			require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", r.header.Get("traceparent"), r.path)
		case i < 8:
			require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", r.header.Get("traceparent"), r.path)
		default:
			require.Empty(t, r.header.Values("traceparent"), r.path)
		}
	}
	require.Equal(t, []string{"/dispatch", "/status", "/compensate", "/cancel"}, []string{got[0].path, got[1].path, got[2].path, got[3].path})
}
