package main

import (
	"testing"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestVersion: `server version` and `server -version` print one line naming the Go version that
// built the binary and its commit (or "(devel)", for a build that recorded none), on stdout, exit
// 0, without a database — even with a configuration serve would refuse. -o json prints the same
// as an object; another -o or an argument is refused with exit status 2.
func TestVersion(t *testing.T) {
	t.Parallel()
	proctest.RequireVersionCommand(t, "server", "RECKON_DB_CONNS=many", "-addr", "127.0.0.1:0")
}
