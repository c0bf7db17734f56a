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

func cmdSchedule(conn asynq.RedisConnOpt, args []string) error {
	fs := newFlagSet("schedule")
	spec := fs.String("spec", "", "cron spec, e.g. \"@every 1s\" (required)")
	typ := fs.String("type", "", "task type name (required)")
	var pf payloadFlags
	pf.register(fs, true)
	maxRetry := fs.Int("max-retry", 0, "asynq.MaxRetry option")
	queue := fs.String("queue", "", "asynq.Queue option")
	timeout := fs.Duration("timeout", 0, "asynq.Timeout option")
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

	sched := asynq.NewScheduler(conn, &asynq.SchedulerOpts{
		HeartbeatInterval: time.Second,
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
