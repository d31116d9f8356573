package turns

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/txn"
)

// LockNamespace is the first key of every session-mutex lock:
// pg_advisory_lock(LockNamespace, hashtext(session_key)). It is apart from db.AdvisoryLockNamespace
// (Reckon's own locks, such as the migrator's) so that no session key can hash onto those.
const LockNamespace int32 = 0x52434b53 // "RCKS"

// scheduleLockNamespace keys the transaction-scoped locks that serialize, per session, the
// assignment of inbound messages to turns.
const scheduleLockNamespace int32 = 0x52434b51 // "RCKQ"

// sessionLock is the session mutex's lock of sessionKey, held for a connection's session.
func sessionLock(sessionKey string) postgres.AdvisoryLock {
	return postgres.AdvisoryLock{Namespace: LockNamespace, Name: sessionKey}
}

// scheduleLock is the lock of sessionKey that serializes, until the caller's transaction ends,
// the statements that assign inbound messages to turns (submitting a message, opening,
// superseding and absorbing turns).
func scheduleLock(sessionKey string) postgres.AdvisoryLock {
	return postgres.AdvisoryLock{Namespace: scheduleLockNamespace, Name: sessionKey}
}

// cleanupTimeout bounds a clean-up statement on a session's connection — the unlock, the close
// of a connection that may hold the lock, a turn's status restored after a failed commit — run
// even once the caller's context has ended: ample for a database that answers, and short enough
// that one that does not holds the caller up for seconds only (closing the connection frees the
// lock anyway).
const cleanupTimeout = 5 * time.Second

// Mutex is the session mutex: a session-level Postgres advisory lock per session key, held on a
// dedicated connection of the pool. Only one Lock per session key exists at a time across every
// process on the database. If the holder dies, its connection closes and Postgres frees the lock
// at once: there is no TTL to guess.
//
// Acquirers of one session in one process first queue in the process, so that at most one pool
// connection per session waits for the database lock: waiters never starve the holder (or its
// handler) of pool connections.
type Mutex struct {
	pool *pgxpool.Pool

	mu    sync.Mutex
	gates map[string]*gate
}

// gate is the in-process queue of one session key: a one-slot semaphore with a reference count.
type gate struct {
	slot chan struct{}
	refs int
}

// NewMutex returns the session mutex on pool's database.
func NewMutex(pool *pgxpool.Pool) *Mutex { return &Mutex{pool: pool, gates: map[string]*gate{}} }

// enter waits for the session's in-process slot until deadline.
func (m *Mutex) enter(ctx context.Context, sessionKey string, deadline time.Time) (bool, error) {
	m.mu.Lock()
	g := m.gates[sessionKey]
	if g == nil {
		g = &gate{slot: make(chan struct{}, 1)}
		m.gates[sessionKey] = g
	}
	g.refs++
	m.mu.Unlock()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case g.slot <- struct{}{}:
		return true, nil
	case <-timer.C:
		m.leave(sessionKey, false)
		return false, nil
	case <-ctx.Done():
		m.leave(sessionKey, false)
		return false, ctx.Err()
	}
}

// leave gives up the session's slot (if held) and the reference to its gate.
func (m *Mutex) leave(sessionKey string, held bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gates[sessionKey]
	if held {
		<-g.slot
	}
	g.refs--
	if g.refs == 0 {
		delete(m.gates, sessionKey)
	}
}

// Lock is a held session mutex. Statements run on Conn (or in transactions from Begin) are made
// while the lock is held; if the connection dies, they cannot commit, and the lock is gone: that
// fences a holder that lost its lock. Release the lock when done.
type Lock struct {
	mutex      *Mutex
	sessionKey string
	conn       *pgxpool.Conn
	acquiredAt time.Time

	mu       sync.Mutex
	released bool
}

// Acquire blocks until it holds the session's lock, for at most timeout (waiting for a pool
// connection included). When the timeout passes while another holder keeps the lock, the error
// is ErrSessionBusy and nothing is held. Other errors (a cancelled ctx, a database error) hold
// nothing either.
func (m *Mutex) Acquire(ctx context.Context, sessionKey string, timeout time.Duration) (*Lock, error) {
	if sessionKey == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSessionKey)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("turns: acquire %q: timeout must be positive, got %v", sessionKey, timeout)
	}
	deadline := time.Now().Add(timeout)
	entered, err := m.enter(ctx, sessionKey, deadline)
	if err != nil {
		return nil, fmt.Errorf("turns: acquire %q: %w", sessionKey, err)
	}
	if !entered {
		return nil, fmt.Errorf("%w: %q: held by another turn of this process for more than %v", ErrSessionBusy, sessionKey, timeout)
	}
	lock, err := m.acquire(ctx, sessionKey, timeout, deadline)
	if err != nil {
		m.leave(sessionKey, true)
		return nil, err
	}
	lock.mutex = m
	return lock, nil
}

func (m *Mutex) acquire(ctx context.Context, sessionKey string, timeout time.Duration, deadline time.Time) (*Lock, error) {
	acquireCtx, cancel := context.WithDeadline(ctx, deadline)
	conn, err := m.pool.Acquire(acquireCtx)
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: %q: no database connection within %v", ErrSessionBusy, sessionKey, timeout)
		}
		return nil, fmt.Errorf("turns: acquire %q: connection: %w", sessionKey, err)
	}
	remaining := time.Until(deadline)
	if remaining < time.Millisecond {
		remaining = time.Millisecond
	}
	// Postgres ends the wait at lock_timeout with 55P03; the context only guards against a
	// database that does not answer.
	lockCtx, cancel := context.WithTimeout(ctx, remaining+10*time.Second)
	defer cancel()
	err = txn.Once(lockCtx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(lockCtx, `SELECT set_config('lock_timeout', $1, true)`, strconv.FormatInt(remaining.Milliseconds()+1, 10)); err != nil {
			return err
		}
		return sessionLock(sessionKey).Lock(lockCtx, tx)
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.LockNotAvailable {
			conn.Release() // the transaction rolled back cleanly and nothing is held
			return nil, fmt.Errorf("%w: %q: held by another turn for more than %v", ErrSessionBusy, sessionKey, timeout)
		}
		// The lock may have been granted just before the failure: never return this connection
		// to the pool.
		destroy(conn)
		return nil, fmt.Errorf("turns: acquire %q: %w", sessionKey, err)
	}
	return &Lock{sessionKey: sessionKey, conn: conn, acquiredAt: time.Now()}, nil
}

// SessionKey returns the key of the locked session.
func (l *Lock) SessionKey() string { return l.sessionKey }

// Conn returns the connection that holds the lock. Do not close or release it; Release does.
func (l *Lock) Conn() *pgx.Conn { return l.conn.Conn() }

// Begin starts a transaction on the lock's connection.
func (l *Lock) Begin(ctx context.Context) (pgx.Tx, error) { return l.conn.Begin(ctx) }

// Release unlocks the session and returns the connection to the pool. If the unlock fails, the
// connection is closed instead (which frees the lock) so that it never returns to the pool
// holding it. Calling Release again does nothing.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	defer l.mutex.leave(l.sessionKey, true)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	unlocked, err := sessionLock(l.sessionKey).Unlock(ctx, l.conn)
	if err != nil || !unlocked {
		destroy(l.conn)
		if err != nil {
			return fmt.Errorf("turns: release %q: %w (connection closed, which frees the lock)", l.sessionKey, err)
		}
		return fmt.Errorf("turns: release %q: lock was not held (connection closed)", l.sessionKey)
	}
	l.conn.Release()
	return nil
}

// destroy closes a pooled connection instead of returning it to the pool.
func destroy(conn *pgxpool.Conn) {
	raw := conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = raw.Close(ctx)
}
