package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// stdoutMu serialises writes to stdout so that concurrent handlers never
// interleave their JSON lines.
var stdoutMu sync.Mutex

// emit writes v as one line of JSON on stdout. os.Stdout is unbuffered, so
// the line is flushed by the single Write call.
func emit(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // Encode appends the trailing newline
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	_, err := os.Stdout.Write(buf.Bytes())
	return err
}

type errorJSON struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// fail prints err as the JSON error document and returns the exit status.
func fail(err error) int {
	if e := emit(errorJSON{Error: err.Error(), Code: errorCode(err)}); e != nil {
		os.Stderr.WriteString("asynq-peer: " + err.Error() + "\n")
	}
	return 1
}

// errorCode maps an asynq error to the stable code used by the Rust tests.
func errorCode(err error) string {
	switch {
	case errors.Is(err, asynq.ErrDuplicateTask):
		return "duplicate_task"
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return "task_id_conflict"
	case errors.Is(err, asynq.ErrQueueNotFound):
		return "queue_not_found"
	case errors.Is(err, asynq.ErrTaskNotFound):
		return "task_not_found"
	case errors.Is(err, asynq.ErrQueueNotEmpty):
		return "queue_not_empty"
	case isTaskAlreadyArchived(err):
		return "task_already_archived"
	case strings.Contains(err.Error(), "FAILED_PRECONDITION"):
		return "failed_precondition"
	}
	return "other"
}

// isTaskAlreadyArchived reports whether err says the task is already
// archived. asynq v0.26.0 has no exported sentinel for this case: the
// condition is an internal *errors.TaskAlreadyArchivedError wrapped by
// Inspector.ArchiveTask, which cannot be imported. It is recognised by its
// type name anywhere in the chain, or failing that by its message text.
func isTaskAlreadyArchived(err error) bool {
	found := false
	walkErrors(err, func(e error) {
		if reflectTypeName(e) == "*errors.TaskAlreadyArchivedError" {
			found = true
		}
	})
	return found || strings.Contains(err.Error(), "task is already archived")
}

// walkErrors calls fn on err and on every error reachable through Unwrap.
func walkErrors(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walkErrors(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkErrors(e, fn)
		}
	}
}

// unixOrZero returns t as unix seconds, or 0 when t is the zero time.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// unixNanoOrZero returns t as unix nanoseconds, or 0 when t is the zero time.
func unixNanoOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// hexOrEmpty returns the hex encoding of b ("" for nil or empty).
func hexOrEmpty(b []byte) string {
	return hex.EncodeToString(b)
}

// headersOrEmpty never returns nil so that headers encode as {}.
func headersOrEmpty(h map[string]string) map[string]string {
	if h == nil {
		return map[string]string{}
	}
	return h
}

type taskInfoJSON struct {
	ID            string            `json:"id"`
	Queue         string            `json:"queue"`
	Type          string            `json:"type"`
	PayloadHex    string            `json:"payload_hex"`
	Payload       string            `json:"payload"`
	Headers       map[string]string `json:"headers"`
	State         string            `json:"state"`
	MaxRetry      int               `json:"max_retry"`
	Retried       int               `json:"retried"`
	LastErr       string            `json:"last_err"`
	LastFailedAt  int64             `json:"last_failed_at"`
	TimeoutSecs   int64             `json:"timeout_secs"`
	Deadline      int64             `json:"deadline"`
	Group         string            `json:"group"`
	NextProcessAt int64             `json:"next_process_at"`
	IsOrphaned    bool              `json:"is_orphaned"`
	RetentionSecs int64             `json:"retention_secs"`
	CompletedAt   int64             `json:"completed_at"`
	ResultHex     string            `json:"result_hex"`
}

func toTaskInfoJSON(t *asynq.TaskInfo) taskInfoJSON {
	return taskInfoJSON{
		ID:            t.ID,
		Queue:         t.Queue,
		Type:          t.Type,
		PayloadHex:    hexOrEmpty(t.Payload),
		Payload:       string(t.Payload),
		Headers:       headersOrEmpty(t.Headers),
		State:         t.State.String(),
		MaxRetry:      t.MaxRetry,
		Retried:       t.Retried,
		LastErr:       t.LastErr,
		LastFailedAt:  unixOrZero(t.LastFailedAt),
		TimeoutSecs:   int64(t.Timeout / time.Second),
		Deadline:      unixOrZero(t.Deadline),
		Group:         t.Group,
		NextProcessAt: unixOrZero(t.NextProcessAt),
		IsOrphaned:    t.IsOrphaned,
		RetentionSecs: int64(t.Retention / time.Second),
		CompletedAt:   unixOrZero(t.CompletedAt),
		ResultHex:     hexOrEmpty(t.Result),
	}
}

func toTaskInfoJSONList(ts []*asynq.TaskInfo) []taskInfoJSON {
	out := make([]taskInfoJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTaskInfoJSON(t))
	}
	return out
}

type okJSON struct {
	OK bool `json:"ok"`
}

type countJSON struct {
	Count int `json:"count"`
}
