package main

import (
	"errors"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

// latencyJSON is the document printed by "latency" when it ends. Latencies
// are milliseconds from the scheduled send time to Enqueue's return, over
// every enqueue (a failed one counts with the time it took to fail: what
// the producer waited); ok_p99_ms is the p99 of the successful ones alone.
// errors counts the failed enqueues and error_samples holds up to three
// distinct error texts.
type latencyJSON struct {
	Sent         int      `json:"sent"`
	Ok           int      `json:"ok"`
	Errors       int      `json:"errors"`
	P50Ms        float64  `json:"p50_ms"`
	P99Ms        float64  `json:"p99_ms"`
	MaxMs        float64  `json:"max_ms"`
	OkP99Ms      float64  `json:"ok_p99_ms"`
	Over20ms     int      `json:"over_20ms"`
	ErrorSamples []string `json:"error_samples"`
	ElapsedMs    float64  `json:"elapsed_ms"`
}

// cmdLatency enqueues one small task every 1/--rate s with asynq.Client into
// --queue for --for (or until SIGTERM/SIGINT, whichever comes first), each
// enqueue in its own goroutine so a blocked Redis does not delay the next
// send (no coordinated omission), then waits for the enqueues in flight and
// prints one latencyJSON. Used by bench/scale (asynqdeck's bench_scale
// example) to see what a bulk action costs a producer; never by the tests.
func cmdLatency(conn asynq.RedisConnOpt, args []string) error {
	fs := newFlagSet("latency")
	rate := fs.Int("rate", 200, "enqueues per second (> 0)")
	dur := fs.Duration("for", 30*time.Second, "stop after this long (SIGTERM stops earlier)")
	queue := fs.String("queue", "latency", "queue to enqueue into")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *rate <= 0 {
		return usageErr("latency: --rate must be > 0")
	}
	client := asynq.NewClient(conn)
	defer client.Close()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)

	var (
		mu      sync.Mutex
		lat     []int64
		okLat   []int64
		errs    int
		samples []string
		wg      sync.WaitGroup
	)
	interval := time.Second / time.Duration(*rate)
	start := time.Now()
	end := start.Add(*dur)
	sent := 0
loop:
	for {
		at := start.Add(time.Duration(sent) * interval)
		if !at.Before(end) {
			break
		}
		select {
		case <-stop:
			break loop
		case <-time.After(time.Until(at)):
		}
		sent++
		wg.Add(1)
		go func(at time.Time) {
			defer wg.Done()
			_, err := client.Enqueue(asynq.NewTask("bench:latency", []byte(`{"n":1}`)), asynq.Queue(*queue))
			took := time.Since(at).Nanoseconds()
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, took)
			if err != nil {
				errs++
				text := err.Error()
				if len(samples) < 3 && !contains(samples, text) {
					samples = append(samples, text)
				}
				return
			}
			okLat = append(okLat, took)
		}(at)
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sort.Slice(okLat, func(i, j int) bool { return okLat[i] < okLat[j] })
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	over := len(lat) - sort.Search(len(lat), func(i int) bool { return lat[i] > 20_000_000 })
	if samples == nil {
		samples = []string{}
	}
	if sent == 0 {
		return errors.New("latency: nothing was sent")
	}
	return emit(latencyJSON{
		Sent:         sent,
		Ok:           len(okLat),
		Errors:       errs,
		P50Ms:        ms(percentile(lat, 50)),
		P99Ms:        ms(percentile(lat, 99)),
		MaxMs:        ms(percentile(lat, 100)),
		OkP99Ms:      ms(percentile(okLat, 99)),
		Over20ms:     over,
		ErrorSamples: samples,
		ElapsedMs:    ms(elapsed.Nanoseconds()),
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
