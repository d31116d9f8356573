package pgtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScriptTestDecides runs scripts/test (`make test`) with a fake docker and a fake go on PATH:
// an engine that answers but cannot pull the image means the local Postgres, said loudly, unless a
// container is required, which fails before any test runs.
func TestScriptTestDecides(t *testing.T) {
	t.Parallel()
	localUp := false
	if conn, err := net.Dial("tcp", "127.0.0.1:5432"); err == nil {
		localUp = true
		_ = conn.Close()
	}
	bin := t.TempDir()
	fake := map[string]string{
		"docker": `case "$1" in
  info) exit "${FAKE_DOCKER_INFO:-0}" ;;
  image) exit "${FAKE_DOCKER_IMAGE:-1}" ;;
  pull) echo "Error response from daemon: registry unreachable" >&2; exit 1 ;;
esac
exit 2`,
		"go": `echo "go $* TEST_DATABASE_URL=${TEST_DATABASE_URL:-}"`,
	}
	for name, body := range fake {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755))
	}
	run := func(env ...string) (string, int) {
		cmd := exec.Command("../../../scripts/test")
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"TEST_DATABASE_URL=", "RECKON_TEST_DATABASE_URL=", "RECKON_REQUIRE_CONTAINER=", "RECKON_TEST_SKIP_DB=", "CI=", "RECKON_TEST_PG_IMAGE=",
			"RECKON_TEST_CLIENTS=0") // the clients' suites build and run the real binaries: not with a fake go
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		if exitErr, ok := err.(*exec.ExitError); ok {
			return string(out), exitErr.ExitCode()
		}
		require.NoError(t, err, string(out))
		return string(out), 0
	}

	// Cannot pull: the local Postgres, loudly (or, without one, a loud warning that tests will fail).
	out, code := run()
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "cannot pull postgres:15-alpine: Error response from daemon: registry unreachable")
	if localUp {
		require.Contains(t, out, "FALLING BACK to the local Postgres")
		// Everything but the timed tests, then those alone (scripts/test's timedTests).
		require.Regexp(t, `go test -race -count=1 -p 1 -timeout 15m -skip \^\(Test\w+(\|Test\w+)*\)\$ \./\.\.\. TEST_DATABASE_URL=`+regexp.QuoteMeta(LocalURL), out)
		require.Regexp(t, `go test -race -count=1 -timeout 15m -run \^\(Test\w+(\|Test\w+)*\)\$ \./effects/ TEST_DATABASE_URL=`+regexp.QuoteMeta(LocalURL), out)
	} else {
		require.Contains(t, out, "NO DATABASE")
	}

	// No engine answers: the same.
	out, code = run("FAKE_DOCKER_INFO=1")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "no Docker engine answers")

	// CI requires a container: fail before running anything.
	out, code = run("CI=true", "RECKON_REQUIRE_CONTAINER=1")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "RECKON_REQUIRE_CONTAINER=1, but the Docker engine cannot pull")
	require.NotContains(t, out, "go test")

	// The image is there: containers, no fallback.
	out, code = run("FAKE_DOCKER_IMAGE=0", "CI=true", "RECKON_REQUIRE_CONTAINER=1")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "databases from a Postgres container")
	require.Regexp(t, `(?m)^go test .* \./\.\.\. TEST_DATABASE_URL=$`, out, "no TEST_DATABASE_URL: testcontainers")
	require.NotContains(t, out, "TEST_DATABASE_URL=postgres")
	require.Contains(t, out, "RECKON_TEST_CLIENTS=0: the Python and TypeScript clients' suites are SKIPPED")

	// Skipping the database tests is said out loud.
	out, code = run("RECKON_TEST_SKIP_DB=1", "FAKE_DOCKER_IMAGE=0")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "RECKON_TEST_SKIP_DB=1: database tests that find no database are SKIPPED")
}
