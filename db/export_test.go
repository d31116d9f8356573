package db

// SetMigrations makes m apply migrations instead of Reckon's, for tests of the migrator itself.
func SetMigrations(m *Migrator, migrations []Migration) { m.migrations = migrations }

// SplitStatements exports splitStatements to the tests.
var SplitStatements = splitStatements
