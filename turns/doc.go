// Package turns serializes each conversation session with a Postgres advisory lock and groups
// inbound messages into logical turns that commit their mutations and effects atomically
// (DESIGN.md section 5). It builds on package effects.
package turns
