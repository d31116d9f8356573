// Package renderer stands for the upstream of README.md's async example: a renderer that accepts
// jobs and reports by webhook. Its functions are variables, never called.
package renderer

import (
	"context"
	"encoding/json"
)

// Job is a render job.
type Job struct {
	Scene          json.RawMessage
	IdempotencyKey string
	Webhook        string
}

var (
	// Start submits a job.
	Start func(ctx context.Context, job Job) error
	// Cancel abandons a job.
	Cancel func(ctx context.Context, id string) error
)
