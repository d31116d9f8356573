package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/effects"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// pages holds one template per page, each the layout with the page's "content".
type pages map[string]*template.Template

func parsePages() (pages, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: parse layout: %w", err)
	}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	result := pages{}
	for _, file := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(file, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		page, err := template.Must(layout.Clone()).ParseFS(templateFiles, file)
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", file, err)
		}
		result[name] = page
	}
	return result, nil
}

// staticHandler serves the embedded assets under /console/static/. It serves the embedded FS
// itself, not an fs.Sub of it: a name fs.Sub refuses (invalid UTF-8) would be the file server's
// 500, where the embedded FS answers "does not exist", a 404.
func staticHandler() http.Handler {
	return http.StripPrefix("/console/", http.FileServerFS(staticFiles))
}

// view is what every page's template gets.
type view struct {
	Title    string
	Operator *operator.Operator // nil on the sign-in page
	CSRF     string
	Now      time.Time
	Path     string
	Data     any
}

// render executes page into a buffer (so that a template error is a clean 500) and writes it.
func (c *Console) render(req *request, status int, page, title string, data any) {
	v := view{Title: title, Now: c.config.Now().UTC(), Path: req.URL.Path, Data: data}
	if req.session != nil {
		v.Operator, v.CSRF = req.session.Operator, req.session.CSRF
	}
	var buf bytes.Buffer
	tmpl, ok := c.pages[page]
	if !ok {
		c.logger.Error("console: no such page", "page", page)
		status, tmpl = http.StatusInternalServerError, c.pages["error"]
		v.Data = errorData{Status: status, Message: "Something went wrong on our side."}
	}
	if err := tmpl.ExecuteTemplate(&buf, "layout", v); err != nil {
		c.logger.Error("console: render", "page", page, "error", err)
		buf.Reset()
		status = http.StatusInternalServerError
		buf.WriteString("<!doctype html><title>500</title><p>The page could not be rendered; it is in the server's log.</p>")
	}
	req.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	req.w.WriteHeader(status)
	_, _ = req.w.Write(buf.Bytes())
}

// page renders a 200 page.
func (c *Console) page(req *request, page, title string, data any) error {
	c.render(req, http.StatusOK, page, title, data)
	return nil
}

var funcs = template.FuncMap{
	"utc":      formatTime,
	"utcp":     func(t *time.Time) string { return formatTimePtr(t) },
	"age":      func(now, t time.Time) string { return formatAge(now.Sub(t)) },
	"until":    func(now, t time.Time) string { return formatAge(t.Sub(now)) },
	"dur":      formatAge,
	"json":     prettyJSON,
	"short":    shortID,
	"shortp":   func(id *uuid.UUID) string { return shortID(*id) },
	"path":     url.PathEscape,
	"tenants":  tenantsText,
	"progress": sagaProgress,
	"count":    func(counts map[effects.State]int, state string) int { return counts[effects.State(state)] },
	"form":     func(id any, csrf string) formArgs { return formArgs{ID: id, CSRF: csrf} },
	"decision": func(id any, csrf, action, legend, button string) decisionArgs {
		return decisionArgs{formArgs: formArgs{ID: id, CSRF: csrf}, Action: action, Legend: legend, Button: button}
	},
}

// formArgs are what an action form's template needs: the thing acted on and the CSRF token.
type formArgs struct {
	ID   any
	CSRF string
}

// decisionArgs are what the form of a decision on an effect with a reason alone needs (cancel,
// confirm, decline): its action (the path's last segment), legend and button.
type decisionArgs struct {
	formArgs
	Action, Legend, Button string
}

// shortID names an id in lists and titles by its last 12 hex digits ("…8162571a061f"): the
// first ones of a UUIDv7 are its creation time, the same for everything made in one minute; the
// last ones are random. Links and pages carry the full id.
func shortID(id uuid.UUID) string {
	s := id.String()
	return "…" + s[len(s)-12:]
}

// formatTime is t in UTC to the second, or "—" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return formatTime(*t)
}

// formatAge is d as "3h12m", "4d2h", "45s" — two units at most.
func formatAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}

// prettyJSON indents a JSON document for a <pre>; "" for none.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func tenantsText(tenants []string) string {
	if tenants == nil {
		return "all tenants"
	}
	return strings.Join(tenants, ", ")
}
