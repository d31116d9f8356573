package retention

// SetAfterBatch makes r call fn after each batch it commits, with the phase's name.
func SetAfterBatch(r *Retention, fn func(phase string)) { r.afterBatch = fn }
