package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// header names the machine, build and disk the figures belong to.
type header struct {
	CPU         string    `json:"cpu"`
	Cores       int       `json:"cores"`
	GoVersion   string    `json:"go_version"`
	OS          string    `json:"os"`
	Dir         string    `json:"dir"`
	FSType      string    `json:"filesystem"`
	Device      string    `json:"block_device"`
	Version     string    `json:"durawal_version"`
	RecordSize  int       `json:"record_size"`
	SegmentSize int64     `json:"segment_size"`
	Mode        string    `json:"mode"`
	Rounds      int       `json:"rounds"`
	LoadAvg     string    `json:"load_average"`
	Started     time.Time `json:"started"`
	Warnings    []string  `json:"warnings,omitempty"`
}

// collectHeader describes this machine and the directory dir. Anything it
// cannot find out reads "unknown".
func collectHeader(dir string, cfg config) header {
	h := header{
		CPU:         cpuModel(),
		Cores:       runtime.NumCPU(),
		GoVersion:   runtime.Version(),
		OS:          runtime.GOOS + "/" + runtime.GOARCH,
		Dir:         dir,
		Version:     durawalVersion(),
		RecordSize:  cfg.size,
		SegmentSize: cfg.segment,
		Mode:        "default counts",
		Rounds:      cfg.rounds,
		LoadAvg:     loadAverage(),
		Started:     time.Now(),
	}
	if cfg.quick {
		h.Mode = "-quick (reduced counts: a smoke run, not a measurement)"
	}
	fsName, volatile := filesystem(dir)
	h.FSType = fsName
	h.Device = blockDevice(dir)
	if volatile {
		h.Warnings = append(h.Warnings, fsName+": fsync is nearly free on this filesystem, "+
			"so these figures say little about a disk; pass -dir on a real disk")
	}
	return h
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "unknown".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU (" + runtime.GOARCH + ")"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU (" + runtime.GOARCH + ")"
}

// loadAverage returns the 1, 5 and 15 minute load averages at the start,
// which say whether other processes competed for the CPUs, or "unknown".
func loadAverage() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ") + " (1, 5, 15 min, at the start)"
}

// durawalVersion returns the module version of the main module, else the
// VCS revision stamped in the binary, else the git commit of the working
// tree, else "devel".
func durawalVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
		if rev != "" {
			return "git " + short(rev) + dirty
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "devel"
	}
	v := "git " + short(strings.TrimSpace(string(out)))
	if exec.CommandContext(ctx, "git", "diff", "--quiet", "HEAD").Run() != nil {
		v += " (working tree modified)"
	}
	return v
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// readTrim returns the trimmed contents of a small file, or "".
func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// realPath returns dir made absolute with symbolic links resolved, or dir.
func realPath(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	return dir
}
