package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// TestReactorReloadsSagaDefinitions: -connector-sync-interval reloads the saga definitions too, as
// `reactor -h`, docs/operations.md and docs/sagas.md say: a definition stored while the reactor
// runs is loaded within an interval, before any saga names it.
func TestReactorReloadsSagaDefinitions(t *testing.T) {
	t.Parallel()
	help := proctest.Run(t, nil, proctest.Binary(t, "reactor"), "-h")
	require.Equal(t, 0, help.ExitCode)
	require.Regexp(t, regexp.MustCompile(`-connector-sync-interval duration\s+how often to reload the HTTP connectors and the saga definitions`), help.Stderr)

	f := setup(t)
	reactor := f.startReactor() // -connector-sync-interval 200ms
	_, created, err := sagadef.Put(context.Background(), f.pool, sagadef.Definition{
		Name:  "payout",
		Steps: []sagadef.Step{{Name: "wire", Connector: "bank.wire", Undo: sagadef.Undo{Kind: sagadef.UndoNone}}},
	}, nil)
	require.NoError(t, err)
	require.True(t, created)
	require.Eventually(t, func() bool {
		return strings.Contains(reactor.Stderr(), `"msg":"saga definition added","definition":"payout"`)
	}, 10*time.Second, 20*time.Millisecond, "a definition stored while the reactor runs is loaded at the next sync")
	reactor.Stop(t)
}
