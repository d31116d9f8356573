package main

import (
	"context"
	"fmt"
	"strings"
)

// statement is one normalized statement's cost over a scenario, from pg_stat_statements.
type statement struct {
	Query       string  `json:"query"`
	Calls       int64   `json:"calls"`
	TotalMS     float64 `json:"total_ms"`
	MeanMS      float64 `json:"mean_ms"`
	RowsPerCall float64 `json:"rows_per_call"`
	WALPerCall  float64 `json:"wal_bytes_per_call"`
}

// resetStatements empties pg_stat_statements before a scenario (-statements). The server must
// load the module (shared_preload_libraries = 'pg_stat_statements'); the extension is created in
// the bench database on first use.
func (b *bench) resetStatements(ctx context.Context) error {
	if _, err := b.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return fmt.Errorf("-statements: %w", err)
	}
	if _, err := b.pool.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return fmt.Errorf("-statements: %w (is pg_stat_statements in the server's shared_preload_libraries?)", err)
	}
	return nil
}

// reportStatements prints the -statements most expensive statements on the bench database since
// resetStatements, by total execution time, and records them in the results under scenario.
func (b *bench) reportStatements(ctx context.Context, scenario string) error {
	rows, err := b.pool.Query(ctx, `
		SELECT regexp_replace(query, '\s+', ' ', 'g'), calls, total_exec_time, mean_exec_time,
		       rows::float8 / calls, wal_bytes::float8 / calls
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND calls > 0
		ORDER BY total_exec_time DESC LIMIT $1`, b.o.statements)
	if err != nil {
		return fmt.Errorf("-statements: %w", err)
	}
	defer rows.Close()
	var list []statement
	for rows.Next() {
		var s statement
		if err := rows.Scan(&s.Query, &s.Calls, &s.TotalMS, &s.MeanMS, &s.RowsPerCall, &s.WALPerCall); err != nil {
			return err
		}
		list = append(list, s)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if b.results.Statements == nil {
		b.results.Statements = map[string][]statement{}
	}
	b.results.Statements[scenario] = list
	fmt.Fprintf(b.out, "\nSTATEMENTS of %s by total time (pg_stat_statements)\n%10s %10s %9s %7s %9s  %s\n", scenario, "calls", "total ms", "mean ms", "rows", "WAL B", "query")
	for _, s := range list {
		fmt.Fprintf(b.out, "%10d %10.0f %9.3f %7.1f %9.0f  %s\n", s.Calls, s.TotalMS, s.MeanMS, s.RowsPerCall, s.WALPerCall, shorten(s.Query, 140))
	}
	return nil
}

// shorten cuts text to at most n runes, marking the cut.
func shorten(text string, n int) string {
	r := []rune(strings.TrimSpace(text))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}
