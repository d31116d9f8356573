package health

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reckonhq/reckon/db"
)

// CodeSchemaNotCurrent is the API error code of a request refused because the database's
// migrations are not current for this binary (HTTP 503).
const CodeSchemaNotCurrent = "schema_not_current"

// SchemaGate keeps a process that may start before its database is migrated from using it: until
// the migrations are current, its Guard answers every request but /healthz, /readyz and /metrics
// with 503 schema_not_current, and Current's channel stays open. Check and Watch ask the
// migrator; once current, the gate stays open (a migration rolled back under a running process
// is not watched for).
type SchemaGate struct {
	migrator *db.Migrator
	logger   *slog.Logger
	current  chan struct{}
	open     sync.Once

	mu     sync.Mutex
	reason string // why the gate is closed, for the 503 message and the log
}

// NewSchemaGate returns a closed gate on migrator's database; logger receives one line when the
// gate finds the schema not current, one when it opens and one per new error of a check.
func NewSchemaGate(migrator *db.Migrator, logger *slog.Logger) *SchemaGate {
	return &SchemaGate{
		migrator: migrator, logger: logger, current: make(chan struct{}),
		reason: "the database schema has not been checked yet",
	}
}

// Current returns a channel closed once the schema is current.
func (g *SchemaGate) Current() <-chan struct{} { return g.current }

// Check asks the migrator once whether the schema is current, opens the gate if it is, and
// reports whether the gate is open. Each check has five seconds.
func (g *SchemaGate) Check(ctx context.Context) bool {
	select {
	case <-g.current:
		return true
	default:
	}
	checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	status, err := g.migrator.Status(checkCtx)
	switch {
	case err != nil && ctx.Err() != nil:
		return false // stopping
	case err != nil:
		if g.setReason("the database schema could not be checked: " + err.Error()) {
			g.logger.Warn("checking the database schema; retrying", slog.Any("error", err))
		}
		return false
	case !status.Current():
		pending := PendingMigrations(status)
		if g.setReason("the database schema is not current (pending migrations: " + strings.Join(pending, ", ") +
			"): run `server migrate up`") {
			g.logger.Warn("the database schema is not current: serving only /healthz, /readyz and /metrics, "+
				"the API answers 503 schema_not_current until `server migrate up` has run",
				slog.Any("pending", pending))
		}
		return false
	}
	g.open.Do(func() {
		g.logger.Info("the database schema is current")
		close(g.current)
	})
	return true
}

// setReason records why the gate is closed and reports whether that is news.
func (g *SchemaGate) setReason(reason string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	changed := g.reason != reason
	g.reason = reason
	return changed
}

// Watch checks the schema every interval until it is current or ctx ends.
func (g *SchemaGate) Watch(ctx context.Context, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for !g.Check(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Guard serves next once the schema is current. Until then /healthz, /readyz and /metrics reach
// next and every other request is answered 503 with Retry-After and the API's error body, code
// CodeSchemaNotCurrent.
func (g *SchemaGate) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-g.current:
			next.ServeHTTP(w, r)
			return
		default:
		}
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			next.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		reason := g.reason
		g.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(5))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{
			"error": map[string]string{"code": CodeSchemaNotCurrent, "message": reason},
		})
	})
}

// PendingMigrations names the migrations status lists as pending, in the order they apply:
// River's as one entry ("river (N versions)"), then Reckon's as NNNN_name.
func PendingMigrations(status *db.Status) []string {
	pending := make([]string, 0, len(status.Pending)+1)
	if status.RiverPending > 0 {
		pending = append(pending, fmt.Sprintf("river (%d versions)", status.RiverPending))
	}
	for _, m := range status.Pending {
		pending = append(pending, fmt.Sprintf("%04d_%s", m.Version, m.Name))
	}
	return pending
}
