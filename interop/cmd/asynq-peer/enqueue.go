package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

// headerFlags collects repeatable --header k=v flags.
type headerFlags struct {
	m map[string]string
}

func (h *headerFlags) String() string { return fmt.Sprint(h.m) }

func (h *headerFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("header %q is not of the form key=value", s)
	}
	if h.m == nil {
		h.m = map[string]string{}
	}
	h.m[k] = v
	return nil
}

// payloadFlags holds the mutually exclusive --payload, --payload-hex and
// --nil-payload flags shared by several commands.
type payloadFlags struct {
	str    string
	hexStr string
	isNil  bool
}

func (p *payloadFlags) register(fs *flag.FlagSet, withNil bool) {
	fs.StringVar(&p.str, "payload", "", "payload as a string")
	fs.StringVar(&p.hexStr, "payload-hex", "", "payload as hex-encoded bytes")
	if withNil {
		fs.BoolVar(&p.isNil, "nil-payload", false, "use a nil payload")
	}
}

// bytes returns the payload selected by the flags: nil when none was given
// (or --nil-payload), otherwise the given bytes (possibly empty, non-nil).
func (p *payloadFlags) bytes(given map[string]bool) ([]byte, error) {
	n := 0
	for _, f := range []string{"payload", "payload-hex", "nil-payload"} {
		if given[f] {
			n++
		}
	}
	if n > 1 {
		return nil, usageErr("--payload, --payload-hex and --nil-payload are mutually exclusive")
	}
	switch {
	case given["payload"]:
		return []byte(p.str), nil
	case given["payload-hex"]:
		b, err := hex.DecodeString(p.hexStr)
		if err != nil {
			return nil, usageErr("--payload-hex: %v", err)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	}
	return nil, nil
}

func cmdEnqueue(conn asynq.RedisConnOpt, args []string) error {
	fs := newFlagSet("enqueue")
	typ := fs.String("type", "", "task type name (required)")
	var pf payloadFlags
	pf.register(fs, true)
	queue := fs.String("queue", "", "asynq.Queue option")
	maxRetry := fs.Int("max-retry", 0, "asynq.MaxRetry option")
	timeout := fs.Duration("timeout", 0, "asynq.Timeout option")
	deadline := fs.Int64("deadline", 0, "asynq.Deadline option (unix seconds)")
	processIn := fs.Duration("process-in", 0, "asynq.ProcessIn option")
	processAt := fs.Int64("process-at", 0, "asynq.ProcessAt option (unix seconds)")
	unique := fs.Duration("unique", 0, "asynq.Unique option")
	taskID := fs.String("task-id", "", "asynq.TaskID option")
	retention := fs.Duration("retention", 0, "asynq.Retention option")
	group := fs.String("group", "", "asynq.Group option")
	var headers headerFlags
	fs.Var(&headers, "header", "task header key=value (repeatable)")

	given, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := requireFlags(fs, given, "type"); err != nil {
		return err
	}
	payload, err := pf.bytes(given)
	if err != nil {
		return err
	}

	// Options are passed only when their flag was given, in this fixed
	// order (asynq lets the last of ProcessIn/ProcessAt win).
	var opts []asynq.Option
	if given["queue"] {
		opts = append(opts, asynq.Queue(*queue))
	}
	if given["max-retry"] {
		opts = append(opts, asynq.MaxRetry(*maxRetry))
	}
	if given["timeout"] {
		opts = append(opts, asynq.Timeout(*timeout))
	}
	if given["deadline"] {
		opts = append(opts, asynq.Deadline(time.Unix(*deadline, 0)))
	}
	if given["process-in"] {
		opts = append(opts, asynq.ProcessIn(*processIn))
	}
	if given["process-at"] {
		opts = append(opts, asynq.ProcessAt(time.Unix(*processAt, 0)))
	}
	if given["unique"] {
		opts = append(opts, asynq.Unique(*unique))
	}
	if given["task-id"] {
		opts = append(opts, asynq.TaskID(*taskID))
	}
	if given["retention"] {
		opts = append(opts, asynq.Retention(*retention))
	}
	if given["group"] {
		opts = append(opts, asynq.Group(*group))
	}

	var task *asynq.Task
	if given["header"] {
		task = asynq.NewTaskWithHeaders(*typ, payload, headers.m)
	} else {
		task = asynq.NewTask(*typ, payload)
	}

	client := asynq.NewClient(conn)
	defer client.Close()
	info, err := client.Enqueue(task, opts...)
	if err != nil {
		return err
	}
	return emit(toTaskInfoJSON(info))
}
