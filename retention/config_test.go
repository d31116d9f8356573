package retention_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// Validate names the field that is wrong; the zero Config is valid (the defaults).
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, c := range []struct {
		config retention.Config
		field  string
	}{
		{retention.Config{EffectRetention: time.Hour - time.Second}, "EffectRetention"},
		{retention.Config{EffectRetention: -time.Hour}, "EffectRetention"},
		{retention.Config{AuditRetention: -time.Hour}, "AuditRetention"},
		{retention.Config{AuditRetention: 29 * day}, "AuditRetention"},
		{retention.Config{DedupWindow: -time.Second}, "DedupWindow"},
		{retention.Config{DedupWindow: time.Millisecond}, "DedupWindow"},
		{retention.Config{IdempotencyTTL: -time.Hour}, "IdempotencyTTL"},
		{retention.Config{BatchSize: 10_001}, "BatchSize"},
		{retention.Config{BatchSize: -1}, "BatchSize"},
		{retention.Config{Interval: time.Millisecond}, "Interval"},
	} {
		_, err := retention.New(h.pool, &c.config)
		require.ErrorContains(t, err, "Config."+c.field, "%+v", c.config)
	}
	for _, config := range []*retention.Config{nil, {}, {EffectRetention: time.Hour, AuditRetention: time.Hour, DedupWindow: time.Second, BatchSize: 10_000}} {
		_, err := retention.New(h.pool, config)
		require.NoError(t, err)
	}
	_, err := retention.New(nil, nil)
	require.Error(t, err)
}
