package events

import "time"

// WebhookMaxAttempts and WebhookBackoff expose a Webhooks' retry settings to the tests.
func WebhookMaxAttempts(w *Webhooks) int { return w.config.MaxAttempts }

func WebhookBackoff(w *Webhooks) func(int) time.Duration { return w.config.Backoff }
