package measure

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestTableAlignsNumbersRight(t *testing.T) {
	tb := NewTable("policy", "commits/s", "note")
	tb.Row("innodb=1", "7,680", "fsync each")
	tb.Row("innodb=0", "1,234,567", "—")
	var b strings.Builder
	tb.Fprint(&b)
	want := "" +
		"| policy   | commits/s | note       |\n" +
		"| -------- | --------: | ---------- |\n" +
		"| innodb=1 |     7,680 | fsync each |\n" +
		"| innodb=0 | 1,234,567 | —          |\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestTableTitleAndNotes(t *testing.T) {
	tb := &Table{Title: "Levels", Notes: []string{"one note"}}
	tb.rows = [][]string{{"a", "b"}}
	tb.Row("x", 1)
	var b strings.Builder
	tb.Fprint(&b)
	if !strings.HasPrefix(b.String(), "## Levels\n\none note\n\n| a   | b   |\n| --- | --: |\n| x   |   1 |\n") {
		t.Fatalf("got\n%s", b.String())
	}
}

func TestDriveEachTotalFor(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	op := func(context.Context, int, int) error { calls.Add(1); return nil }

	run, err := Drive(ctx, Load{Workers: 4, Each: 25}, op)
	if err != nil || len(run.Latencies) != 100 || calls.Load() != 100 {
		t.Fatalf("Each: %d latencies, %d calls, %v; want 100", len(run.Latencies), calls.Load(), err)
	}
	calls.Store(0)
	run, err = Drive(ctx, Load{Workers: 3, Total: 10}, op)
	if err != nil || len(run.Latencies) != 10 || calls.Load() != 10 {
		t.Fatalf("Total: %d latencies, %d calls, %v; want 10", len(run.Latencies), calls.Load(), err)
	}
	run, err = Drive(ctx, Load{Workers: 2, For: 20 * time.Millisecond}, func(context.Context, int, int) error {
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil || len(run.Latencies) == 0 || run.Elapsed < 20*time.Millisecond {
		t.Fatalf("For: %d latencies in %v, %v", len(run.Latencies), run.Elapsed, err)
	}
}

func TestDriveStopsOnError(t *testing.T) {
	var calls atomic.Int64
	boom := errors.New("boom")
	run, err := Drive(context.Background(), Load{Workers: 8, Each: 100000}, func(_ context.Context, w, seq int) error {
		calls.Add(1)
		if w == 3 && seq == 5 {
			return boom
		}
		time.Sleep(10 * time.Microsecond)
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if n := calls.Load(); n >= 800000 || int64(len(run.Latencies)) != n {
		t.Fatalf("%d calls (%d timed): the error did not stop the run", n, len(run.Latencies))
	}
}
