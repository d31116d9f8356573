package main

import (
	"fmt"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one measured line.
type result struct {
	Name      string             `json:"name"`
	Label     string             `json:"label"`
	Count     int                `json:"count"`
	Seconds   float64            `json:"seconds,omitempty"`
	PerSecond float64            `json:"per_second,omitempty"`
	Extra     map[string]float64 `json:"extra,omitempty"`
}

type target struct {
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Met      bool    `json:"met"`
}

type results struct {
	Setup   map[string]any     `json:"setup"`
	Results []result           `json:"results"`
	Ratios  map[string]float64 `json:"ratios"`
	Targets []target           `json:"targets"`
	// Spans is how many spans each scenario's run with tracing on exported (-tracing).
	Spans map[string]int64 `json:"spans,omitempty"`
	// Statements is each scenario's most expensive statements (-statements).
	Statements map[string][]statement `json:"statements,omitempty"`
}

func throughput(name, label string, count int, elapsed time.Duration) result {
	return result{Name: name, Label: label, Count: count, Seconds: elapsed.Seconds(), PerSecond: float64(count) / elapsed.Seconds()}
}

func (r *results) add(res result) { r.Results = append(r.Results, res) }

func (r *results) get(name string) *result {
	for i := range r.Results {
		if r.Results[i].Name == name {
			return &r.Results[i]
		}
	}
	return nil
}

func (r *results) rate(name string) float64 {
	if res := r.get(name); res != nil {
		return res.PerSecond
	}
	return 0
}

func (r *results) extra(name, key string) (float64, bool) {
	if res := r.get(name); res != nil {
		v, ok := res.Extra[key]
		return v, ok
	}
	return 0, false
}

func ratio(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a / b
}

// saturatedPct is how busy the machine's CPUs must be, in the median 100-ms window of a run, for
// the run to count as saturated.
const saturatedPct = 90

// report prints the table, the ratios and the targets.
func (b *bench) report() {
	r := &b.results
	river, peer := r.rate("river"), r.rate("peer")
	r.Ratios = map[string]float64{}
	b.reportTable(river, peer)
	b.reportDetails()
	b.reportScaling()
	b.reportStorage()
	b.reportRetention()
	b.reportTracing()
	b.reportEvents()
	b.reportLimits()
	b.reportOrdered()
	b.checkTargets(river, peer)
	b.reportTargets()
}

// reportRatios prints under title, for each result also run the other way in the same run (the
// result named with suffix; suffixedOn: that run is the one with the feature on), the ratio on/off
// of its rate and of its p99 latency (where it has one), with rateFormat and p99Format given on,
// off and their ratio, and records them in the ratios as "ON/OFF" and "ON/OFF p99". Without such
// a result it prints nothing.
func (b *bench) reportRatios(title, suffix string, suffixedOn bool, rateFormat, p99Format string) {
	r := &b.results
	var lines []string
	for i := range r.Results {
		suffixed := &r.Results[i]
		base, ok := strings.CutSuffix(suffixed.Name, suffix)
		other := r.get(base)
		if !ok || other == nil {
			continue
		}
		on, off := other, suffixed
		if suffixedOn {
			on, off = suffixed, other
		}
		line := fmt.Sprintf("  %-22s", base)
		if on.PerSecond > 0 && off.PerSecond > 0 {
			r.Ratios[on.Name+"/"+off.Name] = on.PerSecond / off.PerSecond
			line += fmt.Sprintf(rateFormat, on.PerSecond, off.PerSecond, on.PerSecond/off.PerSecond)
		}
		if p99on, p99off := on.Extra["p99_ms"], off.Extra["p99_ms"]; p99on > 0 && p99off > 0 {
			r.Ratios[on.Name+"/"+off.Name+" p99"] = p99on / p99off
			line += fmt.Sprintf(p99Format, p99on, p99off, p99on/p99off)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(b.out, "\n"+title)
	for _, line := range lines {
		fmt.Fprintln(b.out, line)
	}
}

// reportTable prints the throughput of every scenario, and its ratio to River's (river) and to
// the peer's (peer), which it records in the ratios.
func (b *bench) reportTable(river, peer float64) {
	r := &b.results
	fmt.Fprintln(b.out)
	tw := tabwriter.NewWriter(b.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tWHAT\tCOUNT\tSECONDS\tPER SECOND\t×RIVER\t×PEER")
	for _, res := range r.Results {
		if res.PerSecond == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%s\t%s\n", res.Name, res.Label, res.Count, res.Seconds, res.PerSecond,
			ratioText(ratio(res.PerSecond, river)), ratioText(ratio(res.PerSecond, peer)))
		if river > 0 {
			r.Ratios[res.Name+"/river"] = ratio(res.PerSecond, river)
		}
		if peer > 0 {
			r.Ratios[res.Name+"/peer"] = ratio(res.PerSecond, peer)
		}
	}
	_ = tw.Flush()
}

// reportDetails prints the latencies and the memory of the scenarios that measured them.
func (b *bench) reportDetails() {
	for _, res := range b.results.Results {
		if p99, ok := res.Extra["p99_ms"]; ok {
			fmt.Fprintf(b.out, "%-12s %s: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms\n", res.Name, res.Label, res.Extra["p50_ms"], res.Extra["p95_ms"], p99)
		}
		if rss, ok := res.Extra["peak_rss_mb"]; ok {
			fmt.Fprintf(b.out, "%-12s %s: peak RSS %.1f MB, peak Go heap %.1f MB\n", res.Name, res.Label, rss, res.Extra["peak_heap_mb"])
		}
	}
}

// reportScaling prints, for River's process and 1, 2 and 4 reactor processes, the throughput per
// process, the CPU seconds per 1,000 effects (or jobs) of the processes and of Postgres, and how
// busy the CPUs were; and how throughput grew with reactor processes, which it records in the
// ratios.
func (b *bench) reportScaling() {
	r := &b.results
	for _, k := range []string{"scale-river", "scale-1", "scale-2", "scale-4"} {
		res := r.get(k)
		if res == nil {
			continue
		}
		x := res.Extra
		fmt.Fprintf(b.out, "%-12s %.0f/s per process; CPU seconds per 1,000: processes %.3f + Postgres %.3f = %.3f; CPUs %.0f%% busy (median 100-ms window %.0f%%), Postgres %.2f of %d cores\n",
			k, x["per_process"], x["worker_cpu_s_per_1000"], x["postgres_cpu_s_per_1000"], cpuPer1000(res),
			x["cpu_busy_pct"], x["cpu_busy_median_pct"], x["postgres_cores"], runtime.NumCPU())
	}
	if one := r.rate("scale-1"); one > 0 {
		for _, k := range []string{"scale-2", "scale-4"} {
			if v := r.rate(k); v > 0 {
				r.Ratios[k+"/scale-1"] = v / one
				fmt.Fprintf(b.out, "%s / scale-1 = %.2f\n", k, v/one)
			}
		}
	}
}

// cpuPer1000 is the CPU seconds a scale run spent per 1,000 effects (or jobs): its worker
// processes' and Postgres's.
func cpuPer1000(res *result) float64 {
	return res.Extra["worker_cpu_s_per_1000"] + res.Extra["postgres_cpu_s_per_1000"]
}

// check records a target: its goal, what was measured, the value and whether it met the goal.
func (r *results) check(goal, measured string, value float64, met bool) {
	r.Targets = append(r.Targets, target{Goal: goal, Measured: measured, Value: value, Met: met})
}

// checkTargets checks the targets (issues 19 and 39), each a ratio to River's same workload (river) or the
// peer's (peer) from the same run, or a bound, for the scenarios that ran.
func (b *bench) checkTargets(river, peer float64) {
	r := &b.results
	if full := r.rate("reckon-full"); full > 0 && peer > 0 {
		r.check("full protocol ≥ 1.5 × peer", "reckon-full/peer", full/peer, full/peer >= 1.5)
	}
	for _, batch := range []struct{ name, goal string }{
		{"reckon-full", "batch, full protocol ≥ 0.9 × River"},
		{"reckon", "batch, idempotent no-op ≥ 0.9 × River"},
	} {
		if v := r.rate(batch.name); v > 0 && river > 0 {
			r.check(batch.goal, batch.name+"/river", v/river, v/river >= 0.9)
		}
	}
	if e, ri := r.rate("enqueue-reckon"), r.rate("enqueue-river"); e > 0 && ri > 0 {
		r.Ratios["enqueue-reckon/enqueue-river"] = e / ri
		r.check("EnqueueTx ≥ 0.9 × River InsertTx, one per tx", "enqueue-reckon/enqueue-river", e/ri, e/ri >= 0.9)
	}
	if e, ri := r.rate(e2eReckon), r.rate(e2eRiver); e > 0 && ri > 0 {
		r.Ratios[e2eReckon+"/"+e2eRiver] = e / ri
		r.check("single-effect end to end ≥ 0.9 × River's", e2eReckon+"/"+e2eRiver, e/ri, e/ri >= 0.9)
	}
	if p99, ok := r.extra("latency-50", "p99_ms"); ok {
		r.check("p99 enqueue → CONFIRMED ≤ 25 ms at 50% load", "latency-50 p99 ms", p99, p99 <= 25)
	}
	for _, name := range []string{"limits-rate", "limits-cap"} {
		if of, ok := r.extra(name, "of_limit"); ok {
			r.check("limited connector ≥ 0.9 × its limit while work waits", name+" of limit", of, of >= 0.9)
		}
	}
	if rss, ok := r.extra("memory", "peak_rss_mb"); ok {
		r.check("reactor RSS ≤ 150 MB with the backlog", "memory peak RSS MB", rss, rss <= 150)
	}
	r.checkScaling()
	r.checkStorage()
	r.checkEvents()
}

// checkStorage checks the bytes (tables and indexes) and the WAL a simple effect writes against
// what River's no-op job writes.
func (r *results) checkStorage() {
	for _, c := range []struct {
		key, goal string
		bound     float64
	}{
		{"bytes_per_unit", "bytes per simple effect ≤ 1.5 × River's per job", 1.5},
		{"wal_bytes_per_unit", "WAL per simple effect ≤ 1.2 × River's per job", 1.2},
	} {
		effect, ok := r.extra("storage-simple", c.key)
		job, jobOK := r.extra("storage-river", c.key)
		if ok && jobOK && job > 0 {
			r.check(c.goal, "storage-simple/storage-river "+c.key, effect/job, effect/job <= c.bound)
		}
	}
}

// checkEvents checks, for the batch and end-to-end runs made with the event stream and without
// (-events both), that writing events costs at most 5 % of the throughput.
func (r *results) checkEvents() {
	for _, name := range []string{"reckon-full", "reckon", e2eReckon} {
		on, off := r.rate(name), r.rate(name+eventsOffSuffix)
		if on > 0 && off > 0 {
			r.check("events written ≥ 0.95 × not written", name+"/"+name+eventsOffSuffix, on/off, on/off >= 0.95)
		}
	}
}

// checkScaling checks what one reactor process and its Postgres spend in CPU per 1,000
// full-protocol effects against what one River process and its Postgres spend per 1,000 no-op
// jobs. Unlike throughput, CPU time does not hide a cost behind idle or saturated CPUs.
func (r *results) checkScaling() {
	reckon, river := r.get("scale-1"), r.get("scale-river")
	if reckon == nil || river == nil || cpuPer1000(river) <= 0 {
		return
	}
	v := cpuPer1000(reckon) / cpuPer1000(river)
	r.Ratios["scale-1/scale-river cpu"] = v
	r.check("CPU per 1,000, reactor + Postgres ≤ 1.1 × River's", "scale-1/scale-river CPU s", v, v <= 1.1)
}

// reportTargets prints the targets checked, met or missed.
func (b *bench) reportTargets() {
	r := &b.results
	if len(r.Targets) == 0 {
		return
	}
	fmt.Fprintln(b.out, "\nTARGETS")
	for _, t := range r.Targets {
		mark := "MET   "
		if !t.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(b.out, "  %s %-50s %s = %.2f\n", mark, t.Goal, t.Measured, t.Value)
	}
}

func ratioText(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}
