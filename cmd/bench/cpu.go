package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of the CPU times in /proc.
const clockTicks = 100

// cpuSample is the machine's CPU time and each postgres process's, read from /proc.
type cpuSample struct {
	at          time.Time
	busy, total uint64         // ticks summed over all CPUs
	postgres    map[int]uint64 // pid → user + system ticks
	database    map[int]uint64 // the postgres processes serving the bench database: pid → ticks
	server      map[int]int    // pid → the pid of its server (the postmaster: itself for one)
}

// machineCPU returns the machine's busy and total CPU ticks from /proc/stat.
func machineCPU() (busy, total uint64, err error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, errors.New("unexpected /proc/stat")
	}
	for i, f := range fields[1:9] { // user nice system idle iowait irq softirq steal
		v, _ := strconv.ParseUint(f, 10, 64)
		total += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, total, nil
}

// busyWindows samples how busy the machine's CPUs are in every 100 ms window until ctx ends, and
// then returns the median window (0–100 %): the steady state of a run, without the ramp-up and
// the tail, when the last few jobs leave the CPUs idle.
func busyWindows(ctx context.Context) <-chan float64 {
	out := make(chan float64, 1)
	go func() {
		var windows []float64
		prevBusy, prevTotal, err := machineCPU()
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for err == nil {
			select {
			case <-ctx.Done():
				err = ctx.Err()
				continue
			case <-ticker.C:
			}
			busy, total, e := machineCPU()
			if e != nil || total <= prevTotal {
				err = e
				continue
			}
			windows = append(windows, 100*float64(busy-prevBusy)/float64(total-prevTotal))
			prevBusy, prevTotal = busy, total
		}
		if len(windows) == 0 {
			out <- 0
			return
		}
		slices.Sort(windows)
		out <- windows[len(windows)/2]
	}()
	return out
}

// procStat returns the command name, parent pid and user + system CPU ticks of process pid, from
// /proc/<pid>/stat.
func procStat(pid int) (comm string, ppid int, ticks uint64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, err // exited meanwhile
	}
	text := string(raw)
	open, end := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 0 || end < open {
		return "", 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	rest := strings.Fields(text[end+1:]) // from field 3 (state) on
	if len(rest) < 13 {
		return "", 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	ppid, _ = strconv.Atoi(rest[1])
	utime, _ := strconv.ParseUint(rest[11], 10, 64)
	stime, _ := strconv.ParseUint(rest[12], 10, 64)
	return text[open+1 : end], ppid, utime + stime, nil
}

// sampleCPU reads /proc/stat and /proc/<pid>/stat of every process named postgres; the ticks of
// those serving database (their title names it: backends and autovacuum workers) also go into
// the sample's dbTicks.
func sampleCPU(database string) (cpuSample, error) {
	s := cpuSample{at: time.Now(), postgres: map[int]uint64{}, database: map[int]uint64{}, server: map[int]int{}}
	var err error
	if s.busy, s.total, err = machineCPU(); err != nil {
		return s, err
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	parents := map[int]int{}
	for _, path := range paths {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		comm, ppid, ticks, err := procStat(pid)
		if err != nil || comm != "postgres" {
			continue
		}
		s.postgres[pid], parents[pid] = ticks, ppid
		if title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && slices.Contains(strings.Fields(strings.ReplaceAll(string(title), "\x00", " ")), database) {
			s.database[pid] = ticks
		}
	}
	for pid, ppid := range parents {
		if _, child := s.postgres[ppid]; child {
			s.server[pid] = ppid
		} else {
			s.server[pid] = pid
		}
	}
	return s, nil
}

// serverPorts returns the port of each Postgres server of the sample (postmaster pid → port), from
// its data directory's postmaster.pid; a server it cannot read is left out.
func (s cpuSample) serverPorts() map[int]int {
	ports := map[int]int{}
	for _, server := range s.server {
		if _, done := ports[server]; done {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", server))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if i := slices.Index(args, "-D"); i >= 0 && i+1 < len(args) {
			if pidFile, err := os.ReadFile(filepath.Join(args[i+1], "postmaster.pid")); err == nil {
				if lines := strings.Split(string(pidFile), "\n"); len(lines) > 3 {
					if port, err := strconv.Atoi(strings.TrimSpace(lines[3])); err == nil {
						ports[server] = port
					}
				}
			}
		}
	}
	return ports
}

// onPort returns the ticks of e's postgres processes (a later sample's) that belong to the server
// listening on port.
func (e cpuSample) onPort(port int) map[int]uint64 {
	ports := e.serverPorts()
	ticks := map[int]uint64{}
	for pid, t := range e.postgres {
		if ports[e.server[pid]] == port {
			ticks[pid] = t
		}
	}
	return ticks
}

// cpuSeconds returns the CPU seconds the processes of e (a later sample's map) used since s (an
// earlier one's); a process absent from s started in between and counts whole.
func cpuSeconds(s, e map[int]uint64) float64 {
	var ticks uint64
	for pid, t := range e {
		if t >= s[pid] {
			ticks += t - s[pid]
		}
	}
	return float64(ticks) / clockTicks
}

// usage returns how busy the machine's CPUs were between s and e (0–100 %) and how many cores
// postgres processes used on average. Take e before the processes of interest exit.
func (s cpuSample) usage(e cpuSample) (busyPct, postgresCores float64) {
	if e.total > s.total {
		busyPct = 100 * float64(e.busy-s.busy) / float64(e.total-s.total)
	}
	if secs := e.at.Sub(s.at).Seconds(); secs > 0 {
		postgresCores = cpuSeconds(s.postgres, e.postgres) / secs
	}
	return busyPct, postgresCores
}
