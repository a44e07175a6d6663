package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// straceCount is one library's fsync count as strace saw it: the syscalls
// of a child process that ran the workload, minus those of a child that
// only opened the log, made the warm-up commit and closed it.
type straceCount struct {
	Lib           string  `json:"lib"`
	Mode          string  `json:"mode"`
	Writers       int     `json:"writers"`
	Commits       int64   `json:"commits"`
	StraceSyncs   int64   `json:"strace_syncs"`  // fsync+fdatasync in the workload window
	CounterSyncs  int64   `json:"counter_syncs"` // the library counter in the same child, -1 without one
	StracePerOp   float64 `json:"strace_syncs_per_commit"`
	CounterPerOp  float64 `json:"counter_syncs_per_commit"`
	BaselineSyncs int64   `json:"baseline_syncs"` // open + warm-up + close
	Err           string  `json:"error,omitempty"`
}

// haveStrace reports whether strace can trace a child here.
func haveStrace() bool {
	_, err := exec.LookPath("strace")
	return err == nil
}

// straceChild runs this program as a child under strace -f -c limited to
// fsync and fdatasync and returns the child's cell and the calls counted.
func straceChild(root string, l *lib, m mode, writers, size int, d time.Duration) (cell, int64, error) {
	self, err := os.Executable()
	if err != nil {
		return cell{}, 0, err
	}
	out := filepath.Join(root, fmt.Sprintf("strace-%s-%s-%d.txt", l.name, m, writers))
	dir := filepath.Join(root, fmt.Sprintf("strace-%s-%s-%d", l.name, m, writers))
	cmd := exec.Command("strace", "-f", "-c", "--seccomp-bpf", "-e", "trace=fsync,fdatasync", "-o", out,
		self, "-child", "-libs", l.name, "-child-mode", m.String(), "-child-writers", strconv.Itoa(writers),
		"-size", strconv.Itoa(size), "-duration", d.String(), "-dir", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return cell{}, 0, fmt.Errorf("strace child: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var c cell
	if err := json.Unmarshal(stdout.Bytes(), &c); err != nil {
		return cell{}, 0, fmt.Errorf("strace child output: %v", err)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		return cell{}, 0, err
	}
	os.Remove(out)
	return c, parseStraceCounts(string(text)), nil
}

// parseStraceCounts sums the calls column of the fsync and fdatasync rows
// of an strace -c summary.
func parseStraceCounts(text string) int64 {
	var n int64
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if name := f[len(f)-1]; name != "fsync" && name != "fdatasync" {
			continue
		}
		if v, err := strconv.ParseInt(f[3], 10, 64); err == nil {
			n += v
		}
	}
	return n
}

// straceCell measures l's fsyncs per commit under strace: one child for
// the workload, one for the baseline (writers 0).
func straceCell(root string, l *lib, m mode, writers, size int, d time.Duration) straceCount {
	sc := straceCount{Lib: l.name, Mode: m.String(), Writers: writers, CounterSyncs: -1}
	base, nb, err := straceChild(root, l, m, 0, size, 0)
	if err == nil && base.Err != "" {
		err = fmt.Errorf("%s", base.Err)
	}
	if err != nil {
		sc.Err = err.Error()
		return sc
	}
	c, n, err := straceChild(root, l, m, writers, size, d)
	if err == nil && c.Err != "" {
		err = fmt.Errorf("%s", c.Err)
	}
	if err != nil {
		sc.Err = err.Error()
		return sc
	}
	sc.Commits = c.Commits
	sc.BaselineSyncs = nb
	sc.StraceSyncs = n - nb
	if c.Commits > 0 {
		sc.StracePerOp = float64(sc.StraceSyncs) / float64(c.Commits)
	}
	if c.Syncs >= 0 {
		sc.CounterSyncs = c.Syncs
		sc.CounterPerOp = c.SyncsPerOp
	}
	return sc
}
