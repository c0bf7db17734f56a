package main

import (
	"encoding/json"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
)

// benchEnqueueJSON is the document printed by "bench-enqueue": how many
// tasks were enqueued, how long it took (unix-ns wall clock span) and the
// process's own CPU time.
type benchEnqueueJSON struct {
	Count     int64 `json:"count"`
	Errors    int64 `json:"errors"`
	ElapsedNs int64 `json:"elapsed_ns"`
	CPUUserMs int64 `json:"cpu_user_ms"`
	CPUSysMs  int64 `json:"cpu_sys_ms"`
}

// cmdBenchEnqueue enqueues --count small tasks (type bench:noop, payload
// the enqueue time in unix ns, decimal) into --queue with asynq.Client's
// Enqueue, --parallel of them in flight at once, and prints one
// benchEnqueueJSON. Go v0.26.0 has no batch enqueue, so this is Go's
// fastest producer path. Used by asynqdeck's benchmark (bench/engine,
// --batch-enqueue), never by the tests.
func cmdBenchEnqueue(conn asynq.RedisConnOpt, args []string) error {
	fs := newFlagSet("bench-enqueue")
	count := fs.Int("count", 0, "tasks to enqueue (required, > 0)")
	parallel := fs.Int("parallel", 128, "enqueues in flight at once (> 0)")
	queue := fs.String("queue", "default", "queue to enqueue into")
	given, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := requireFlags(fs, given, "count"); err != nil {
		return err
	}
	if *count <= 0 || *parallel <= 0 {
		return usageErr("bench-enqueue: --count and --parallel must be > 0")
	}
	client := asynq.NewClient(conn)
	defer client.Close()

	var next, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*count) {
				payload := []byte(strconv.FormatInt(time.Now().UnixNano(), 10))
				if _, err := client.Enqueue(asynq.NewTask("bench:noop", payload), asynq.Queue(*queue)); err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	userMs, sysMs := cpuMs()
	out, err := json.Marshal(benchEnqueueJSON{
		Count:     int64(*count) - errs.Load(),
		Errors:    errs.Load(),
		ElapsedNs: elapsed.Nanoseconds(),
		CPUUserMs: userMs,
		CPUSysMs:  sysMs,
	})
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}
