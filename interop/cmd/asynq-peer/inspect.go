package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/hibiken/asynq"
)

const inspectUsage = `inspect subcommands:
  queues
  queue-info --queue Q
  history --queue Q --days N
  task --queue Q --id ID
  list --queue Q --state S [--page N] [--size N] [--group G]
  groups --queue Q
  run|archive|delete --queue Q --id ID
  run-all|archive-all|delete-all --queue Q --state S [--group G]
  pause|unpause --queue Q
  delete-queue --queue Q [--force]
  cancel --id ID
  update-payload --queue Q --id ID (--payload STR | --payload-hex HEX)
  servers
  scheduler-entries
  scheduler-events --entry ID [--page N] [--size N]`

// inspectFlags holds every flag any inspect subcommand may use; each
// subcommand declares which of them it accepts.
type inspectFlags struct {
	fs      *flag.FlagSet
	given   map[string]bool
	queue   string
	id      string
	state   string
	group   string
	entry   string
	days    int
	page    int
	size    int
	force   bool
	payload payloadFlags
}

func parseInspectFlags(name string, args []string, accepted ...string) (*inspectFlags, error) {
	f := &inspectFlags{fs: newFlagSet("inspect " + name)}
	fs := f.fs
	for _, a := range accepted {
		switch a {
		case "queue":
			fs.StringVar(&f.queue, "queue", "", "queue name")
		case "id":
			fs.StringVar(&f.id, "id", "", "task id")
		case "state":
			fs.StringVar(&f.state, "state", "", "task state")
		case "group":
			fs.StringVar(&f.group, "group", "", "group name")
		case "entry":
			fs.StringVar(&f.entry, "entry", "", "scheduler entry id")
		case "days":
			fs.IntVar(&f.days, "days", 0, "number of days")
		case "page":
			fs.IntVar(&f.page, "page", 0, "page number (1-based)")
		case "size":
			fs.IntVar(&f.size, "size", 0, "page size")
		case "force":
			fs.BoolVar(&f.force, "force", false, "force")
		case "payload":
			f.payload.register(fs, false)
		default:
			panic("unknown inspect flag " + a)
		}
	}
	given, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	f.given = given
	return f, nil
}

func (f *inspectFlags) require(names ...string) error {
	return requireFlags(f.fs, f.given, names...)
}

// listOpts returns asynq.Page / asynq.PageSize only for the flags given.
func (f *inspectFlags) listOpts() []asynq.ListOption {
	var opts []asynq.ListOption
	if f.given["page"] {
		opts = append(opts, asynq.Page(f.page))
	}
	if f.given["size"] {
		opts = append(opts, asynq.PageSize(f.size))
	}
	return opts
}

func cmdInspect(conn asynq.RedisConnOpt, args []string) error {
	if len(args) == 0 {
		return usageErr("inspect: missing subcommand\n%s", inspectUsage)
	}
	sub, args := args[0], args[1:]
	insp := asynq.NewInspector(conn)
	defer insp.Close()

	switch sub {
	case "queues":
		if _, err := parseInspectFlags(sub, args); err != nil {
			return err
		}
		qs, err := insp.Queues()
		if err != nil {
			return err
		}
		out := append([]string{}, qs...)
		sort.Strings(out)
		return emit(out)

	case "queue-info":
		f, err := parseInspectFlags(sub, args, "queue")
		if err != nil {
			return err
		}
		if err := f.require("queue"); err != nil {
			return err
		}
		qi, err := insp.GetQueueInfo(f.queue)
		if err != nil {
			return err
		}
		return emit(toQueueInfoJSON(qi))

	case "history":
		f, err := parseInspectFlags(sub, args, "queue", "days")
		if err != nil {
			return err
		}
		if err := f.require("queue", "days"); err != nil {
			return err
		}
		stats, err := insp.History(f.queue, f.days)
		if err != nil {
			return err
		}
		out := make([]dailyStatsJSON, 0, len(stats))
		for _, s := range stats {
			out = append(out, dailyStatsJSON{
				Date:      s.Date.UTC().Format("2006-01-02"),
				Processed: s.Processed,
				Failed:    s.Failed,
			})
		}
		return emit(out)

	case "task":
		f, err := parseInspectFlags(sub, args, "queue", "id")
		if err != nil {
			return err
		}
		if err := f.require("queue", "id"); err != nil {
			return err
		}
		ti, err := insp.GetTaskInfo(f.queue, f.id)
		if err != nil {
			return err
		}
		return emit(toTaskInfoJSON(ti))

	case "list":
		f, err := parseInspectFlags(sub, args, "queue", "state", "page", "size", "group")
		if err != nil {
			return err
		}
		if err := f.require("queue", "state"); err != nil {
			return err
		}
		tasks, err := listTasks(insp, f)
		if err != nil {
			return err
		}
		return emit(toTaskInfoJSONList(tasks))

	case "groups":
		f, err := parseInspectFlags(sub, args, "queue")
		if err != nil {
			return err
		}
		if err := f.require("queue"); err != nil {
			return err
		}
		groups, err := insp.Groups(f.queue)
		if err != nil {
			return err
		}
		out := make([]groupJSON, 0, len(groups))
		for _, g := range groups {
			out = append(out, groupJSON{Group: g.Group, Size: g.Size})
		}
		return emit(out)

	case "run", "archive", "delete":
		f, err := parseInspectFlags(sub, args, "queue", "id")
		if err != nil {
			return err
		}
		if err := f.require("queue", "id"); err != nil {
			return err
		}
		switch sub {
		case "run":
			err = insp.RunTask(f.queue, f.id)
		case "archive":
			err = insp.ArchiveTask(f.queue, f.id)
		case "delete":
			err = insp.DeleteTask(f.queue, f.id)
		}
		if err != nil {
			return err
		}
		return emit(okJSON{OK: true})

	case "run-all", "archive-all", "delete-all":
		f, err := parseInspectFlags(sub, args, "queue", "state", "group")
		if err != nil {
			return err
		}
		if err := f.require("queue", "state"); err != nil {
			return err
		}
		n, err := bulkOp(insp, sub, f)
		if err != nil {
			return err
		}
		return emit(countJSON{Count: n})

	case "pause", "unpause":
		f, err := parseInspectFlags(sub, args, "queue")
		if err != nil {
			return err
		}
		if err := f.require("queue"); err != nil {
			return err
		}
		if sub == "pause" {
			err = insp.PauseQueue(f.queue)
		} else {
			err = insp.UnpauseQueue(f.queue)
		}
		if err != nil {
			return err
		}
		return emit(okJSON{OK: true})

	case "delete-queue":
		f, err := parseInspectFlags(sub, args, "queue", "force")
		if err != nil {
			return err
		}
		if err := f.require("queue"); err != nil {
			return err
		}
		if err := insp.DeleteQueue(f.queue, f.force); err != nil {
			return err
		}
		return emit(okJSON{OK: true})

	case "cancel":
		f, err := parseInspectFlags(sub, args, "id")
		if err != nil {
			return err
		}
		if err := f.require("id"); err != nil {
			return err
		}
		if err := insp.CancelProcessing(f.id); err != nil {
			return err
		}
		return emit(okJSON{OK: true})

	case "update-payload":
		f, err := parseInspectFlags(sub, args, "queue", "id", "payload")
		if err != nil {
			return err
		}
		if err := f.require("queue", "id"); err != nil {
			return err
		}
		if !f.given["payload"] && !f.given["payload-hex"] {
			return usageErr("inspect update-payload: --payload or --payload-hex is required")
		}
		payload, err := f.payload.bytes(f.given)
		if err != nil {
			return err
		}
		if err := insp.UpdateTaskPayload(f.queue, f.id, payload); err != nil {
			return err
		}
		ti, err := insp.GetTaskInfo(f.queue, f.id)
		if err != nil {
			return err
		}
		return emit(toTaskInfoJSON(ti))

	case "servers":
		if _, err := parseInspectFlags(sub, args); err != nil {
			return err
		}
		servers, err := insp.Servers()
		if err != nil {
			return err
		}
		return emit(toServersJSON(servers))

	case "scheduler-entries":
		if _, err := parseInspectFlags(sub, args); err != nil {
			return err
		}
		entries, err := insp.SchedulerEntries()
		if err != nil {
			return err
		}
		out := make([]schedulerEntryJSON, 0, len(entries))
		for _, e := range entries {
			opts := make([]string, 0, len(e.Opts))
			for _, o := range e.Opts {
				opts = append(opts, o.String())
			}
			out = append(out, schedulerEntryJSON{
				ID:          e.ID,
				Spec:        e.Spec,
				TaskType:    e.Task.Type(),
				TaskPayload: string(e.Task.Payload()),
				Opts:        opts,
				Next:        unixOrZero(e.Next),
				Prev:        unixOrZero(e.Prev),
				NextNano:    unixNanoOrZero(e.Next),
				PrevNano:    unixNanoOrZero(e.Prev),
				PrevIsZero:  e.Prev.IsZero(),
			})
		}
		return emit(out)

	case "scheduler-events":
		f, err := parseInspectFlags(sub, args, "entry", "page", "size")
		if err != nil {
			return err
		}
		if err := f.require("entry"); err != nil {
			return err
		}
		events, err := insp.ListSchedulerEnqueueEvents(f.entry, f.listOpts()...)
		if err != nil {
			return err
		}
		out := make([]schedulerEventJSON, 0, len(events))
		for _, ev := range events {
			out = append(out, schedulerEventJSON{
				TaskID:         ev.TaskID,
				EnqueuedAt:     unixOrZero(ev.EnqueuedAt),
				EnqueuedAtNano: unixNanoOrZero(ev.EnqueuedAt),
			})
		}
		return emit(out)

	case "help":
		return usageErr("%s", inspectUsage)
	}
	return usageErr("inspect: unknown subcommand %q\n%s", sub, inspectUsage)
}

func listTasks(insp *asynq.Inspector, f *inspectFlags) ([]*asynq.TaskInfo, error) {
	opts := f.listOpts()
	switch strings.ToLower(f.state) {
	case "pending":
		return insp.ListPendingTasks(f.queue, opts...)
	case "active":
		return insp.ListActiveTasks(f.queue, opts...)
	case "scheduled":
		return insp.ListScheduledTasks(f.queue, opts...)
	case "retry":
		return insp.ListRetryTasks(f.queue, opts...)
	case "archived":
		return insp.ListArchivedTasks(f.queue, opts...)
	case "completed":
		return insp.ListCompletedTasks(f.queue, opts...)
	case "aggregating":
		if !f.given["group"] {
			return nil, usageErr("inspect list: --state aggregating requires --group")
		}
		return insp.ListAggregatingTasks(f.queue, f.group, opts...)
	}
	return nil, usageErr("inspect list: unknown state %q", f.state)
}

// bulkOp runs the Inspector's {Run,Archive,Delete}All<State>Tasks method.
// Combinations asynq does not provide are reported as errors (code other).
func bulkOp(insp *asynq.Inspector, op string, f *inspectFlags) (int, error) {
	state := strings.ToLower(f.state)
	if state == "aggregating" && !f.given["group"] {
		return 0, usageErr("inspect %s: --state aggregating requires --group", op)
	}
	q, g := f.queue, f.group
	switch op + ":" + state {
	case "run-all:scheduled":
		return insp.RunAllScheduledTasks(q)
	case "run-all:retry":
		return insp.RunAllRetryTasks(q)
	case "run-all:archived":
		return insp.RunAllArchivedTasks(q)
	case "run-all:aggregating":
		return insp.RunAllAggregatingTasks(q, g)
	case "archive-all:pending":
		return insp.ArchiveAllPendingTasks(q)
	case "archive-all:scheduled":
		return insp.ArchiveAllScheduledTasks(q)
	case "archive-all:retry":
		return insp.ArchiveAllRetryTasks(q)
	case "archive-all:aggregating":
		return insp.ArchiveAllAggregatingTasks(q, g)
	case "delete-all:pending":
		return insp.DeleteAllPendingTasks(q)
	case "delete-all:scheduled":
		return insp.DeleteAllScheduledTasks(q)
	case "delete-all:retry":
		return insp.DeleteAllRetryTasks(q)
	case "delete-all:archived":
		return insp.DeleteAllArchivedTasks(q)
	case "delete-all:completed":
		return insp.DeleteAllCompletedTasks(q)
	case "delete-all:aggregating":
		return insp.DeleteAllAggregatingTasks(q, g)
	}
	return 0, fmt.Errorf("inspect %s: state %q is not supported by asynq", op, f.state)
}

type queueInfoJSON struct {
	Queue          string `json:"queue"`
	MemoryUsage    int64  `json:"memory_usage"`
	LatencyMs      int64  `json:"latency_ms"`
	Size           int    `json:"size"`
	Groups         int    `json:"groups"`
	Pending        int    `json:"pending"`
	Active         int    `json:"active"`
	Scheduled      int    `json:"scheduled"`
	Retry          int    `json:"retry"`
	Archived       int    `json:"archived"`
	Completed      int    `json:"completed"`
	Aggregating    int    `json:"aggregating"`
	Processed      int    `json:"processed"`
	Failed         int    `json:"failed"`
	ProcessedTotal int    `json:"processed_total"`
	FailedTotal    int    `json:"failed_total"`
	Paused         bool   `json:"paused"`
	Timestamp      int64  `json:"timestamp"`
}

func toQueueInfoJSON(q *asynq.QueueInfo) queueInfoJSON {
	return queueInfoJSON{
		Queue:          q.Queue,
		MemoryUsage:    q.MemoryUsage,
		LatencyMs:      q.Latency.Milliseconds(),
		Size:           q.Size,
		Groups:         q.Groups,
		Pending:        q.Pending,
		Active:         q.Active,
		Scheduled:      q.Scheduled,
		Retry:          q.Retry,
		Archived:       q.Archived,
		Completed:      q.Completed,
		Aggregating:    q.Aggregating,
		Processed:      q.Processed,
		Failed:         q.Failed,
		ProcessedTotal: q.ProcessedTotal,
		FailedTotal:    q.FailedTotal,
		Paused:         q.Paused,
		Timestamp:      q.Timestamp.Unix(),
	}
}

type dailyStatsJSON struct {
	Date      string `json:"date"`
	Processed int    `json:"processed"`
	Failed    int    `json:"failed"`
}

type groupJSON struct {
	Group string `json:"group"`
	Size  int    `json:"size"`
}

type workerJSON struct {
	TaskID      string `json:"task_id"`
	TaskType    string `json:"task_type"`
	TaskPayload string `json:"task_payload"`
	Queue       string `json:"queue"`
	Started     int64  `json:"started"`
	Deadline    int64  `json:"deadline"`
}

type serverJSON struct {
	Host           string         `json:"host"`
	PID            int            `json:"pid"`
	ServerID       string         `json:"server_id"`
	Concurrency    int            `json:"concurrency"`
	Queues         map[string]int `json:"queues"`
	StrictPriority bool           `json:"strict_priority"`
	Status         string         `json:"status"`
	Started        int64          `json:"started"`
	ActiveWorkers  []workerJSON   `json:"active_workers"`
}

// toServersJSON converts servers, sorted by (host, pid, server_id) and with
// workers sorted by task id, so the output is deterministic.
func toServersJSON(servers []*asynq.ServerInfo) []serverJSON {
	out := make([]serverJSON, 0, len(servers))
	for _, s := range servers {
		workers := make([]workerJSON, 0, len(s.ActiveWorkers))
		for _, w := range s.ActiveWorkers {
			workers = append(workers, workerJSON{
				TaskID:      w.TaskID,
				TaskType:    w.TaskType,
				TaskPayload: string(w.TaskPayload),
				Queue:       w.Queue,
				Started:     unixOrZero(w.Started),
				Deadline:    unixOrZero(w.Deadline),
			})
		}
		sort.Slice(workers, func(i, j int) bool { return workers[i].TaskID < workers[j].TaskID })
		queues := s.Queues
		if queues == nil {
			queues = map[string]int{}
		}
		out = append(out, serverJSON{
			Host:           s.Host,
			PID:            s.PID,
			ServerID:       s.ID,
			Concurrency:    s.Concurrency,
			Queues:         queues,
			StrictPriority: s.StrictPriority,
			Status:         s.Status,
			Started:        unixOrZero(s.Started),
			ActiveWorkers:  workers,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.ServerID < b.ServerID
	})
	return out
}

type schedulerEntryJSON struct {
	ID          string   `json:"id"`
	Spec        string   `json:"spec"`
	TaskType    string   `json:"task_type"`
	TaskPayload string   `json:"task_payload"`
	Opts        []string `json:"opts"`
	Next        int64    `json:"next"`
	Prev        int64    `json:"prev"`
	// NextNano and PrevNano are the same times in unix nanoseconds (0 for
	// the zero time), for exact comparisons.
	NextNano   int64 `json:"next_ns"`
	PrevNano   int64 `json:"prev_ns"`
	PrevIsZero bool  `json:"prev_is_zero"`
}

type schedulerEventJSON struct {
	TaskID     string `json:"task_id"`
	EnqueuedAt int64  `json:"enqueued_at"`
	// EnqueuedAtNano is EnqueuedAt in unix nanoseconds.
	EnqueuedAtNano int64 `json:"enqueued_at_ns"`
}
