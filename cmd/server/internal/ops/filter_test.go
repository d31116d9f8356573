package ops_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
	"github.com/reckonhq/reckon/effects"
)

func TestParseEffectFilter(t *testing.T) {
	t.Parallel()
	turn := uuid.New()
	cursor := pagecursor.Cursor{At: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC), ID: uuid.NewString()}.String()
	f, err := ops.ParseEffectFilter(url.Values{
		"tenant": {"acme"}, "state": {"stuck"}, "connector": {"bank.wire"}, "idempotency_key": {"wire-1"},
		"business_key": {"order-9"}, "run": {"run-1"}, "turn": {turn.String()}, "created_after": {"2026-01-02T15:04:05Z"},
		"created_before": {"2026-02-01T00:00:00+01:00"}, "limit": {"20"}, "after": {cursor},
	})
	require.NoError(t, err)
	require.Equal(t, ops.EffectFilter{
		Tenant: "acme", State: effects.StateStuck, Connector: "bank.wire", IdempotencyKey: "wire-1", BusinessKey: "order-9",
		RunID: "run-1", TurnID: turn, CreatedAfter: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		CreatedBefore: time.Date(2026, 2, 1, 0, 0, 0, 0, time.FixedZone("", 3600)), Limit: 20, After: cursor,
	}, f)

	empty, err := ops.ParseEffectFilter(url.Values{"state": {""}})
	require.NoError(t, err)
	require.Equal(t, ops.EffectFilter{Limit: ops.DefaultLimit}, empty)

	for _, tc := range []struct {
		name  string
		query url.Values
		field string
	}{
		{"unknown filter", url.Values{"status": {"STUCK"}}, "status"},
		{"twice", url.Values{"state": {"STUCK", "FAILED"}}, "state"},
		{"bad state", url.Values{"state": {"DONE"}}, "state"},
		{"bad tenant", url.Values{"tenant": {"-acme"}}, "tenant"},
		{"NUL in connector", url.Values{"connector": {"bank\x00wire"}}, "connector"},
		{"invalid UTF-8 key", url.Values{"idempotency_key": {"\xff"}}, "idempotency_key"},
		{"long business key", url.Values{"business_key": {strings.Repeat("k", 513)}}, "business_key"},
		{"long run", url.Values{"run": {strings.Repeat("r", 201)}}, "run"},
		{"bad turn", url.Values{"turn": {"turn-1"}}, "turn"},
		{"bad time", url.Values{"created_after": {"yesterday"}}, "created_after"},
		{"date only", url.Values{"created_before": {"2026-01-02"}}, "created_before"},
		{"zero limit", url.Values{"limit": {"0"}}, "limit"},
		{"huge limit", url.Values{"limit": {"501"}}, "limit"},
		{"bad cursor", url.Values{"after": {"not-a-cursor"}}, "after"},
		{"cursor without a UUID", url.Values{"after": {pagecursor.Cursor{At: time.Now(), ID: "run-1"}.String()}}, "after"},
	} {
		_, err := ops.ParseEffectFilter(tc.query)
		var fe *ops.FieldError
		require.ErrorAs(t, err, &fe, tc.name)
		require.Equal(t, tc.field, fe.Field, tc.name)
		require.True(t, strings.HasPrefix(err.Error(), tc.field+": "), "%s: %v", tc.name, err)
	}
}
