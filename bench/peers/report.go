package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/durawal/durawal/internal/measure"
)

// report writes the Markdown tables.
func report(w io.Writer, res *results, cfg config) {
	m := res.Machine
	fmt.Fprintf(w, "# durawal and its peers\n\n")
	fmt.Fprintf(w, "%s, %s, %d CPUs, %s at `%s`; load average %s before, %s after. ",
		m.GoVersion, m.OS, m.CPUs, m.FS, m.Dir, m.LoadBefore, m.LoadAfter)
	fmt.Fprintf(w, "%d B records, %s per cell, median of %d round(s), libraries interleaved "+
		"(order reversed every other round); ratios are per-round ratios to durawal, then the median.\n\n",
		cfg.size, cfg.duration, cfg.rounds)

	libs := measure.NewTable("library", "version", "concurrent commits", "relaxed mode", "fsyncs counted by")
	libs.Title = "Libraries"
	for _, l := range res.Libs {
		relaxed := l.Relaxed
		if relaxed == "" {
			relaxed = "none (always fsyncs)"
		}
		counter := l.Counter
		if counter == "" {
			counter = "no seam: strace -f -c in a child process"
		}
		libs.Row(l.Name, l.Version, l.Concurrency, relaxed, counter)
	}
	libs.Fprint(w)
	fmt.Fprintln(w)

	for _, md := range cfg.modes {
		title := "Durable commits: each record fsynced before Append returns"
		if md == relaxed {
			title = "Relaxed commits: each library's no-sync setting"
		}
		t := measure.NewTable("writers", "library", "commits/s", "commits/s × durawal", "p50 µs", "p99 µs", "fsyncs/commit", "counted by")
		t.Title = title
		for _, wr := range cfg.writers {
			for _, l := range res.Libs {
				cs := cellsFor(res.Cells, l.Name, md.String(), wr)
				if len(cs) == 0 {
					continue
				}
				if e := firstErr(cs); e != "" {
					t.Row(wr, l.Name, "error: "+oneLine(e))
					continue
				}
				var ps, p50, p99, spo, ratio []float64
				for _, c := range cs {
					ps = append(ps, c.PerSec)
					p50 = append(p50, c.P50us)
					p99 = append(p99, c.P99us)
					if c.Syncs >= 0 {
						spo = append(spo, c.SyncsPerOp)
					}
					if d := cellFor(res.Cells, "durawal", md.String(), wr, c.Round); d != nil && d.PerSec > 0 {
						ratio = append(ratio, c.PerSec/d.PerSec)
					}
				}
				fsy, by := "n/a", "—"
				if len(spo) > 0 {
					fsy, by = fmt.Sprintf("%.3f", median(spo)), "counter"
				} else if sc := straceFor(res.Strace, l.Name, md.String(), wr); sc != nil && sc.Err == "" {
					fsy, by = fmt.Sprintf("%.3f", sc.StracePerOp), "strace (separate 1-run child)"
				}
				rs := "—"
				if len(ratio) > 0 {
					rs = fmt.Sprintf("%.2f", median(ratio))
				}
				t.Row(wr, l.Name, measure.Thousands(int64(median(ps))), rs, fmt.Sprintf("%.0f", median(p50)), fmt.Sprintf("%.0f", median(p99)), fsy, by)
			}
		}
		t.Fprint(w)
		fmt.Fprintln(w)
	}

	if len(cfg.modes) > 0 && cfg.modes[0] == durable {
		for _, wr := range cfg.writers {
			if wr != 16 {
				continue
			}
			var r []float64
			for round := range cfg.rounds {
				d := cellFor(res.Cells, "durawal", "durable", 16, round)
				p := cellFor(res.Cells, "pebble", "durable", 16, round)
				if d != nil && p != nil && p.PerSec > 0 && d.Err == "" && p.Err == "" {
					r = append(r, d.PerSec/p.PerSec)
				}
			}
			if len(r) > 0 {
				fmt.Fprintf(w, "**durawal / pebble at 16 durable writers: %.2f× commits/s** (median of %d per-round ratios: %s).\n\n",
					median(r), len(r), floats(r))
			}
		}
	}

	if len(res.Strace) > 0 {
		t := measure.NewTable("library", "mode", "writers", "commits", "strace fsyncs/commit", "counter fsyncs/commit")
		t.Title = "fsync counts under strace"
		t.Notes = []string{fmt.Sprintf("Each row is a child process (ptrace slows it, so only its ratio is used) run under `strace -f -c --seccomp-bpf -e trace=fsync,fdatasync` for %s, "+
			"minus a child that only opened the log, made one commit and closed it. "+
			"`counter` is the library's own counter (or FS-seam wrapper) in the same child.", cfg.straceDur)}
		for _, s := range res.Strace {
			if s.Err != "" {
				t.Row(s.Lib, s.Mode, s.Writers, "error: "+oneLine(s.Err))
				continue
			}
			ctr := "—"
			if s.CounterSyncs >= 0 {
				ctr = fmt.Sprintf("%.3f", s.CounterPerOp)
			}
			t.Row(s.Lib, s.Mode, s.Writers, s.Commits, fmt.Sprintf("%.3f", s.StracePerOp), ctr)
		}
		t.Fprint(w)
		fmt.Fprintln(w)
	}

	if len(res.Recovery) > 0 {
		cache := "page cache dropped before each replay"
		if !res.DropCaches {
			cache = "page cache NOT dropped (no permission): replays read warm cache"
		}
		t := measure.NewTable("library", "records written", "records recovered", "open + read s", "time × durawal")
		t.Title = fmt.Sprintf("Recovery: open and read every record of a %d MiB log", res.RecoveryMiB)
		t.Notes = []string{fmt.Sprintf("%d B records written with each library's batch API, closed cleanly; %s; median of the timed replays.", cfg.size, cache)}
		for _, l := range res.Libs {
			var secs, ratio []float64
			var last recoveryRun
			found := false
			for _, r := range res.Recovery {
				if r.Lib != l.Name {
					continue
				}
				found, last = true, r
				if r.Err != "" {
					continue
				}
				secs = append(secs, r.Seconds)
				for _, d := range res.Recovery {
					if d.Lib == "durawal" && d.Round == r.Round && d.Err == "" && d.Seconds > 0 {
						ratio = append(ratio, r.Seconds/d.Seconds)
					}
				}
			}
			if !found {
				continue
			}
			if last.Err != "" {
				t.Row(l.Name, last.Written, last.Recovered, "error: "+oneLine(last.Err))
				continue
			}
			t.Row(l.Name, last.Written, last.Recovered, fmt.Sprintf("%.2f", median(secs)), fmt.Sprintf("%.2f", median(ratio)))
		}
		t.Fprint(w)
		fmt.Fprintln(w)
	}

	if len(res.Torn) > 0 {
		tb := measure.NewTable("library", "records returned", "outcome", "error", "cut")
		tb.Title = fmt.Sprintf("Torn tail: the last of %d durable records cut in half, then reopen", cfg.tornN)
		for _, t := range res.Torn {
			tb.Row(t.Lib, fmt.Sprintf("%d of %d", t.Recovered, t.Written), t.Outcome, oneLine(t.Err), t.Cut)
		}
		tb.Fprint(w)
		fmt.Fprintln(w)
	}
	if len(res.Skipped) > 0 {
		fmt.Fprintf(w, "Skipped: %s\n", strings.Join(res.Skipped, "; "))
	}
}

func cellsFor(cs []cell, lib, mode string, writers int) []cell {
	var out []cell
	for _, c := range cs {
		if c.Lib == lib && c.Mode == mode && c.Writers == writers {
			out = append(out, c)
		}
	}
	return out
}

func cellFor(cs []cell, lib, mode string, writers, round int) *cell {
	for i, c := range cs {
		if c.Lib == lib && c.Mode == mode && c.Writers == writers && c.Round == round {
			return &cs[i]
		}
	}
	return nil
}

func straceFor(ss []straceCount, lib, mode string, writers int) *straceCount {
	for i, s := range ss {
		if s.Lib == lib && s.Mode == mode && s.Writers == writers {
			return &ss[i]
		}
	}
	return nil
}

func firstErr(cs []cell) string {
	for _, c := range cs {
		if c.Err != "" {
			return c.Err
		}
	}
	return ""
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func floats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}
