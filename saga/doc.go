// Package saga runs durable multi-step effects: ordered steps, each an effect with a compensation;
// when a step fails, the confirmed steps are compensated in reverse order (DESIGN.md section 6).
// It builds on package effects.
package saga
