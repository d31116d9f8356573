package readmetest_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestReadmeFilesRun takes each complete Go file of README.md — a ```go block that starts with a
// package clause — and does what a new user does with it: puts it in a module of their own that
// requires github.com/reckonhq/reckon (replaced by this checkout), then runs go vet and, for a
// _test package, go test against the test database's server (for any other package, go build).
// Nothing is downloaded: the module gets this module's go.sum and GOPROXY=off, so every dependency
// comes from the module cache, as this module's own build found them. Failures point at the
// README's lines.
func TestReadmeFilesRun(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	readmePath := filepath.Join(root, "README.md")
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	var files []block
	for _, b := range goBlocks(t, readme) {
		if isFile(b.code) {
			files = append(files, b)
		}
	}
	require.NotEmpty(t, files, "README.md has no complete Go file (a ```go block starting with a package clause)")

	pgtest.NewDB(t) // fails, or skips under RECKON_TEST_SKIP_DB=1, when there is no server
	server, err := pgtest.Server()
	require.NoError(t, err)
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)

	for _, b := range files {
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			t.Parallel()
			f, err := parser.ParseFile(token.NewFileSet(), "", b.code, parser.PackageClauseOnly)
			require.NoError(t, err)
			pkg := f.Name.Name
			name, run := "main.go", []string{"build", "-o", os.DevNull, "./..."}
			if strings.HasSuffix(pkg, "_test") {
				name, run = strings.TrimSuffix(pkg, "_test")+"_test.go", []string{"test", "-count=1", "-timeout=5m", "./..."}
			}

			dir := t.TempDir()
			goMod := fmt.Sprintf("module example.com/readme\n\ngo 1.26.0\n\nrequire github.com/reckonhq/reckon v0.0.0\n\nreplace github.com/reckonhq/reckon => %s\n", root)
			directive := fmt.Sprintf("//line %s:%d\n", readmePath, b.line)
			for file, content := range map[string]string{"go.mod": goMod, "go.sum": string(goSum), name: directive + b.code} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644))
			}
			env := append(os.Environ(),
				"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), // go.mod gains the requirements the file imports
				"GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local",
				"RECKON_TEST_DATABASE_URL="+server.AdminURL, // reckontest makes its databases there
			)
			for _, args := range [][]string{{"vet", "./..."}, run} {
				cmd := exec.Command("go", args...)
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("README.md line %d, copied into a module of its own (%s): go %s failed: %v\n%s",
						b.line, dir, strings.Join(args, " "), err, out)
				}
				t.Logf("go %s:\n%s", strings.Join(args, " "), out)
			}
		})
	}
}
