package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
)

type scheduleBody struct {
	Tenant          string     `json:"tenant"`
	Name            string     `json:"name"`
	Connector       string     `json:"connector"`
	Cron            string     `json:"cron"`
	IntervalSeconds int64      `json:"interval_seconds"`
	Missed          string     `json:"missed"`
	Enabled         bool       `json:"enabled"`
	NextTick        time.Time  `json:"next_tick"`
	LastTick        *time.Time `json:"last_tick"`
	CreatedBy       string     `json:"created_by"`
}

// Schedules over HTTP: a tenant's admin token sets its own, its tokens read them, another
// tenant's are absent; a bad definition is 400 naming the field and stores nothing.
func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	admin, acme, globex, system := h.token("acme", true), h.token("acme", false), h.token("globex", true), h.systemToken()
	path := "/v1/schedules/acme/nightly"
	count := func() int { return testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_schedules`) }

	r := h.do("PUT", path, acme, `{"connector":"bank.wire","cron":"0 2 * * *"}`)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.Equal(t, "forbidden", r.errorCode(t))
	r = h.do("PUT", path, globex, `{"connector":"bank.wire","cron":"0 2 * * *"}`)
	require.Equal(t, http.StatusNotFound, r.status, "another tenant's: %s", r.body)

	for body, field := range map[string]string{
		`{"connector":"nope","cron":"0 2 * * *"}`:                         "connector",
		`{"connector":"bank.wire","cron":"0 25 * * *"}`:                   "cron",
		`{"connector":"bank.wire","cron":"@every 1h"}`:                    "cron",
		`{"connector":"bank.wire"}`:                                       "cron",
		`{"connector":"bank.wire","cron":"@hourly","interval_seconds":5}`: "cron",
		`{"connector":"bank.wire","interval_seconds":0.5}`:                "interval_seconds",
		`{"connector":"bank.wire","interval_seconds":-1}`:                 "interval_seconds",
		`{"connector":"bank.wire","interval_seconds":99999999999}`:        "interval_seconds",
		`{"connector":"bank.wire","cron":"@hourly","missed":"later"}`:     "missed",
		`{"connector":"bank.wire","cron":"@hourly","every":"1h"}`:         "every",
	} {
		r := h.do("PUT", path, admin, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		require.Equal(t, "invalid_request", r.errorCode(t), "%s", body)
		require.Contains(t, string(r.body), field, "%s", body)
	}
	r = h.do("PUT", "/v1/schedules/acme/bad%2Fname", admin, `{"connector":"bank.wire","cron":"@hourly"}`)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Equal(t, "invalid_parameter", r.errorCode(t))
	require.Equal(t, 0, count(), "a refused definition stores nothing")

	r = h.do("PUT", path, admin, `{"connector":"bank.wire","cron":"0 2 * * *","args":{"account":"a-1","amount":1}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	created := decode[scheduleBody](t, r)
	require.Equal(t, "skip", created.Missed)
	require.True(t, created.Enabled)
	require.Equal(t, 2, created.NextTick.UTC().Hour())
	require.Nil(t, created.LastTick)
	require.True(t, strings.HasPrefix(created.CreatedBy, "api:"), created.CreatedBy)

	r = h.do("PUT", path, system, `{"connector":"bank.wire","interval_seconds":3600,"missed":"catch_up","enabled":false}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	replaced := decode[scheduleBody](t, r)
	require.EqualValues(t, 3600, replaced.IntervalSeconds)
	require.Empty(t, replaced.Cron)
	require.False(t, replaced.Enabled)
	require.Equal(t, "catch_up", replaced.Missed)

	r = h.do("GET", path, acme, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "nightly", decode[scheduleBody](t, r).Name)
	require.Equal(t, http.StatusNotFound, h.do("GET", path, globex, "").status)
	require.Equal(t, http.StatusNotFound, h.do("GET", "/v1/schedules/acme/other", acme, "").status)

	r = h.do("PUT", "/v1/schedules/globex/sync", system, `{"connector":"bank.wire","interval_seconds":60}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	type list struct {
		Schedules  []scheduleBody `json:"schedules"`
		NextCursor string         `json:"next_cursor"`
	}
	require.Len(t, decode[list](t, h.do("GET", "/v1/schedules", acme, "")).Schedules, 1, "a tenant sees its own")
	all := decode[list](t, h.do("GET", "/v1/schedules?limit=1", system, ""))
	require.Len(t, all.Schedules, 1)
	require.Equal(t, "acme", all.Schedules[0].Tenant)
	require.NotEmpty(t, all.NextCursor)
	r = h.do("GET", "/v1/schedules?limit=1&cursor="+all.NextCursor, system, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	rest := decode[list](t, r)
	require.Len(t, rest.Schedules, 1)
	require.Equal(t, "globex", rest.Schedules[0].Tenant)
	require.Empty(t, rest.NextCursor)
	require.Len(t, decode[list](t, h.do("GET", "/v1/schedules?tenant=globex", system, "")).Schedules, 1)
	require.Equal(t, "invalid_cursor", h.do("GET", "/v1/schedules?cursor=nonsense", system, "").errorCode(t))
	require.Equal(t, "invalid_parameter", h.do("GET", "/v1/schedules?tenant=%20", system, "").errorCode(t))

	require.Equal(t, http.StatusForbidden, h.do("DELETE", path, acme, "").status)
	require.Equal(t, http.StatusNotFound, h.do("DELETE", path, globex, "").status)
	require.Equal(t, http.StatusOK, h.do("DELETE", path, admin, "").status)
	require.Equal(t, http.StatusNotFound, h.do("DELETE", path, admin, "").status)
	require.Equal(t, 1, count())
}
