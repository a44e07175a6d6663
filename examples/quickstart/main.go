// Quickstart is the smallest correct use of durawal: open a log, append
// records, close it, reopen it and read every record back. It uses only the
// public API (wal and policy), so it can be copied into a module of your own
// as it is.
//
//	go run ./examples/quickstart          # a fresh temporary directory
//	go run ./examples/quickstart -dir d   # keep the log in d
//
// Like every lesson it also takes -quick, which changes nothing here: the
// program is already a fraction of a second.
//
// The zero wal.Options is the safe choice: policy.SyncEveryCommit, so each
// Append returns only after the fdatasync that covers its record (InnoDB
// innodb_flush_log_at_trx_commit=1, Redis appendfsync always). The policy is
// spelled out below anyway, because it is the decision that matters.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"text/tabwriter"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
)

func main() {
	dir := flag.String("dir", "", "directory for the log (default: a fresh temporary directory, removed afterwards)")
	flag.Bool("quick", false, "accepted as by every lesson; quickstart is already quick")
	flag.Parse()
	if err := start(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// start runs the example in dir, or in a temporary directory when dir is
// empty. Ctrl-C cancels it.
func start(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if dir == "" {
		tmp, err := os.MkdirTemp("", "durawal-quickstart-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	return run(ctx, dir, os.Stdout)
}

func run(ctx context.Context, dir string, out io.Writer) error {
	opts := wal.Options{Policy: policy.SyncEveryCommit()}

	// 1. Open (creating the log) and commit three records. When Append
	//    returns nil, the record is on stable storage.
	l, err := wal.Open(dir, opts)
	if err != nil {
		return err
	}
	before := l.Stats().Fsyncs // creating the first segment syncs it
	for _, rec := range []string{"set x=1", "set y=2", "del x"} {
		if _, err := l.AppendContext(ctx, []byte(rec)); err != nil {
			l.Close()
			return err
		}
	}
	st := l.Stats()
	// Close syncs anything still unsynced and releases the directory lock.
	if err := l.Close(); err != nil {
		return err
	}

	// 2. Reopen: recovery checks the last segment frame by frame and keeps the three records.
	l, err = wal.Open(dir, opts)
	if err != nil {
		return err
	}
	defer l.Close()

	// 3. Read them back in LSN order, from the start of the log.
	r, err := l.NewReader(0)
	if err != nil {
		return err
	}
	defer r.Close()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LSN\trecord")
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%q\n", lsn, rec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(out, `
An LSN is the byte position of a record's frame in the log, so LSNs grow by
the frame size (header plus payload, padded), not by one. The %d commits cost
%d fsyncs (creating the segment file cost %d more): under SyncEveryCommit an
Append that returns nil has been fdatasync'ed, so a power cut at any moment
after it returned cannot lose that record, and reopening finds it. Every other
policy gives up part of that promise for speed; the other lessons measure how
much.
`, st.Commits, st.Fsyncs-before, before)
	return nil
}
