package readmetest_test

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestReadmeFilesRun takes each complete Go file of README.md — a ```go block that starts with a
// package clause — and does what a new user does with it: puts it in a module of their own that
// requires github.com/reckonhq/reckon (replaced by this checkout), then runs go vet and, for a
// _test package, go test against the test database's server (for any other package, go build).
// Nothing is downloaded (GOPROXY=off): the module's go.mod is what `go get` and `go mod tidy` give
// a user — reckon and, as indirect requirements, the versions reckon's go.mod selects — with this
// module's go.sum, and the go command runs with -mod=readonly. With a complete go.mod the go
// command loads no module graph beyond it, so what this module's own build downloaded is enough:
// letting it add requirements (-mod=mod) made it load the whole graph, whose older go.mod files
// (go-logr/logr v1.2.2's) a fresh machine's module cache does not hold. Failures point at the
// README's lines.
func TestReadmeFilesRun(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../../..")
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
	goMod := userGoMod(t, root)

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
			directive := fmt.Sprintf("//line %s:%d\n", readmePath, b.line)
			for file, content := range map[string]string{"go.mod": goMod, "go.sum": string(goSum), name: directive + b.code} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644))
			}
			env := append(os.Environ(),
				"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=readonly"), // go.mod is complete, as after go mod tidy
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

// userGoMod is the go.mod of a user's module after `go get github.com/reckonhq/reckon` and `go mod
// tidy`: it requires reckon (replaced by the checkout at root) and, indirectly, every module
// reckon's go.mod requires, at the same versions (what minimal version selection picks when
// reckon is the only requirement). Listing modules the copy does not use is harmless; one missing
// would fail under -mod=readonly instead of being looked up.
func userGoMod(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go mod edit -json")
	var mod struct {
		Go      string
		Require []struct{ Path, Version string }
	}
	require.NoError(t, json.Unmarshal(out, &mod))
	var b strings.Builder
	fmt.Fprintf(&b, "module example.com/readme\n\ngo %s\n\nrequire github.com/reckonhq/reckon v0.0.0\n\nrequire (\n", mod.Go)
	for _, r := range mod.Require {
		fmt.Fprintf(&b, "\t%s %s // indirect\n", r.Path, r.Version)
	}
	fmt.Fprintf(&b, ")\n\nreplace github.com/reckonhq/reckon => %s\n", root)
	return b.String()
}
