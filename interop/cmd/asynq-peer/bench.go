package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

// benchSummaryJSON is the single line printed by "bench-work" when it ends.
// Times are unix nanoseconds; latencies are enqueue-to-start in microseconds.
type benchSummaryJSON struct {
	Count        int64 `json:"count"`
	FirstStartNs int64 `json:"first_start_ns"`
	LastEndNs    int64 `json:"last_end_ns"`
	P50Us        int64 `json:"p50_us"`
	P99Us        int64 `json:"p99_us"`
	MaxUs        int64 `json:"max_us"`
	Over100ms    int   `json:"over_100ms"`
	MaxRssKb     int64 `json:"max_rss_kb"`
	CPUUserMs    int64 `json:"cpu_user_ms"`
	CPUSysMs     int64 `json:"cpu_sys_ms"`
}

// cmdBenchWork runs an asynq.Server whose handler does nothing but record
// how long each task waited: the payload is the enqueue time in unix
// nanoseconds (decimal ASCII) and the handler stores now minus that. It
// stops after --count handler calls and prints one benchSummaryJSON line.
// Used by asynqdeck's benchmark (bench/main.rs), never by the tests.
func cmdBenchWork(conn asynq.RedisConnOpt, args []string) error {
	fs := newFlagSet("bench-work")
	queuesFlag := fs.String("queues", "default=1", "queues with priorities, e.g. q1=1,q2=3")
	concurrency := fs.Int("concurrency", 10, "number of concurrent workers")
	count := fs.Int("count", 0, "stop after this many tasks were handled (required, > 0)")
	maxDuration := fs.Duration("max-duration", 10*time.Minute, "give up after this long")

	given, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := requireFlags(fs, given, "count"); err != nil {
		return err
	}
	if *count <= 0 {
		return usageErr("bench-work: --count must be > 0")
	}
	queues, err := parseQueues(*queuesFlag)
	if err != nil {
		return err
	}

	n := int64(*count)
	latencies := make([]int64, n)
	var started, ended, firstStart, lastEnd atomic.Int64
	done := make(chan struct{})

	handler := asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		now := time.Now().UnixNano()
		firstStart.CompareAndSwap(0, now)
		if i := started.Add(1) - 1; i < n {
			if enq, err := strconv.ParseInt(string(t.Payload()), 10, 64); err == nil {
				latencies[i] = now - enq
			}
		}
		end := time.Now().UnixNano()
		for {
			cur := lastEnd.Load()
			if end <= cur || lastEnd.CompareAndSwap(cur, end) {
				break
			}
		}
		if ended.Add(1) == n {
			close(done)
		}
		return nil
	})

	srv := asynq.NewServer(conn, asynq.Config{
		Concurrency: *concurrency,
		Queues:      queues,
		LogLevel:    asynq.ErrorLevel,
	})
	if err := srv.Ping(); err != nil {
		return err
	}
	if err := srv.Start(handler); err != nil {
		return err
	}
	timer := time.NewTimer(*maxDuration)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
	srv.Stop()
	srv.Shutdown()

	got := started.Load()
	if got > n {
		got = n
	}
	lat := append([]int64(nil), latencies[:got]...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	userMs, sysMs := cpuMs()
	out, err := json.Marshal(benchSummaryJSON{
		Count:        ended.Load(),
		FirstStartNs: firstStart.Load(),
		LastEndNs:    lastEnd.Load(),
		P50Us:        percentile(lat, 50) / 1000,
		P99Us:        percentile(lat, 99) / 1000,
		MaxUs:        percentile(lat, 100) / 1000,
		Over100ms:    len(lat) - sort.Search(len(lat), func(i int) bool { return lat[i] > 100_000_000 }),
		MaxRssKb:     vmHWM(),
		CPUUserMs:    userMs,
		CPUSysMs:     sysMs,
	})
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}

// cpuMs returns this process's user and system CPU time so far, in ms.
func cpuMs() (userMs, sysMs int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Sec*1000 + int64(ru.Utime.Usec)/1000, ru.Stime.Sec*1000 + int64(ru.Stime.Usec)/1000
}

// percentile returns the nearest-rank p-th percentile of sorted (0 when empty).
func percentile(sorted []int64, p int) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// vmHWM reads the peak resident set size (VmHWM, kB) from /proc/self/status;
// 0 when it cannot be read.
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
