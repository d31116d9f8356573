// Package proctest builds Reckon's binaries and runs them as real processes in tests: started with
// JSON logs, found by the address they log, stopped with a signal or killed; SelfSignedCert makes
// a certificate for them to serve HTTPS with.
package proctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Binary returns the path of the named command of this module (server or reactor), built once per
// test binary.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "reckon-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", buildDir+string(filepath.Separator),
			"github.com/reckonhq/reckon/cmd/server", "github.com/reckonhq/reckon/cmd/reactor")
		var out []byte
		out, buildErr = cmd.CombinedOutput()
		if buildErr != nil {
			buildErr = &buildError{err: buildErr, output: string(out)}
		}
	})
	if buildErr != nil {
		tb.Fatalf("proctest: build binaries: %v", buildErr)
	}
	return filepath.Join(buildDir, name)
}

type buildError struct {
	err    error
	output string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.output }

// Result is what a finished command printed and its exit code.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
}

// Run runs a command to completion, with a minute at most.
func Run(tb testing.TB, env []string, bin string, args ...string) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if exitErr, ok := err.(*exec.ExitError); ok {
		res.ExitCode = exitErr.ExitCode()
	} else if err != nil {
		tb.Fatalf("proctest: run %s: %v", bin, err)
	}
	return res
}

// Process is a running command whose stderr carries JSON log lines.
type Process struct {
	cmd  *exec.Cmd
	addr chan string
	done chan struct{}

	mu     sync.Mutex
	stderr bytes.Buffer
	err    error
}

// Start starts bin with args (plus "-log-format json") and the extra environment. The process is
// killed when the test ends if it is still running.
func Start(tb testing.TB, env []string, bin string, args ...string) *Process {
	tb.Helper()
	cmd := exec.Command(bin, append(args, "-log-format", "json")...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatalf("proctest: %v", err)
	}
	p := &Process{cmd: cmd, addr: make(chan string, 1), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("proctest: start %s: %v", bin, err)
	}
	go func() {
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			line := scanner.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			var entry struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "listening" {
				select {
				case p.addr <- entry.Addr:
				default:
				}
			}
		}
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if tb.Failed() {
			tb.Logf("%s stderr:\n%s", filepath.Base(bin), p.Stderr())
		}
	})
	return p
}

// Addr waits for the process to log the address it listens on.
func (p *Process) Addr(tb testing.TB) string {
	tb.Helper()
	select {
	case addr := <-p.addr:
		p.addr <- addr
		return addr
	case <-p.done:
		tb.Fatalf("proctest: process exited before listening: %v\n%s", p.exitErr(), p.Stderr())
	case <-time.After(30 * time.Second):
		tb.Fatalf("proctest: process did not listen within 30s\n%s", p.Stderr())
	}
	return ""
}

// Signal sends sig to the process.
func (p *Process) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("proctest: signal %v: %v", sig, err)
	}
}

// Stop sends SIGTERM and requires the process to exit with status 0 within 30 seconds: a graceful
// stop. A failure shows what the process logged.
func (p *Process) Stop(tb testing.TB) {
	tb.Helper()
	p.Signal(tb, syscall.SIGTERM)
	if code := p.Wait(tb, 30*time.Second); code != 0 {
		tb.Fatalf("proctest: exit status %d after SIGTERM, want 0\n%s", code, p.Stderr())
	}
}

// Kill sends SIGKILL to the process and waits for it to be gone. Unlike Signal it may be called
// from any goroutine.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("proctest: kill: %w", err)
	}
	<-p.done
	return nil
}

// KillRandomly, for d, waits a random pause from minPause to maxPause, SIGKILLs one of procs
// chosen at random, waits for it to be gone and puts start() in its place. It returns how many it
// killed.
func KillRandomly(tb testing.TB, procs []*Process, d, minPause, maxPause time.Duration, start func() *Process) int {
	tb.Helper()
	kills := 0
	for began := time.Now(); time.Since(began) < d; kills++ {
		time.Sleep(minPause + rand.N(maxPause-minPause))
		i := rand.IntN(len(procs))
		procs[i].Signal(tb, syscall.SIGKILL)
		procs[i].Wait(tb, 10*time.Second)
		procs[i] = start()
	}
	return kills
}

// Wait waits up to timeout for the process to exit and returns its exit code.
func (p *Process) Wait(tb testing.TB, timeout time.Duration) int {
	tb.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		tb.Fatalf("proctest: process still running after %v\n%s", timeout, p.Stderr())
	}
	return p.cmd.ProcessState.ExitCode()
}

// Stderr returns what the process has logged so far.
func (p *Process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Logged reports whether a log line with the message msg was written.
func (p *Process) Logged(msg string) bool {
	return strings.Contains(p.Stderr(), `"msg":"`+msg+`"`)
}

func (p *Process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// RequireVersionCommand checks the version command both binaries promise, run with a database
// that cannot be reached and refused, a setting the binary would refuse to serve with (e.g.
// "RECKON_WORKERS=many"): `BINARY version`, `BINARY -version` and `BINARY FLAGS... -version` exit
// 0 with the version line on stdout and nothing on stderr; `BINARY version -o json` prints an
// object named "reckon BINARY" with a version and the Go version that built this test; `version -o
// yaml` and `version extra` exit 2, print nothing on stdout and say why on stderr.
func RequireVersionCommand(tb testing.TB, binary, refused string, flags ...string) {
	tb.Helper()
	bin := Binary(tb, binary)
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1", refused}

	for _, args := range [][]string{{"version"}, {"-version"}, append(flags, "-version")} {
		res := Run(tb, env, bin, args...)
		if res.ExitCode != 0 || res.Stderr != "" {
			tb.Fatalf("%s %v: exit status %d, want 0 and nothing on stderr: %s", binary, args, res.ExitCode, res.Stderr)
		}
		requireVersionLine(tb, binary, res.Stdout)
	}

	res := Run(tb, env, bin, "version", "-o", "json")
	if res.ExitCode != 0 {
		tb.Fatalf("%s version -o json: exit status %d: %s", binary, res.ExitCode, res.Stderr)
	}
	var info struct {
		Name      string `json:"name"`
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &info); err != nil {
		tb.Fatalf("%s version -o json: %v: %s", binary, err, res.Stdout)
	}
	if info.Name != "reckon "+binary || info.Version == "" || info.GoVersion != runtime.Version() {
		tb.Fatalf("%s version -o json: %+v, want name %q, a version and Go %s", binary, info, "reckon "+binary, runtime.Version())
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"version", "-o", "yaml"}, `-o "yaml": want text or json`},
		{[]string{"version", "extra"}, `unexpected argument "extra"`},
	} {
		res := Run(tb, env, bin, c.args...)
		if res.ExitCode != 2 || res.Stdout != "" || !strings.HasPrefix(res.Stderr, binary+": ") || !strings.Contains(res.Stderr, c.want) {
			tb.Fatalf("%s %v: exit status %d, stdout %q, stderr %q; want 2, nothing and %q after %q", binary, c.args, res.ExitCode, res.Stdout, res.Stderr, c.want, binary+": ")
		}
	}
}

// requireVersionLine checks what `BINARY version` printed: one line "reckon BINARY VERSION (commit
// C, TIME, GOVERSION OS/ARCH)", or, for a build that recorded no commit, VERSION "(devel)" without
// commit and time; GOVERSION is the Go that built this test.
func requireVersionLine(tb testing.TB, binary, stdout string) {
	tb.Helper()
	if strings.Count(stdout, "\n") != 1 || !strings.HasPrefix(stdout, "reckon "+binary+" ") ||
		!strings.HasSuffix(stdout, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+")\n") {
		tb.Fatalf("not one line \"reckon %s VERSION (…, %s %s/%s)\": %q", binary, runtime.Version(), runtime.GOOS, runtime.GOARCH, stdout)
	}
	if !strings.Contains(stdout, "(commit ") && !strings.Contains(stdout, " (devel) ") {
		tb.Fatalf("neither a commit nor (devel): %q", stdout)
	}
}
