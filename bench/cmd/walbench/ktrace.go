package main

import (
	"bufio"
	"cmp"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The servers experiment counts, for every subject (a server process, or
// walbench itself for durawal's rows), the sync and write system calls it
// made during the measured window, from the kernel's syscall tracepoints
// (tracefs: events/syscalls/sys_enter_*), filtered to the subject's threads
// with set_event_pid (threads it starts meanwhile are followed through the
// event-fork option). The counting is done by reading the trace buffer after
// the window; the buffer is large enough for the experiment's counts, and a
// run that overflowed it says so.

// syncEvents and writeEvents are the syscall tracepoints counted as a sync
// of a file and as a write to one. fsync and fdatasync are what InnoDB,
// Redis and durawal call; sync_file_range does not make data durable and is
// not counted.
var (
	syncEvents  = []string{"sys_enter_fsync", "sys_enter_fdatasync"}
	writeEvents = []string{"sys_enter_write", "sys_enter_pwrite64", "sys_enter_writev", "sys_enter_pwritev", "sys_enter_pwritev2"}
)

// fdCounts is how many sync and write calls the trace shows, per file
// descriptor.
type fdCounts struct {
	syncs, writes map[int]uint64
}

// traceLine matches one syscall event in tracefs's text output, for example
//
//	redis-server-26364   [001] .....  5769.074419: sys_fdatasync(fd: 7)
//
// capturing the event name and the first argument (the file descriptor, in
// decimal or hex as the kernel prints it).
var traceLine = regexp.MustCompile(`-\d+\s+\[\d+\][^:]*:\s+(sys_[a-z0-9_]+)\(fd:\s*(0x[0-9a-fA-F]+|\d+)`)

// parseTrace counts the sync and write events in the text of a tracefs
// trace file; lines that are comments or other events are skipped.
func parseTrace(text string) (fdCounts, error) {
	c := fdCounts{syncs: map[int]uint64{}, writes: map[int]uint64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		m := traceLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fd, err := strconv.ParseUint(m[2], 0, 31)
		if err != nil {
			return c, fmt.Errorf("trace line %q: fd %q: %v", line, m[2], err)
		}
		ev := "sys_enter_" + strings.TrimPrefix(m[1], "sys_")
		switch {
		case slices.Contains(syncEvents, ev):
			c.syncs[int(fd)]++
		case slices.Contains(writeEvents, ev):
			c.writes[int(fd)]++
		}
	}
	return c, sc.Err()
}

// kernelCount is what the kernel saw a subject do in one measured window.
type kernelCount struct {
	// Syncs is every fsync and fdatasync call, whatever the file.
	Syncs uint64 `json:"syncs"`
	// Writes is every write, pwrite64, writev, pwritev and pwritev2 call on
	// a file under the subject's data directory (not its sockets, pipes or
	// log file).
	Writes uint64 `json:"writes"`
	// Files breaks both down by file: the path relative to the data
	// directory, an absolute path outside it, or closedFD for a descriptor
	// closed before the window ended.
	Files map[string]fileOps `json:"files"`
	// Lost is the number of trace events the buffer dropped; the counts
	// are then lower bounds.
	Lost uint64 `json:"lost_events,omitempty"`
}

// fileOps counts the calls on one file.
type fileOps struct {
	Syncs  uint64 `json:"syncs,omitempty"`
	Writes uint64 `json:"writes,omitempty"`
}

// closedFD labels calls on a descriptor that no longer named a file when
// the window ended.
const closedFD = "(closed before the end of the window)"

// attribute names each descriptor's file (resolve returns its target as
// /proc/PID/fd shows it, or "" if it is closed) and sums the calls: syncs
// on any file, writes on files under dir or on closed descriptors.
func (c fdCounts) attribute(dir string, resolve func(fd int) string) kernelCount {
	k := kernelCount{Files: map[string]fileOps{}}
	name := func(fd int) (string, bool) {
		t := resolve(fd)
		switch {
		case t == "":
			return closedFD, true
		case !strings.HasPrefix(t, "/") || strings.HasPrefix(t, "/dev/"):
			return "", false // a socket, pipe, eventfd or device
		}
		t = strings.TrimSuffix(t, " (deleted)")
		if rel, err := filepath.Rel(dir, t); err == nil && !strings.HasPrefix(rel, "..") {
			return rel, true
		}
		return t, false
	}
	for fd, n := range c.syncs {
		f, _ := name(fd)
		if f == "" {
			f = fmt.Sprintf("fd %d", fd)
		}
		ops := k.Files[f]
		ops.Syncs += n
		k.Files[f] = ops
		k.Syncs += n
	}
	for fd, n := range c.writes {
		f, inside := name(fd)
		if f == "" {
			continue
		}
		ops := k.Files[f]
		ops.Writes += n
		k.Files[f] = ops
		if inside {
			k.Writes += n
		}
	}
	return k
}

// add sums two counts (over rounds).
func (k kernelCount) add(o kernelCount) kernelCount {
	sum := kernelCount{Syncs: k.Syncs + o.Syncs, Writes: k.Writes + o.Writes, Lost: k.Lost + o.Lost, Files: map[string]fileOps{}}
	for _, m := range []map[string]fileOps{k.Files, o.Files} {
		for f, ops := range m {
			s := sum.Files[f]
			s.Syncs += ops.Syncs
			s.Writes += ops.Writes
			sum.Files[f] = s
		}
	}
	return sum
}

// breakdown lists the files with their syncs and writes per commit, most
// synced first: "ib_logfile0 1.00 syncs, 1.00 writes · binlog.000001 …",
// or says there were none; "—" when there were no commits.
func (k kernelCount) breakdown(commits uint64) string {
	switch {
	case commits == 0:
		return "—"
	case len(k.Files) == 0:
		return "no sync or write of a file"
	}
	names := make([]string, 0, len(k.Files))
	for f := range k.Files {
		names = append(names, f)
	}
	slices.SortFunc(names, func(a, b string) int {
		fa, fb := k.Files[a], k.Files[b]
		return cmp.Or(cmp.Compare(fb.Syncs, fa.Syncs), cmp.Compare(fb.Writes, fa.Writes), strings.Compare(a, b))
	})
	per := func(n uint64) string { return fmtPerCommit(float64(n) / float64(commits)) }
	var parts []string
	for _, f := range names {
		ops := k.Files[f]
		parts = append(parts, fmt.Sprintf("%s %s syncs, %s writes", f, per(ops.Syncs), per(ops.Writes)))
	}
	return strings.Join(parts, " · ")
}

// fmtPerCommit formats a count per commit: two decimals, or three
// significant digits below 0.01 (0.00041), "0" for none.
func fmtPerCommit(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x < 0.01:
		return strconv.FormatFloat(x, 'g', 2, 64)
	}
	return fmtRatio(x)
}
