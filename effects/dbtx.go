package effects

import "github.com/reckonhq/reckon/internal/dbsqlc"

// DBTX is what Reckon's store functions run their statements on: a *pgxpool.Pool, a *pgx.Conn or
// a pgx.Tx (to write in the caller's transaction). It is the interface Reckon's generated queries
// run on (Exec, Query, QueryRow as pgx has them). The stores of connector and saga definitions,
// turn handlers and webhook subscriptions take it.
type DBTX = dbsqlc.DBTX
