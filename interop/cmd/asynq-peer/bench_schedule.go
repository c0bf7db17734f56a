package main

import (
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

// benchScheduleJSON is the one summary line of bench-schedule. Drift is
// measured on every fire: "fire" at the PreEnqueueFunc call, "enq" when
// PostEnqueueFunc sees the enqueue's result; each is the time past the
// whole second of the tick (the spec is "@every 1s", whose ticks fall on
// whole seconds), so a drift of a second or more would wrap: Fires against
// Entries × Ticks tells whether every tick fired.
type benchScheduleJSON struct {
	Entries   int   `json:"entries"`
	Ticks     int64 `json:"ticks"`
	Fires     int   `json:"fires"`
	Errors    int   `json:"errors"`
	FireP50Us int64 `json:"fire_p50_us"`
	FireP99Us int64 `json:"fire_p99_us"`
	FireMaxUs int64 `json:"fire_max_us"`
	EnqP50Us  int64 `json:"enq_p50_us"`
	EnqP99Us  int64 `json:"enq_p99_us"`
	EnqMaxUs  int64 `json:"enq_max_us"`
	StartNs   int64 `json:"start_ns"`
	StopNs    int64 `json:"stop_ns"`
	MaxRssKb  int64 `json:"max_rss_kb"`
	CPUUserMs int64 `json:"cpu_user_ms"`
	CPUSysMs  int64 `json:"cpu_sys_ms"`
}

// cmdBenchSchedule runs an asynq.Scheduler with --entries entries on
// "@every 1s" (type bench:sched, payload the entry's index, queue
// --queue) for --for and prints one benchScheduleJSON line.
func cmdBenchSchedule(conn asynq.RedisConnOpt, args []string) error {
	fs := newFlagSet("bench-schedule")
	entries := fs.Int("entries", 1000, "number of entries")
	runFor := fs.Duration("for", 30*time.Second, "how long to run the scheduler")
	queue := fs.String("queue", "default", "queue of the tasks")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		fire   []int64
		enq    []int64
		errors int
	)
	sinceSecond := func(t time.Time) int64 { return int64(t.Sub(t.Truncate(time.Second))) }
	sched := asynq.NewScheduler(conn, &asynq.SchedulerOpts{
		LogLevel: asynq.ErrorLevel,
		PreEnqueueFunc: func(*asynq.Task, []asynq.Option) {
			d := sinceSecond(time.Now())
			mu.Lock()
			fire = append(fire, d)
			mu.Unlock()
		},
		PostEnqueueFunc: func(_ *asynq.TaskInfo, err error) {
			d := sinceSecond(time.Now())
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errors++
				return
			}
			enq = append(enq, d)
		},
	})
	if err := sched.Ping(); err != nil {
		return err
	}
	for i := 0; i < *entries; i++ {
		task := asynq.NewTask("bench:sched", []byte(strconv.Itoa(i)))
		if _, err := sched.Register("@every 1s", task, asynq.Queue(*queue)); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := sched.Start(); err != nil {
		return err
	}
	time.Sleep(*runFor)
	stop := time.Now()
	sched.Shutdown()

	mu.Lock()
	defer mu.Unlock()
	sort.Slice(fire, func(i, j int) bool { return fire[i] < fire[j] })
	sort.Slice(enq, func(i, j int) bool { return enq[i] < enq[j] })
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	out, err := json.Marshal(benchScheduleJSON{
		Entries:   *entries,
		Ticks:     stop.Unix() - start.Unix(),
		Fires:     len(fire),
		Errors:    errors,
		FireP50Us: percentile(fire, 50) / 1000,
		FireP99Us: percentile(fire, 99) / 1000,
		FireMaxUs: percentile(fire, 100) / 1000,
		EnqP50Us:  percentile(enq, 50) / 1000,
		EnqP99Us:  percentile(enq, 99) / 1000,
		EnqMaxUs:  percentile(enq, 100) / 1000,
		StartNs:   start.UnixNano(),
		StopNs:    stop.UnixNano(),
		MaxRssKb:  vmHWM(),
		CPUUserMs: ru.Utime.Sec*1000 + int64(ru.Utime.Usec)/1000,
		CPUSysMs:  ru.Stime.Sec*1000 + int64(ru.Stime.Usec)/1000,
	})
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}
