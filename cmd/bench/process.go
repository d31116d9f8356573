package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/postgres"
)

// runReactorProcess is `bench reactor`: a reactor process with the bench connectors, which
// prints "ready" and then its Go heap every 100ms on stdout until ctx ends (SIGTERM); with
// -tracing memory, the spans it exported as its last line. With -river it is River's side of the
// comparison instead: a River client working the no-op jobs of the river queue.
func runReactorProcess(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("bench reactor", flag.ContinueOnError)
	databaseURL := fs.String("database-url", "", "bench database")
	schema := fs.String("schema", "", "the bench's Citus cell in it (bench -citus)")
	workers := fs.Int("workers", 100, "workers")
	tracing := fs.String("tracing", tracingOff, "off or memory")
	riverOnly := fs.Bool("river", false, "work River no-op jobs instead of effects")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var provider trace.TracerProvider // nil: the default, tracing off
	if *tracing == tracingMemory {
		sdk, counter := newMemoryTracing()
		provider = sdk
		defer func() {
			_ = sdk.Shutdown(context.Background())
			fmt.Printf("spans %d\n", counter.spans.Load())
		}()
	}
	pool, err := postgres.OpenPool(ctx, *databaseURL, 0, *schema)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var client interface {
		Start(context.Context) error
		Stop(context.Context) error
	}
	if *riverOnly {
		client, err = river.NewClient(riverpgxv5.New(pool), riverConfig(logger, noopWorkers(), riverQueue, *workers))
	} else {
		client, err = effects.NewClient(pool, &effects.Config{
			Registry: benchRegistry(), Logger: logger,
			Workers: *workers, FetchCooldown: fetchCooldown, FetchPollInterval: fetchPollInterval, TracerProvider: provider,
		})
	}
	if err == nil {
		err = client.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for ctx.Err() == nil {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Printf("heap %d\n", m.HeapAlloc)
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// reactorProcess is a running `bench reactor`, with its peak RSS and heap.
type reactorProcess struct {
	cmd      *exec.Cmd
	mu       sync.Mutex
	peakHeap uint64
	peakRSS  uint64
	ready    chan struct{}
	done     chan struct{}
	spans    *spanCounter // where the spans it reports are added; nil with tracing off
}

// startReactors starts k reactor processes (`bench reactor`, with args) and waits until they are
// ready.
func (b *bench) startReactors(k int, args ...string) ([]*reactorProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var procs []*reactorProcess
	for range k {
		tracing := tracingOff
		if b.tracing != nil {
			tracing = tracingMemory
		}
		p := &reactorProcess{ready: make(chan struct{}), done: make(chan struct{}), spans: b.spans}
		flags := []string{"reactor", "-database-url", b.url, "-workers", strconv.Itoa(b.o.workers), "-tracing", tracing}
		if b.o.citus {
			flags = append(flags, "-schema", b.name)
		}
		p.cmd = exec.Command(self, append(flags, args...)...)
		p.cmd.Stderr = os.Stderr
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			return procs, err
		}
		if err := p.cmd.Start(); err != nil {
			return procs, err
		}
		procs = append(procs, p)
		go p.read(bufio.NewScanner(stdout))
		go p.sampleRSS()
	}
	for _, p := range procs {
		select {
		case <-p.ready:
		case <-p.done:
			return procs, errors.New("reactor process exited before it was ready")
		case <-time.After(30 * time.Second):
			return procs, errors.New("reactor process not ready after 30s")
		}
	}
	return procs, nil
}

func (p *reactorProcess) read(lines *bufio.Scanner) {
	defer close(p.done)
	readyOnce := sync.OnceFunc(func() { close(p.ready) })
	for lines.Scan() {
		line := lines.Text()
		if line == "ready" {
			readyOnce()
			continue
		}
		if spans, ok := strings.CutPrefix(line, "spans "); ok && p.spans != nil {
			if v, err := strconv.ParseInt(spans, 10, 64); err == nil {
				p.spans.spans.Add(v)
			}
			continue
		}
		if heap, ok := strings.CutPrefix(line, "heap "); ok {
			if v, err := strconv.ParseUint(heap, 10, 64); err == nil {
				p.mu.Lock()
				p.peakHeap = max(p.peakHeap, v)
				p.mu.Unlock()
			}
		}
	}
	_ = p.cmd.Wait()
}

// sampleRSS reads VmRSS from /proc every 50ms while the process runs.
func (p *reactorProcess) sampleRSS() {
	for {
		select {
		case <-p.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				p.mu.Lock()
				p.peakRSS = max(p.peakRSS, kb*1024)
				p.mu.Unlock()
			}
		}
	}
}

func stopReactors(procs []*reactorProcess) {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// scale measures what dispatch costs and how it spreads over processes: N no-op River jobs
// worked by one River process (River's side), then N full-protocol effects dispatched by 1, 2 and
// 4 reactor processes on the same queue.
func (b *bench) scale(ctx context.Context) error {
	if err := b.reset(ctx); err != nil {
		return err
	}
	if err := b.insertRiverJobs(ctx, "scale-river"); err != nil {
		return err
	}
	riverDone := func(ctx context.Context, name string) (time.Time, error) {
		return b.waitDone(ctx, name, riverRemaining, riverEnd)
	}
	if err := b.measureProcesses(ctx, "scale-river", "1 River process, no-op jobs, from process start", 1, riverDone, "-river"); err != nil {
		return err
	}
	for _, k := range []int{1, 2, 4} {
		client, err := b.resetClient(ctx, 1)
		if err != nil {
			return err
		}
		if err := b.enqueueEffects(ctx, client, "bench.full", "scale", b.o.n); err != nil {
			return err
		}
		if err := b.analyze(ctx); err != nil {
			return err
		}
		label := fmt.Sprintf("%d reactor process(es), full protocol, from process start", k)
		if err := b.measureProcesses(ctx, fmt.Sprintf("scale-%d", k), label, k, b.waitEffectsDone); err != nil {
			return err
		}
	}
	return nil
}

// measureProcesses starts k worker processes (`bench reactor` with args), waits with done for
// them to work off the queue and records the result name: the throughput since their start, the
// CPU they and Postgres spent per 1,000 effects (or jobs), and whether Postgres had room to grow:
// how busy the CPUs were while the processes worked (sampled once they are ready: their start-up
// leaves the CPUs idle), and Postgres's share.
func (b *bench) measureProcesses(ctx context.Context, name, label string, k int, done func(context.Context, string) (time.Time, error), args ...string) error {
	start := time.Now()
	procs, err := b.startReactors(k, args...)
	if err != nil {
		stopReactors(procs)
		return err
	}
	before, cpuErr := sampleCPU(b.name)
	procsBefore := procTicks(procs)
	windowsCtx, stopWindows := context.WithCancel(ctx)
	median := busyWindows(windowsCtx)
	end, err := done(ctx, name)
	stopWindows()
	after, sampleErr := sampleCPU(b.name)
	procsAfter := procTicks(procs)
	stopReactors(procs)
	if err != nil {
		return err
	}
	res := throughput(name, label, b.o.n, end.Sub(start))
	res.Extra = map[string]float64{"per_process": res.PerSecond / float64(k), "cpu_busy_median_pct": <-median}
	if cpuErr == nil && sampleErr == nil {
		thousands := float64(b.o.n) / 1000
		res.Extra["cpu_busy_pct"], res.Extra["postgres_cores"] = before.usage(after)
		res.Extra["worker_cpu_s_per_1000"] = cpuSeconds(procsBefore, procsAfter) / thousands
		res.Extra["postgres_cpu_s_per_1000"] = cpuSeconds(before.database, after.database) / thousands
		if b.o.citus { // the cell's backends are in the coordinator's database: counted per node
			coordinator := cpuSeconds(before.postgres, after.onPort(b.coordinatorPort)) / thousands
			worker := cpuSeconds(before.postgres, after.onPort(b.cellPort)) / thousands
			res.Extra["coordinator_cpu_s_per_1000"], res.Extra["cell_worker_cpu_s_per_1000"] = coordinator, worker
			res.Extra["postgres_cpu_s_per_1000"] = coordinator + worker
			b.progress("%s: Postgres CPU s per 1,000: coordinator %.3f, the cell's worker %.3f", name, coordinator, worker)
		}
	}
	b.results.add(res)
	b.progress("%s: %.0f/s (%.0f per process), CPU s per 1,000: processes %.3f, Postgres %.3f; CPUs %.0f%% busy (median 100-ms window %.0f%%)",
		name, res.PerSecond, res.Extra["per_process"], res.Extra["worker_cpu_s_per_1000"], res.Extra["postgres_cpu_s_per_1000"],
		res.Extra["cpu_busy_pct"], res.Extra["cpu_busy_median_pct"])
	return nil
}

// procTicks returns the CPU ticks each of procs has used so far (pid → ticks).
func procTicks(procs []*reactorProcess) map[int]uint64 {
	ticks := make(map[int]uint64, len(procs))
	for _, p := range procs {
		if _, _, t, err := procStat(p.cmd.Process.Pid); err == nil {
			ticks[p.cmd.Process.Pid] = t
		}
	}
	return ticks
}

// memory starts one reactor process with memoryN effects waiting and records its peak RSS and Go
// heap until they are all dispatched.
func (b *bench) memory(ctx context.Context) error {
	client, err := b.resetClient(ctx, 1)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := b.enqueueEffects(ctx, client, "bench.full", "mem", b.o.memoryN); err != nil {
		return err
	}
	b.progress("memory: %d effects waiting (enqueued in %v)", b.o.memoryN, time.Since(start).Round(time.Millisecond))
	procs, err := b.startReactors(1)
	if err == nil {
		_, err = b.waitEffectsDone(ctx, "memory")
	}
	stopReactors(procs)
	if err != nil {
		return err
	}
	p := procs[0]
	p.mu.Lock()
	defer p.mu.Unlock()
	b.results.add(result{Name: "memory", Label: fmt.Sprintf("one reactor process working off %d waiting effects", b.o.memoryN),
		Count: b.o.memoryN, Extra: map[string]float64{"peak_rss_mb": float64(p.peakRSS) / (1 << 20), "peak_heap_mb": float64(p.peakHeap) / (1 << 20)}})
	b.progress("memory: peak RSS %.1f MB, peak heap %.1f MB", float64(p.peakRSS)/(1<<20), float64(p.peakHeap)/(1<<20))
	return nil
}
