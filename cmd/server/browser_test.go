package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The console's browser tests drive a headless Chromium through chromedp. Chromium is found in
// RECKON_CHROMIUM, else /usr/bin/chromium (Debian's package), else "chromium" on PATH. Without one
// a browser test is skipped, except under CI=true, where it fails: CI installs Chromium
// (.ci/run), so a missing browser there is a broken set-up, not a reason to pass.
//
// Screenshots go to the directory RECKON_SCREENSHOTS names, else bin/screenshots under the
// repository's root, one full-page PNG per page named after it (overview.png, stuck.png, ...).

// chromiumInstall tells how to get the browser, in the messages of a skip or a failure.
const chromiumInstall = "install it with `apt-get install -y chromium` (Debian/Ubuntu) or set RECKON_CHROMIUM to its path"

// chromiumPath returns the Chromium to drive, or skips the test (fails it under CI=true) when
// there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path, err := findChromium()
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("browser test: %v; CI needs Chromium: %s", err, chromiumInstall)
	}
	t.Skipf("browser test skipped: %v; %s", err, chromiumInstall)
	return ""
}

func findChromium() (string, error) {
	if path := os.Getenv("RECKON_CHROMIUM"); path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("RECKON_CHROMIUM=%s: %w", path, err)
		}
		return path, nil
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	if path, err := exec.LookPath("chromium"); err == nil {
		return path, nil
	}
	return "", errors.New("no Chromium (RECKON_CHROMIUM unset, no /usr/bin/chromium, no chromium on PATH)")
}

// startChromium starts a headless Chromium for the test (stopped when it ends) and returns the
// browser's context; open tabs in it with newTab. Every action in it must end within timeout.
func startChromium(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Run(browser), "start %s", path)
	return browser
}

// newTab opens a tab in a browser context of its own, with its own cookies: one per signed-in
// operator, as if each used their own browser.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	// Made here rather than with chromedp.WithNewBrowserContext, whose target opens without a
	// window: headless Chromium then answers "no browser is open".
	executor := cdp.WithExecutor(browser, chromedp.FromContext(browser).Browser)
	browserContext, err := target.CreateBrowserContext().WithDisposeOnDetach(true).Do(executor)
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.DisposeBrowserContext(browserContext).Do(executor) })
	id, err := target.CreateTarget("about:blank").WithBrowserContextID(browserContext).WithNewWindow(true).Do(executor)
	require.NoError(t, err)
	tab, cancel := chromedp.NewContext(browser, chromedp.WithTargetID(id))
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Run(tab))
	return tab
}

// screenshotDir returns the directory screenshots go to (RECKON_SCREENSHOTS, else bin/screenshots
// under the repository's root), created.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RECKON_SCREENSHOTS")
	if dir == "" {
		root, err := filepath.Abs(filepath.Join("..", "..")) // tests run in cmd/server
		require.NoError(t, err)
		require.FileExists(t, filepath.Join(root, "go.mod"), "the repository's root")
		dir = filepath.Join(root, "bin", "screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// screenshot saves the whole page the tab shows (not only the window) as dir/name.png.
func screenshot(t *testing.T, tab context.Context, dir, name string) {
	t.Helper()
	var png []byte
	require.NoError(t, chromedp.Run(tab, chromedp.FullScreenshot(&png, 100)), "screenshot %s", name)
	path := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s", path)
}

// TestBrowserHarness checks the harness itself on a page of its own: Chromium starts headless,
// keys typed into a focused labelled field reach it and Enter submits its form, two tabs keep
// their cookies apart, and a screenshot is a PNG of the whole page, taller than the window.
func TestBrowserHarness(t *testing.T) {
	t.Parallel()
	browser := startChromium(t, 30*time.Second)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>form</title><form method="post" action="/said">`+
			`<label for="reason">Reason</label> <input id="reason" name="reason"></form>`+
			`<div style="height:3000px">tall</div>`)
	})
	mux.HandleFunc("POST /said", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "said", Value: r.PostFormValue("reason")})
		fmt.Fprintf(w, `<!doctype html><title>said</title><p id="said">%s</p>`, r.PostFormValue("reason"))
	})
	mux.HandleFunc("GET /cookie", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("said")
		if err != nil {
			fmt.Fprint(w, `<!doctype html><p id="cookie">none</p>`)
			return
		}
		fmt.Fprintf(w, `<!doctype html><p id="cookie">%s</p>`, c.Value)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	tab := newTab(t, browser)
	var said, cookie string
	require.NoError(t, chromedp.Run(tab,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.Focus("#reason", chromedp.ByQuery),
		chromedp.KeyEvent("typed by keys"),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible("#said", chromedp.ByQuery),
		chromedp.Text("#said", &said, chromedp.ByQuery),
		chromedp.Navigate(srv.URL+"/cookie"),
		chromedp.Text("#cookie", &cookie, chromedp.ByQuery),
	))
	require.Equal(t, "typed by keys", said)
	require.Equal(t, "typed by keys", cookie)

	other := newTab(t, browser)
	require.NoError(t, chromedp.Run(other,
		chromedp.Navigate(srv.URL+"/cookie"),
		chromedp.Text("#cookie", &cookie, chromedp.ByQuery),
	))
	require.Equal(t, "none", cookie, "another tab's browser context has its own cookies")

	dir := t.TempDir()
	require.NoError(t, chromedp.Run(tab, chromedp.Navigate(srv.URL+"/")))
	screenshot(t, tab, dir, "form")
	png, err := os.ReadFile(filepath.Join(dir, "form.png"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "a PNG")
	height := int(png[20])<<24 | int(png[21])<<16 | int(png[22])<<8 | int(png[23]) // IHDR
	require.Greater(t, height, 3000, "the whole page, beyond the 900px window")
}
