package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// handledTaskJSON is the line printed for every task handed to the handler.
type handledTaskJSON struct {
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	PayloadHex string            `json:"payload_hex"`
	Payload    string            `json:"payload"`
	Headers    map[string]string `json:"headers"`
	Queue      string            `json:"queue"`
	RetryCount int               `json:"retry_count"`
	MaxRetry   int               `json:"max_retry"`
	// StartedNano is time.Now() when the handler was called and
	// DeadlineNano the handler context's deadline (Go's processor sets it
	// from the task's Timeout and Deadline), both in unix nanoseconds.
	StartedNano  int64 `json:"started_ns"`
	DeadlineNano int64 `json:"deadline_ns"`
}

// behaviour is what the handler does with each task.
type behaviour func(ctx context.Context, t *asynq.Task) error

func parseBehaviour(s string) (behaviour, error) {
	name, arg, _ := strings.Cut(s, ":")
	switch name {
	case "ok":
		return func(context.Context, *asynq.Task) error { return nil }, nil
	case "fail":
		return func(context.Context, *asynq.Task) error { return errors.New("peer failure") }, nil
	case "skip":
		return func(context.Context, *asynq.Task) error { return fmt.Errorf("peer skip: %w", asynq.SkipRetry) }, nil
	case "revoke":
		return func(context.Context, *asynq.Task) error { return asynq.RevokeTask }, nil
	case "panic":
		return func(context.Context, *asynq.Task) error { panic("peer panic") }, nil
	case "sleep":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return nil, usageErr("work: --behaviour sleep:DUR: %v", err)
		}
		return func(ctx context.Context, _ *asynq.Task) error {
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-timer.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, nil
	case "result":
		return func(_ context.Context, t *asynq.Task) error {
			_, err := t.ResultWriter().Write([]byte(arg))
			return err
		}, nil
	}
	return nil, usageErr("work: unknown --behaviour %q (want ok, fail, skip, revoke, panic, sleep:DUR or result:STR)", s)
}

// parseQueues parses "q1=1,q2=3" (a bare name gets priority 1).
func parseQueues(s string) (map[string]int, error) {
	queues := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, prio, hasPrio := strings.Cut(part, "=")
		p := 1
		if hasPrio {
			n, err := strconv.Atoi(prio)
			if err != nil {
				return nil, usageErr("work: --queues: bad priority in %q", part)
			}
			p = n
		}
		queues[name] = p
	}
	if len(queues) == 0 {
		return nil, usageErr("work: --queues is empty")
	}
	return queues, nil
}

func cmdWork(conn asynq.RedisConnOpt, args []string) error {
	fs := newFlagSet("work")
	queuesFlag := fs.String("queues", "", "queues with priorities, e.g. q1=1,q2=3")
	concurrency := fs.Int("concurrency", 1, "number of concurrent workers")
	count := fs.Int("count", 0, "stop after this many tasks were handled (0: no limit)")
	maxDuration := fs.Duration("max-duration", 30*time.Second, "stop after this long")
	strict := fs.Bool("strict", false, "strict queue priority")
	behaviourFlag := fs.String("behaviour", "ok", "handler behaviour")
	shutdownTimeout := fs.Duration("shutdown-timeout", 0, "Config.ShutdownTimeout")
	retryDelay := fs.Duration("retry-delay", 0, "constant retry delay")
	// Extensions beyond the core contract, passed to asynq.Config only when
	// given, to make interop tests faster or to exercise task groups.
	delayedCheck := fs.Duration("delayed-check-interval", 0, "Config.DelayedTaskCheckInterval")
	taskCheck := fs.Duration("task-check-interval", 0, "Config.TaskCheckInterval")
	janitor := fs.Duration("janitor-interval", 0, "Config.JanitorInterval")
	groupGrace := fs.Duration("group-grace-period", 0, "Config.GroupGracePeriod")
	groupMaxDelay := fs.Duration("group-max-delay", 0, "Config.GroupMaxDelay")
	groupMaxSize := fs.Int("group-max-size", 0, "Config.GroupMaxSize")
	recordAttempts := fs.String("record-attempts", "", "hash key: HINCRBY KEY <task id> 1 when a handler call starts (chaos suite)")
	recordDone := fs.String("record-done", "", "hash key: HINCRBY KEY <task id> 1 when a handler call returns nil (chaos suite)")
	aggregate := fs.Bool("aggregate", false, "set a GroupAggregator: one task of type \"aggregated\" whose payload is the group's payloads joined by \"\\n\"")

	given, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	behave, err := parseBehaviour(*behaviourFlag)
	if err != nil {
		return err
	}
	cfg := asynq.Config{
		Concurrency:    *concurrency,
		StrictPriority: *strict,
		LogLevel:       asynq.ErrorLevel,
	}
	if given["queues"] {
		if cfg.Queues, err = parseQueues(*queuesFlag); err != nil {
			return err
		}
	}
	if given["shutdown-timeout"] {
		cfg.ShutdownTimeout = *shutdownTimeout
	}
	if given["retry-delay"] {
		d := *retryDelay
		cfg.RetryDelayFunc = func(int, error, *asynq.Task) time.Duration { return d }
	}

	if given["delayed-check-interval"] {
		cfg.DelayedTaskCheckInterval = *delayedCheck
	}
	if given["task-check-interval"] {
		cfg.TaskCheckInterval = *taskCheck
	}
	if given["janitor-interval"] {
		cfg.JanitorInterval = *janitor
	}
	if given["group-grace-period"] {
		cfg.GroupGracePeriod = *groupGrace
	}
	if given["group-max-delay"] {
		cfg.GroupMaxDelay = *groupMaxDelay
	}
	if given["group-max-size"] {
		cfg.GroupMaxSize = *groupMaxSize
	}
	if *aggregate {
		cfg.GroupAggregator = asynq.GroupAggregatorFunc(aggregateGroup)
	}

	var recorder redis.UniversalClient
	if *recordAttempts != "" || *recordDone != "" {
		recorder = conn.MakeRedisClient().(redis.UniversalClient)
		defer recorder.Close()
	}
	// record adds one to field id of hash key (when key is set); a failed
	// write fails the handler call, so the task is retried.
	record := func(ctx context.Context, key, id string) error {
		if key == "" {
			return nil
		}
		return recorder.HIncrBy(context.WithoutCancel(ctx), key, id, 1).Err()
	}

	srv := asynq.NewServer(conn, cfg)
	done := make(chan struct{})
	var (
		mu      sync.Mutex
		handled int
		once    sync.Once
	)
	// finished records that one handler call returned (or panicked). When
	// the count is reached it stops the processor synchronously, before the
	// worker releases its slot, so no further task is dequeued (exact for
	// --concurrency 1).
	finished := func() {
		mu.Lock()
		handled++
		reached := *count > 0 && handled >= *count
		mu.Unlock()
		if reached {
			once.Do(func() {
				srv.Stop()
				close(done)
			})
		}
	}

	handler := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		started := time.Now()
		deadline, _ := ctx.Deadline()
		id, _ := asynq.GetTaskID(ctx)
		retryCount, _ := asynq.GetRetryCount(ctx)
		maxRetry, _ := asynq.GetMaxRetry(ctx)
		queue, _ := asynq.GetQueueName(ctx)
		if err := emit(handledTaskJSON{
			ID:           id,
			Type:         t.Type(),
			PayloadHex:   hexOrEmpty(t.Payload()),
			Payload:      string(t.Payload()),
			Headers:      headersOrEmpty(t.Headers()),
			Queue:        queue,
			RetryCount:   retryCount,
			MaxRetry:     maxRetry,
			StartedNano:  started.UnixNano(),
			DeadlineNano: unixNanoOrZero(deadline),
		}); err != nil {
			fmt.Fprintf(os.Stderr, "asynq-peer: cannot write task line: %v\n", err)
		}
		defer finished()
		if err := record(ctx, *recordAttempts, id); err != nil {
			return err
		}
		if err := behave(ctx, t); err != nil {
			return err
		}
		return record(ctx, *recordDone, id)
	})

	// Fail fast (as a JSON error) when Redis is unreachable; Start itself
	// does not check the connection.
	if err := srv.Ping(); err != nil {
		return err
	}
	if err := srv.Start(handler); err != nil {
		return err
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	timer := time.NewTimer(*maxDuration)
	defer timer.Stop()

	select {
	case <-done:
	case <-timer.C:
	case <-sigs:
	}
	srv.Shutdown()
	return nil
}

// aggregateGroup combines a group's tasks into one task of type "aggregated"
// whose payload is the tasks' payloads joined by newlines, in order.
func aggregateGroup(group string, tasks []*asynq.Task) *asynq.Task {
	parts := make([][]byte, 0, len(tasks))
	for _, t := range tasks {
		parts = append(parts, t.Payload())
	}
	return asynq.NewTask("aggregated", bytes.Join(parts, []byte("\n")))
}
