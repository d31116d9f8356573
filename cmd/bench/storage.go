package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/saga"
)

// The storage scenario measures what an effect leaves behind: the growth of every reckon_% and
// river_% table (with its indexes and TOAST) and the WAL written, per effect of each kind, next to
// River's per no-op job. Each kind starts from emptied tables (reset) and runs alone.
//
// Sizes are read after VACUUM (ANALYZE) of those tables, not before: VACUUM removes the dead row
// versions the run's updates left (an effect row is updated at each state change, a River job at
// fetch and at completion) and their index entries, and records their space as free, as
// autovacuum does in a live database. It does not shrink the files, though, and so the file
// growth (bytes) also holds free space: the dead versions' space, and whole pages that Postgres
// added ahead of need while concurrent inserters waited to extend a table (PG 15: 20 pages per
// waiter, up to 512 at a time). Later rows fill that space, so the file growth is an upper bound
// of the long-run cost per effect, and a noisy one, which depends on timing: at N=2000, River's
// bytes per job were anywhere between 880 and 2060 from run to run here; at N=100 most of it is
// free space.
//
// Where the pg_freespacemap extension (contrib) is there, the scenario also reports the growth in
// use: the file growth less the free space the free-space maps record (up to date after VACUUM)
// for the tables and their indexes. That is the rows, their pages' overhead and the indexes'
// entries: close to what the kind costs in a steady state, and much steadier from run to run
// (here within a few percent for effects, some 10% for River's jobs, whose GIN indexes' pending
// lists vary).
//
// WAL is pg_current_wal_lsn's advance over the run, final VACUUM included, without a CHECKPOINT:
// the first change of a page after a checkpoint writes the whole page (a full-page image), so a
// run that straddles a checkpoint (checkpoint_timeout, max_wal_size, or a forced one: every DROP
// DATABASE on the server) writes more than one that does not. WAL is the whole server's: with
// pg_walinspect (contrib) the records that touch only other databases' tables are taken off —
// other writers on a shared server, e.g. a test database being created — and the full-page
// images are reported apart (walReader); without it the figure is the server's, unsplit.

// storageQueue is the River queue of the River baseline.
const storageQueue = "bench_storage"

// storageSaga is the saga definition of the saga kind, of storageSagaSteps steps.
const (
	storageSaga      = "bench_storage"
	storageSagaSteps = 3
)

// storageTools are the optional extensions of the scenario.
type storageTools struct {
	wal       *walReader // nil: the WAL is not split
	freeSpace bool       // pg_freespacemap is there: the growth in use is measured
}

// storage runs the River baseline and then each kind of effect, storage-n of each.
func (b *bench) storage(ctx context.Context) error {
	n := b.o.storageN
	var tools storageTools
	var err error
	if tools.wal, err = b.openWALReader(ctx); err != nil {
		b.progress("storage: WAL not split (%v): it is the whole server's, full-page images not counted apart", err)
	} else {
		defer tools.wal.close(ctx)
	}
	if _, err := b.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_freespacemap`); err != nil {
		b.progress("storage: growth in use not measured (%v)", err)
	} else {
		tools.freeSpace = true
	}
	sagas := (n + storageSagaSteps - 1) / storageSagaSteps
	for _, kind := range []struct {
		name, label string
		n, units    int // run's argument; what the growth is divided by
		run         func(ctx context.Context, n int) error
	}{
		{"storage-river", "River no-op job, InsertTx, worked", n, n, b.storageRiver},
		{"storage-simple", "effect, EnqueueTx, CONFIRMED", n, n, b.storageSimple},
		{"storage-compensated", "effect CONFIRMED + its compensation CONFIRMED", n, n, b.storageCompensated},
		{"storage-async", "effect accepted, CONFIRMED by Callback", n, n, b.storageAsync},
		{"storage-saga", fmt.Sprintf("saga step (%d-step sagas, CONFIRMED)", storageSagaSteps), sagas, sagas * storageSagaSteps, b.storageSagas},
	} {
		work := func(ctx context.Context) error { return kind.run(ctx, kind.n) }
		if err := b.measureStorage(ctx, kind.name, kind.label, kind.units, tools, work); err != nil {
			return fmt.Errorf("%s: %w", kind.name, err)
		}
	}
	return nil
}

// storageSnapshot is what the tables and the WAL hold at one instant.
type storageSnapshot struct {
	tables map[string]int64 // reckon_% and river_% table name → bytes with its indexes and TOAST
	free   map[string]int64 // table name → free bytes its and its indexes' free-space maps record
	lsn    string           // pg_current_wal_lsn
}

// measureStorage empties the tables, runs work, which returns once its units are settled with
// every client it started stopped, and records the growth per unit.
func (b *bench) measureStorage(ctx context.Context, name, label string, units int, tools storageTools, work func(context.Context) error) error {
	if err := b.reset(ctx); err != nil {
		return err
	}
	if err := b.vacuumStorage(ctx); err != nil {
		return err
	}
	if tools.wal != nil {
		if err := tools.wal.keepFromNow(ctx); err != nil {
			return err
		}
	}
	start, err := b.storageSnapshot(ctx, tools.freeSpace)
	if err != nil {
		return err
	}
	if err := work(ctx); err != nil {
		return err
	}
	if err := b.vacuumStorage(ctx); err != nil {
		return err
	}
	end, err := b.storageSnapshot(ctx, tools.freeSpace)
	if err != nil {
		return err
	}
	var walBytes, fpi, other int64
	if err := b.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint`, end.lsn, start.lsn).Scan(&walBytes); err != nil {
		return fmt.Errorf("wal diff: %w", err)
	}
	if tools.wal != nil {
		if fpi, other, err = tools.wal.breakdown(ctx, start.lsn, end.lsn); err != nil {
			return err
		}
	}
	per := func(v int64) float64 { return float64(v) / float64(units) }
	res := result{Name: name, Label: label, Count: units, Extra: map[string]float64{
		"wal_bytes_per_unit": per(walBytes - other),
		"wal_bytes":          float64(walBytes - other),
	}}
	walText := fmt.Sprintf("%.0f bytes of WAL each, the server's", per(walBytes))
	if tools.wal != nil {
		res.Extra["wal_fpi_bytes_per_unit"], res.Extra["wal_other_db_bytes"] = per(fpi), float64(other)
		walText = fmt.Sprintf("%.0f bytes of WAL each (%.0f of full-page images)", per(walBytes-other), per(fpi))
	}
	var total, river, inUse int64
	var grown []string
	for table, size := range end.tables {
		growth := size - start.tables[table]
		used := growth - (end.free[table] - start.free[table])
		if growth == 0 && used == 0 {
			continue
		}
		total += growth
		inUse += used
		if strings.HasPrefix(table, "river_") {
			river += growth
		}
		res.Extra["bytes_per_unit."+table] = per(growth) // where the bytes go, in the JSON
		if tools.freeSpace {
			res.Extra["in_use_bytes_per_unit."+table] = per(used)
		}
		grown = append(grown, table)
	}
	res.Extra["bytes"], res.Extra["bytes_per_unit"], res.Extra["river_bytes_per_unit"] = float64(total), per(total), per(river)
	if tools.freeSpace {
		res.Extra["in_use_bytes_per_unit"] = per(inUse)
	}
	b.results.add(res)
	key := "bytes_per_unit."
	if tools.freeSpace {
		key = "in_use_bytes_per_unit."
	}
	slices.SortFunc(grown, func(a, b string) int { return cmp.Compare(res.Extra[key+b], res.Extra[key+a]) })
	for i, table := range grown {
		grown[i] = fmt.Sprintf("%s %.0f", table, res.Extra[key+table])
	}
	sizeText := fmt.Sprintf("%.0f bytes each (%s)", per(total), strings.Join(grown, ", "))
	if tools.freeSpace {
		sizeText = fmt.Sprintf("%.0f bytes each, %.0f in use (%s)", per(total), per(inUse), strings.Join(grown, ", "))
	}
	b.progress("%s: %d × %s: %s, %s", name, units, label, sizeText, walText)
	if other > 0 {
		b.progress("%s: %d bytes of WAL of other databases on the server, left out", name, other)
	}
	return nil
}

// walReader reads the WAL of a measured window with pg_walinspect. It holds a connection with a
// temporary physical replication slot, so that a checkpoint (another database dropped on the
// server forces one) does not remove the window's WAL before it is read; Postgres drops the slot
// when the connection ends, whatever becomes of the bench.
type walReader struct {
	conn *pgxpool.Conn
	slot string
}

// openWALReader creates pg_walinspect in the bench database and the slot. It fails where the
// extension is not installed or the role may not create slots (it needs REPLICATION).
func (b *bench) openWALReader(ctx context.Context) (*walReader, error) {
	if _, err := b.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		return nil, err
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	w := &walReader{conn: conn, slot: b.name + "_wal"}
	if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true, true)`, w.slot); err != nil {
		conn.Release()
		return nil, err
	}
	return w, nil
}

// keepFromNow moves the slot up to the WAL flushed so far, if that is past it: older WAL is no
// longer needed. (A slot is never moved back, and a physical one never past the flushed WAL.)
func (w *walReader) keepFromNow(ctx context.Context) error {
	if _, err := w.conn.Exec(ctx, `SELECT pg_replication_slot_advance(slot_name, pg_current_wal_flush_lsn())
		FROM pg_replication_slots WHERE slot_name = $1 AND restart_lsn < pg_current_wal_flush_lsn()`, w.slot); err != nil {
		return fmt.Errorf("advance slot %s: %w", w.slot, err)
	}
	return nil
}

// close drops the slot and gives the connection back.
func (w *walReader) close(ctx context.Context) {
	_, _ = w.conn.Exec(context.WithoutCancel(ctx), `SELECT pg_drop_replication_slot($1)`, w.slot)
	w.conn.Release()
}

// breakdown reads the WAL from start to end and returns the bytes of the records that touch only
// other databases' relations (their block references name neither this database nor the shared
// catalogs, database 0), and the bytes of the full-page images of the others. Records without a
// block reference (commits, mostly) cannot be told apart and stay counted. WAL not yet flushed,
// which pg_walinspect cannot read, is left out of both.
func (w *walReader) breakdown(ctx context.Context, start, end string) (fpi, other int64, err error) {
	err = w.conn.QueryRow(ctx, `WITH r AS (
			SELECT record_length, fpi_length, block_ref IS NOT NULL
				AND block_ref !~ ('rel \d+/(0|' || (SELECT oid FROM pg_database WHERE datname = current_database()) || ')/') AS other
			FROM pg_get_wal_records_info($1::pg_lsn, least($2::pg_lsn, pg_current_wal_flush_lsn())))
		SELECT coalesce(sum(fpi_length) FILTER (WHERE NOT other), 0)::bigint,
			coalesce(sum(record_length) FILTER (WHERE other), 0)::bigint FROM r`, start, end).Scan(&fpi, &other)
	if err != nil {
		return 0, 0, fmt.Errorf("wal breakdown: %w", err)
	}
	return fpi, other, nil
}

// storageRelations selects the measured tables: every plain table and partition named reckon_%
// or river_% (a partitioned parent has no storage of its own) in the bench database's schemas.
const storageRelations = `FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = ANY (current_schemas(false)) AND (c.relname LIKE 'reckon\_%' OR c.relname LIKE 'river\_%')`

// storageSnapshot reads the size of each measured table and the WAL position, and with freeSpace
// the free space recorded in the free-space maps of each table and its indexes (pg_freespacemap).
func (b *bench) storageSnapshot(ctx context.Context, freeSpace bool) (storageSnapshot, error) {
	s := storageSnapshot{tables: map[string]int64{}, free: map[string]int64{}}
	free := `0::bigint`
	if freeSpace {
		free = `(SELECT coalesce(sum(f.avail), 0) FROM pg_freespace(c.oid) f)
			+ (SELECT coalesce(sum(f.avail), 0) FROM pg_index i, pg_freespace(i.indexrelid) f WHERE i.indrelid = c.oid)`
	}
	rows, err := b.pool.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid), (`+free+`)::bigint `+
		storageRelations+` AND c.relkind = 'r'`)
	if err != nil {
		return s, fmt.Errorf("storage snapshot: %w", err)
	}
	var table string
	var size, avail int64
	_, err = pgx.ForEachRow(rows, []any{&table, &size, &avail}, func() error {
		s.tables[table], s.free[table] = size, avail
		return nil
	})
	if err == nil {
		err = b.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s.lsn)
	}
	if err != nil {
		return s, fmt.Errorf("storage snapshot: %w", err)
	}
	return s, nil
}

// vacuumStorage runs VACUUM (ANALYZE) on the measured tables: on each partitioned parent, which
// recurses into its partitions and analyzes the parent too, and on each table that is no partition.
func (b *bench) vacuumStorage(ctx context.Context) error {
	rows, err := b.pool.Query(ctx, `SELECT c.relname `+storageRelations+
		` AND (c.relkind = 'p' OR (c.relkind = 'r' AND NOT c.relispartition)) ORDER BY c.relname`)
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	quoted := make([]string, len(names))
	for i, name := range names {
		quoted[i] = pgx.Identifier{name}.Sanitize()
	}
	if _, err := b.pool.Exec(ctx, `VACUUM (ANALYZE) `+strings.Join(quoted, ", ")); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// parallel runs fn(i) for i in [0, n) from C goroutines and returns the first error.
func (b *bench) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(b.o.concurrency)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

// eachInTx runs fn(tx, i) for i in [0, n), each in a transaction of its own, from C goroutines.
func (b *bench) eachInTx(ctx context.Context, n int, fn func(ctx context.Context, tx pgx.Tx, i int) error) error {
	return b.parallel(ctx, n, func(ctx context.Context, i int) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return fn(ctx, tx, i) })
	})
}

// storageRiver inserts n no-op River jobs one per transaction and works them to completion.
func (b *bench) storageRiver(ctx context.Context, n int) (err error) {
	client, err := b.riverClient(ctx, noopWorkers(), storageQueue)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, client.Stop(context.WithoutCancel(ctx))) }()
	err = b.eachInTx(ctx, n, func(ctx context.Context, tx pgx.Tx, _ int) error {
		_, err := client.InsertTx(ctx, tx, noopArgs{}, &river.InsertOpts{Queue: storageQueue})
		return err
	})
	if err != nil {
		return err
	}
	_, err = b.waitDone(ctx, "storage-river", `FROM river_job WHERE queue = '`+storageQueue+`' AND state <> 'completed'`,
		`SELECT coalesce(max(finalized_at), now()) FROM river_job`)
	return err
}

// The connectors of the storage scenario besides benchRegistry's: every call answers at once.
const (
	connectorCompensable = "bench.compensable" // bench.full with a Compensate
	connectorAsync       = "bench.async"       // accepted upstream, settled by callback
	connectorStep        = "bench.step"        // a saga step
)

// startStorageClient starts a reactor with the connectors of every kind and the saga definition.
func (b *bench) startStorageClient(ctx context.Context) (*effects.Client, *saga.Client, error) {
	registry := benchRegistry()
	ok := func(ctx context.Context, _ effects.Call) (json.RawMessage, error) { return noopUpstream(ctx) }
	undo := func(ctx context.Context, _ effects.Call, _ effects.Original) (json.RawMessage, error) {
		return noopUpstream(ctx)
	}
	present := func(context.Context, effects.Call) (effects.Status, error) {
		return effects.Present(json.RawMessage(`{"ok":true}`)), nil
	}
	for _, c := range []effects.Connector{
		{Name: connectorCompensable, Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, Dispatch: ok, StatusCheck: present, Compensate: undo},
		{Name: connectorAsync, Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
			Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, effects.Accepted("") }},
		{Name: connectorStep, Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Dispatch: ok, Compensate: undo},
	} {
		if err := registry.Register(c); err != nil {
			return nil, nil, err
		}
	}
	sagas, err := saga.NewClient(b.pool, &saga.Config{Logger: b.logger})
	if err != nil {
		return nil, nil, err
	}
	step := func(name string) saga.Step {
		return saga.Step{Name: name, Undo: saga.UndoByConnector(), Effect: func(saga.Input) (effects.Spec, error) {
			return effects.Spec{Connector: connectorStep, Args: json.RawMessage(`{"amount":1}`)}, nil
		}}
	}
	if err := sagas.Register(saga.Definition{Name: storageSaga, Steps: []saga.Step{step("first"), step("second"), step("third")}}); err != nil {
		return nil, nil, err
	}
	client, err := effects.NewClient(b.pool, &effects.Config{
		Registry: registry, Logger: b.logger, Workers: b.o.workers, FetchCooldown: fetchCooldown,
		FetchPollInterval: fetchPollInterval, Plugins: []effects.Plugin{sagas}, TracerProvider: b.tracerProvider(),
	})
	if err != nil {
		return nil, nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, nil, err
	}
	return client, sagas, nil
}

// withStorageClient runs fn with a started storage reactor, then checks that want effects exist,
// all CONFIRMED, and stops the reactor.
func (b *bench) withStorageClient(ctx context.Context, name string, want int, fn func(*effects.Client, *saga.Client) error) (err error) {
	client, sagas, err := b.startStorageClient(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, client.Stop(context.WithoutCancel(ctx))) }()
	if err := fn(client, sagas); err != nil {
		return err
	}
	if _, err := b.waitEffectsDone(ctx, name); err != nil {
		return err
	}
	var count int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effects`).Scan(&count); err != nil {
		return err
	}
	if count != want {
		return fmt.Errorf("%d effects, want %d", count, want)
	}
	return nil
}

// storageSimple enqueues n effects one per transaction; the reactor confirms them.
func (b *bench) storageSimple(ctx context.Context, n int) error {
	return b.withStorageClient(ctx, "storage-simple", n, func(client *effects.Client, _ *saga.Client) error {
		return b.eachInTx(ctx, n, func(ctx context.Context, tx pgx.Tx, i int) error {
			_, err := client.EnqueueTx(ctx, tx, benchSpec("bench.full", fmt.Sprintf("storage-simple-%d", i)), nil)
			return err
		})
	})
}

// storageCompensated enqueues n effects one per transaction, waits until they are CONFIRMED, and
// compensates each (CompensateTx, one per transaction); the reactor confirms the compensations.
func (b *bench) storageCompensated(ctx context.Context, n int) error {
	return b.withStorageClient(ctx, "storage-compensated", 2*n, func(client *effects.Client, _ *saga.Client) error {
		ids := make([]uuid.UUID, n)
		err := b.eachInTx(ctx, n, func(ctx context.Context, tx pgx.Tx, i int) error {
			e, err := client.EnqueueTx(ctx, tx, benchSpec(connectorCompensable, fmt.Sprintf("storage-compensated-%d", i)), nil)
			if err == nil {
				ids[i] = e.ID
			}
			return err
		})
		if err != nil {
			return err
		}
		if _, err := b.waitEffectsDone(ctx, "storage-compensated"); err != nil {
			return err
		}
		return b.eachInTx(ctx, n, func(ctx context.Context, tx pgx.Tx, i int) error {
			_, err := client.CompensateTx(ctx, tx, ids[i], "bench", "storage scenario", nil)
			return err
		})
	})
}

// storageAsync enqueues n async effects one per transaction, waits until the upstream accepted
// them all, and then settles each with a Callback.
func (b *bench) storageAsync(ctx context.Context, n int) error {
	return b.withStorageClient(ctx, "storage-async", n, func(client *effects.Client, _ *saga.Client) error {
		err := b.eachInTx(ctx, n, func(ctx context.Context, tx pgx.Tx, i int) error {
			_, err := client.EnqueueTx(ctx, tx, benchSpec(connectorAsync, fmt.Sprintf("storage-async-%d", i)), nil)
			return err
		})
		if err != nil {
			return err
		}
		// Accepted means the correlation id is recorded; a callback before that would race the
		// dispatch (and fence it out), which is not the path measured here.
		_, err = b.waitDone(ctx, "storage-async accepted", `FROM reckon_effects WHERE correlation_id IS NULL`, `SELECT now()`)
		if err != nil {
			return err
		}
		rows, err := b.pool.Query(ctx, `SELECT correlation_id FROM reckon_effects`)
		if err != nil {
			return err
		}
		correlations, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		return b.parallel(ctx, len(correlations), func(ctx context.Context, i int) error {
			_, err := client.Callback(ctx, correlations[i], json.RawMessage(`{"ok":true}`), "", nil)
			return err
		})
	})
}

// storageSagas starts n sagas one per transaction; the reactor runs their steps to COMPLETED.
func (b *bench) storageSagas(ctx context.Context, n int) error {
	return b.withStorageClient(ctx, "storage-saga", n*storageSagaSteps, func(_ *effects.Client, sagas *saga.Client) error {
		err := b.eachInTx(ctx, n, func(ctx context.Context, tx pgx.Tx, _ int) error {
			_, err := sagas.StartTx(ctx, tx, storageSaga, json.RawMessage(`{"amount":1}`), nil)
			return err
		})
		if err != nil {
			return err
		}
		_, err = b.waitDone(ctx, "storage-saga", `FROM reckon_sagas WHERE state <> 'COMPLETED'`, `SELECT now()`)
		if err != nil {
			return err
		}
		var completed int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM reckon_sagas WHERE state = 'COMPLETED'`).Scan(&completed); err != nil {
			return err
		}
		if completed != n {
			return fmt.Errorf("%d sagas COMPLETED, want %d", completed, n)
		}
		return nil
	})
}

// reportStorage prints the storage section: bytes and WAL per unit of each kind, against River's
// per job, and the simple kind's growth per million effects. It adds the ratios to r.Ratios.
func (b *bench) reportStorage() {
	r := &b.results
	var lines []result
	for _, res := range r.Results {
		if strings.HasPrefix(res.Name, "storage-") {
			lines = append(lines, res)
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(b.out, "\nSTORAGE per unit, in bytes: growth of the reckon_% and river_% files (tables, indexes, TOAST) after VACUUM,")
	fmt.Fprintln(b.out, "of it in use (less the free space in the free-space maps), of it River's; WAL, of it full-page images (FPI)")
	tw := tabwriter.NewWriter(b.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tUNIT\tCOUNT\tFILES\tIN USE\triver_%\tWAL\tFPI\t×RIVER FILES\t×RIVER IN USE\t×RIVER WAL")
	text := func(extra map[string]float64, key string) string {
		if v, ok := extra[key]; ok {
			return fmt.Sprintf("%.0f", v)
		}
		return "-"
	}
	for _, res := range lines {
		cells := []string{res.Name, res.Label, fmt.Sprint(res.Count)}
		for _, key := range []string{"bytes_per_unit", "in_use_bytes_per_unit", "river_bytes_per_unit", "wal_bytes_per_unit", "wal_fpi_bytes_per_unit"} {
			cells = append(cells, text(res.Extra, key))
		}
		for _, key := range []string{"bytes_per_unit", "in_use_bytes_per_unit", "wal_bytes_per_unit"} {
			v, ok := res.Extra[key]
			river, _ := r.extra("storage-river", key)
			cells = append(cells, ratioText(ratio(v, river)))
			if ok && res.Name != "storage-river" && river > 0 {
				r.Ratios[res.Name+"/storage-river "+key] = ratio(v, river)
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	if simple := r.get("storage-simple"); simple != nil {
		// Bytes per effect × 10⁶ / 10⁹: GB (decimal) per million effects.
		e := simple.Extra
		e["gb_per_million"], e["wal_gb_per_million"] = e["bytes_per_unit"]/1000, e["wal_bytes_per_unit"]/1000
		inUse := ""
		if v, ok := e["in_use_bytes_per_unit"]; ok {
			e["in_use_gb_per_million"] = v / 1000
			inUse = fmt.Sprintf(" (%.2f GB in use)", v/1000)
		}
		fmt.Fprintf(b.out, "growth per million simple effects: %.2f GB of files%s, of which %.2f GB River's (its cleaner deletes completed jobs after their retention); %.2f GB of WAL\n",
			e["gb_per_million"], inUse, e["river_bytes_per_unit"]/1000, e["wal_gb_per_million"])
	}
}
