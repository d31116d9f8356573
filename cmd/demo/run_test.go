package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunRefusesTakenPorts: `make run` (scripts/run) started while another one runs says which of
// its addresses are taken and exits 1 before building, migrating or minting a token.
func TestRunRefusesTakenPorts(t *testing.T) {
	t.Parallel()
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	server, bank := listen(), listen()
	free := listen()
	freeAddr := free.Addr().String()
	require.NoError(t, free.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../scripts/run")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL=postgres://nobody@127.0.0.1:1/none", // never reached
		"RECKON_SERVER_ADDR="+server.Addr().String(),
		"RECKON_REACTOR_ADDR="+freeAddr,
		"RECKON_DEMO_BANK_ADDR="+bank.Addr().String(),
		"RECKON_DEMO=1")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, string(out))
	require.Equal(t, 1, exitErr.ExitCode(), string(out))
	text := string(out)
	require.Contains(t, text, "run: "+server.Addr().String()+" (server, RECKON_SERVER_ADDR) is already in use")
	require.Contains(t, text, "run: "+bank.Addr().String()+" (demo bank, RECKON_DEMO_BANK_ADDR) is already in use")
	require.NotContains(t, text, freeAddr)
	require.NotContains(t, text, "building", "nothing is done")
}
