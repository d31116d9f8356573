package postgres

import (
	"context"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// AdvisoryLock names a two-key Postgres advisory lock, (Namespace, hashtext(Name)): the namespace
// keeps one kind of lock (a reactor's liveness, a session's mutex) apart from the others, and the
// name is the thing locked (a reactor id, a session key).
//
// Session-scoped locks (Lock, TryLock, Unlock) are held by the connection until Unlock or until
// the connection ends, whatever transactions it runs meanwhile: Postgres frees them the moment
// the holder's process or connection dies. Transaction-scoped locks (LockTx, TryLockTx) are freed
// when the caller's transaction ends. A connection pooler in transaction mode breaks the first
// kind (docs/operations.md).
type AdvisoryLock struct {
	Namespace int32
	Name      string
}

// Lock takes the lock for conn's session, waiting while another session or transaction holds it,
// up to conn's lock_timeout (then a 55P03 error, nothing held) or ctx's end.
func (l AdvisoryLock) Lock(ctx context.Context, conn dbsqlc.DBTX) error {
	return dbsqlc.New(conn).AdvisoryLock(ctx, dbsqlc.AdvisoryLockParams{Namespace: l.Namespace, Name: l.Name})
}

// TryLock takes the lock for conn's session if nobody holds it, and reports whether it did.
func (l AdvisoryLock) TryLock(ctx context.Context, conn dbsqlc.DBTX) (bool, error) {
	return dbsqlc.New(conn).AdvisoryTryLock(ctx, dbsqlc.AdvisoryTryLockParams{Namespace: l.Namespace, Name: l.Name})
}

// Unlock frees conn's session lock, and reports whether conn's session held it (Postgres also
// logs a warning when it did not).
func (l AdvisoryLock) Unlock(ctx context.Context, conn dbsqlc.DBTX) (bool, error) {
	return dbsqlc.New(conn).AdvisoryUnlock(ctx, dbsqlc.AdvisoryUnlockParams{Namespace: l.Namespace, Name: l.Name})
}

// LockTx takes the lock until tx ends, waiting while another holds it.
func (l AdvisoryLock) LockTx(ctx context.Context, tx dbsqlc.DBTX) error {
	return dbsqlc.New(tx).AdvisoryXactLock(ctx, dbsqlc.AdvisoryXactLockParams{Namespace: l.Namespace, Name: l.Name})
}

// TryLockTx takes the lock until tx ends if nobody holds it, and reports whether it did.
func (l AdvisoryLock) TryLockTx(ctx context.Context, tx dbsqlc.DBTX) (bool, error) {
	return dbsqlc.New(tx).AdvisoryTryXactLock(ctx, dbsqlc.AdvisoryTryXactLockParams{Namespace: l.Namespace, Name: l.Name})
}
