package db

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MaxSchemaLength is the longest schema name ValidateSchema accepts: River prefixes its
// notification channels with the schema ("cell1.river_leadership"), and Postgres truncates a
// channel name past 63 bytes.
const MaxSchemaLength = 46

// schemaNameRE is what a schema name may be: an unquoted lowercase SQL identifier, so that it means
// the same quoted or not, in search_path, in SQL and in River's channel names.
var schemaNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ValidateSchema checks name as the schema of Reckon's and River's tables (ConfigureSchema): 1 to
// MaxSchemaLength characters, lowercase letters, digits and underscores, not starting with a
// digit, and none of the names Postgres reserves (pg_…, information_schema). The error names the
// value and what is allowed.
func ValidateSchema(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("schema: empty name")
	case len(name) > MaxSchemaLength:
		return fmt.Errorf("schema %q: longer than %d characters", name, MaxSchemaLength)
	case !schemaNameRE.MatchString(name):
		return fmt.Errorf("schema %q: want lowercase letters, digits and underscores, not starting with a digit", name)
	case strings.HasPrefix(name, "pg_") || name == "information_schema":
		return fmt.Errorf("schema %q: a name Postgres reserves for itself", name)
	}
	return nil
}

// ConfigureSchema makes every connection of config use schema for Reckon's and River's tables and
// functions: it sets the connection's search_path to that schema and RiverSchema(schema), where a
// Citus cell keeps River's tables (a startup parameter, so no statement is spent on it). Reckon's
// queries and River's name their tables unqualified, and River's notification channels follow the
// current schema, so several deployments can live in one database, one per schema, apart from
// each other. Migrate with MigratorConfig.Schema set to the
// same name (it creates the schema). An invalid name is an error (ValidateSchema) and config is
// left unchanged. "public" is the default of a database and needs no call.
//
// Nothing else is on the search path: objects of extensions installed in public are
// not found unqualified (Reckon uses none).
func ConfigureSchema(config *pgxpool.Config, schema string) error {
	if err := ValidateSchema(schema); err != nil {
		return err
	}
	if config.ConnConfig.RuntimeParams == nil {
		config.ConnConfig.RuntimeParams = map[string]string{}
	}
	config.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize() + ", " + pgx.Identifier{RiverSchema(schema)}.Sanitize()
	return nil
}
