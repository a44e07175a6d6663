// Command peers runs the same workloads against durawal and the Go WALs
// people use today — pebble's record.LogWriter, etcd's storage/wal,
// tidwall/wal, hashicorp/raft-wal and rosedblabs/wal — and prints a
// Markdown table per workload: durable commits (100 B records, 1/8/16/32
// writers), the same with each library's no-sync setting, recovery of a
// large log, and what each does with a torn last record.
//
// It lives in its own module (bench/peers/go.mod) so that durawal itself
// never depends on these libraries. Run it from bench/peers:
//
//	go run . [-dir /path/on/disk] [-quick] [-json out.json]
//
// Libraries run interleaved (A B C … then C B A …) in every round, and the
// figures are medians over rounds with ratios to durawal taken per round,
// because a disk's fsync time drifts within minutes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/durawal/durawal/bench/peers/internal/host"
)

type config struct {
	dir        string
	libs       string
	writers    []int
	modes      []mode
	size       int
	duration   time.Duration
	rounds     int
	recMiB     int
	recRounds  int
	tornN      int
	strace     bool
	straceDur  time.Duration
	jsonPath   string
	quick      bool
	keep       bool
	childMode  string
	childW     int
	child      bool
	skipRecov  bool
	skipStrace bool
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var writers, modes string
	fs.StringVar(&c.dir, "dir", "", "directory on the disk to measure (default: a new temp dir)")
	fs.StringVar(&c.libs, "libs", "all", "comma-separated libraries: durawal,pebble,etcd,tidwall,raft-wal,rosedb")
	fs.StringVar(&writers, "writers", "1,8,16,32", "comma-separated writer counts")
	fs.StringVar(&modes, "modes", "durable,relaxed", "durable, relaxed (each library's no-sync setting)")
	fs.IntVar(&c.size, "size", 100, "record size in bytes")
	fs.DurationVar(&c.duration, "duration", time.Second, "time each commit cell runs")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; figures are medians over rounds")
	fs.IntVar(&c.recMiB, "recovery-mib", 256, "payload MiB in the recovery log (0 skips recovery)")
	fs.IntVar(&c.recRounds, "recovery-rounds", 3, "timed replays of each recovery log")
	fs.IntVar(&c.tornN, "torn-records", 1000, "records committed before the torn-tail cut")
	fs.BoolVar(&c.strace, "strace", true, "cross-check fsync counts with strace -f -c in child processes (if strace is installed)")
	fs.DurationVar(&c.straceDur, "strace-duration", time.Second, "time each strace child commits")
	fs.StringVar(&c.jsonPath, "json", "", "also write every measurement as JSON to this file")
	fs.BoolVar(&c.quick, "quick", false, "smoke run (< 30 s): writers 1,16, one short round, 4 MiB recovery, no strace")
	fs.BoolVar(&c.keep, "keep", false, "keep the run directory")
	fs.BoolVar(&c.child, "child", false, "internal: run one cell and print it as JSON (used under strace)")
	fs.StringVar(&c.childMode, "child-mode", "durable", "internal: the child's mode")
	fs.IntVar(&c.childW, "child-writers", 1, "internal: the child's writers")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		if !set["writers"] {
			writers = "1,16"
		}
		if !set["duration"] {
			c.duration = 150 * time.Millisecond
		}
		if !set["rounds"] {
			c.rounds = 1
		}
		if !set["recovery-mib"] {
			c.recMiB = 4
		}
		if !set["recovery-rounds"] {
			c.recRounds = 1
		}
		if !set["torn-records"] {
			c.tornN = 20
		}
		if !set["strace"] {
			c.strace = false
		}
	}
	for _, w := range splitComma(writers) {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			return c, fmt.Errorf("bad -writers entry %q", w)
		}
		c.writers = append(c.writers, n)
	}
	for _, m := range splitComma(modes) {
		switch m {
		case "durable":
			c.modes = append(c.modes, durable)
		case "relaxed":
			c.modes = append(c.modes, relaxed)
		default:
			return c, fmt.Errorf("bad -modes entry %q", m)
		}
	}
	if c.rounds < 1 || c.size < 1 {
		return c, fmt.Errorf("-rounds and -size must be ≥ 1")
	}
	return c, nil
}

// results is everything one run measured; it is what -json writes.
type results struct {
	Started     time.Time     `json:"started"`
	Machine     machine       `json:"machine"`
	Config      jsonConfig    `json:"config"`
	Libs        []libInfo     `json:"libs"`
	Cells       []cell        `json:"cells"`
	Strace      []straceCount `json:"strace,omitempty"`
	Recovery    []recoveryRun `json:"recovery,omitempty"`
	RecoveryMiB int           `json:"recovery_mib"`
	DropCaches  bool          `json:"drop_caches_worked"`
	Torn        []tornResult  `json:"torn_tail,omitempty"`
	Skipped     []string      `json:"skipped,omitempty"`
}

type machine struct {
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	CPUs       int    `json:"cpus"`
	FS         string `json:"filesystem"`
	Dir        string `json:"dir"`
	LoadBefore string `json:"loadavg_before"`
	LoadAfter  string `json:"loadavg_after"`
}

type jsonConfig struct {
	Writers  []int   `json:"writers"`
	Size     int     `json:"record_size"`
	Duration float64 `json:"cell_seconds"`
	Rounds   int     `json:"rounds"`
	Quick    bool    `json:"quick"`
}

type libInfo struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Concurrency string `json:"concurrency"`
	Relaxed     string `json:"relaxed"`
	Counter     string `json:"counter"`
}

func run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	chosen, err := pick(cfg.libs)
	if err != nil {
		return err
	}
	if cfg.child {
		return runChild(cfg, chosen, stdout)
	}
	root := cfg.dir
	if root == "" {
		if root, err = os.MkdirTemp("", "peers-"); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return err
		}
		if root, err = os.MkdirTemp(root, "peers-"); err != nil {
			return err
		}
	}
	if !cfg.keep {
		defer os.RemoveAll(root)
	}
	res := &results{
		Started: time.Now(),
		Machine: machine{GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
			CPUs: runtime.NumCPU(), FS: host.FSName(root), Dir: root, LoadBefore: host.LoadAvg()},
		Config:      jsonConfig{cfg.writers, cfg.size, cfg.duration.Seconds(), cfg.rounds, cfg.quick},
		RecoveryMiB: cfg.recMiB,
	}
	for _, l := range chosen {
		res.Libs = append(res.Libs, libInfo{l.name, l.version, l.concurrency, l.relaxed, l.counter})
	}
	progress := func(format string, a ...any) {
		fmt.Fprintf(stderr, "peers [%5.1fs] %s\n", time.Since(res.Started).Seconds(), fmt.Sprintf(format, a...))
	}
	seq := 0
	subdir := func(name string) string {
		seq++
		return filepath.Join(root, fmt.Sprintf("%04d-%s", seq, name))
	}

	// Commit cells: every round runs every library for every writer count
	// and mode, alternating the library order between rounds.
	for round := range cfg.rounds {
		for _, w := range cfg.writers {
			for _, m := range cfg.modes {
				order := chosen
				if round%2 == 1 {
					order = reversed(chosen)
				}
				for _, l := range order {
					if m == relaxed && l.relaxed == "" {
						continue
					}
					c := runCell(l, subdir(l.name), m, w, cfg.size, cfg.duration, 0)
					c.Round = round
					res.Cells = append(res.Cells, c)
					progress("round %d %-8s %-7s %2d writers: %8.0f commits/s p50 %7.0f µs p99 %7.0f µs %s",
						round+1, l.name, m, w, c.PerSec, c.P50us, c.P99us, c.Err)
				}
			}
		}
	}

	// fsync counts under strace, one child per library, mode and writers.
	if cfg.strace && haveStrace() {
		for _, m := range cfg.modes {
			for _, w := range cfg.writers {
				for _, l := range chosen {
					if m == relaxed && l.relaxed == "" {
						continue
					}
					sc := straceCell(root, l, m, w, cfg.size, cfg.straceDur)
					res.Strace = append(res.Strace, sc)
					progress("strace %-8s %-7s %2d writers: %d commits, %d fsync+fdatasync (counter %d) %s",
						l.name, m, w, sc.Commits, sc.StraceSyncs, sc.CounterSyncs, sc.Err)
				}
			}
		}
	} else if cfg.strace {
		res.Skipped = append(res.Skipped, "strace cross-check: strace not installed")
	}

	// Recovery: fill each library's log once, then replay interleaved.
	if cfg.recMiB > 0 {
		n := cfg.recMiB << 20 / cfg.size
		dirs := map[string]string{}
		for _, l := range chosen {
			d := subdir("recovery-" + l.name)
			took, err := fillLog(l, d, n, cfg.size)
			progress("recovery %-8s filled %d records in %s %v", l.name, n, took.Round(time.Millisecond), errStr(err))
			if err != nil {
				res.Recovery = append(res.Recovery, recoveryRun{Lib: l.name, Written: n, Err: "fill: " + err.Error()})
				continue
			}
			dirs[l.name] = d
		}
		res.DropCaches = dropCaches()
		for round := range cfg.recRounds {
			order := chosen
			if round%2 == 1 {
				order = reversed(chosen)
			}
			for _, l := range order {
				d, ok := dirs[l.name]
				if !ok {
					continue
				}
				got, took, err := timeReplay(l, d)
				rr := recoveryRun{Lib: l.name, Round: round, Bytes: int64(n) * int64(cfg.size), Written: n,
					Recovered: got, Seconds: took.Seconds()}
				if err != nil {
					rr.Err = err.Error()
				}
				res.Recovery = append(res.Recovery, rr)
				progress("recovery %-8s round %d: %d records in %s %s", l.name, round+1, got, took.Round(time.Millisecond), rr.Err)
			}
		}
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}

	// Torn tail.
	if cfg.tornN > 1 {
		for _, l := range chosen {
			t := tornTail(l, subdir("torn-"+l.name), cfg.tornN, cfg.size)
			res.Torn = append(res.Torn, t)
			progress("torn %-8s: %s %s", l.name, t.Outcome, t.Err)
		}
	}
	res.Machine.LoadAfter = host.LoadAvg()

	report(stdout, res, cfg)
	if cfg.jsonPath != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func errStr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func reversed(ls []*lib) []*lib {
	out := make([]*lib, len(ls))
	for i, l := range ls {
		out[len(ls)-1-i] = l
	}
	return out
}

// runChild runs one cell (writers 0: open, warm-up commit, close) and
// prints it as JSON; straceChild parses it.
func runChild(cfg config, chosen []*lib, stdout io.Writer) error {
	if len(chosen) != 1 {
		return fmt.Errorf("-child needs exactly one library in -libs")
	}
	m := durable
	if cfg.childMode == "relaxed" {
		m = relaxed
	}
	per := 0
	if cfg.childW == 0 {
		per = 1
	}
	c := runCell(chosen[0], cfg.dir, m, cfg.childW, cfg.size, cfg.duration, per)
	return json.NewEncoder(stdout).Encode(c)
}
