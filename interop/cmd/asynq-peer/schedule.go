package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

type entryJSON struct {
	EntryID string `json:"entry_id"`
}

// cmdSchedule runs an asynq.Scheduler with one entry (options in the
// order of the flags above, each only when given) for --for, then shuts it
// down; it prints the entry id first.
func cmdSchedule(conn asynq.RedisConnOpt, args []string) error {
	fs := newFlagSet("schedule")
	spec := fs.String("spec", "", "cron spec, e.g. \"@every 1s\" (required)")
	typ := fs.String("type", "", "task type name (required)")
	var pf payloadFlags
	pf.register(fs, true)
	maxRetry := fs.Int("max-retry", 0, "asynq.MaxRetry option")
	queue := fs.String("queue", "", "asynq.Queue option")
	timeout := fs.Duration("timeout", 0, "asynq.Timeout option")
	deadline := fs.String("deadline", "", "asynq.Deadline option, RFC 3339")
	unique := fs.Duration("unique", 0, "asynq.Unique option")
	processIn := fs.Duration("process-in", 0, "asynq.ProcessIn option")
	retention := fs.Duration("retention", 0, "asynq.Retention option")
	taskID := fs.String("task-id", "", "asynq.TaskID option")
	group := fs.String("group", "", "asynq.Group option")
	heartbeat := fs.Duration("heartbeat", time.Second, "SchedulerOpts.HeartbeatInterval")
	runFor := fs.Duration("for", 0, "how long to run the scheduler (required)")

	given, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := requireFlags(fs, given, "spec", "type", "for"); err != nil {
		return err
	}
	payload, err := pf.bytes(given)
	if err != nil {
		return err
	}
	var opts []asynq.Option
	if given["max-retry"] {
		opts = append(opts, asynq.MaxRetry(*maxRetry))
	}
	if given["queue"] {
		opts = append(opts, asynq.Queue(*queue))
	}
	if given["timeout"] {
		opts = append(opts, asynq.Timeout(*timeout))
	}
	if given["deadline"] {
		t, err := time.Parse(time.RFC3339, *deadline)
		if err != nil {
			return usageErr("schedule: --deadline: %v", err)
		}
		opts = append(opts, asynq.Deadline(t))
	}
	if given["unique"] {
		opts = append(opts, asynq.Unique(*unique))
	}
	if given["process-in"] {
		opts = append(opts, asynq.ProcessIn(*processIn))
	}
	if given["retention"] {
		opts = append(opts, asynq.Retention(*retention))
	}
	if given["task-id"] {
		opts = append(opts, asynq.TaskID(*taskID))
	}
	if given["group"] {
		opts = append(opts, asynq.Group(*group))
	}

	sched := asynq.NewScheduler(conn, &asynq.SchedulerOpts{
		HeartbeatInterval: *heartbeat,
		LogLevel:          asynq.ErrorLevel,
	})
	if err := sched.Ping(); err != nil {
		return err
	}
	entryID, err := sched.Register(*spec, asynq.NewTask(*typ, payload), opts...)
	if err != nil {
		return err
	}
	if err := sched.Start(); err != nil {
		return err
	}
	defer sched.Shutdown()
	if err := emit(entryJSON{EntryID: entryID}); err != nil {
		return err
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	timer := time.NewTimer(*runFor)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-sigs:
	}
	return nil
}
