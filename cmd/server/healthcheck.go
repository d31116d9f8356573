package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// healthcheckUsage is the synopsis of `server healthcheck`.
const healthcheckUsage = `usage: server healthcheck [-timeout D] [URL]   GET URL (default http://127.0.0.1:8080/readyz);
                                              exit 0 on a 2xx answer, 1 otherwise

For container health checks: the image has no shell or curl. The reactor's containers use it too,
with the reactor's address (http://127.0.0.1:9090/readyz). It needs no database.

flags:`

// runHealthcheck asks URL once, without following redirects: a 2xx answer is healthy (nil); any
// other answer, or none within -timeout, is an error naming what came back.
func runHealthcheck(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("server healthcheck", healthcheckUsage, stdout)
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer (1ms to 1m)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	target := "http://127.0.0.1:8080/readyz"
	switch fs.NArg() {
	case 0:
	case 1:
		target = fs.Arg(0)
	default:
		return fmt.Errorf("%w: healthcheck takes one URL, got %d arguments", errUsage, fs.NArg())
	}
	if *timeout < time.Millisecond || *timeout > time.Minute {
		return fmt.Errorf("%w: -timeout %v: want 1ms to 1m", errUsage, *timeout)
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: URL %q: want http:// or https:// with a host", errUsage, target)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%w: URL %q: %v", errUsage, target, err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		text := strings.TrimSpace(strings.ToValidUTF8(string(body), string(utf8.RuneError)))
		return fmt.Errorf("healthcheck %s: %s: %s", target, resp.Status, text)
	}
	return nil
}
