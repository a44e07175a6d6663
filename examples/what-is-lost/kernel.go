package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The third crash, when the crash lab's tools are installed: a real Linux
// kernel, booted under QEMU on an ext4 disk image, crashed with sysrq-c while
// the policy's committers run, then booted again to recover the log
// (bench/cmd/crashlab; one trial per policy, a minute or so each). The
// guest's page cache dies with it, as in a kernel panic or a power cut behind
// a disk that honours its flushes.
//
// It is off by default, so that the lesson keeps to the half minute every
// lesson takes: with it the lesson takes a few minutes (about 2 on the
// 2-core development machine, one QEMU boot and crash per policy).
var kernelMode = flag.String("kernel", "off",
	"also crash a real kernel under QEMU for each policy (bench/cmd/crashlab; about 2 minutes more): off, on, or auto (on when its tools are installed and not -quick)")

// kernelTools are the programs the lab needs, with the Debian package of each.
var kernelTools = [][2]string{
	{"qemu-system-x86_64", "qemu-system-x86"}, {"busybox", "busybox-static"},
	{"mkfs.ext4", "e2fsprogs"}, {"cpio", "cpio"}, {"apt-get", "apt"},
}

// labSpec is how the lab names each row's policy (policy.Parse's forms).
var labSpec = map[string]string{
	"innodb=1": "innodb=1", "innodb=2": "innodb=2", "innodb=0": "innodb=0",
	"everysec": "appendfsync=everysec", "no": "appendfsync=no", "async-commit": "postgres-async",
}

// missingTools returns the Debian packages to install for the lab, or "".
func missingTools() string {
	var pkgs []string
	for _, t := range kernelTools {
		if _, err := exec.LookPath(t[0]); err != nil {
			pkgs = append(pkgs, t[1])
		}
	}
	return strings.Join(pkgs, " ")
}

// labTrial is the part of crashlab's -json output this lesson reads.
type labTrial struct {
	Policy        string
	Acked, Lost   uint64
	OldestLostAge time.Duration
	Violations    []string
}

// realKernel runs the crash lab once per row in dir and returns each row's
// outcome by row name, or a note saying why there is no column.
func realKernel(ctx context.Context, dir string, quick bool) (map[string]outcome, string) {
	switch *kernelMode {
	case "off":
		return nil, "real kernel: not run (-kernel=off)."
	case "auto":
		if quick {
			return nil, "real kernel: not run in -quick mode (run with -kernel=on)."
		}
	case "on":
	default:
		return nil, fmt.Sprintf("real kernel: -kernel=%q is not auto, on or off.", *kernelMode)
	}
	if pkgs := missingTools(); pkgs != "" {
		return nil, fmt.Sprintf("real kernel: not run, the crash lab needs QEMU and friends: apt-get install %s (Debian/Ubuntu), then run this again.", pkgs)
	}
	bin := filepath.Join(dir, "crashlab")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/durawal/durawal/bench/cmd/crashlab")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // the lab's binary is also the guest's init
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("real kernel: not run, building bench/cmd/crashlab failed (run this from the durawal repository): %v: %s", err, strings.TrimSpace(string(out)))
	}
	var specs []string
	for _, p := range policies {
		specs = append(specs, labSpec[p.name])
	}
	jsonPath := filepath.Join(dir, "crashlab.json")
	fmt.Fprintf(os.Stderr, "what-is-lost: crashing a real kernel under QEMU, one trial per policy (a few minutes)…\n")
	lab := exec.CommandContext(ctx, bin, "-trials", "1", "-policies", strings.Join(specs, ","),
		"-json", jsonPath, "-work", filepath.Join(dir, "lab"))
	lab.Stderr = os.Stderr
	out, err := lab.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: a violation, still judged
		return nil, fmt.Sprintf("real kernel: the crash lab failed: %v\n%s", err, out)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, fmt.Sprintf("real kernel: %v", err)
	}
	res, err := kernelOutcomes(b)
	if err != nil {
		return nil, fmt.Sprintf("real kernel: %v", err)
	}
	return res, "real kernel: Linux under QEMU (TCG), crashed by sysrq-c amid commits, one trial per policy (bench/cmd/crashlab for more)."
}

// kernelOutcomes reads crashlab's -json output into outcomes by row name.
// A trial with a violation of its promise is an error: the lab found a bug.
func kernelOutcomes(b []byte) (map[string]outcome, error) {
	var trials []labTrial
	if err := json.Unmarshal(b, &trials); err != nil {
		return nil, fmt.Errorf("reading the crash lab's results: %w", err)
	}
	bySpec := map[string]string{}
	for row, spec := range labSpec {
		bySpec[spec] = row
	}
	res := map[string]outcome{}
	for _, t := range trials {
		row, ok := bySpec[t.Policy]
		if !ok {
			return nil, fmt.Errorf("the crash lab ran %q, which is no row here", t.Policy)
		}
		if len(t.Violations) > 0 {
			return nil, fmt.Errorf("%s broke its promise in a real kernel crash: %s", row, strings.Join(t.Violations, "; "))
		}
		o := res[row]
		o.acked += int(t.Acked)
		o.lost += int(t.Lost)
		if t.Lost > 0 {
			o.oldest = max(o.oldest, t.OldestLostAge)
		}
		res[row] = o
	}
	return res, nil
}
