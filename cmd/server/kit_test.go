package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// The operator's kit (docs/operations.md, "Dashboards and alerts"), relative to this package.
const (
	kitDashboard  = "../../deploy/grafana/reckon.json"
	kitAlerts     = "../../deploy/prometheus/alerts.yml"
	kitOperations = "../../docs/operations.md"
	kitRunbook    = "https://github.com/reckonhq/reckon/blob/main/docs/operations.md#"
)

// grafanaDashboard is the part of a Grafana dashboard's JSON model the tests look at.
type grafanaDashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *grafanaRef     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *grafanaRef `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Panels  []grafanaPanel `json:"panels"` // a collapsed row's
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *grafanaRef `json:"datasource"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	return readKitFile[grafanaDashboard](t, kitDashboard, json.Unmarshal)
}

// readKitFile is the kit's file at path, decoded by unmarshal (JSON or YAML).
func readKitFile[T any](t *testing.T, path string, unmarshal func([]byte, any) error) T {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var v T
	require.NoError(t, unmarshal(raw, &v), "%s does not decode", path)
	return v
}

// dashboardQueries is every PromQL query of the dashboard, the templating's included, by where it is.
func dashboardQueries(t *testing.T, d grafanaDashboard) map[string]string {
	t.Helper()
	queries := map[string]string{}
	var walk func([]grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, p := range panels {
			for _, target := range p.Targets {
				queries[fmt.Sprintf("panel %d %q, target %s", p.ID, p.Title, target.RefID)] = target.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			queries["variable "+v.Name] = v.Definition
		}
	}
	return queries
}

// alertRules is alerts.yml: the groups of rules promtool reads.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readAlertRules(t *testing.T) alertRules {
	t.Helper()
	rules := readKitFile[alertRules](t, kitAlerts, yaml.Unmarshal)
	require.NotEmpty(t, rules.Groups)
	return rules
}

// requirePromtool is promtool's path; without it the test is skipped, except under CI=true.
func requirePromtool(t *testing.T) string {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing (Debian's prometheus package): .ci/run installs it")
		}
		t.Skip("promtool is missing (Debian's prometheus package); CI=true fails instead")
	}
	return promtool
}

var (
	// promqlString is a quoted string of PromQL (a label value or a regexp): names in it are data.
	promqlString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	// promqlLabelList is a list of label names: by (…), without (…), on (…), ignoring (…), group_left (…).
	promqlLabelList = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// reckonName is a metric name of Reckon's, not preceded by what would make it part of another word.
	reckonName = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])(reckon_[a-zA-Z0-9_:]+)`)
	// grafanaVariable is a dashboard variable in a query: $name or ${name}.
	grafanaVariable = regexp.MustCompile(`\$\{?(\w+)`)
)

// metricNames is the set of reckon_* metric names a PromQL expression names.
func metricNames(expr string) []string {
	var names []string
	expr = promqlLabelList.ReplaceAllString(promqlString.ReplaceAllString(expr, `""`), "")
	for _, m := range reckonName.FindAllStringSubmatch(expr, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestMetricNames: names are found in selectors, aggregations and functions, and not in label
// values, regexps or label names.
func TestMetricNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"reckon_a_total", "reckon_b_seconds_bucket", "reckon_c"},
		metricNames(`sum(rate(reckon_a_total{kind="reckon_dispatch"}[5m])) / histogram_quantile(0.9, rate(reckon_b_seconds_bucket[1m]))+reckon_c`))
	require.Empty(t, metricNames(`up{job=~"reckon_x|reckon-server"} and on (reckon_label) foo_reckon_bar`))
	require.Equal(t, []string{"reckon_d"}, metricNames(`sum without (reckon_x, job) (reckon_d) * on(reckon_y) group_left(reckon_z) up`))
}

// TestDashboard: deploy/grafana/reckon.json is a dashboard Grafana loads — schema 36 or later
// (Grafana 10 and 11), a Prometheus datasource variable that every panel and query goes through, unique panel
// ids, panels that fit the 24-column grid without overlapping, every panel with at least one
// query, only defined variables in the queries — and every query is valid PromQL (promtool parses
// them as recording rules, with the variables replaced; skipped without promtool, except under CI=true).
func TestDashboard(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	require.Equal(t, "reckon", d.UID)
	require.NotEmpty(t, d.Title)
	require.GreaterOrEqual(t, d.SchemaVersion, 36, "a schema Grafana 10 and 11 load without migrating")

	variables := map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
	for _, v := range d.Templating.List {
		variables[v.Name] = true
		if v.Name == "datasource" {
			require.Equal(t, "datasource", v.Type)
			require.JSONEq(t, `"prometheus"`, string(v.Query), "a choice of Prometheus datasources")
		} else {
			require.Equal(t, &grafanaRef{Type: "prometheus", UID: "${datasource}"}, v.Datasource, "variable %s", v.Name)
		}
	}
	require.True(t, variables["datasource"], "a datasource variable: the dashboard works with any Prometheus")
	require.True(t, variables["connector"], "a connector variable")

	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	var panels int
	var walk func([]grafanaPanel)
	walk = func(list []grafanaPanel) {
		for _, p := range list {
			require.NotZero(t, p.ID, "panel %q has no id", p.Title)
			require.NotContains(t, ids, p.ID, "panel id %d is %q's and %q's", p.ID, ids[p.ID], p.Title)
			ids[p.ID] = p.Title
			require.NotEmpty(t, p.Title, "panel %d has no title", p.ID)
			g := p.GridPos
			require.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.Y >= 0 && g.X+g.W <= 24, "panel %q: gridPos %+v", p.Title, g)
			for x := g.X; x < g.X+g.W; x++ {
				for y := g.Y; y < g.Y+g.H; y++ {
					require.NotContains(t, taken, cell{x, y}, "panel %q overlaps %q", p.Title, taken[cell{x, y}])
					taken[cell{x, y}] = p.Title
				}
			}
			if p.Type == "row" {
				require.Empty(t, p.Targets, "row %q", p.Title)
				walk(p.Panels)
				continue
			}
			panels++
			require.Contains(t, []string{"timeseries", "stat"}, p.Type, "panel %q", p.Title)
			require.Equal(t, &grafanaRef{Type: "prometheus", UID: "${datasource}"}, p.Datasource, "panel %q", p.Title)
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			refs := map[string]bool{}
			for _, target := range p.Targets {
				require.NotEmpty(t, strings.TrimSpace(target.Expr), "panel %q target %s", p.Title, target.RefID)
				require.NotEmpty(t, target.RefID, "panel %q", p.Title)
				require.False(t, refs[target.RefID], "panel %q: refId %s twice", p.Title, target.RefID)
				refs[target.RefID] = true
				require.Equal(t, p.Datasource, target.Datasource, "panel %q target %s", p.Title, target.RefID)
			}
		}
	}
	walk(d.Panels)
	require.GreaterOrEqual(t, panels, 20)

	queries := dashboardQueries(t, d)
	for where, expr := range queries {
		for _, m := range grafanaVariable.FindAllStringSubmatch(expr, -1) {
			require.True(t, variables[m[1]], "%s uses $%s, which is not defined: %s", where, m[1], expr)
		}
	}

	// Every query parses: promtool checks them as recording rules, with the variables replaced.
	promtool := requirePromtool(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	keys := slices.Sorted(maps.Keys(queries))
	for i, where := range keys {
		expr := queries[where]
		if strings.HasPrefix(where, "variable ") { // label_values(metric, label) is Grafana's, not PromQL
			m := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`).FindStringSubmatch(expr)
			require.NotNil(t, m, "%s: %s", where, expr)
			expr = m[1]
		}
		expr = strings.NewReplacer(`$connector`, `.*`, `$__rate_interval`, `5m`, `$__interval`, `1m`, `$__range`, `1h`).Replace(expr)
		quoted, err := json.Marshal(expr) // a JSON string is a YAML string
		require.NoError(t, err)
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, quoted)
	}
	file := filepath.Join(t.TempDir(), "dashboard.yml")
	require.NoError(t, os.WriteFile(file, []byte(rules.String()), 0o600))
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	require.NoError(t, err, "the dashboard's queries as rules (%s):\n%s\n%s", kitDashboard, out, rules.String())
}

// TestAlertRules: every alert in alerts.yml has a severity (critical, warning or info), a summary,
// a description and a runbook_url to its own section of docs/operations.md, which exists
// ("#### AlertName" under "Dashboards and alerts"). promtool checks and tests the rules
// themselves (make check-rules).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	rules := readAlertRules(t)
	docs, err := os.ReadFile(kitOperations)
	require.NoError(t, err)
	var alerts int
	for _, group := range rules.Groups {
		for _, rule := range group.Rules {
			if rule.Alert == "" {
				continue
			}
			alerts++
			require.Regexp(t, `^Reckon[A-Z][A-Za-z]+$`, rule.Alert)
			require.Contains(t, []string{"critical", "warning", "info"}, rule.Labels["severity"], rule.Alert)
			require.NotEmpty(t, rule.Annotations["summary"], rule.Alert)
			require.NotEmpty(t, rule.Annotations["description"], rule.Alert)
			require.Equal(t, kitRunbook+strings.ToLower(rule.Alert), rule.Annotations["runbook_url"], rule.Alert)
			require.True(t, strings.Contains(string(docs), "\n#### "+rule.Alert+"\n"), "docs/operations.md has no section #### %s", rule.Alert)
			require.NotEmpty(t, strings.TrimSpace(rule.Expr), rule.Alert)
		}
	}
	require.GreaterOrEqual(t, alerts, 15)
}

// scrape is what a /metrics answer exports: each metric family's type, and the values each label
// of the family's series takes.
type scrape struct {
	types  map[string]string                     // family → counter, gauge, histogram, …
	labels map[string]map[string]map[string]bool // family → label → values
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func newScrape() scrape {
	return scrape{types: map[string]string{}, labels: map[string]map[string]map[string]bool{}}
}

// add reads the text exposition of url into s.
func (s scrape) add(t *testing.T, url string) {
	t.Helper()
	code, body := get(t, url)
	require.Equal(t, http.StatusOK, code, body)
	lines := strings.Split(body, "\n")
	for _, line := range lines {
		if fields := strings.Fields(line); len(fields) == 4 && fields[0] == "#" && fields[1] == "TYPE" {
			s.types[fields[2]] = fields[3]
		}
	}
	for _, line := range lines {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		family := s.family(m[1])
		if s.labels[family] == nil {
			s.labels[family] = map[string]map[string]bool{}
		}
		for _, pair := range labelPair.FindAllStringSubmatch(m[2], -1) {
			if s.labels[family][pair[1]] == nil {
				s.labels[family][pair[1]] = map[string]bool{}
			}
			s.labels[family][pair[1]][pair[2]] = true
		}
	}
}

// family is the family of a sample or series name: a histogram's _bucket, _sum and _count are the
// histogram's.
func (s scrape) family(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && (s.types[base] == "histogram" || s.types[base] == "summary") {
			return base
		}
	}
	return name
}

var (
	// promqlSelector is a selector of one of Reckon's metrics with label matchers.
	promqlSelector = regexp.MustCompile(`(reckon_[a-zA-Z0-9_:]+)\{([^}]*)\}`)
	// promqlMatcher is one label matcher of a selector.
	promqlMatcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"`)
)

// missingFrom is what expr names that s does not export: metric names, labels that a matcher
// names (job and instance are the scrape's), and the value of each equality matcher.
func missingFrom(s scrape, expr string) []string {
	var missing []string
	for _, name := range metricNames(expr) {
		if _, ok := s.types[s.family(name)]; !ok {
			missing = append(missing, name)
		}
	}
	for _, sel := range promqlSelector.FindAllStringSubmatch(expr, -1) {
		family := s.family(sel[1])
		if _, ok := s.types[family]; !ok {
			continue // reported above
		}
		for _, m := range promqlMatcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := m[1], m[2], m[3]
			switch {
			case label == "job" || label == "instance":
			case s.labels[family][label] == nil:
				missing = append(missing, fmt.Sprintf("%s{%s}", sel[1], label))
			case op == "=" && !s.labels[family][label][value]:
				missing = append(missing, fmt.Sprintf("%s{%s=%q}", sel[1], label, value))
			}
		}
	}
	return missing
}

// TestMissingFrom: a metric, a label or a label value that the scrape lacks is reported; regexps
// and negative matchers need only the label.
func TestMissingFrom(t *testing.T) {
	t.Parallel()
	s := newScrape()
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE reckon_a_total counter\nreckon_a_total{state=\"STUCK\",connector=\"b\\\"c\"} 1\n"+
			"# TYPE reckon_h_seconds histogram\nreckon_h_seconds_bucket{connector=\"x\",le=\"+Inf\"} 0\nreckon_h_seconds_sum{connector=\"x\"} 0\nreckon_h_seconds_count{connector=\"x\"} 0\n")
	}))
	t.Cleanup(metrics.Close)
	s.add(t, metrics.URL+"/metrics")
	require.Empty(t, missingFrom(s, `sum(rate(reckon_a_total{state="STUCK",job="x",connector=~"$connector"}[5m])) / reckon_h_seconds_count{connector!="y"} + histogram_quantile(0.5, reckon_h_seconds_bucket{connector="x"})`))
	require.Equal(t, []string{"reckon_b", "reckon_h_seconds_total", `reckon_a_total{state="FAILED"}`, "reckon_a_total{kind}"},
		missingFrom(s, `reckon_a_total{state="FAILED"} + reckon_b + reckon_h_seconds_total + reckon_a_total{kind=~"x"}`))
}

// TestKitMetricsExported runs a server and a reactor with a connector and a saga definition,
// gets an effect and a saga through them, then scrapes both: every reckon_* metric that the
// dashboard's queries and the alert rules name must be exported by one of them (a histogram's
// _bucket, _sum and _count by the histogram), with every label their selectors match on and every
// value they match exactly. A misspelt or removed metric, label or value fails here instead of
// leaving an empty panel or an alert that never fires.
func TestKitMetricsExported(t *testing.T) {
	t.Parallel()
	used := map[string]string{} // where → PromQL expression
	d := readDashboard(t)
	for where, expr := range dashboardQueries(t, d) {
		used["dashboard "+where] = expr
	}
	for _, group := range readAlertRules(t).Groups {
		for i, rule := range group.Rules {
			used[fmt.Sprintf("alert %s (group %s, rule %d)", rule.Alert+rule.Record, group.Name, i+1)] = rule.Expr
		}
	}
	require.NotEmpty(t, used)

	server, _, env := serverOnDB(t)
	token, system := tenantToken(t, env, server, "acme"), systemToken(t, env, server)
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	api := apiClient{t: t, base: "http://" + srv.Addr(t)}
	defineTransfer(t, api, system)
	r := api.do("POST", "/v1/sagas", token, `{"definition":"transfer","input":{"account":"a-1","amount":70}}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	sagaID := uuid.MustParse(r.body["id"].(string))
	r = api.do("POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"w-1","args":{"account":"a-1","amount":10}}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	effectID := r.body["id"].(string)

	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms")
	reactor.Addr(t)
	require.Eventually(t, func() bool {
		s := api.do("GET", "/v1/sagas/"+sagaID.String(), token, "")
		e := api.do("GET", "/v1/effects/"+effectID, token, "")
		return s.body["state"] == "COMPLETED" && e.body["state"] == "CONFIRMED"
	}, 60*time.Second, 50*time.Millisecond, reactor.Stderr())

	// Series that come with an event (the saga's transitions, counted by its settle hook after the
	// commit) or with the first computation of the shared statistics may take a moment: scrape
	// until nothing is missing, or give up and say what is.
	var exported scrape
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		exported = newScrape()
		exported.add(t, "http://"+reactor.Addr(t)+"/metrics")
		exported.add(t, api.base+"/metrics")
		missing = missing[:0]
		for _, where := range slices.Sorted(maps.Keys(used)) {
			for _, what := range missingFrom(exported, used[where]) {
				missing = append(missing, what+" (in "+where+")")
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Empty(t, missing, "named by the dashboard or the alert rules, exported by neither the server nor the reactor")

	named := map[string]bool{}
	for _, expr := range used {
		for _, name := range metricNames(expr) {
			named[exported.family(name)] = true
		}
	}
	var unshown []string
	for name := range exported.types {
		if strings.HasPrefix(name, "reckon_") && !named[name] {
			unshown = append(unshown, name)
		}
	}
	t.Logf("exported but on no panel and in no rule: %v", slices.Sorted(slices.Values(unshown)))
	stopBoth(t, srv, reactor)
}
