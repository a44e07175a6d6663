// Command ab compares two builds of durawal on the same workload, in
// alternating rounds, with pebble's record.LogWriter as the control: the
// way a throughput regression between two revisions is found and shown.
//
// It builds the cell program (ab/cell, from the working tree, so both sides
// run the same harness) twice, against the library of revision -a and of
// revision -b: a revision is anything git names (a commit, a branch, a tag;
// extracted with git archive into a temporary directory), or "." for the
// working tree as it is, uncommitted changes included. Then, in every round,
// each cell (policy × committers) runs once per build and once for pebble,
// back to back, each in a fresh process on a fresh log: in the order a, b,
// pebble, reversed every other round, so a disk whose speed drifts slows
// all three alike. Tables give each figure as the median over rounds with
// its range, median [min–max], and the ratios (b ÷ a, each ÷ pebble) taken
// within each round, then their median and range.
//
// Run it from bench/peers (its own module; it needs git and the go command):
//
//	GOWORK=off go run ./ab -a d2f6765 -b . [-writers 1,8,32] [-policies sync,never,buffered]
//	    [-size 100] [-duration 2s] [-rounds 5] [-dir PARENT] [-profile DIR] [-json FILE] [-quick]
//
// -profile writes, for every cell run, a CPU profile and a runtime trace of
// its measured window (go tool pprof, go tool trace); profiling costs a
// few per cent of throughput, alike on both sides. The load average is
// printed before and after: on a shared machine, rerun when it moved.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durawal/durawal/bench/peers/internal/host"
	"github.com/durawal/durawal/internal/measure"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ab:", err)
		os.Exit(1)
	}
}

type config struct {
	a, b     string
	writers  []int
	policies []string
	size     int
	duration time.Duration
	rounds   int
	dir      string
	pebble   bool
	profile  string
	json     string
	keep     bool
}

// policyNames says what each -policies entry runs, on each side.
var policyNames = map[string]string{
	"sync":     "SyncEveryCommit (pebble: Sync=true, its commit pipeline's group fsync)",
	"never":    "SyncNever: a write() per group, no fsync (pebble: Sync=false, buffered in its LogWriter)",
	"buffered": "BufferedInterval, hourly sync: the log-buffer append path alone (pebble: Sync=false)",
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("ab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var writers, policies string
	var quick bool
	fs.StringVar(&c.a, "a", "HEAD", `revision of build a (git names it; "." is the working tree)`)
	fs.StringVar(&c.b, "b", ".", `revision of build b (git names it; "." is the working tree)`)
	fs.StringVar(&writers, "writers", "1,8,32", "comma-separated committer counts")
	fs.StringVar(&policies, "policies", "sync", "comma-separated: sync, never, buffered")
	fs.IntVar(&c.size, "size", 100, "record size in bytes")
	fs.DurationVar(&c.duration, "duration", 2*time.Second, "time each cell's committers append")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds; figures are medians over rounds")
	fs.StringVar(&c.dir, "dir", "", "parent of the run directory, on the disk to measure (default TMPDIR)")
	fs.BoolVar(&c.pebble, "pebble", true, "run pebble's LogWriter as the control in every round")
	fs.StringVar(&c.profile, "profile", "", "write a CPU profile and a runtime trace of every cell run into this directory")
	fs.StringVar(&c.json, "json", "", "also write every cell run as JSON to this file")
	fs.BoolVar(&c.keep, "keep", false, "keep the run directory (sources and binaries of both builds)")
	fs.BoolVar(&quick, "quick", false, "smoke run: writers 1,4, 2 rounds of 200 ms cells")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if quick {
		if !set["writers"] {
			writers = "1,4"
		}
		if !set["rounds"] {
			c.rounds = 2
		}
		if !set["duration"] {
			c.duration = 200 * time.Millisecond
		}
	}
	for _, w := range strings.Split(writers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			return c, fmt.Errorf("bad -writers entry %q", w)
		}
		c.writers = append(c.writers, n)
	}
	for _, p := range strings.Split(policies, ",") {
		p = strings.TrimSpace(p)
		if _, ok := policyNames[p]; !ok {
			return c, fmt.Errorf("bad -policies entry %q (want sync, never or buffered)", p)
		}
		c.policies = append(c.policies, p)
	}
	if c.rounds < 1 || c.size < 1 || c.duration <= 0 {
		return c, errors.New("-rounds, -size and -duration must be positive")
	}
	if c.a == "" || c.b == "" {
		return c, errors.New("-a and -b name revisions")
	}
	return c, nil
}

// build is one side of the comparison.
type build struct {
	label string // "a", "b" or "pebble"
	rev   string // as given
	desc  string // commit, subject, and whether the tree was modified
	bin   string // the cell program built against it
}

// result is one cell run, as the cell program printed it.
type result struct {
	Round   int     `json:"round"`
	Policy  string  `json:"policy"`
	Writers int     `json:"writers"`
	Build   string  `json:"build"`
	Commits int64   `json:"commits"`
	Seconds float64 `json:"seconds"`
	CPUus   float64 `json:"cpu_us"`
	Syncs   int64   `json:"syncs"`
	P50us   float64 `json:"p50_us"`
	P99us   float64 `json:"p99_us"`
	P999us  float64 `json:"p999_us"`
	MaxUs   float64 `json:"max_us"`
	Over10  int64   `json:"over_10ms"`
	Err     string  `json:"error,omitempty"`
}

func (r result) perSec() float64 { return float64(r.Commits) / r.Seconds }

func run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	peersDir, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(peersDir, "ab", "cell", "main.go")); err != nil {
		return fmt.Errorf("run ab from bench/peers (no ab/cell/main.go here): %w", err)
	}
	repo, err := git(peersDir, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	parent := cfg.dir
	if parent == "" {
		parent = os.TempDir()
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	root, err := os.MkdirTemp(parent, "ab-")
	if err != nil {
		return err
	}
	if !cfg.keep {
		defer os.RemoveAll(root)
	}
	if cfg.profile != "" {
		if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
			return err
		}
	}
	started := time.Now()
	progress := func(format string, a ...any) {
		fmt.Fprintf(stderr, "ab [%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, a...))
	}
	builds := []*build{{label: "a", rev: cfg.a}, {label: "b", rev: cfg.b}}
	for _, b := range builds {
		progress("building %s = %s", b.label, b.rev)
		if err := b.make(repo, peersDir, root); err != nil {
			return fmt.Errorf("build %s (%s): %w", b.label, b.rev, err)
		}
	}
	sides := slices.Clone(builds)
	if cfg.pebble {
		// pebble's code is the same in both binaries: a's runs it.
		sides = append(sides, &build{label: "pebble", bin: builds[0].bin})
	}
	loadBefore := host.LoadAvg()
	var results []result
	seq := 0
	for round := range cfg.rounds {
		order := slices.Clone(sides)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, pol := range cfg.policies {
			for _, w := range cfg.writers {
				for _, s := range order {
					seq++
					r, err := runCell(cfg, s, pol, w, filepath.Join(root, fmt.Sprintf("cell-%05d", seq)), round)
					if err != nil {
						return err
					}
					progress("round %d %s w=%d %s: %.0f commits/s", round+1, pol, w, s.label, r.perSec())
					results = append(results, r)
				}
			}
		}
	}
	report(stdout, cfg, builds, results, host.FSName(root), loadBefore, host.LoadAvg())
	if cfg.json != "" {
		b, err := json.MarshalIndent(struct {
			Builds  []*build `json:"builds"`
			Results []result `json:"results"`
		}{builds, results}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.json, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (b *build) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"label": b.label, "rev": b.rev, "desc": b.desc})
}

// make extracts b's revision of the library (or takes the working tree),
// and builds the cell program against it.
func (b *build) make(repo, peersDir, root string) error {
	src := repo
	if b.rev == "." {
		head, err := git(repo, "log", "-1", "--format=%h %s")
		if err != nil {
			return err
		}
		b.desc = "working tree at " + head
		if st, _ := git(repo, "status", "--porcelain", "--untracked-files=no"); st != "" {
			b.desc += " (modified)"
		}
	} else {
		d, err := git(repo, "log", "-1", "--format=%h %s", b.rev, "--")
		if err != nil {
			return err
		}
		b.desc = d
		src = filepath.Join(root, "src-"+b.label)
		if err := extract(repo, b.rev, src); err != nil {
			return err
		}
	}
	modfile := filepath.Join(root, b.label+".mod")
	if err := copyFile(filepath.Join(peersDir, "go.mod"), modfile); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(peersDir, "go.sum"), strings.TrimSuffix(modfile, ".mod")+".sum"); err != nil {
		return err
	}
	if err := goCmd(peersDir, "mod", "edit", "-replace", "github.com/durawal/durawal="+src, modfile); err != nil {
		return err
	}
	b.bin = filepath.Join(root, "cell-"+b.label)
	return goCmd(peersDir, "build", "-mod=mod", "-modfile="+modfile, "-o", b.bin, "./ab/cell")
}

// runCell runs s's cell program once and decodes what it printed.
func runCell(cfg config, s *build, pol string, writers int, dir string, round int) (result, error) {
	lib := "durawal"
	if s.label == "pebble" {
		lib = "pebble"
	}
	args := []string{"-lib", lib, "-policy", pol, "-writers", strconv.Itoa(writers),
		"-size", strconv.Itoa(cfg.size), "-duration", cfg.duration.String(), "-dir", dir}
	if cfg.profile != "" {
		base := filepath.Join(cfg.profile, fmt.Sprintf("%s-%s-w%d-r%d", s.label, pol, writers, round+1))
		args = append(args, "-cpuprofile", base+".pprof", "-trace", base+".trace")
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	r := result{Round: round + 1, Policy: pol, Writers: writers, Build: s.label}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("%s %s w=%d: %v: %s%s", s.label, pol, writers, runErr, out.String(), errOut.String())
	}
	if r.Err != "" {
		return r, fmt.Errorf("%s %s w=%d: %s", s.label, pol, writers, r.Err)
	}
	if r.Seconds <= 0 || r.Commits == 0 {
		return r, fmt.Errorf("%s %s w=%d: no commits", s.label, pol, writers)
	}
	return r, nil
}

// report prints one Markdown table per policy.
func report(w io.Writer, cfg config, builds []*build, rs []result, fs, loadBefore, loadAfter string) {
	fmt.Fprintf(w, "# A/B: a = %s, b = %s\n\n", builds[0].desc, builds[1].desc)
	fmt.Fprintf(w, "%s, %s/%s, %d CPUs, %s; load average %s before, %s after. "+
		"%d B records, %s cells on a fresh log each, %d rounds; in each round a cell runs for a, b",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), fs, loadBefore, loadAfter,
		cfg.size, cfg.duration, cfg.rounds)
	if cfg.pebble {
		fmt.Fprint(w, " and pebble")
	}
	fmt.Fprint(w, " back to back, the order reversed every other round. Figures: median [min–max] over "+
		"rounds; ratios are taken within each round, then the median [min–max]. CPU: user+system of "+
		"the whole process over the window, per commit.\n")
	for _, pol := range cfg.policies {
		fmt.Fprintf(w, "\n## %s\n\n", policyNames[pol])
		head := []string{"writers", "a commits/s", "b commits/s", "b ÷ a"}
		if cfg.pebble {
			head = append(head, "pebble commits/s", "a ÷ pebble", "b ÷ pebble")
		}
		head = append(head, "CPU µs/commit a", "b", "p50 µs a", "b", "p99 µs a", "b", "max ms a", "b", "commits/fsync a", "b")
		t := measure.NewTable(head...)
		for _, wr := range cfg.writers {
			by := map[string][]result{}
			for _, r := range rs {
				if r.Policy == pol && r.Writers == wr {
					by[r.Build] = append(by[r.Build], r)
				}
			}
			a, b, p := by["a"], by["b"], by["pebble"]
			row := []string{strconv.Itoa(wr), spread(each(a, result.perSec), "%.0f"), spread(each(b, result.perSec), "%.0f"),
				spread(ratios(b, a, result.perSec), "%.2f")}
			if cfg.pebble {
				row = append(row, spread(each(p, result.perSec), "%.0f"),
					spread(ratios(a, p, result.perSec), "%.2f"), spread(ratios(b, p, result.perSec), "%.2f"))
			}
			cpu := func(r result) float64 { return r.CPUus / float64(r.Commits) }
			perSync := func(r result) float64 {
				if r.Syncs == 0 {
					return 0
				}
				return float64(r.Commits) / float64(r.Syncs)
			}
			maxMs := func(r result) float64 { return r.MaxUs / 1e3 }
			for _, f := range []struct {
				fn  func(result) float64
				fmt string
			}{{cpu, "%.2f"}, {result.p50, "%.0f"}, {result.p99, "%.0f"}, {maxMs, "%.1f"}, {perSync, "%.1f"}} {
				row = append(row, spread(each(a, f.fn), f.fmt), spread(each(b, f.fn), f.fmt))
			}
			t.RowStrings(row...)
		}
		t.Fprint(w)
	}
}

func (r result) p50() float64 { return r.P50us }
func (r result) p99() float64 { return r.P99us }

// each returns f of every run in rs.
func each(rs []result, f func(result) float64) []float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return xs
}

// ratios returns, for every round that has a run in both num and den, the
// ratio of their figures f.
func ratios(num, den []result, f func(result) float64) []float64 {
	var xs []float64
	for _, n := range num {
		for _, d := range den {
			if d.Round == n.Round && f(d) != 0 {
				xs = append(xs, f(n)/f(d))
			}
		}
	}
	return xs
}

// spread formats the median of xs and their range: "m [lo–hi]", or "–"
// for none.
func spread(xs []float64, format string) string {
	if len(xs) == 0 {
		return "–"
	}
	m := fmt.Sprintf(format, measure.Median(xs))
	if len(xs) == 1 {
		return m
	}
	return fmt.Sprintf("%s ["+format+"–"+format+"]", m, slices.Min(xs), slices.Max(xs))
}

// git runs git in dir and returns its trimmed output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// goCmd runs the go command in dir, outside any workspace.
func goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// extract writes the tree of rev in repo into dir (git archive).
func extract(repo, rev, dir string) error {
	cmd := exec.Command("git", "archive", "--format=tar", rev)
	cmd.Dir = repo
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git archive %s: %w: %s", rev, err, errOut.String())
	}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("git archive: entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
		}
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
