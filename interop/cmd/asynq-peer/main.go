// Command asynq-peer is a small CLI around github.com/hibiken/asynq used by
// asynqdeck's Rust integration tests to exercise wire compatibility against
// the reference Go implementation on a shared Redis.
//
// Usage:
//
//	asynq-peer --redis HOST:PORT [--db N] <subcommand> [flags]
//	asynq-peer --cluster-nodes HOST:PORT,HOST:PORT [--password PW] <subcommand> [flags]
//	asynq-peer --sentinel-addrs HOST:PORT,... --sentinel-master NAME
//	           [--sentinel-password PW] [--password PW] [--db N] <subcommand> [flags]
//
// The first form uses asynq.RedisClientOpt, the second
// asynq.RedisClusterClientOpt, the third asynq.RedisFailoverClientOpt.
//
// Every invocation prints exactly one JSON document on stdout, except
// "work" and "schedule" which print one JSON document per line. On error it
// prints {"error":"...","code":"..."} on stdout and exits with status 1.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hibiken/asynq"
)

const usage = `usage: asynq-peer --redis HOST:PORT [--db N] <command> [flags]
       asynq-peer --cluster-nodes H:P,H:P [--password PW] <command> [flags]
       asynq-peer --sentinel-addrs H:P,H:P --sentinel-master NAME
                  [--sentinel-password PW] [--password PW] [--db N] <command> [flags]

commands:
  enqueue    enqueue one task with asynq.Client and print its TaskInfo
  inspect    run an asynq.Inspector operation (see "inspect help")
  work       run an asynq.Server and print one JSON line per handled task
  schedule   run an asynq.Scheduler with one entry for a while
  bench-work run an asynq.Server with a no-op handler for the benchmark and
             print one JSON summary line (see bench.go)
  bench-schedule
             run an asynq.Scheduler with N entries on "@every 1s" for the
             benchmark and print one JSON summary line (bench_schedule.go)
  bench-enqueue enqueue N tasks with asynq.Client for the benchmark and
             print one JSON summary line (see bench_enqueue.go)
  latency    enqueue at a fixed rate with asynq.Client for a while and print
             p50/p99/max enqueue latency and errors (see latency.go)
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	global := flag.NewFlagSet("asynq-peer", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	redisAddr := global.String("redis", "", "Redis address HOST:PORT (asynq.RedisClientOpt)")
	db := global.Int("db", 0, "Redis database number (standalone and sentinel)")
	clusterNodes := global.String("cluster-nodes", "", "cluster seed nodes HOST:PORT,... (asynq.RedisClusterClientOpt)")
	sentinelAddrs := global.String("sentinel-addrs", "", "sentinels HOST:PORT,... (asynq.RedisFailoverClientOpt)")
	sentinelMaster := global.String("sentinel-master", "", "master name monitored by the sentinels")
	sentinelPassword := global.String("sentinel-password", "", "password of the sentinels")
	password := global.String("password", "", "password of the Redis server(s)")
	if err := global.Parse(args); err != nil {
		return fail(usageErr("%v", err))
	}
	rest := global.Args()
	if len(rest) == 0 {
		return fail(usageErr("missing command\n%s", usage))
	}
	conn, err := connOpt(*redisAddr, *db, *clusterNodes, *sentinelAddrs, *sentinelMaster, *sentinelPassword, *password)
	if err != nil {
		return fail(err)
	}

	switch cmd, cmdArgs := rest[0], rest[1:]; cmd {
	case "enqueue":
		err = cmdEnqueue(conn, cmdArgs)
	case "inspect":
		err = cmdInspect(conn, cmdArgs)
	case "work":
		err = cmdWork(conn, cmdArgs)
	case "schedule":
		err = cmdSchedule(conn, cmdArgs)
	case "bench-work":
		err = cmdBenchWork(conn, cmdArgs)
	case "bench-schedule":
		err = cmdBenchSchedule(conn, cmdArgs)
	case "bench-enqueue":
		err = cmdBenchEnqueue(conn, cmdArgs)
	case "latency":
		err = cmdLatency(conn, cmdArgs)
	default:
		err = usageErr("unknown command %q\n%s", cmd, usage)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// connOpt picks the asynq connection option named by exactly one of
// --redis, --cluster-nodes and --sentinel-addrs.
func connOpt(addr string, db int, clusterNodes, sentinelAddrs, master, sentinelPassword, password string) (asynq.RedisConnOpt, error) {
	n := 0
	for _, s := range []string{addr, clusterNodes, sentinelAddrs} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return nil, usageErr("exactly one of --redis, --cluster-nodes and --sentinel-addrs is required")
	}
	switch {
	case clusterNodes != "":
		return asynq.RedisClusterClientOpt{Addrs: splitAddrs(clusterNodes), Password: password}, nil
	case sentinelAddrs != "":
		if master == "" {
			return nil, usageErr("--sentinel-addrs needs --sentinel-master")
		}
		return asynq.RedisFailoverClientOpt{
			MasterName:       master,
			SentinelAddrs:    splitAddrs(sentinelAddrs),
			SentinelPassword: sentinelPassword,
			Password:         password,
			DB:               db,
		}, nil
	}
	return asynq.RedisClientOpt{Addr: addr, Password: password, DB: db}, nil
}

// splitAddrs splits "h:p,h:p" into its non-empty, trimmed parts.
func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// usageErr builds an error for bad command-line input; it is reported with
// code "other".
func usageErr(format string, a ...any) error {
	return fmt.Errorf("usage: "+format, a...)
}

// newFlagSet returns a flag set that reports parse errors instead of
// printing them and exiting, so that errors are reported as JSON.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs, rejects positional leftovers and returns
// the set of flag names that were explicitly given.
func parseFlags(fs *flag.FlagSet, args []string) (map[string]bool, error) {
	if err := fs.Parse(args); err != nil {
		return nil, usageErr("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return nil, usageErr("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given, nil
}

// requireFlags returns a usage error if any of names was not given.
func requireFlags(fs *flag.FlagSet, given map[string]bool, names ...string) error {
	for _, n := range names {
		if !given[n] {
			return usageErr("%s: --%s is required", fs.Name(), n)
		}
	}
	return nil
}
