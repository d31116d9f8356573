package schedule

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// scheduleJSON is a Schedule on the wire: what the HTTP API answers (docs/openapi/api.json,
// Schedule) and what `server schedules list -o json` prints.
type scheduleJSON struct {
	Tenant          string          `json:"tenant"`
	Name            string          `json:"name"`
	Connector       string          `json:"connector"`
	Args            json.RawMessage `json:"args"`
	Cron            string          `json:"cron,omitempty"`
	IntervalSeconds int64           `json:"interval_seconds,omitempty"`
	Missed          Missed          `json:"missed"`
	Enabled         bool            `json:"enabled"`
	NextTick        time.Time       `json:"next_tick"`
	LastTick        *time.Time      `json:"last_tick,omitempty"`
	LastEffectID    *uuid.UUID      `json:"last_effect_id,omitempty"`
	LastError       string          `json:"last_error,omitempty"`
	CreatedAt       time.Time       `json:"created_at"`
	CreatedBy       string          `json:"created_by"`
	UpdatedAt       time.Time       `json:"updated_at"`
	UpdatedBy       string          `json:"updated_by"`
}

// MarshalJSON writes the schedule as the HTTP API does: the interval in whole seconds
// (interval_seconds), enabled rather than Disabled, the times in RFC 3339.
func (s *Schedule) MarshalJSON() ([]byte, error) {
	args := s.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	return json.Marshal(scheduleJSON{
		Tenant: s.Tenant, Name: s.Name, Connector: s.Connector, Args: args, Cron: s.Cron,
		IntervalSeconds: int64(s.Interval / time.Second), Missed: s.missed(), Enabled: !s.Disabled,
		NextTick: s.NextTick, LastTick: s.LastTick, LastEffectID: s.LastEffectID, LastError: s.LastError,
		CreatedAt: s.CreatedAt, CreatedBy: s.CreatedBy, UpdatedAt: s.UpdatedAt, UpdatedBy: s.UpdatedBy,
	})
}
