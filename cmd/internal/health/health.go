// Package health serves what every Reckon process exposes to its operators: /healthz (the process
// is alive), /readyz (the database answers and its schema is current for this binary) and
// /metrics (Prometheus).
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reckonhq/reckon/db"
)

// NewRegistry returns a Prometheus registry with the Go runtime and process collectors and
// reckon_build_info (BuildInfo), for a binary's own collectors to join.
func NewRegistry() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		BuildInfo(),
	)
	return registry
}

// Register adds /healthz, /readyz and /metrics to mux. Readiness pings the database through pool
// and asks migrator whether any migration is pending (503 naming them); each check has two seconds.
func Register(mux *http.ServeMux, pool *pgxpool.Pool, migrator *db.Migrator, registry *prometheus.Registry) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "database: " + err.Error()})
			return
		}
		status, err := migrator.Status(ctx)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "migrations: " + err.Error()})
			return
		}
		if !status.Current() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{
				"status": "unavailable", "error": "migrations pending: run `server migrate up`",
				"pending": PendingMigrations(status), "river_pending": status.RiverPending,
			})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
