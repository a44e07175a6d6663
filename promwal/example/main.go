// Example serves a durawal log's metrics to Prometheus on /metrics while a
// few goroutines commit to it, so that a scrape shows the histograms move:
//
//	cd promwal && go run ./example                       # 127.0.0.1:2112, a temporary directory
//	curl -s localhost:2112/metrics | grep fsync_duration
//	go run ./example -addr :9100 -dir /var/lib/app/wal -policy innodb=2 -committers 16
//
// It listens on the loopback interface only unless -addr names another (":9100"
// is every interface), since /debug/vars shows the command line.
//
// It registers one promwal.Collector, labelled with the log's name, next to
// the Go runtime collectors, and publishes the same statistics through
// expvar on /debug/vars (package walexpvar). Ctrl-C closes the log.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/promwal"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/walexpvar"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:2112", "address to serve /metrics and /debug/vars on (\":2112\" listens on every interface)")
	dir := flag.String("dir", "", "directory for the log (default: a fresh temporary directory, removed afterwards)")
	pol := policy.SyncEveryCommit()
	flag.TextVar(&pol, "policy", pol, `flush policy, as policy.Parse reads it ("innodb=1", "appendfsync=everysec", "sync-interval(1s)", ...)`)
	committers := flag.Int("committers", 4, "goroutines committing 100-byte records in a loop")
	pause := flag.Duration("pause", time.Millisecond, "pause between a committer's commits")
	flag.Parse()

	if *dir == "" {
		d, err := os.MkdirTemp("", "durawal-promwal-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	l, err := wal.Open(*dir, wal.Options{Policy: pol})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go load(ctx, l, *committers, *pause)

	srv := &http.Server{Addr: *addr, Handler: newHandler(l, "example")}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Printf("serving http://%s/metrics for the log in %s (%v); Ctrl-C stops\n", *addr, *dir, pol)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Print(err)
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}
}

// newHandler returns the example's HTTP handler: Prometheus metrics of l
// (labelled log=name) and the Go runtime on /metrics, expvar on /debug/vars.
func newHandler(l *wal.Log, name string) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		promwal.NewCollector(l, promwal.Options{ConstLabels: prometheus.Labels{"log": name}}),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/debug/vars", expvarHandler(l, name))
	return mux
}

// expvarHandler serves only this log's walexpvar summary as JSON: the
// process-wide expvar registry (and its panics on a reused name) is left to
// programs that want it (walexpvar.Publish).
func expvarHandler(l *wal.Log, name string) http.Handler {
	v := walexpvar.Func(l)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprintf(w, "{%q: %s}\n", name, v.String())
	})
}

// load commits from n goroutines until ctx ends.
func load(ctx context.Context, l *wal.Log, n int, pause time.Duration) {
	rec := make([]byte, 100)
	for range n {
		go func() {
			for ctx.Err() == nil {
				if _, err := l.AppendContext(ctx, rec); err != nil && ctx.Err() == nil {
					log.Print(err)
					return
				}
				time.Sleep(pause)
			}
		}()
	}
}
