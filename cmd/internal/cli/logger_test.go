package cli

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseLogLevel(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
		"DEBUG": slog.LevelDebug, "Warn": slog.LevelWarn,
	} {
		got, err := ParseLogLevel(raw)
		require.NoError(t, err, raw)
		require.Equal(t, want, got, raw)
	}
	for _, bad := range []string{"", "verbose", "warning", "info+2", "-4", "debug "} {
		_, err := ParseLogLevel(bad)
		require.ErrorContains(t, err, `-log-level "`+bad+`" (or RECKON_LOG_LEVEL): want debug, info, warn or error`)
	}
}

// TestNewLoggerLevel: the logger's handler is enabled from its level up; a bad format or level is
// an error.
func TestNewLoggerLevel(t *testing.T) {
	t.Parallel()
	logger, err := NewLogger("json", "warn")
	require.NoError(t, err)
	require.False(t, logger.Enabled(t.Context(), slog.LevelInfo))
	require.True(t, logger.Enabled(t.Context(), slog.LevelWarn))
	logger, err = NewLogger("text", DefaultLogLevel)
	require.NoError(t, err)
	require.False(t, logger.Enabled(t.Context(), slog.LevelDebug))
	require.True(t, logger.Enabled(t.Context(), slog.LevelInfo))
	_, err = NewLogger("xml", "info")
	require.ErrorContains(t, err, `log format "xml"`)
	_, err = NewLogger("text", "loud")
	require.ErrorContains(t, err, `-log-level "loud"`)
}
