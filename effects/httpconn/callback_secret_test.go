package httpconn_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
)

// TestCallbackSecretHeader: dispatch, compensate and cancel calls carry the effect's callback
// secret in Reckon-Callback-Secret, which the endpoint signs its callback with; status checks,
// whose calls have none, send no such header.
func TestCallbackSecretHeader(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, answer(http.StatusAccepted, nil, ``))
	def := definition(up.URL)
	def.CancelURL = up.URL + "/cancel"
	connector := def.Connector(nil)
	ctx := context.Background()
	call := testCall()
	call.CallbackSecret = "5ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2e75ec2" // 64 hex digits, as the client's

	_, err := connector.Dispatch(ctx, call)
	require.True(t, effects.IsAccepted(err), "%v", err)
	_, _ = connector.Compensate(ctx, call, effects.Original{EffectID: call.EffectID, Result: json.RawMessage(`{}`)})
	_ = connector.Cancel(ctx, call)
	status := call
	status.CallbackSecret = "" // as the reactor makes a status check's call
	_, err = connector.StatusCheck(ctx, status)
	require.NoError(t, err)

	got := up.received()
	require.Len(t, got, 4)
	for i, path := range []string{"/dispatch", "/compensate", "/cancel"} {
		require.Equal(t, path, got[i].path)
		require.Equal(t, call.CallbackSecret, got[i].header.Get(httpconn.HeaderCallbackSecret), path)
	}
	require.Equal(t, "/status", got[3].path)
	require.Empty(t, got[3].header.Values(httpconn.HeaderCallbackSecret))
}
